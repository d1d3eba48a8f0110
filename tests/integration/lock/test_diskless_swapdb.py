# SPDX-License-Identifier: BSD-3-Clause
"""A replica loading its primary's data diskless into a temporary db
(repl-diskless-load swapdb) frees the old values on another thread, with no
flush event: its lease entries must go with them, not stay stale (issue #25
item 9). Each full sync leaves one entry per held lock, and the entries still
follow the values (a promotion ends their leases).

What the servers do today: the module does not declare
REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD, so a replica configured for a
swapdb load logs "Skipping diskless-load because there are modules that are
not aware of async replication" and loads from disk after emptying its data
(flush events drop the entries). This test keeps the configuration, so that
it covers the swapdb load the day the module declares the option; until then
leases.c's on_loading finds no entry left at REPL_START."""

from servers import wait_replicas_synced, wait_until

SECTION = "mcaptcha_cache_locks"
N = 50


def _f(r, name):
    return int(r.info(SECTION).get("mcaptcha_cache_" + name, 0))


def _full_syncs(p):
    return int(p.info("stats")["sync_full"])


def test_diskless_swapdb_load_leaves_no_stale_lease_entries(servers):
    primary = servers.new(name="primary", config={"repl-diskless-sync": "yes", "repl-diskless-sync-delay": 0})
    p = primary.client()
    for i in range(N):
        assert p.execute_command("LOCK.ACQUIRE", "d:%d" % i, "o", 600000)[0] == 1
    replica = servers.replica_of(primary, name="replica", config={"repl-diskless-load": "swapdb"})
    rc = replica.client()
    wait_until(lambda: _f(rc, "lease_timers") == N, "the replica tracks every held lock")
    for round in range(2):
        syncs = _full_syncs(p)
        p.execute_command("DEBUG", "CHANGE-REPL-ID")  # the next sync must be a full one
        rc.execute_command("CLIENT", "KILL", "TYPE", "master")
        wait_until(lambda: _full_syncs(p) > syncs, "a new full sync")
        wait_replicas_synced(primary, [replica])
        wait_until(lambda: _f(rc, "leases_moved_pending") == 0, "the loaded locks are placed")
        # before the fix: N more stale entries after each sync
        assert _f(rc, "lease_timers") == N, round
    primary.kill()
    assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert rc.execute_command("LOCK.EXTEND", "d:0", "o", 1) == 1
    wait_until(lambda: _f(rc, "lease_timers") == N - 1, "the promoted replica ends a lease")
    assert rc.execute_command("LOCK.INSPECT", "d:0")[3] == []

# SPDX-License-Identifier: BSD-3-Clause
"""Moving held locks costs what moving unheld ones does (issue #25 items 3, 5).

RENAME, MOVE, COPY and SWAPDB of held locks never read the keyspace, on the
primary nor on a replica: with 200,000 other keys INFO's lease_keys_scanned
stays 0 while the leases still end where their keys went. A renamed lock is
placed again when a command next opens it by name. A transaction that renames
then deletes many held locks does linear work."""

from servers import wait_replicas_synced, wait_until

KEYS = 200000
SECTION = "mcaptcha_cache_locks"


def _f(r, name):
    return int(r.info(SECTION)["mcaptcha_cache_" + name])


def _settled(r):
    return _f(r, "leases_moved_pending") == 0


def test_moves_of_held_locks_scan_nothing_on_primary_and_replica(servers):
    primary = servers.new(name="primary")
    p = primary.client()
    p.execute_command("DEBUG", "POPULATE", KEYS)  # not replicated: the full sync carries it
    replica = servers.replica_of(primary, name="replica")
    rr = replica.client()
    assert rr.dbsize() == KEYS
    expired0 = _f(p, "leases_expired_while_held")
    for k in ["rn", "mv", "cp", "sw"]:
        assert p.execute_command("LOCK.ACQUIRE", k, "o", 1500)[0] == 1
    wait_replicas_synced(primary, [replica], timeout=60)
    assert _f(rr, "lease_timers") == 4
    p.execute_command("RENAME", "rn", "rn2")
    assert p.execute_command("MOVE", "mv", 1) == 1
    assert p.execute_command("COPY", "cp", "cp2") == 1
    p.execute_command("SWAPDB", 0, 2)
    wait_replicas_synced(primary, [replica], timeout=60)
    # the renamed lock is placed when a command opens it by its new name
    p2, r2 = primary.client(db=2), replica.client(db=2)
    assert [h[0] for h in p2.execute_command("LOCK.INSPECT", "rn2")[3]] == [b"o"]
    assert [h[0] for h in r2.execute_command("LOCK.INSPECT", "rn2")[3]] == [b"o"]
    wait_until(lambda: _settled(p) and _settled(rr), "the moved locks are placed")
    assert _f(p, "lease_keys_scanned") == 0
    assert _f(rr, "lease_keys_scanned") == 0
    # every lease (the copy's too) ends where its key went, on time, by the primary
    wait_until(lambda: _f(p, "leases_expired_while_held") >= expired0 + 5, "the leases end", timeout=30)
    wait_replicas_synced(primary, [replica], timeout=60)
    for db, k in [(2, "rn2"), (1, "mv"), (2, "cp"), (2, "cp2"), (2, "sw")]:
        assert primary.client(db=db).execute_command("LOCK.INSPECT", k)[3] == [], (db, k)
        assert replica.client(db=db).execute_command("LOCK.INSPECT", k)[3] == [], (db, k)
    assert _f(p, "lease_keys_scanned") == 0
    assert _f(rr, "lease_keys_scanned") == 0
    assert p.execute_command("DEBUG", "DIGEST") == rr.execute_command("DEBUG", "DIGEST")


def test_a_renamed_lock_nobody_opened_still_ends_on_time(server):
    """The one case that reads the keyspace: a renamed lock whose lease must be
    written before anything opened it by its new name (one scan for every such
    lock at once)."""
    r = server.client()
    r.flushall()
    r.execute_command("DEBUG", "POPULATE", 1000)
    before = _f(r, "leases_expired_while_held")
    for i in range(20):
        assert r.execute_command("LOCK.ACQUIRE", "q%d" % i, "o", 300)[0] == 1
        r.execute_command("RENAME", "q%d" % i, "q%d:new" % i)
    scanned = _f(r, "lease_keys_scanned")
    wait_until(lambda: _f(r, "leases_expired_while_held") >= before + 20, "the renamed leases end")
    assert all(r.execute_command("LOCK.INSPECT", "q%d:new" % i)[3] == [] for i in range(20))
    # one scan (at most the keyspace once, not once per lock)
    assert _f(r, "lease_keys_scanned") - scanned <= 1020 + 64


def _exec_usec(r):
    return float(r.info("commandstats").get("cmdstat_exec", {"usec": 0})["usec"])


def _rename_then_delete(r, n, tag, lease):
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("LOCK.ACQUIRE", "%s:%d" % (tag, i), "o", lease)
    p.execute()
    if lease < 1000:  # unheld locks: every lease has ended and been handled
        wait_until(lambda: _f(r, "lease_timers") == 0, "the short leases end")
    before = _exec_usec(r)
    t = r.pipeline(transaction=True)
    for i in range(n):
        t.execute_command("RENAME", "%s:%d" % (tag, i), "%s:%d:r" % (tag, i))
    for i in range(n):
        t.execute_command("DEL", "%s:%d:r" % (tag, i))
    t.execute()
    return _exec_usec(r) - before


def test_renaming_then_deleting_many_held_locks_is_linear(server):
    """16,000 held locks renamed then deleted in one transaction cost the
    order of unheld ones (commandstats' EXEC time, the server's own account;
    before the fix: ~36 times, growing with the square of the count)."""
    r = server.client()
    r.flushall()
    unheld = _rename_then_delete(r, 16000, "u", 1)
    held = _rename_then_delete(r, 16000, "h", 600000)
    assert held < unheld * 6, (unheld, held)
    wait_until(lambda: _settled(r), "nothing left to place")
    assert _f(r, "lease_timers") == 0

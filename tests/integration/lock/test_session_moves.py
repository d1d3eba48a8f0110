# SPDX-License-Identifier: BSD-3-Clause
"""SESSION holds follow their values (issue #25 items 1 and 2).

A connection's SESSION bookkeeping lives exactly as long as its holds: leases
that end and keys that go give their memory back while the connection stays
open. A hold ends on disconnect wherever its key went (RENAME, MOVE, SWAPDB,
one key of a LOCK.ACQUIRE_ALL group renamed)."""

import pytest

from servers import wait_until

N = 20000


class _Locks:
    def __init__(self, r):
        self.info = r.info("mcaptcha_cache_locks")

    def __getitem__(self, name):
        return int(self.info["mcaptcha_cache_" + name])


def _locks(r):
    return _Locks(r)


def _used(r):
    r.execute_command("MEMORY", "PURGE")
    return int(r.info("memory")["used_memory"])


def _grant_many(r, prefix, lease):
    p = r.pipeline(transaction=False)
    for i in range(N):
        p.execute_command("LOCK.ACQUIRE", "%s:%d" % (prefix, i), "owner", lease, "SESSION")
    assert all(rep[0] == 1 for rep in p.execute())


def test_session_memory_comes_back_while_the_connection_stays_open(server):
    r = server.client()
    admin = server.client()
    _grant_many(r, "warm", 1)   # allocator warm-up
    wait_until(lambda: _locks(admin)["session_entries"] == 0, "the warm-up leases end", timeout=30)
    admin.execute_command("FLUSHALL", "SYNC")  # freed now (Valkey 8 flushes lazily by default)
    base = _used(admin)
    _grant_many(r, "s", 3000)
    assert _locks(admin)["session_entries"] == N
    # the 3 s leases end (the keys stay): every entry goes
    wait_until(lambda: _locks(admin)["session_entries"] == 0, "every entry goes with its lease", timeout=60)
    admin.execute_command("FLUSHALL", "SYNC")
    after = _used(admin)
    # before the fix: +3.9 MB for 20,000 grants until the connection closed
    assert after - base < 200 * 1024, (base, after)
    # deleted keys take their entries too
    _grant_many(r, "d", 600000)
    assert _locks(admin)["session_entries"] == N
    admin.execute_command("FLUSHALL", "SYNC")
    assert _locks(admin)["session_entries"] == 0
    assert _used(admin) - base < 200 * 1024
    # the connection still holds and releases with SESSION
    assert r.execute_command("LOCK.ACQUIRE", "held", "me", 600000, "SESSION")[0] == 1
    r.connection_pool.disconnect()
    wait_until(lambda: admin.execute_command("LOCK.INSPECT", "held")[3] == [], "released on disconnect", timeout=10)
    assert _locks(admin)["session_entries"] == 0


@pytest.mark.parametrize("how", ["RENAME", "MOVE", "SWAPDB"])
def test_session_hold_ends_on_disconnect_wherever_its_key_went(server, how):
    server.client().flushall()
    c1, c2 = server.client(), server.client()
    assert c1.execute_command("LOCK.ACQUIRE", "s", "o", 600000, "SESSION")[0] == 1
    if how == "RENAME":
        c2.execute_command("RENAME", "s", "s2")
        db, name = 0, "s2"
    elif how == "MOVE":
        assert c2.execute_command("MOVE", "s", 1) == 1
        db, name = 1, "s"
    else:
        c2.execute_command("SWAPDB", 0, 1)
        db, name = 1, "s"
    where = server.client(db=db)
    assert [h[0] for h in where.execute_command("LOCK.INSPECT", name)[3]] == [b"o"]
    c1.connection_pool.disconnect()
    wait_until(lambda: where.execute_command("LOCK.INSPECT", name)[3] == [], "released where the key went",
               timeout=10)
    assert where.execute_command("LOCK.ACQUIRE", name, "other", 1000)[0] == 1
    assert _locks(c2)["session_entries"] == 0
    if how == "SWAPDB":
        c2.execute_command("SWAPDB", 0, 1)


def test_a_renamed_key_of_an_acquire_all_group_is_released_too(server):
    server.client().flushall()
    c1, c2 = server.client(), server.client()
    rep = c1.execute_command("LOCK.ACQUIRE_ALL", 3, "{g}a", "{g}b", "{g}c", "o", 600000, "SESSION")
    assert rep[0] == 1
    c2.execute_command("RENAME", "{g}a", "{g}z")
    assert c2.execute_command("MOVE", "{g}b", 2) == 1
    c1.connection_pool.disconnect()
    d2 = server.client(db=2)
    wait_until(lambda: c2.execute_command("LOCK.INSPECT", "{g}z")[3] == []
               and d2.execute_command("LOCK.INSPECT", "{g}b")[3] == []
               and c2.execute_command("LOCK.INSPECT", "{g}c")[3] == [], "every key of the group released",
               timeout=10)
    assert _locks(c2)["session_entries"] == 0


def test_session_hold_renamed_twice_in_a_transaction_then_disconnect(server):
    server.client().flushall()
    c1, c2 = server.client(), server.client()
    assert c1.execute_command("LOCK.ACQUIRE", "t1", "o", 600000, "SESSION")[0] == 1
    p = c2.pipeline(transaction=True)
    p.execute_command("RENAME", "t1", "t2")
    p.execute_command("RENAME", "t2", "t3")
    p.execute()
    c1.connection_pool.disconnect()
    wait_until(lambda: c2.execute_command("LOCK.INSPECT", "t3")[3] == [], "released after two renames", timeout=10)

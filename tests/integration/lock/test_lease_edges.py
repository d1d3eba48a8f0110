# SPDX-License-Identifier: BSD-3-Clause
"""Leases end on time wherever the key goes, and their bookkeeping goes with them.

- A lock that is released, deleted or flushed keeps no lease-timer entry
  (module memory returns to its baseline after churn).
- DEL / UNLINK / expiry of a held lock serves its head waiter at once.
- A lock key that is RENAMEd, MOVEd to another db or COPYed still has its lease
  end on time under its new name (INFO's leases_expired_while_held counts it).
"""

import threading

import pytest

from servers import wait_replicas_synced, wait_until

INFO_SECTION = "mcaptcha_cache_locks"


def _expired(r):
    return int(r.info(INFO_SECTION)["mcaptcha_cache_leases_expired_while_held"])


def _wait_for(pred, what, timeout=10.0):
    return wait_until(pred, what, timeout)


def _used(r):
    r.execute_command("MEMORY", "PURGE")
    return int(r.info("memory")["used_memory"])


def test_released_and_deleted_locks_leave_no_timer_entries(server):
    r = server.client()
    n = 5000
    for rnd in range(2):  # warm-up round, then the measured one
        base = _used(r)
        for i in range(n):
            assert r.execute_command("LOCK.ACQUIRE", "rel:%d:%d" % (rnd, i), "o", 600000)[0] == 1
            assert r.execute_command("LOCK.RELEASE", "rel:%d:%d" % (rnd, i), "o") == 0
        for i in range(n):
            assert r.execute_command("LOCK.ACQUIRE", "del:%d:%d" % (rnd, i), "o", 600000)[0] == 1
        for i in range(0, n, 500):
            r.delete(*["del:%d:%d" % (rnd, j) for j in range(i, i + 500)])
        for i in range(n):
            assert r.execute_command("RL.CONCURRENCY", "cc:%d:%d" % (rnd, i), "h", 600000, 2)[0] == 1
        r.execute_command("FLUSHALL", "SYNC")  # Valkey 8 flushes in the background by default
        after = _used(r)
    # before the fix: ~200 B per lease still armed (about 3 MB here)
    assert after - base < 300 * 1024, (base, after)


@pytest.mark.parametrize("how", ["DEL", "UNLINK", "FLUSHDB", "FLUSHALL", "RENAME", "MOVE", "PEXPIRE", "SET"])
def test_deleting_a_held_lock_serves_its_waiter(server, how):
    r = server.client()
    assert r.execute_command("LOCK.ACQUIRE", "dl", "holder", 600000)[0] == 1
    out = {}

    def waiter():
        c = server.client()
        out["reply"] = c.execute_command("LOCK.ACQUIRE", "dl", "waiter", 600000, "WAIT", 30000)

    t = threading.Thread(target=waiter)
    t.start()
    _wait_for(lambda: r.execute_command("LOCK.INSPECT", "dl")[2] == 1, "the waiter is queued")
    args = {"DEL": ("DEL", "dl"), "UNLINK": ("UNLINK", "dl"), "RENAME": ("RENAME", "dl", "dl2"),
            "MOVE": ("MOVE", "dl", 4), "PEXPIRE": ("PEXPIRE", "dl", 1)}.get(how, (how,))
    if how == "SET":
        # overwritten by another lock value (RESTORE REPLACE of an unheld lock)
        assert r.execute_command("LOCK.ACQUIRE", "free", "x", 600000)[0] == 1
        assert r.execute_command("LOCK.RELEASE", "free", "x") == 0
        args = ("RESTORE", "dl", 0, r.dump("free"), "REPLACE")
    r.execute_command(*args)
    t.join(20)  # well before the waiter's WAIT (30 s) and the old lease (600 s) end
    assert not t.is_alive(), "the waiter was not served after %s" % how
    assert out["reply"][0] == 1
    holders = r.execute_command("LOCK.INSPECT", "dl")[3]
    assert [h[0] for h in holders] == [b"waiter"]


def test_lease_ends_after_rename(server):
    r = server.client()
    before = _expired(r)
    assert r.execute_command("LOCK.ACQUIRE", "rn:a", "o", 300)[0] == 1
    r.execute_command("RENAME", "rn:a", "rn:b")
    _wait_for(lambda: _expired(r) > before, "the renamed lock's lease ends")
    assert r.execute_command("LOCK.INSPECT", "rn:b")[3] == []
    assert r.execute_command("LOCK.ACQUIRE", "rn:b", "other", 1000)[0] == 1


def test_lease_ends_after_move_to_another_db(server):
    r = server.client()
    before = _expired(r)
    assert r.execute_command("LOCK.ACQUIRE", "mv", "o", 300)[0] == 1
    assert r.execute_command("MOVE", "mv", 3) == 1
    _wait_for(lambda: _expired(r) > before, "the moved lock's lease ends")
    r3 = server.client(db=3)
    assert r3.execute_command("LOCK.INSPECT", "mv")[3] == []


def test_lease_ends_on_a_copy(server):
    r = server.client()
    assert r.execute_command("LOCK.ACQUIRE", "cp:a", "o", 300)[0] == 1
    before = _expired(r)
    assert r.execute_command("COPY", "cp:a", "cp:b", "DB", 2) == 1
    # both the original and the copy in db 2 end on time
    _wait_for(lambda: _expired(r) >= before + 2, "both leases end")
    assert server.client(db=2).execute_command("LOCK.INSPECT", "cp:b")[3] == []


def test_lease_ends_after_swapdb(server):
    r = server.client()
    before = _expired(r)
    assert r.execute_command("LOCK.ACQUIRE", "sw", "o", 300)[0] == 1
    assert r.execute_command("SWAPDB", 0, 5)
    _wait_for(lambda: _expired(r) > before, "the swapped lock's lease ends")
    assert server.client(db=5).execute_command("LOCK.INSPECT", "sw")[3] == []


def test_lease_ends_after_renames_inside_multi(server):
    """A held lock renamed twice, and a restored one renamed, in one transaction:
    each lease ends under the name the lock has after the transaction."""
    r = server.client()
    before = _expired(r)
    assert r.execute_command("LOCK.ACQUIRE", "tx:src", "o", 300)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "tx:tmpl", "o", 600000)[0] == 1
    payload = r.dump("tx:tmpl")
    r.delete("tx:tmpl")
    p = r.pipeline(transaction=True)
    p.execute_command("RENAME", "tx:src", "tx:mid")
    p.execute_command("RENAME", "tx:mid", "tx:dst")
    # restored with a lease that already ended (its end is an absolute time in
    # the payload): after the restore and a rename, it must still be ended
    p.execute_command("RESTORE", "tx:restored", 0, payload)
    p.execute_command("RENAME", "tx:restored", "tx:restored2")
    p.execute()
    # (INSPECT hides an ended lease at once; the counter moves when the timer ends it)
    _wait_for(lambda: _expired(r) > before, "the renamed lease ends")
    assert r.execute_command("LOCK.INSPECT", "tx:dst")[3] == []
    held = r.execute_command("LOCK.INSPECT", "tx:restored2")[3]
    assert [h[0] for h in held] == [b"o"]   # its 600 s lease goes on, under the new name
    # a rename and then a delete inside one transaction leaves no entry behind
    assert r.execute_command("LOCK.ACQUIRE", "tx:gone", "o", 200)[0] == 1
    p = r.pipeline(transaction=True)
    p.execute_command("RENAME", "tx:gone", "tx:gone2")
    p.execute_command("DEL", "tx:gone2")
    p.execute()
    assert r.exists("tx:gone", "tx:gone2") == 0
    assert r.ping()


def test_async_flush_of_held_and_moved_locks(server):
    """FLUSHALL ASYNC frees lock values on a background thread: no lease entry
    may outlive them (the ASan build would report a use after free), and a lock
    moved just before keeps its lease when its db is not flushed."""
    r = server.client()
    for i in range(200):
        assert r.execute_command("LOCK.ACQUIRE", "af:%d" % i, "o", 200 + i)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "af:kept", "o", 300)[0] == 1
    p = r.pipeline(transaction=True)
    p.execute_command("MOVE", "af:kept", 7)
    p.execute_command("FLUSHDB", "ASYNC")
    p.execute()
    assert r.dbsize() == 0
    before = _expired(r)
    _wait_for(lambda: _expired(r) > before, "the moved lock's lease ends")
    assert server.client(db=7).execute_command("LOCK.INSPECT", "af:kept")[3] == []
    for i in range(200):
        assert r.execute_command("LOCK.ACQUIRE", "af:%d" % i, "o", 50)[0] == 1
    r.execute_command("FLUSHALL", "ASYNC")
    assert r.ping()


def _timers(r):
    return int(r.info(INFO_SECTION)["mcaptcha_cache_lease_timers"])


def test_a_released_locks_timer_entry_goes_by_the_old_lease_end(server):
    """A release leaves the lock's armed timer in place (the next acquire reuses
    it); it goes when it fires, at the released lease's end at the latest, and
    at once when the key goes or on a replica-style unarmed entry."""
    r = server.client()
    assert _timers(r) == 0
    assert r.execute_command("LOCK.ACQUIRE", "tm:a", "o", 300)[0] == 1
    assert _timers(r) == 1
    assert r.execute_command("LOCK.RELEASE", "tm:a", "o") == 0
    assert _timers(r) == 1            # still armed
    for i in range(50):               # cycles reuse the one entry
        assert r.execute_command("LOCK.ACQUIRE", "tm:a", "o%d" % i, 300)[0] == 1
        assert r.execute_command("LOCK.RELEASE", "tm:a", "o%d" % i) == 0
    assert _timers(r) == 1
    _wait_for(lambda: _timers(r) == 0, "the released lock's timer fires and goes")
    # a deleted released lock drops its entry at once
    assert r.execute_command("LOCK.ACQUIRE", "tm:b", "o", 600000)[0] == 1
    assert r.execute_command("LOCK.RELEASE", "tm:b", "o") == 0
    assert _timers(r) == 1
    r.delete("tm:b")
    assert _timers(r) == 0
    # a re-acquire after the timer went gets a new one, and its lease ends on time
    before = _expired(r)
    assert r.execute_command("LOCK.ACQUIRE", "tm:a", "late", 100)[0] == 1
    _wait_for(lambda: _expired(r) > before, "the new lease ends")
    _wait_for(lambda: _timers(r) == 0, "its entry goes")


# --- keys whose TTL passed but that are still stored (active expiry off): the
# module's own lookups then delete them, with its callbacks running inside

def _server_ms(r):
    sec, usec = r.execute_command("TIME")
    return int(sec) * 1000 + int(usec) // 1000


def _logically_expired(r, key):
    """Give `key` a TTL 50 ms ahead (a time already past would delete it at
    once) and wait, on the server's clock, until it has passed; with active
    expiry off the key stays stored until a lookup."""
    at = _server_ms(r) + 50
    assert r.execute_command("PEXPIREAT", key, at) == 1
    _wait_for(lambda: _server_ms(r) > at + 1, "the server's clock passes the TTL")
    assert r.dbsize() >= 1   # still stored: nothing looked the key up


def test_lease_timer_on_a_key_whose_ttl_passed(server):
    """The lease timer's own lookup expires the key (unlink + free run inside
    it): no use after free, the entry goes, the name is free again."""
    r = server.client()
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    try:
        assert r.execute_command("LOCK.ACQUIRE", "ttl:t", "o", 1000)[0] == 1
        _logically_expired(r, "ttl:t")
        _wait_for(lambda: _timers(r) == 0, "the lease timer fires and its entry goes")
        assert r.ping()
        assert r.execute_command("LOCK.ACQUIRE", "ttl:t", "o2", 1000)[0] == 1
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 1)


@pytest.mark.parametrize("how", ["SYNC", "ASYNC"])
def test_flush_over_held_locks_whose_ttl_passed(server, how):
    r = server.client()
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    try:
        for i in range(20):
            assert r.execute_command("LOCK.ACQUIRE", "ttl:f%d" % i, "o", 600000)[0] == 1
        assert r.execute_command("LOCK.ACQUIRE", "ttl:r", "o", 600000)[0] == 1
        assert r.execute_command("LOCK.RELEASE", "ttl:r", "o") == 0   # a released lock's armed entry
        for i in range(0, 20, 2):
            _logically_expired(r, "ttl:f%d" % i)
        r.execute_command("FLUSHALL", how)
        assert r.ping()
        _wait_for(lambda: _timers(r) == 0, "every entry goes with the flush")
        assert r.execute_command("LOCK.ACQUIRE", "ttl:f0", "o2", 1000)[0] == 1
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 1)


@pytest.mark.parametrize("paused", [False, True], ids=["running", "paused"])
def test_promotion_over_a_held_lock_whose_ttl_passed(servers, paused):
    """A replica keeps a logically expired key (replicas do not expire keys);
    after its promotion the lease timers look the tracked locks up, which
    expires it. While clients are paused for writes a lookup hides such a key
    without deleting it: nothing may be freed that the value still points to."""
    primary = servers.new(name="primary")
    replica = servers.replica_of(primary, name="replica")
    pc, rc = primary.client(), replica.client()
    pc.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    assert pc.execute_command("LOCK.ACQUIRE", "ttl:p", "o", 600000)[0] == 1
    assert pc.execute_command("LOCK.ACQUIRE", "ttl:q", "o", 600000)[0] == 1
    _logically_expired(pc, "ttl:p")
    wait_replicas_synced(primary, [replica])
    assert rc.dbsize() == 2
    assert _timers(rc) == 2
    primary.kill()
    if paused:
        rc.execute_command("CLIENT", "PAUSE", 60000, "WRITE")
    assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert rc.ping()
    if paused:
        # the timers wait while paused; a lookup then would not delete the key
        assert rc.dbsize() == 2
        rc.execute_command("CLIENT", "UNPAUSE")
    _wait_for(lambda: _timers(rc) == 1, "the expired lock's entry goes; the other one's is armed")
    assert [h[0] for h in rc.execute_command("LOCK.INSPECT", "ttl:q")[3]] == [b"o"]
    assert rc.execute_command("LOCK.ACQUIRE", "ttl:p", "o2", 1000)[0] == 1

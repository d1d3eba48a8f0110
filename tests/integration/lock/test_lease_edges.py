"""Leases end on time wherever the key goes, and their bookkeeping goes with them.

- A lock that is released, deleted or flushed keeps no lease-timer entry
  (module memory returns to its baseline after churn).
- DEL / UNLINK / expiry of a held lock serves its head waiter at once.
- A lock key that is RENAMEd, MOVEd to another db or COPYed still has its lease
  end on time under its new name (INFO's leases_expired_while_held counts it).
"""

import threading
import time

import pytest

INFO_SECTION = "mcaptcha_cache_locks"


def _expired(r):
    return int(r.info(INFO_SECTION)["mcaptcha_cache_leases_expired_while_held"])


def _wait_for(pred, what, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.005)  # polling for a state, not ordering events
    pytest.fail("timed out waiting for: " + what)


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


@pytest.mark.parametrize("how", ["DEL", "UNLINK", "FLUSHDB", "FLUSHALL"])
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
    r.execute_command(how, "dl") if how in ("DEL", "UNLINK") else r.execute_command(how)
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

# SPDX-License-Identifier: BSD-3-Clause
"""The Python client (clients/python, package mcaptcha_cache) against real servers.

The package is imported from clients/python (put first on sys.path), not installed; one test
installs it with pip (offline, --no-build-isolation) into a scratch directory and imports it
from there.

Covered: Lock as a context manager and its fencing tokens; two holders excluding each other,
the second queued on the server (LOCK.INSPECT waiters) with no command sent while it waits;
waits longer than the socket timeout split into server-side rounds; the watchdog keeping a
1.5 s lease for longer than the lease and sending no LOCK.EXTEND after the release (INFO
commandstats); a lost lease reported (lock.lost, on_lost, LockLost from release/extend and
from the end of a with block); Semaphore permits and its pool (add_permits, drain_permits,
available_permits, and their async twins); RateLimiter decisions against raw RL.GCRA,
SlidingWindowLimiter, WAIT, refunds; the rate_limited decorator; Captcha add/visit/count and
challenges; typed errors; the asyncio classes; Lock, Semaphore and RateLimiter through
redis.cluster.RedisCluster.

Times: leases of 300-5000 ms and waits of at most a few seconds; the file runs in about 20 s
(the 6-node cluster's start included)."""

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
import redis
import redis.asyncio as aioredis

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CLIENT_DIR = os.path.join(REPO_ROOT, "clients", "python")
sys.path.insert(0, CLIENT_DIR)

import mcaptcha_cache  # noqa: E402
from mcaptcha_cache import (AsyncCaptcha, AsyncLock, AsyncRateLimiter, AsyncReadWriteLock,  # noqa: E402
                            AsyncSemaphore, ReadWriteLock,
                            Captcha, CaptchaExists, CaptchaNotFound, Challenge, ChallengeExists,
                            ChallengeNotFound, Decision, InvalidArgument, InvalidCaptchaConfig,
                            Lock, LockError, LockLost, LockNotAcquired, LockNotOwned,
                            PermitsMismatch, RateLimited, RateLimiter, Semaphore,
                            SlidingWindowLimiter, WrongType, rate_limited)


# ------------------------------------------------------------------ helpers
def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))


def calls(server, command):
    """INFO commandstats calls of `command` (e.g. "lock.extend") on `server` (module commands
    keep their registered case there on Redis 7.0: cmdstat_LOCK.EXTEND)."""
    want = "cmdstat_" + command.lower()
    for k, v in server.info("commandstats").items():
        if k.lower() == want:
            return int(dict(kv.split("=", 1) for kv in v.split(","))["calls"])
    return 0


def lock_stat(server, field):
    """A counter of INFO mcaptcha_cache_locks (waits: WAITs that blocked; timeouts: WAITs that
    ran out)."""
    return int(server.info("mcaptcha_cache_locks")["mcaptcha_cache_" + field])


def inspect(c, key):
    return c.execute_command("LOCK.INSPECT", key)


def s(x):
    return x.decode() if isinstance(x, bytes) else x


def test_package_comes_from_clients_python():
    assert os.path.dirname(os.path.abspath(mcaptcha_cache.__file__)) == \
        os.path.join(CLIENT_DIR, "mcaptcha_cache")


# -------------------------------------------------------------------- locks
def test_lock_context_manager_and_fencing_tokens(server):
    r = server.client()
    tokens = []
    for _ in range(3):
        with Lock(r, "orders:42", lease_ms=2000) as lock:
            assert lock.held and isinstance(lock.token, int)
            permits, last, waiters, holders, adjustment, size = inspect(r, "orders:42")
            assert (adjustment, size) == (0, 1)
            assert (permits, last, waiters) == (1, lock.token, 0)
            assert [(s(h[0]), h[2], h[3]) for h in holders] == [(lock.owner, lock.token, 1)]
            assert 0 < holders[0][1] <= 2000
            assert lock.owned() and lock.locked()
            tokens.append(lock.token)
        assert not lock.held and not lock.lost
        assert inspect(r, "orders:42")[3] == []
    assert tokens == sorted(set(tokens)), tokens

    # a random owner per instance; acquire / extend / release / owned by hand
    a, b = Lock(r, "orders:43", 1000), Lock(r, "orders:43", 1000)
    assert a.owner != b.owner and len(a.owner) == 32
    assert a.acquire() is True
    assert b.acquire(wait_ms=0) is False and not b.held and b.token is None
    assert a.extend(5000) == 5000
    assert 4000 < inspect(r, "orders:43")[3][0][1] <= 5000
    assert a.owned() and not b.owned()
    with pytest.raises(LockError):
        a.acquire()  # one instance is one holder (not reentrant)
    with pytest.raises(LockNotOwned) as ei:
        b.release()
    assert not isinstance(ei.value, LockLost)
    with pytest.raises(LockNotOwned):
        b.extend()
    a.release()
    with pytest.raises(LockNotOwned):
        a.release()
    assert b.acquire(wait_ms=0) and b.token > a.token > tokens[-1]
    with pytest.raises(LockNotAcquired):
        with Lock(r, "orders:43", 1000, wait_ms=0):
            pass
    b.release()
    with pytest.raises(ValueError):
        Lock(r, "x", 0)


def test_two_holders_exclude_each_other_waiting_on_the_server(server):
    r = server.client(socket_timeout=None)  # one WAIT round, however long
    key = "orders:7"
    a = Lock(r, key, lease_ms=5000)
    assert a.acquire()
    got = []
    done = threading.Event()

    def second():
        with Lock(r, key, lease_ms=5000) as b:  # wait_ms=None: until granted
            got.append((b.token, time.monotonic(), [s(h[0]) for h in inspect(r, key)[3]],
                        b.owner))
        done.set()

    t = threading.Thread(target=second, daemon=True)
    t.start()
    wait_for(lambda: inspect(r, key)[2] == 1, 5.0, "the second holder queued on the server")
    acquires, waits = calls(server, "lock.acquire"), lock_stat(server, "waits")
    time.sleep(0.5)
    # blocked in one LOCK.ACQUIRE ... WAIT: nothing polls, a still holds it alone
    assert calls(server, "lock.acquire") == acquires and lock_stat(server, "waits") == waits
    assert not got and [s(h[0]) for h in inspect(r, key)[3]] == [a.owner]
    released_at = time.monotonic()
    a.release()
    assert done.wait(5.0)
    t.join(5.0)
    token, granted_at, holders, owner = got[0]
    assert granted_at >= released_at and holders == [owner]
    assert token > a.token
    assert inspect(r, key)[2:] == [0, [], 0, 1]


def test_waits_longer_than_the_socket_timeout_run_in_rounds(server):
    r = server.client(socket_timeout=1.0)  # rounds of 800 ms
    holder = Lock(r, "orders:8", 5000)
    assert holder.acquire()
    waits, timeouts = lock_stat(server, "waits"), lock_stat(server, "timeouts")
    t0 = time.monotonic()
    assert Lock(r, "orders:8", 5000, wait_ms=1200).acquire() is False  # no TimeoutError
    elapsed = time.monotonic() - t0
    rounds = lock_stat(server, "waits") - waits
    assert elapsed >= 1.1, elapsed   # the whole wait, in several server-side rounds
    assert rounds >= 2 and lock_stat(server, "timeouts") - timeouts == rounds, rounds
    # a grant within a round ends the wait
    t = threading.Timer(0.6, holder.release)
    t.start()
    waiter = Lock(r, "orders:8", 5000, wait_ms=3000)
    assert waiter.acquire() is True
    t.join()
    waiter.release()


def test_watchdog_keeps_a_short_lease_and_stops_after_release(server):
    r = server.client()
    key = "jobs:1"
    extends0 = calls(server, "lock.extend")
    # renewed every 500 ms: a margin of a second for a loaded machine's thread
    lock = Lock(r, key, lease_ms=1500, renew_every_ms=150)   # ten renewals per lease
    with lock:
        token = lock.token
        watchdog = lock._thread
        end = time.monotonic() + 2.5  # work that outlasts the lease
        while time.monotonic() < end:
            holders = inspect(r, key)[3]
            assert [(s(h[0]), h[2]) for h in holders] == [(lock.owner, token)]
            assert 0 < holders[0][1] <= 1500
            time.sleep(0.05)
        assert lock.owned() and not lock.lost and watchdog.is_alive()
    extends1 = calls(server, "lock.extend")
    assert extends1 - extends0 >= 3
    assert not watchdog.is_alive() and lock._thread is None
    assert inspect(r, key)[3] == []
    time.sleep(1.0)  # two renewal intervals
    assert calls(server, "lock.extend") == extends1  # no renewal after the release


def test_lost_lease_is_reported(server):
    r = server.client()
    seen = []
    lock = Lock(r, "jobs:2", 300, on_lost=seen.append)
    assert lock.acquire()
    r.delete("jobs:2")
    wait_for(lambda: lock.lost, 3.0, "the watchdog to find the lock lost")
    assert seen == [lock] and not lock.held
    assert "renewal refused" in lock.lost_reason
    with pytest.raises(LockLost):
        lock.extend()
    with pytest.raises(LockLost) as ei:
        lock.release()
    assert isinstance(ei.value, LockNotOwned)
    assert lock.acquire() and not lock.lost  # usable again
    lock.release()

    # the end of a with block raises it
    with pytest.raises(LockLost):
        with Lock(r, "jobs:3", 300) as l2:
            r.delete("jobs:3")
            wait_for(lambda: l2.lost, 3.0, "the loss")

    # without a watchdog the lease just ends; the release finds it out
    l3 = Lock(r, "jobs:4", 100, auto_renew=False)
    assert l3.acquire()
    time.sleep(0.3)
    assert Lock(r, "jobs:4", 1000, auto_renew=False).acquire(wait_ms=0)  # someone else has it
    assert not l3.owned() and l3.lost
    with pytest.raises(LockLost):
        l3.release()

    # the key overwritten with another type
    l4 = Lock(r, "jobs:5", 300)
    assert l4.acquire()
    r.set("jobs:5", "x")
    wait_for(lambda: l4.lost, 3.0, "the loss")
    with pytest.raises(LockLost):
        l4.release()
    with pytest.raises(WrongType):
        Lock(r, "jobs:5", 300).acquire(wait_ms=0)

    # SESSION: held on a connection of its own; when it closes the server releases the lock
    # and the next renewal finds it lost
    sl = Lock(r, "jobs:6", 600, session=True)
    assert sl.acquire()
    r.client_kill_filter(_id=sl._session_client.client_id())
    wait_for(lambda: inspect(r, "jobs:6")[3] == [], 3.0, "the session's release")
    wait_for(lambda: sl.lost, 3.0, "the loss")
    with pytest.raises(LockLost):
        sl.release()
    with Lock(r, "jobs:6", 600, session=True) as sl2:
        assert sl2.owned()
    assert sl2._session_client is None and inspect(r, "jobs:6")[3] == []


def test_lock_delay_ms(server):
    """lock_delay_ms sends LOCKDELAY: a lease that runs out leaves the lock taken by
    nobody (count 0 in LOCK.INSPECT); a release() frees it at once."""
    r = server.client(decode_responses=True)
    with pytest.raises(ValueError):
        Lock(r, "d", 1000, lock_delay_ms=-1)
    with Lock(r, "d:1", 60000, lock_delay_ms=600000) as lk:
        assert lk.owned()
    assert Lock(r, "d:1", 1000).acquire(wait_ms=0)
    stalled = Lock(r, "d:2", 100, auto_renew=False, lock_delay_ms=600000)
    assert stalled.acquire(wait_ms=0)
    wait_for(lambda: [h[3] for h in inspect(r, "d:2")[3]] == [0], 3.0, "the lease ended into a lock-delay")
    assert not Lock(r, "d:2", 1000).acquire(wait_ms=0)
    # the owner's lock-delay entry is not a hold: owned() is False and marks the lock lost
    info = stalled.inspect()
    assert [(h.owner, h.lock_delay) for h in info.holders] == [(stalled.owner, True)]
    assert stalled.locked() and not stalled.owned() and stalled.lost
    with pytest.raises(LockLost):
        stalled.release()


def test_read_write_lock(server):
    """read_lock() objects share the key; write_lock() waits for them on the server, and
    readers that come after the waiting writer wait behind it."""
    r = server.client(decode_responses=True)
    rw = ReadWriteLock(r, "rw:1", 60000)
    a, b = rw.read_lock(), rw.read_lock()
    assert a.acquire(wait_ms=0) and b.acquire(wait_ms=0)
    assert a.token != b.token and a.owner != b.owner
    w = rw.write_lock()
    assert not w.acquire(wait_ms=0)
    t = threading.Thread(target=w.acquire, kwargs={"wait_ms": 10000}, daemon=True)
    t.start()
    wait_for(lambda: inspect(r, "rw:1")[2] == 1, 3.0, "the writer queued")
    assert not rw.read_lock().acquire(wait_ms=0)  # does not pass the waiting writer
    a.release()
    b.release()
    t.join(10)
    assert w.held and w.token > max(a.token, b.token)
    w.release()

    async def run():
        ar = aioredis.Redis(host=server.host, port=server.port)
        try:
            arw = AsyncReadWriteLock(ar, "rw:2", 60000)
            async with arw.read_lock() as x, arw.read_lock() as y:
                assert x.token != y.token
                assert not await arw.write_lock().acquire(wait_ms=0)
            async with arw.write_lock() as z:
                assert z.held
        finally:
            await ar.close()

    asyncio.run(run())


def test_semaphore_take(server):
    r = server.client(decode_responses=True)
    with pytest.raises(ValueError):
        Semaphore(r, "t", 2, 1000, take=3)
    big = Semaphore(r, "t", 5, 60000, take=4)
    assert big.acquire(wait_ms=0)
    assert not Semaphore(r, "t", 5, 60000, take=2).acquire(wait_ms=0)
    one = Semaphore(r, "t", 5, 60000)
    assert one.acquire(wait_ms=0)
    big.release()
    one.release()


def test_semaphore_permits(server):
    r = server.client(decode_responses=True)
    sems = [Semaphore(r, "pool", 3, 2000) for _ in range(4)]
    assert [sm.acquire(wait_ms=0) for sm in sems] == [True, True, True, False]
    info = sems[0].inspect()
    assert info.permits == 3 and sems[0].permits == 3
    assert sorted(h.owner for h in info.holders) == sorted(sm.owner for sm in sems[:3])
    assert [sm.token for sm in sems[:3]] == sorted(sm.token for sm in sems[:3])
    with pytest.raises(PermitsMismatch):
        Semaphore(r, "pool", 2, 2000).acquire(wait_ms=0)
    with pytest.raises(PermitsMismatch):
        Lock(r, "pool", 2000).acquire(wait_ms=0)
    # the fourth waits on the server and gets the first freed permit
    t = threading.Thread(target=sems[3].acquire, kwargs={"wait_ms": 5000}, daemon=True)
    t.start()
    wait_for(lambda: inspect(r, "pool")[2] == 1, 5.0, "the fourth queued")
    sems[0].release()
    t.join(5.0)
    assert sems[3].held and sems[3].token > sems[2].token
    for sm in sems[1:]:
        sm.release()
    assert sems[0].inspect().holders == []
    with Semaphore(r, "pool", 2, 1000) as sm:  # free again: the next acquire sets the size
        assert sm.inspect().permits == 2


def test_semaphore_pool(server):
    r = server.client(decode_responses=True)
    a, b, c = (Semaphore(r, "sp", 2, 60000) for _ in range(3))
    assert a.available_permits() == 2  # no key yet: the base size
    assert a.acquire(wait_ms=0)
    assert b.add_permits(1) == 3 and c.available_permits() == 2
    assert b.acquire(wait_ms=0) and c.acquire(wait_ms=0)
    assert a.available_permits() == 0
    assert a.add_permits(-2) == 1  # below the three taken: the holders keep theirs
    info = a.inspect()
    assert (info.permits, info.adjustment, info.size, len(info.holders)) == (2, -1, 1, 3)
    a.release()
    b.release()
    assert c.available_permits() == 0
    c.release()
    assert a.available_permits() == 1
    assert a.drain_permits() == 1 and a.available_permits() == 0
    assert not b.acquire(wait_ms=0)
    with pytest.raises(ValueError):
        a.add_permits(2000)
    with pytest.raises(ValueError):
        a.add_permits(True)
    with pytest.raises(mcaptcha_cache.ServerError, match="must stay from 0 to 1024"):
        a.add_permits(-1)
    assert a.add_permits(1) == 1 and a.acquire(wait_ms=0)
    with pytest.raises(PermitsMismatch):  # held: every instance passes the same permits
        Semaphore(r, "sp", 3, 60000).add_permits(1)
    a.release()

    async def run():
        ar = aioredis.Redis(host=server.host, port=server.port)
        try:
            x, y = AsyncSemaphore(ar, "sp:a", 1, 60000), AsyncSemaphore(ar, "sp:a", 1, 60000)
            assert await x.acquire(wait_ms=0)
            assert not await y.acquire(wait_ms=0)
            with pytest.raises(mcaptcha_cache.ServerError, match="lock of one permit, held"):
                await x.add_permits(1)  # held and exclusive: no second owner beside x
            await x.release()
            assert await x.add_permits(1) == 2
            assert await x.acquire(wait_ms=0)
            assert await y.available_permits() == 1
            assert await y.acquire(wait_ms=0)
            await x.release()
            assert await x.drain_permits() == 1
            assert await x.available_permits() == 0
            await y.release()
        finally:
            await ar.close()

    asyncio.run(run())


# -------------------------------------------------------------- rate limits
def test_rate_limiter_decisions_match_rl_gcra(server):
    r = server.client()
    # 5 per minute (a unit every 12 s): no refill during the exact sequence below,
    # however slow the machine
    lim = RateLimiter(r, "rl:a", rate=5, period_ms=60000, burst=3)
    ours, raw = [], []
    for _ in range(5):
        ours.append(lim.acquire())
        raw.append(r.execute_command("RL.GCRA", "rl:b", 5, 60000, "BURST", 3))
    assert all(isinstance(d, Decision) for d in ours)
    assert [(d.allowed, d.remaining) for d in ours] == [(bool(x[0]), x[1]) for x in raw]
    assert [bool(d) for d in ours] == [True, True, True, False, False]
    for d, x in zip(ours, raw):   # the same shapes and bounds (the two keys' clocks differ a little)
        assert (d.retry_after_ms == -1) == (x[2] == -1) == d.allowed, (d, x)
        assert d.allowed or 0 < d.retry_after_ms <= 12000, d   # one unit per 12 s
        assert 0 < d.reset_after_ms <= 36000 and 0 < x[3] <= 36000, (d, x)   # burst 3 x 12 s
    assert ours[0].retry_after_ms == -1 and 0 < ours[3].retry_after_ms <= 12000
    # a peek takes nothing
    p1, p2 = lim.peek(), lim.peek()   # (their retry times may differ by the ms between them)
    assert (p1.allowed, p1.remaining) == (p2.allowed, p2.remaining) == (False, 0)
    # a cost above the capacity can never fit: refused at once, even with WAIT
    d = lim.acquire(cost=4, wait_ms=2000)
    assert not d.allowed and d.retry_after_ms == -1
    assert lim.refund(1) == 1 and lim.acquire().allowed
    # waiting on the server until one unit fits (a fast limiter: one per 200 ms)
    fast = RateLimiter(r, "rl:fast", rate=5, period_ms=1000, burst=1)
    assert fast.acquire().allowed and not fast.acquire().allowed
    assert fast.acquire(wait_ms=5000).allowed
    # without BURST the capacity is the rate, as RL.GCRA's
    plain = RateLimiter(r, "rl:c", rate=2, period_ms=60000)
    assert [plain.acquire().allowed for _ in range(3)] == [True, True, False]
    assert r.execute_command("RL.GCRA_PEEK", "rl:c", 2, 60000)[0] == 0
    # the sliding window
    win = SlidingWindowLimiter(r, "rl:w", limit=2, window_ms=60000)
    assert [win.acquire().remaining for _ in range(2)] == [1, 0]
    d = win.acquire()
    assert not d.allowed and 59000 < d.retry_after_ms <= 60000 + 60000 // 256 + 1
    assert win.acquire(cost=3).retry_after_ms == -1
    # typed errors
    with pytest.raises(InvalidArgument) as ei:
        RateLimiter(r, "rl:d", rate=0, period_ms=1000).acquire()
    assert isinstance(ei.value, redis.exceptions.ResponseError) and "rate" in str(ei.value)
    r.set("rl:s", "x")
    with pytest.raises(WrongType):
        RateLimiter(r, "rl:s", 1, 1000).acquire()


def test_rate_limited_decorator(server):
    r = server.client()
    lim = RateLimiter(r, "rl:fn", rate=2, period_ms=60000)

    @rate_limited(lim)
    def work(x):
        """doubles"""
        return 2 * x

    assert work(1) == 2 and work(2) == 4
    with pytest.raises(RateLimited) as ei:
        work(3)
    assert ei.value.decision.allowed is False and ei.value.retry_after_ms > 0
    assert ei.value.key == "rl:fn"
    assert work.__name__ == "work" and work.__doc__ == "doubles" and work.limiter is lim

    # waiting up to wait_ms on the server: 10 per second, one at a time
    @rate_limited(RateLimiter(r, "rl:tick", rate=10, period_ms=1000, burst=1), wait_ms=1000)
    def tick():
        return time.monotonic()

    start = time.monotonic()
    ts = [tick() for _ in range(3)]
    assert ts[2] - start >= 0.19   # the third unit is 200 ms after the first

    # a cost computed from the arguments
    @rate_limited(RateLimiter(r, "rl:bulk", rate=10, period_ms=60000), cost=lambda n: n)
    def bulk(n):
        return n

    assert bulk(6) == 6
    with pytest.raises(RateLimited):
        bulk(5)
    assert bulk(4) == 4


# ----------------------------------------------------------------- captchas
def test_captcha_add_visit_count_and_challenges(server):
    r = server.client()
    site = Captcha(r, "mysite")
    assert not site.exists()
    with pytest.raises(CaptchaNotFound):
        site.visit()
    with pytest.raises(CaptchaNotFound):
        site.count()
    site.add(levels=[(2, 100), (4, 1000), (6, 10000)], duration_s=10)
    assert site.exists()
    with pytest.raises(CaptchaExists):
        site.add(levels=[(1, 1)])
    # the README's redis-cli session
    assert [site.visit() for _ in range(7)] == [100] * 4 + [1000] * 2 + [10000]
    assert site.count() == 7
    assert site.visit_with_duration() == (10000, 10)
    assert int(r.execute_command("MCAPTCHA_CACHE.GET", "mysite")) == 8
    with pytest.raises(InvalidCaptchaConfig):
        Captcha(r, "bad").add(levels=[], duration_s=30)
    with pytest.raises(InvalidCaptchaConfig) as ei:
        Captcha(r, "bad").add(levels=[(2, 20), (5, 10)])  # difficulty decreasing
    assert isinstance(ei.value, InvalidArgument)
    # challenges
    site.add_challenge("n0nce", 10000, 10)
    with pytest.raises(ChallengeExists):
        site.add_challenge("n0nce", 10000, 10)
    assert site.get_challenge("n0nce") == Challenge(10000, 10)
    with pytest.raises(ChallengeNotFound):
        site.get_challenge("n0nce")
    with pytest.raises(ChallengeNotFound):
        site.delete_challenge("n0nce")
    moved = site.rename("mysite2")
    assert moved.count() == 8 and not site.exists()
    moved.delete()
    with pytest.raises(CaptchaNotFound):
        moved.delete()
    # decoded replies
    rd = server.client(decode_responses=True)
    c = Captcha(rd, "site3")
    c.add([{"visitor_threshold": 1, "difficulty_factor": 7}], duration_s=5)
    assert c.visit() == 7 and c.count() == 1


# ------------------------------------------------------------------ asyncio
def test_asyncio_lock_and_rate_limiter(server):
    async def until(pred, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await pred():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("timed out waiting for " + what)

    async def main():
        r = aioredis.Redis(host=server.host, port=server.port)
        try:
            async with AsyncLock(r, "a:1", lease_ms=2000) as lock:
                first = lock.token
                info = await lock.inspect()
                assert [(h.owner, h.token) for h in info.holders] == [(lock.owner, first)]
            assert (await lock.inspect()).holders == []
            with pytest.raises(TypeError):
                with lock:
                    pass

            # a second holder queued on the server
            a, b = AsyncLock(r, "a:1", 5000), AsyncLock(r, "a:1", 5000)
            assert await a.acquire()
            waiter = asyncio.get_running_loop().create_task(b.acquire(wait_ms=5000))

            async def queued():
                return (await r.execute_command("LOCK.INSPECT", "a:1"))[2] == 1
            await until(queued, 5.0, "the waiter")
            await asyncio.sleep(0.2)
            assert not waiter.done() and await a.owned() and not await b.owned()
            await a.release()
            assert await asyncio.wait_for(waiter, 5.0) is True
            assert b.token > a.token > first
            await b.release()
            with pytest.raises(LockNotOwned):
                await b.release()

            # the watchdog task keeps a 1.5 s lease, and stops with the release
            extends0 = calls(server, "lock.extend")
            w = AsyncLock(r, "a:2", 1500, renew_every_ms=150)
            async with w:
                await asyncio.sleep(2.5)   # outlasts the lease
                assert await w.owned() and not w.lost
            extends1 = calls(server, "lock.extend")
            assert extends1 - extends0 >= 3 and w._task is None
            assert (await w.inspect()).holders == []
            await asyncio.sleep(1.0)
            assert calls(server, "lock.extend") == extends1

            # a lost lease
            seen = []

            async def on_lost(lk):
                seen.append(lk)
            lost = AsyncLock(r, "a:3", 300, on_lost=on_lost)
            assert await lost.acquire()
            await r.delete("a:3")

            async def is_lost():
                return lost.lost
            await until(is_lost, 3.0, "the loss")
            assert seen == [lost]
            with pytest.raises(LockLost):
                await lost.release()

            # semaphore
            sems = [AsyncSemaphore(r, "a:pool", 2, 2000) for _ in range(3)]
            assert [await sm.acquire(wait_ms=0) for sm in sems] == [True, True, False]
            for sm in sems[:2]:
                await sm.release()

            # rate limiter, against RL.GCRA
            lim = AsyncRateLimiter(r, "a:rl", rate=5, period_ms=60000, burst=2)   # no refill meanwhile
            ds = [await lim.acquire() for _ in range(3)]
            raw = [await r.execute_command("RL.GCRA", "a:rl2", 5, 60000, "BURST", 2)
                   for _ in range(3)]
            assert [(d.allowed, d.remaining) for d in ds] == [(bool(x[0]), x[1]) for x in raw]
            assert [d.allowed for d in ds] == [True, True, False]
            assert not (await lim.peek()).allowed
            fast = AsyncRateLimiter(r, "a:fast", rate=5, period_ms=1000, burst=1)
            assert (await fast.acquire()).allowed and not (await fast.acquire()).allowed
            d = await fast.acquire(wait_ms=5000)
            assert d.allowed

            @rate_limited(AsyncRateLimiter(r, "a:fn", rate=1, period_ms=60000))
            async def once():
                return 1
            assert await once() == 1
            with pytest.raises(RateLimited):
                await once()
            with pytest.raises(TypeError):
                rate_limited(lim)(lambda: None)

            c = AsyncCaptcha(r, "a:site")
            await c.add([(1, 5), (3, 50)], duration_s=30)
            assert [await c.visit() for _ in range(4)] == [5, 5, 5, 50]
            assert await c.count() == 4
            with pytest.raises(CaptchaNotFound):
                await AsyncCaptcha(r, "a:none").visit()
        finally:
            await r.close()

    asyncio.run(main())


# ------------------------------------------------------------------ cluster
def test_cluster_lock_semaphore_and_rate_limiter(cluster):
    rc = cluster.client
    names = ["orders:1", "orders:2", "orders:3", "orders:4"]
    assert len({cluster.owner_of(n).port for n in names}) >= 2  # several primaries
    tokens = {}
    for n in names:
        with Lock(rc, n, lease_ms=2000) as lock:
            node = cluster.conn(cluster.owner_of(n))
            assert [(h[0], h[2]) for h in inspect(node, n)[3]] == [(lock.owner, lock.token)]
            tokens[n] = lock.token
        assert inspect(cluster.conn(cluster.owner_of(n)), n)[3] == []

    # a holder and a waiter on another cluster client
    key = "orders:1"
    owner_node = cluster.conn(cluster.owner_of(key))
    rc2 = cluster.new_client()
    try:
        a = Lock(rc, key, 5000)
        assert a.acquire() and a.token > tokens[key]
        b = Lock(rc2, key, 5000, wait_ms=5000)
        t = threading.Thread(target=b.acquire, daemon=True)
        t.start()
        wait_for(lambda: inspect(owner_node, key)[2] == 1, 5.0, "the waiter")
        assert not b.held
        a.release()
        t.join(5.0)
        assert b.held and b.token > a.token
        b.release()
    finally:
        rc2.close()

    # the watchdog through the cluster client, and a loss
    with Lock(rc, "orders:2", 1500, renew_every_ms=150) as w:
        time.sleep(2.0)   # outlasts the lease
        assert w.owned()
    lk = Lock(rc, "orders:3", 300)
    assert lk.acquire()
    rc.delete("orders:3")
    wait_for(lambda: lk.lost, 3.0, "the loss")
    with pytest.raises(LockLost):
        lk.release()

    sems = [Semaphore(rc, "pool:{x}", 2, 2000) for _ in range(3)]
    assert [sm.acquire(wait_ms=0) for sm in sems] == [True, True, False]
    for sm in sems[:2]:
        sm.release()

    lim = RateLimiter(rc, "rl:{u42}", rate=3, period_ms=60000)   # no refill meanwhile
    assert [lim.acquire().allowed for _ in range(4)] == [True, True, True, False]
    raw = cluster.conn(cluster.owner_of("rl:{u42}")).execute_command(
        "RL.GCRA_PEEK", "rl:{u42}", 3, 60000)
    peek = lim.peek()
    assert (peek.allowed, peek.remaining) == (bool(raw[0]), raw[1]) == (False, 0)
    assert lim.refund(1) == 1 and lim.acquire().allowed
    fast = RateLimiter(rc, "rl:{u43}", rate=3, period_ms=1000, burst=1)
    assert fast.acquire().allowed and not fast.acquire().allowed
    assert fast.acquire(wait_ms=5000).allowed  # WAIT served on the key's node


# ------------------------------------------------------------- installation
def test_pip_install_offline_into_a_target(tmp_path):
    # install from a copy, so that setuptools' build/ and *.egg-info stay out of the tree
    src = tmp_path / "python"
    shutil.copytree(CLIENT_DIR, src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--target", str(target), str(src)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=180)
    assert p.returncode == 0, p.stdout.decode(errors="replace")
    code = ("import mcaptcha_cache, mcaptcha_cache.asyncio\n"
            "from mcaptcha_cache import Lock, Semaphore, RateLimiter, Captcha, rate_limited\n"
            "print(mcaptcha_cache.__file__)\nprint(mcaptcha_cache.__version__)\n")
    q = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, cwd=str(tmp_path),
                       env=dict(env, PYTHONPATH=str(target)), timeout=60)
    out = q.stdout.decode(errors="replace")
    assert q.returncode == 0, out
    path, version = out.split()
    assert path.startswith(str(target)) and version == mcaptcha_cache.__version__
    assert (target / "mcaptcha_cache" / "py.typed").exists()

# SPDX-License-Identifier: BSD-3-Clause
"""The redis-py drop-in locks (mcaptcha_cache.compat.redis_py.Lock and its asyncio twin)
against real servers, standalone and Cluster: redis-py's documented Lock API (constructor,
r.lock(..., lock_class=Lock), acquire/release/extend/reacquire/locked/owned, the context
manager, the exceptions as redis.exceptions.LockError/LockNotOwnedError), answered by the
module: the wait happens on the server (one LOCK.ACQUIRE per wait, a waiter in
LOCK.INSPECT), a fencing token per grant, a lock without timeout renewed, and a key
overwritten by another client answered as redis-py does (not acquired; LockNotOwnedError)."""

import asyncio
import logging
import os
import sys
import threading

import pytest
import redis
import redis.asyncio as aioredis
import redis.exceptions

from servers import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "clients", "python")
sys.path.insert(0, CLIENT_DIR)

import mcaptcha_cache  # noqa: E402
from mcaptcha_cache.compat import redis_py  # noqa: E402
from mcaptcha_cache.compat.redis_py import Lock  # noqa: E402
from mcaptcha_cache.compat.redis_py_asyncio import Lock as AsyncLock  # noqa: E402


def calls(server, command):
    want = "cmdstat_" + command.lower()
    for k, v in server.info("commandstats").items():
        if k.lower() == want:
            return int(dict(kv.split("=", 1) for kv in v.split(","))["calls"])
    return 0


def lock_stat(server, field):
    """INFO mcaptcha_cache_locks: waits (WAITs that blocked), timeouts (WAITs that ran out)."""
    return int(server.client().info("mcaptcha_cache_locks")["mcaptcha_cache_" + field])


def holders(c, key):
    """[(owner, lease_ms_left, token)] of LOCK.INSPECT."""
    v = c.execute_command("LOCK.INSPECT", key)
    if v is None:
        return []
    return [(h[0].decode() if isinstance(h[0], bytes) else h[0], int(h[1]), int(h[2])) for h in v[3]]


def waiters(c, key):
    v = c.execute_command("LOCK.INSPECT", key)
    return 0 if v is None else int(v[2])


# ------------------------------------------------------------------- sync
def test_lock_class_context_manager_and_fencing_token(server):
    r = server.client()
    with r.lock("res", timeout=5, lock_class=Lock) as lock:
        assert isinstance(lock, Lock) and lock.timeout == 5
        tok1 = lock.fencing_token
        [(owner, lease, token)] = holders(r, "res")
        assert owner.encode() == lock.local.token and token == tok1
        assert 4000 < lease <= 5000
        assert lock.locked() and lock.owned()
        other = r.lock("res", timeout=5, lock_class=Lock)
        assert other.acquire(blocking=False) is False
        assert not other.owned() and other.locked()
    assert holders(r, "res") == [] and not lock.locked() and not lock.owned()
    with r.lock("res", timeout=5, lock_class=Lock) as again:
        assert again.fencing_token > tok1
    assert lock.fencing_token is None


def test_blocking_timeout_waits_on_the_server_not_in_a_loop(server):
    r = server.client()
    held = Lock(r, "res", timeout=10)
    assert held.acquire()
    waits, timeouts = lock_stat(server, "waits"), lock_stat(server, "timeouts")
    waiter = Lock(server.client(socket_timeout=None), "res", timeout=10, blocking_timeout=0.4,
                  thread_local=False)  # acquired in another thread below
    assert waiter.acquire() is False
    # one LOCK.ACQUIRE ... WAIT 400 that blocked and ran out: the client did not poll
    assert lock_stat(server, "waits") - waits == 1 and lock_stat(server, "timeouts") - timeouts == 1

    out = {}
    t = threading.Thread(target=lambda: out.setdefault("ok", waiter.acquire(blocking_timeout=30)))
    t.start()
    wait_until(lambda: waiters(r, "res") == 1, "the waiter queued on the server")
    held.release()
    t.join(30)
    assert out["ok"] is True and waiter.owned() and not held.owned()
    waiter.release()


def test_errors_are_redis_py_lock_errors(server):
    r = server.client()
    lock = Lock(r, "res", timeout=0.3)
    with pytest.raises(redis.exceptions.LockError) as e:
        lock.release()
    assert not isinstance(e.value, redis.exceptions.LockNotOwnedError)
    assert "unlocked" in str(e.value)
    with pytest.raises(redis.exceptions.LockError):
        lock.extend(1)
    assert lock.acquire()
    wait_until(lambda: not lock.locked(), "the 300 ms timeout ran out")
    assert not lock.owned()
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        lock.extend(1)
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        lock.reacquire()
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        lock.release()
    # the package's own lock errors are redis-py's too
    assert issubclass(mcaptcha_cache.LockNotOwned, redis.exceptions.LockNotOwnedError)
    assert issubclass(mcaptcha_cache.LockNotAcquired, redis.exceptions.LockError)


def test_extend_adds_or_replaces_and_reacquire_resets(server):
    r = server.client()
    lock = Lock(r, "res", timeout=10)
    assert lock.acquire()
    assert lock.extend(5) is True
    [(_, lease, _)] = holders(r, "res")
    assert 14000 < lease <= 15000
    assert lock.extend(2.5, replace_ttl=True) is True
    [(_, lease, _)] = holders(r, "res")
    assert 2000 < lease <= 2500
    assert lock.reacquire() is True
    [(_, lease, _)] = holders(r, "res")
    assert 9000 < lease <= 10000
    lock.release()
    forever = Lock(r, "res2")
    assert forever.acquire()
    with pytest.raises(redis.exceptions.LockError, match="no timeout"):
        forever.extend(1)
    with pytest.raises(redis.exceptions.LockError, match="no timeout"):
        forever.reacquire()
    forever.release()


def test_lock_without_timeout_is_renewed_until_released(server, monkeypatch):
    r = server.client()
    monkeypatch.setattr(redis_py, "DEFAULT_LEASE_MS", 600)
    lock = Lock(r, "res")
    assert lock.acquire()
    before = calls(server, "lock.extend")
    # held past twice its lease: renewed in the background (redis-py: held until release())
    wait_until(lambda: calls(server, "lock.extend") - before >= 4, "four renewals")
    assert lock.owned() and lock.locked()
    lock.release()
    assert not lock.locked()


def test_token_argument_and_thread_local(server):
    r = server.client()
    lock = Lock(r, "res", timeout=5)
    assert lock.acquire(token="my-token")
    assert lock.local.token == b"my-token"
    assert holders(r, "res")[0][0] == "my-token"
    seen = {}
    t = threading.Thread(target=lambda: seen.update(token=lock.local.token, owned=lock.owned()))
    t.start()
    t.join()
    assert seen == {"token": None, "owned": False}  # per thread, as redis-py
    lock.release()
    shared = Lock(r, "res", timeout=5, thread_local=False)
    assert shared.acquire()
    t = threading.Thread(target=shared.release)
    t.start()
    t.join()
    assert not shared.locked()


def test_key_overwritten_by_another_client(server):
    r = server.client()
    lock = Lock(r, "res", timeout=5)
    assert lock.acquire()
    r.set("res", "someone else's value")
    assert lock.locked() and not lock.owned()
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        lock.extend(1)
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        lock.release()
    other = Lock(r, "res", timeout=5)
    assert other.acquire(blocking=False) is False
    assert other.acquire(blocking_timeout=0.2, sleep=0.05) is False
    r.delete("res")
    assert other.acquire(blocking=False) is True
    other.release()


def test_context_manager_failures(server, caplog):
    r = server.client()
    held = Lock(r, "res", timeout=10)
    assert held.acquire()
    with pytest.raises(redis.exceptions.LockError, match="Unable to acquire"):
        with Lock(r, "res", timeout=1, blocking_timeout=0.1):
            pass
    held.release()
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        with Lock(r, "res", timeout=0.2) as lock:
            wait_until(lambda: not lock.locked(), "the lease ran out")
    caplog.set_level(logging.WARNING, logger="mcaptcha_cache")
    with Lock(r, "res", timeout=0.2, raise_on_release_error=False) as lock:
        wait_until(lambda: not lock.locked(), "the lease ran out")
    assert any("no longer owned when exiting" in rec.getMessage() for rec in caplog.records)


# ---------------------------------------------------------------- asyncio
def test_asyncio_drop_in(server):
    async def main():
        r = aioredis.Redis(host=server.host, port=server.port)
        try:
            async with r.lock("ares", timeout=5, lock_class=AsyncLock) as lock:
                assert isinstance(lock, AsyncLock) and lock.fencing_token >= 1
                assert await lock.owned() and await lock.locked()
                other = r.lock("ares", timeout=5, lock_class=AsyncLock)
                assert await other.acquire(blocking=False) is False
                assert await other.acquire(blocking_timeout=0.2) is False
                assert await lock.extend(5)
                [(_, lease, _)] = holders(server.client(), "ares")
                assert 9000 < lease <= 10000
                assert await lock.reacquire()
            assert not await lock.locked()
            with pytest.raises(redis.exceptions.LockError):
                await lock.release()
            lock = AsyncLock(r, "ares", timeout=5)
            assert await lock.acquire()
            await r.set("ares", "x")
            with pytest.raises(redis.exceptions.LockNotOwnedError):
                await lock.release()
            assert await AsyncLock(r, "ares").acquire(blocking=False) is False
        finally:
            await r.close()
            await r.connection_pool.disconnect()

    asyncio.run(main())


# ---------------------------------------------------------------- cluster
def test_cluster_drop_in(cluster):
    rc = cluster.client
    for name in ("alpha", "beta", "gamma"):
        with rc.lock(name, timeout=5, lock_class=Lock) as lock:
            node = cluster.conn(cluster.owner_of(name))
            [(owner, _, token)] = holders(node, name)
            assert owner.encode() == lock.local.token and token == lock.fencing_token
            assert rc.lock(name, timeout=5, lock_class=Lock).acquire(blocking_timeout=0.1) is False
            assert lock.extend(1)
        assert holders(node, name) == []


def test_asyncio_cluster_drop_in(cluster):
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
    node = cluster.primaries()[0]

    async def main():
        rc = AsyncRedisCluster(host=node.host, port=node.port)
        try:
            for name in ("alpha", "beta", "gamma"):
                lock = AsyncLock(rc, name, timeout=5)
                async with lock:
                    conn = cluster.conn(cluster.owner_of(name))
                    [(owner, _, token)] = holders(conn, name)
                    assert owner.encode() == lock.local.token and token == lock.fencing_token
                    assert await AsyncLock(rc, name, timeout=5).acquire(blocking_timeout=0.1) is False
                    assert await lock.extend(1) and await lock.owned()
                assert holders(conn, name) == []
        finally:
            await rc.close()

    asyncio.run(main())

# SPDX-License-Identifier: BSD-3-Clause
"""The Python client's MultiLock and AsyncMultiLock (clients/python, LOCK.ACQUIRE_ALL /
EXTEND_ALL / RELEASE_ALL): a context manager holding every key with one fencing token,
waiting on the server holding none, renewed by the watchdog, released together; a key
lost meanwhile is reported (LockLost), never silently."""

import asyncio
import os
import sys
import threading

import pytest
import redis.asyncio as aioredis

from servers import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "clients", "python")
sys.path.insert(0, CLIENT_DIR)

from mcaptcha_cache import (AsyncMultiLock, CrossSlot, Lock, LockLost, LockNotOwned,  # noqa: E402
                            MultiLock)

KEYS = ["{acct}:1", "{acct}:2", "{acct}:3"]


def holder(c, key):
    v = c.execute_command("LOCK.INSPECT", key)
    if v is None or not v[3]:
        return None
    h = v[3][0]
    return (h[0].decode() if isinstance(h[0], bytes) else h[0], h[2])


def test_multilock_holds_every_key_with_one_token(server):
    r = server.client()
    with MultiLock(r, KEYS, lease_ms=5000) as m:
        assert m.held and m.keys == KEYS and m.name == KEYS[0]
        assert [holder(r, k) for k in KEYS] == [(m.owner, m.token)] * 3
        assert m.extend(9000) == 9000
    assert [holder(r, k) for k in KEYS] == [None] * 3
    with pytest.raises(LockNotOwned):
        m.release()


def test_multilock_waits_on_the_server_holding_nothing(server):
    r = server.client()
    blocker = Lock(r, KEYS[1], 10000)
    assert blocker.acquire()
    m = MultiLock(server.client(socket_timeout=None), KEYS[:2], 5000, wait_ms=10000)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("got", m.acquire()), daemon=True)
    t.start()
    wait_until(lambda: r.execute_command("LOCK.INSPECT", KEYS[1])[2] == 1, "the MultiLock queued")
    assert holder(r, KEYS[0]) is None  # nothing held while it waits
    blocker.release()
    t.join(10)
    assert out["got"] is True and m.token > blocker.token
    m.release()


def test_multilock_reports_a_key_lost_and_bad_input(server):
    r = server.client()
    m = MultiLock(r, KEYS[:2], 5000, auto_renew=False)
    assert m.acquire()
    r.execute_command("LOCK.RELEASE", KEYS[1], m.owner)  # taken away behind its back
    with pytest.raises(LockLost, match=r"\{acct\}:2"):
        m.release()
    assert holder(r, KEYS[0]) is None  # the other key was released
    with pytest.raises(CrossSlot):
        MultiLock(r, ["a", "b"], 1000).acquire(wait_ms=0)
    with pytest.raises(ValueError):
        MultiLock(r, ["{x}a", "{x}a"], 1000)


def test_multilock_session_and_asyncio(server):
    r = server.client()

    async def main():
        ar = aioredis.Redis(host=server.host, port=server.port)
        try:
            async with AsyncMultiLock(ar, KEYS, lease_ms=4000) as m:
                assert [holder(r, k) for k in KEYS] == [(m.owner, m.token)] * 3
                assert await m.extend(6000) == 6000
            assert [holder(r, k) for k in KEYS] == [None] * 3
        finally:
            await ar.aclose() if hasattr(ar, "aclose") else await ar.close()

    asyncio.run(main())
    m = MultiLock(r, KEYS, 60000, session=True)
    assert m.acquire()
    m._session_client.connection_pool.disconnect()  # the connection closes: every key is released
    wait_until(lambda: all(holder(r, k) is None for k in KEYS), "the session's keys released")

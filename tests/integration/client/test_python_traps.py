# SPDX-License-Identifier: BSD-3-Clause
"""Traps of the Python client fixed (clients/python), against real servers:
Captcha.visit_info() (deprecated: it counts) beside visit_with_duration() and count() (a
query that counts nothing); list_policies() as str; a with-block whose body raised while the
lease was lost lets the body's exception through (the loss reported by the logger, on_lost
and lock.lost); a MultiLock over several hash slots refused (CrossSlot) before anything is
sent, standalone and Cluster; the policy helpers on a RedisCluster applied to every primary,
naming the primary where one failed (ClusterPolicyError); signatures readable by help()."""

import asyncio
import inspect
import logging
import os
import sys

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from servers import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "clients", "python"))

from mcaptcha_cache import (AsyncLock, Captcha, ClusterPolicyError, CrossSlot, Lock,  # noqa: E402
                            MultiLock, AsyncMultiLock, RateLimiter, delete_policy, get_policy,
                            list_policies, set_gcra_policy, set_window_policy)
from mcaptcha_cache import asyncio as maio  # noqa: E402


def calls(server, command):
    want = "cmdstat_" + command.lower()
    for k, v in server.info("commandstats").items():
        if k.lower() == want:
            return int(dict(kv.split("=", 1) for kv in v.split(","))["calls"])
    return 0


# ---------------------------------------------------------------- captcha
def test_visit_info_is_deprecated_and_count_is_a_query(r):
    site = Captcha(r, "site")
    site.add(levels=[(1, 10), (2, 20)], duration_s=30)
    assert site.count() == 0 and site.count() == 0  # counts nothing
    assert site.visit_with_duration() == (10, 30) and site.count() == 1
    with pytest.warns(DeprecationWarning, match="counts a visit"):
        assert site.visit_info() == (10, 30)
    assert site.count() == 2


# --------------------------------------------------------------- policies
@pytest.mark.parametrize("decode", [False, True])
def test_list_policies_is_str(server, decode):
    c = server.client(decode_responses=decode)
    set_window_policy(c, "p1", 5, 1000)
    set_gcra_policy(c, "p2", 5, 1000)
    assert list_policies(c) == ["p1", "p2"]
    assert [get_policy(c, n)["type"] for n in list_policies(c)] == ["WINDOW", "GCRA"]


# ------------------------------------------------------ body exception first
def test_body_exception_goes_first_when_the_lease_was_lost(r, caplog):
    caplog.set_level(logging.WARNING, logger="mcaptcha_cache")
    lost = []
    with pytest.raises(KeyError, match="the body's own"):
        with Lock(r, "res", lease_ms=5000, on_lost=lost.append) as lock:
            r.delete("res")  # the lease is gone
            raise KeyError("the body's own")
    assert lock.lost and not lock.held and lost == [lock]
    assert "lost" in (lock.lost_reason or "") or lock.lost_reason
    assert any("lost" in rec.getMessage() for rec in caplog.records)
    # without a body exception the loss is still raised
    with pytest.raises(mcaptcha_cache_LockLost()):
        with Lock(r, "res", lease_ms=5000):
            r.delete("res")


def mcaptcha_cache_LockLost():
    from mcaptcha_cache import LockLost
    return LockLost


def test_body_exception_goes_first_asyncio(server):
    lost = []

    async def main():
        c = aioredis.Redis(host=server.host, port=server.port)
        try:
            with pytest.raises(KeyError):
                async with AsyncLock(c, "ares", lease_ms=5000, on_lost=lost.append) as lock:
                    await c.delete("ares")
                    raise KeyError("body")
            assert lock.lost and lost == [lock]
            site = maio.Captcha(c, "asite")
            await site.add(levels=[(1, 10)], duration_s=30)
            assert await site.count() == 0
            assert await site.visit_with_duration() == (10, 30)
            with pytest.warns(DeprecationWarning):
                assert await site.visit_info() == (10, 30)
            assert await site.count() == 2
        finally:
            await c.close()
            await c.connection_pool.disconnect()

    asyncio.run(main())


# --------------------------------------------------------------- CrossSlot
def test_multilock_cross_slot_refused_before_sending(server):
    r = server.client()
    before = calls(server, "lock.acquire_all")
    with pytest.raises(CrossSlot):
        MultiLock(r, ["a", "b"], lease_ms=1000)
    with pytest.raises(CrossSlot):
        AsyncMultiLock(r, [b"{x}1", b"{y}2"], lease_ms=1000)
    assert calls(server, "lock.acquire_all") == before
    with MultiLock(r, ["{t}a", "{t}b"], lease_ms=1000) as m:  # one slot: fine
        assert m.held


def test_cluster_multilock_cross_slot_and_policies(cluster):
    rc = cluster.client
    with pytest.raises(CrossSlot):
        MultiLock(rc, ["a", "b"], lease_ms=1000)
    primaries = cluster.primaries()
    assert len(primaries) == 3
    set_gcra_policy(rc, "api", 2, 60_000)
    for p in primaries:
        assert cluster.conn(p).execute_command("RL.POLICY_GET", "api")[:3] == ["GCRA", "2", "60000"] \
            or cluster.conn(p).execute_command("RL.POLICY_GET", "api")[:3] == ["GCRA", 2, 60000]
    assert get_policy(rc, "api") == {"type": "GCRA", "rate": 2, "period_ms": 60_000, "burst": None}
    assert list_policies(rc) == ["api"]
    # a limiter naming the policy works on keys of every primary
    for key in ("k1", "k2", "k3", "k4", "k5", "k6"):
        lim = RateLimiter(rc, key, policy="api")
        assert [lim.acquire().allowed for _ in range(3)] == [True, True, False]
    # primaries that disagree are named
    cluster.conn(primaries[1]).execute_command("RL.POLICY_SET", "api", "GCRA", 9, 1000)
    with pytest.raises(ClusterPolicyError, match="differs") as e:
        get_policy(rc, "api")
    assert len(e.value.results) == 3
    # a primary where the command fails is named; the others got it
    bad = cluster.conn(primaries[2])
    bad.config_set("aof-use-rdb-preamble", "no")
    bad.config_set("appendonly", "yes")
    try:
        with pytest.raises(ClusterPolicyError) as e:
            set_window_policy(rc, "login", 5, 1000)
        assert list(e.value.failures) == ["%s:%d" % (primaries[2].host, primaries[2].port)]
        assert sorted(e.value.results) == sorted("%s:%d" % (p.host, p.port) for p in primaries[:2])
        assert "RL.POLICY_SET failed on %s:%d" % (primaries[2].host, primaries[2].port) in str(e.value)
    finally:
        bad.config_set("appendonly", "no")
        bad.config_set("aof-use-rdb-preamble", "yes")
    assert delete_policy(rc, "api") is True
    assert delete_policy(rc, "login") is True
    assert list_policies(rc) == [] and delete_policy(rc, "api") is False


def test_asyncio_cluster_policies(cluster):
    node = cluster.primaries()[0]

    async def main():
        rc = AsyncRedisCluster(host=node.host, port=node.port)
        try:
            await maio.set_window_policy(rc, "w", 3, 1000)
            assert await maio.get_policy(rc, "w") == {"type": "WINDOW", "limit": 3, "window_ms": 1000}
            assert await maio.list_policies(rc) == ["w"]
            assert await maio.delete_policy(rc, "w") is True
        finally:
            await rc.close()

    asyncio.run(main())
    for p in cluster.primaries():
        assert cluster.conn(p).execute_command("RL.POLICY_LIST") == []


# ------------------------------------------------------------------ help()
def test_signatures_are_readable():
    assert "object object" not in str(inspect.signature(Lock.acquire))
    assert "wait_ms" in str(inspect.signature(Lock.acquire))
    assert inspect.signature(Lock.__init__).parameters["lease_ms"].annotation in ("int", int)

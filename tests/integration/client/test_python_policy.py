# SPDX-License-Identifier: BSD-3-Clause
"""The Python client's stored policies (clients/python, package mcaptcha_cache): the
set/get/delete/list helpers (sync and asyncio), and RateLimiter / SlidingWindowLimiter with
``policy=`` deciding exactly as the same limiter with the policy's numbers; argument checks
on the client side and typed errors from the server (unknown policy, wrong kind)."""

import asyncio
import os
import sys

import pytest
import redis.asyncio as aioredis

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "clients", "python"))

import mcaptcha_cache  # noqa: E402
from mcaptcha_cache import (InvalidArgument, RateLimiter, SlidingWindowLimiter, delete_policy,  # noqa: E402
                            get_policy, list_policies, set_gcra_policy, set_window_policy)
from mcaptcha_cache import asyncio as maio  # noqa: E402

MIN = 60_000


def _clear(r):
    for n in list_policies(r):
        delete_policy(r, n)


def test_helpers_round_trip(r):
    _clear(r)
    set_gcra_policy(r, "api", 100, MIN, burst=20)
    set_gcra_policy(r, "plain", 3, 1000)
    set_window_policy(r, "login", 5, MIN)
    assert get_policy(r, "api") == {"type": "GCRA", "rate": 100, "period_ms": MIN, "burst": 20}
    assert get_policy(r, "plain") == {"type": "GCRA", "rate": 3, "period_ms": 1000, "burst": None}
    assert get_policy(r, "login") == {"type": "WINDOW", "limit": 5, "window_ms": MIN}
    assert get_policy(r, "none") is None
    assert list_policies(r) == ["api", "login", "plain"]  # str, as get_policy
    assert delete_policy(r, "plain") is True
    assert delete_policy(r, "plain") is False
    assert list_policies(r) == ["api", "login"]
    with pytest.raises(InvalidArgument):
        set_gcra_policy(r, "x", 0, 1000)  # the server's range error, typed
    with pytest.raises(TypeError):
        set_window_policy(r, "x", 1, 1.5)  # milliseconds are ints
    assert get_policy(r, "x") is None


def test_limiters_with_policy_decide_as_with_numbers(r):
    set_gcra_policy(r, "g", 2, MIN, burst=3)
    set_window_policy(r, "w", 2, MIN)
    pairs = [(RateLimiter(r, "pg", policy="g"), RateLimiter(r, "ng", 2, MIN, burst=3)),
             (SlidingWindowLimiter(r, "pw", policy="w"), SlidingWindowLimiter(r, "nw", 2, MIN))]
    for by_policy, by_numbers in pairs:
        for cost in (1, 1, 2, 1, 0):
            a, b = by_policy.acquire(cost), by_numbers.acquire(cost)
            assert (a.allowed, a.remaining) == (b.allowed, b.remaining), cost
            assert by_policy.peek().remaining == by_numbers.peek().remaining
        assert by_policy.refund(1) == by_numbers.refund(1)
    # No digest comparison here: the two keys are written a moment apart, so their stored
    # times may differ by a millisecond. test_policy.py compares the stored state exactly
    # (with AT, the same time for both).


def test_limiter_policy_errors(r):
    set_window_policy(r, "wonly", 2, MIN)
    with pytest.raises(InvalidArgument, match="no such policy"):
        RateLimiter(r, "k", policy="missing").acquire()
    with pytest.raises(InvalidArgument, match="is a WINDOW policy"):
        RateLimiter(r, "k", policy="wonly").acquire()
    assert r.exists("k") == 0
    with pytest.raises(ValueError):
        RateLimiter(r, "k", 5, 1000, policy="wonly")
    with pytest.raises(ValueError):
        RateLimiter(r, "k", policy="wonly", burst=2)
    with pytest.raises(ValueError):
        RateLimiter(r, "k")
    with pytest.raises(ValueError):
        SlidingWindowLimiter(r, "k", limit=3)
    with pytest.raises(ValueError):
        SlidingWindowLimiter(r, "k", policy="")


def test_asyncio_helpers_and_limiter(server):
    async def run():
        c = aioredis.Redis(host=server.host, port=server.port)
        try:
            await maio.set_gcra_policy(c, "ag", 1, MIN)
            await maio.set_window_policy(c, "aw", 1, MIN)
            assert await maio.get_policy(c, "ag") == {"type": "GCRA", "rate": 1, "period_ms": MIN, "burst": None}
            assert "aw" in await maio.list_policies(c)
            lim = maio.RateLimiter(c, "ak", policy="ag")
            assert (await lim.acquire()).allowed
            assert not (await lim.acquire()).allowed
            with pytest.raises(InvalidArgument):
                await maio.SlidingWindowLimiter(c, "ak2", policy="ag").acquire()
            assert await maio.delete_policy(c, "ag") is True
            assert await maio.get_policy(c, "ag") is None
        finally:
            await c.aclose() if hasattr(c, "aclose") else await c.close()

    asyncio.run(run())
    assert "set_gcra_policy" in mcaptcha_cache.__all__

# SPDX-License-Identifier: BSD-3-Clause
"""The `limits` storage of the Python client (mcaptcha_cache.compat.limits) against real
servers, standalone and Cluster, through Debian's python3-limits and python3-flask-limiter:
the URI schemes resolve to it; the moving window is the module's sliding window (RL.WINDOW,
constant memory per key where limits' own Redis storage keeps a list entry per hit), the
fixed window the module's counter (RL.FIXED, no Lua script); a Flask app answers 429 on the N+1-th call within the window, 200
again once the window lets a call through, with X-RateLimit-* headers giving the reset time.
Waits poll the limiter's own state (bounded), never sleep for a time."""

import asyncio
import math
import os
import sys
import time

import pytest

limits = pytest.importorskip("limits")
flask = pytest.importorskip("flask")
flask_limiter = pytest.importorskip("flask_limiter")

from limits import parse, strategies  # noqa: E402
from limits.storage import storage_from_string  # noqa: E402
from flask_limiter import Limiter  # noqa: E402
from flask_limiter.util import get_remote_address  # noqa: E402

from servers import wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "clients", "python")
sys.path.insert(0, CLIENT_DIR)

from mcaptcha_cache.compat.limits import McaptchaClusterStorage, McaptchaStorage  # noqa: E402
from mcaptcha_cache.compat.limits_aio import (McaptchaAsyncClusterStorage,  # noqa: E402
                                              McaptchaAsyncStorage)


def uri(server):
    return "mcaptcha+redis://%s:%d" % (server.host, server.port)


def test_scheme_registered_and_healthy(server):
    store = storage_from_string(uri(server))
    assert isinstance(store, McaptchaStorage) and store.check()
    assert isinstance(storage_from_string(uri(server) + "/0", socket_timeout=5), McaptchaStorage)


def test_moving_window_is_the_module_sliding_window(server):
    r = server.client()
    store = storage_from_string(uri(server))
    mw = strategies.MovingWindowRateLimiter(store)
    item = parse("3 per 2 seconds")
    first = time.time()
    assert [mw.hit(item, "u1") for _ in range(4)] == [True, True, True, False]
    key = item.key_for("u1")
    assert r.type(key) != b"list" and r.exists(key)  # a module window, not limits' list
    assert mw.test(item, "u1") is False
    reset, remaining = mw.get_window_stats(item, "u1")
    assert remaining == 0
    assert first + 2 - 0.1 <= reset <= math.ceil(time.time() + 2 + 2 / 256)  # the oldest hit leaves
    assert mw.hit(item, "u2", cost=2) and not mw.hit(item, "u2", cost=2) and mw.hit(item, "u2")
    # the window lets one through again once the oldest hits are 2 s old
    wait_until(lambda: mw.test(item, "u1"), "the window to move past the first hits", timeout=5)
    assert time.time() >= first + 1.9
    assert mw.hit(item, "u1")
    mw.clear(item, "u1")
    assert mw.get_window_stats(item, "u1")[1] == 3


def test_moving_window_memory_is_constant_per_key(server):
    r = server.client()
    stores = (storage_from_string(uri(server)),  # the strategies keep weak references
              storage_from_string("redis://%s:%d" % (server.host, server.port)))
    ours, theirs = (strategies.MovingWindowRateLimiter(s) for s in stores)
    item = parse("100000/hour")
    for _ in range(20):
        ours.hit(item, "ours"), theirs.hit(item, "theirs")
    small = (r.memory_usage(item.key_for("ours")), r.memory_usage(item.key_for("theirs")))
    for _ in range(2000):
        ours.hit(item, "ours"), theirs.hit(item, "theirs")
    big = (r.memory_usage(item.key_for("ours")), r.memory_usage(item.key_for("theirs")))
    assert ours.get_window_stats(item, "ours")[1] == 100000 - 2020
    assert big[0] <= small[0] + 64                    # ours: constant
    assert big[1] > small[1] + 2000 * 8 > big[0]      # limits' list: one entry per hit


def test_fixed_window_counter(server):
    store = storage_from_string(uri(server))
    fw = strategies.FixedWindowRateLimiter(store)
    item = parse("2 per 2 seconds")
    start = time.time()
    assert [fw.hit(item, "f") for _ in range(3)] == [True, True, False]
    reset, remaining = fw.get_window_stats(item, "f")
    assert remaining == 0 and start + 1 <= reset <= start + 3
    wait_until(lambda: fw.test(item, "f"), "the fixed window to end", timeout=5)
    assert fw.hit(item, "f")
    elastic = strategies.FixedWindowElasticExpiryRateLimiter(store)
    assert elastic.hit(item, "e") and elastic.hit(item, "e") and not elastic.hit(item, "e")
    assert store.reset() >= 2
    assert fw.get_window_stats(item, "f")[1] == 2 and store.get(item.key_for("e")) == 0


def _calls(r, name):
    """Calls of a command (module commands keep their case in INFO: cmdstat_RL.FIXED)."""
    stats = {k.lower(): v for k, v in r.info("commandstats").items()}
    return int(stats.get("cmdstat_" + name, {}).get("calls", 0))


def test_fixed_window_is_the_module_counter(server):
    """The fixed-window strategies run RL.FIXED (no Lua script); the elastic one moves the
    window's end on every hit; a counter limits' own Redis storage wrote goes on counting."""
    r = server.client()
    r.config_resetstat()
    store = storage_from_string(uri(server))
    item = parse("5 per 10 minutes")
    fw = strategies.FixedWindowRateLimiter(store)
    assert [fw.hit(item, "m") for _ in range(3)] == [True] * 3
    assert fw.hit(item, "m", cost=2) and not fw.hit(item, "m")
    assert _calls(r, "rl.fixed") == 5 and _calls(r, "eval") + _calls(r, "evalsha") == 0
    key = item.key_for("m")
    assert r.get(key) == b"6" and 0 < r.pttl(key) <= 600000
    elastic = strategies.FixedWindowElasticExpiryRateLimiter(store)
    ekey = item.key_for("el")
    elastic.hit(item, "el")
    r.pexpire(ekey, 1000)  # as if the window were nearly over
    elastic.hit(item, "el")
    assert r.pttl(ekey) > 1000 and r.get(ekey) == b"2"
    end = r.execute_command("PEXPIRETIME", ekey)
    fw.hit(item, "el")  # the fixed strategy keeps the end
    assert r.execute_command("PEXPIRETIME", ekey) == end and r.get(ekey) == b"3"
    # limits' own Redis storage and ours share the counter's format
    theirs = storage_from_string("redis://%s:%d" % (server.host, server.port))
    theirs_fw = strategies.FixedWindowRateLimiter(theirs)
    assert theirs_fw.hit(item, "shared") and theirs_fw.hit(item, "shared")
    assert fw.get_window_stats(item, "shared")[1] == 3
    assert [fw.hit(item, "shared") for _ in range(4)] == [True, True, True, False]
    assert theirs_fw.get_window_stats(item, "shared")[1] == 0


@pytest.mark.parametrize("strategy", ["moving-window", "fixed-window"])
def test_flask_limiter_app(server, strategy):
    app = flask.Flask("limited")
    limiter = Limiter(get_remote_address, app=app, storage_uri=uri(server), strategy=strategy,
                      headers_enabled=True)

    @app.route("/ping")
    @limiter.limit("3 per 2 seconds")
    def ping():
        return "pong"

    client = app.test_client()
    first = time.time()
    codes = [client.get("/ping") for _ in range(4)]
    assert [c.status_code for c in codes] == [200, 200, 200, 429]
    assert codes[0].headers["X-RateLimit-Limit"] == "3"
    assert [c.headers["X-RateLimit-Remaining"] for c in codes] == ["2", "1", "0", "0"]
    reset = int(codes[3].headers["X-RateLimit-Reset"])
    assert int(first) + 1 <= reset <= int(time.time()) + 2 + 2  # the window's end (+1 rounding)
    assert int(codes[3].headers["Retry-After"]) <= 3

    def allowed():
        resp = client.get("/ping")
        assert resp.status_code in (200, 429)
        return resp.status_code == 200

    wait_until(allowed, "a call let through after the window", timeout=6)
    allowed_at = time.time()
    assert allowed_at >= first + 1  # not before the window moved
    # the header told the truth: let through by the reset time (Flask-Limiter adds 1 s to it)
    assert reset - 2.1 <= allowed_at <= reset + 0.5


def test_cluster_storage(cluster):
    nodes = ",".join("%s:%d" % (n.host, n.port) for n in cluster.primaries())
    store = storage_from_string("mcaptcha+redis+cluster://" + nodes)
    assert isinstance(store, McaptchaClusterStorage) and store.check()
    mw = strategies.MovingWindowRateLimiter(store)
    fw = strategies.FixedWindowRateLimiter(store)
    item = parse("2/minute")
    users = ["%s-%d" % (w, i) for i, w in enumerate("apple kiwi plum fig lime pear date yuzu".split())]
    assert len({cluster.owner_of(item.key_for(u)).port for u in users}) >= 2
    for u in users:
        assert [mw.hit(item, u) for _ in range(3)] == [True, True, False]
        assert mw.get_window_stats(item, u)[1] == 0
        assert [fw.hit(item, "f" + u) for _ in range(3)] == [True, True, False]
    assert store.reset() == 2 * len(users)
    assert all(mw.test(item, u) for u in users)


def test_asyncio_storages(server, cluster):
    from limits.aio import strategies as aio_strategies
    nodes = ",".join("%s:%d" % (n.host, n.port) for n in cluster.primaries())

    async def main():
        item = parse("2 per 30 seconds")
        for u in ("async+" + uri(server), "async+mcaptcha+redis+cluster://" + nodes):
            store = storage_from_string(u)
            assert isinstance(store, (McaptchaAsyncStorage, McaptchaAsyncClusterStorage))
            assert await store.check()
            mw = aio_strategies.MovingWindowRateLimiter(store)
            fw = aio_strategies.FixedWindowRateLimiter(store)
            start = time.time()
            assert [await mw.hit(item, "a") for _ in range(3)] == [True, True, False]
            assert not await mw.test(item, "a")
            reset, remaining = await mw.get_window_stats(item, "a")
            # the oldest hit leaves at most one slot (30 s / 256) after its 30 s; limits'
            # reset is that time rounded up to a second
            assert remaining == 0 and start + 29 <= reset <= math.ceil(time.time() + 30 + 30 / 256)
            assert [await fw.hit(item, "b") for _ in range(3)] == [True, True, False]
            assert (await fw.get_window_stats(item, "b"))[1] == 0
            assert await store.reset() == 2
            assert await mw.test(item, "a") and await fw.test(item, "b")

    asyncio.run(main())

# SPDX-License-Identifier: BSD-3-Clause
"""Only a write signals its key (#25 item 6).

The module sets REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED and signals a
key itself where a write happened. So a refused or no-op command -- a LOCK.ACQUIRE
of a held lock, a limited RL.GCRA, an ADD_VISITOR of a missing captcha --
neither aborts a WATCH on its key nor invalidates a CLIENT TRACKING client;
every kind of real write (commands, internal commands on a primary and as a
replica applies them, a lease that ends by its timer, a SESSION released by
its disconnect, a served waiter) still does.

Tracking is checked without waiting for a time: after the command under test
a sentinel key is written; the next invalidation push must name the key only
when the command wrote it."""

import json

import pytest
import redis

from mcap import ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, DELETE_CAPTCHA, GET_CHALLENGE
from servers import RawConnection, wait_replicas_synced, wait_until

CONFIG = json.dumps({"levels": [{"visitor_threshold": 10, "difficulty_factor": 5}], "duration": 30})
CHALLENGE = json.dumps({"difficulty": 5, "duration": 30, "challenge": "c1"})
K = "{t}k"           # the key under test (a hash tag for the multi-key commands)
K2 = "{t}k2"
SENTINEL = "{t}sentinel"


def captcha_key(name):
    return "mcap:captcha::{%s}" % name


def aborts_watch(server, key, action):
    """WATCH key, run action(other client), EXEC: True when the EXEC was aborted."""
    r = server.client()
    other = server.client()
    with r.pipeline(transaction=True) as p:
        p.watch(key)
        action(other)
        p.multi()
        p.ping()
        try:
            p.execute()
            return False
        except redis.WatchError:
            return True


def invalidates(server, key, action):
    """A RESP3 tracking client reads `key` and the sentinel; action(other) runs,
    then the sentinel is written. True when an invalidation named `key`."""
    other = server.client()
    with RawConnection(server.host, server.port) as conn:
        assert conn.command("HELLO", "3").startswith(b"%")
        assert conn.command("CLIENT", "TRACKING", "ON") == b"+OK\r\n"
        conn.command("EXISTS", key)
        conn.command("EXISTS", SENTINEL)
        action(other)
        other.set(SENTINEL, "1")
        seen = b""
        while b"sentinel" not in seen:
            push = conn.read_reply()
            assert push.startswith(b">2\r\n") and b"invalidate" in push, push
            seen += push
        other.delete(SENTINEL)
        return key.encode() in seen.replace(SENTINEL.encode(), b"")


def held(r, key=K, owner="a", lease=600000):
    assert r.execute_command("LOCK.ACQUIRE", key, owner, lease)[0] == 1


def spend_gcra(r):
    assert r.execute_command("RL.GCRA", K, 1, 600000)[0] == 1


def spend_window(r):
    assert r.execute_command("RL.WINDOW", K, 1, 600000)[0] == 1


def captcha(r, name="site"):
    assert r.execute_command(ADD_CAPTCHA, name, CONFIG) == b"OK"


def nothing(r):
    pass


def expect_refused(*cmd):
    def run(r):
        try:
            reply = r.execute_command(*cmd)
        except redis.ResponseError:
            return
        first = reply[0] if isinstance(reply, list) else reply
        assert first in (0, 1, b"0", None), reply  # refused, or a no-op answer
    return run


# (setup, the command that must write nothing, the key it names)
REFUSED = {
    "lock.acquire held": (held, lambda r: r.execute_command("LOCK.ACQUIRE", K, "b", 1000), K),
    "lock.release not owner": (held, expect_refused("LOCK.RELEASE", K, "b"), K),
    "lock.release free": (nothing, expect_refused("LOCK.RELEASE", K, "b"), K),
    "lock.extend not owner": (held, expect_refused("LOCK.EXTEND", K, "b", 1000), K),
    "lock.acquire_all one held": (held, lambda r: r.execute_command("LOCK.ACQUIRE_ALL", 2, K, K2, "b", 1000), K),
    "rl.concurrency full": (lambda r: r.execute_command("RL.CONCURRENCY", K, "a", 600000, 1),
                            lambda r: r.execute_command("RL.CONCURRENCY", K, "b", 600000, 1), K),
    "rl.concurrency_release absent": (lambda r: r.execute_command("RL.CONCURRENCY", K, "a", 600000, 2),
                                      lambda r: r.execute_command("RL.CONCURRENCY_RELEASE", K, "b"), K),
    "rl.gcra limited": (spend_gcra, lambda r: r.execute_command("RL.GCRA", K, 1, 600000), K),
    "rl.gcra_peek": (spend_gcra, lambda r: r.execute_command("RL.GCRA_PEEK", K, 1, 600000), K),
    "rl.window limited": (spend_window, lambda r: r.execute_command("RL.WINDOW", K, 1, 600000), K),
    "rl.window_peek": (spend_window, lambda r: r.execute_command("RL.WINDOW_PEEK", K, 1, 600000), K),
    "rl.window other length": (spend_window, expect_refused("RL.WINDOW", K, 1, 1000), K),
    "cl.throttle limited": (lambda r: r.execute_command("CL.THROTTLE", K, 0, 1, 600),
                            lambda r: r.execute_command("CL.THROTTLE", K, 0, 1, 600), K),
    "rl.multi refused": (spend_gcra, lambda r: r.execute_command("RL.MULTI", 1, 2, K, "GCRA", 1, 600000,
                                                                 K2, "GCRA", 5, 1000), K2),
    "rl.refund missing": (nothing, lambda r: r.execute_command("RL.REFUND", K, 1), K),
    "add_visitor missing": (nothing, expect_refused(ADD_VISITOR, "site"), "site"),
    "add_captcha exists": (captcha, expect_refused(ADD_CAPTCHA, "site", CONFIG), "site"),
    "add_captcha exists (derived key)": (captcha, expect_refused(ADD_CAPTCHA, "site", CONFIG), captcha_key("site")),
    "delete_captcha missing": (nothing, expect_refused(DELETE_CAPTCHA, "site"), "site"),
    "get_challenge missing": (captcha, expect_refused(GET_CHALLENGE, "site", "c9"), "site"),
    "lock.state bad": (held, expect_refused("LOCK.STATE", K, "x"), K),
    "rl.gcra_set bad": (spend_gcra, expect_refused("RL.GCRA_SET", K, 0, 1, 1), K),
    "rl.fixed cost 0": (lambda r: r.execute_command("RL.FIXED", K, 600000),
                        lambda r: r.execute_command("RL.FIXED", K, 600000, "COST", 0), K),
    "rl.fixed not a count": (lambda r: r.set(K, "abc"), expect_refused("RL.FIXED", K, 600000), K),
    "rl.fixed overflow": (lambda r: r.set(K, 2 ** 63 - 1), expect_refused("RL.FIXED", K, 600000), K),
}


def lease_ends(r):
    """A lease of 50 ms ends by its timer (no command touches the key)."""
    before = int(r.info("mcaptcha_cache_locks").get("mcaptcha_cache_leases_expired_while_held", 0))
    assert r.execute_command("LOCK.ACQUIRE", K, "short", 50)[0] == 1
    wait_until(lambda: int(r.info("mcaptcha_cache_locks").get("mcaptcha_cache_leases_expired_while_held", 0)) > before,
               timeout=10, what="the lease to end")


def session_disconnect(server):
    def run(r):
        c = server.client()
        assert c.execute_command("LOCK.ACQUIRE", K, "s", 600000, "SESSION")[0] == 1
        c.connection_pool.disconnect()
        wait_until(lambda: not r.execute_command("LOCK.INSPECT", K)[3], timeout=10, what="the SESSION release")
    return run


WRITES = {
    "lock.acquire": (nothing, lambda r: r.execute_command("LOCK.ACQUIRE", K, "a", 600000), K),
    "lock.acquire reentrant": (held, lambda r: r.execute_command("LOCK.ACQUIRE", K, "a", 600000, "REENTRANT"), K),
    "lock.release": (held, lambda r: r.execute_command("LOCK.RELEASE", K, "a"), K),
    "lock.extend": (held, lambda r: r.execute_command("LOCK.EXTEND", K, "a", 900000), K),
    "lock.acquire_all": (nothing, lambda r: r.execute_command("LOCK.ACQUIRE_ALL", 2, K, K2, "a", 1000), K2),
    "lock.release_all": (lambda r: r.execute_command("LOCK.ACQUIRE_ALL", 2, K, K2, "a", 600000),
                         lambda r: r.execute_command("LOCK.RELEASE_ALL", 2, K, K2, "a"), K2),
    "lock.add_permits": (lambda r: r.execute_command("LOCK.ACQUIRE", K, "a", 600000, "PERMITS", 2),
                         lambda r: r.execute_command("LOCK.ADD_PERMITS", K, 1, "PERMITS", 2), K),
    "lock.state": (nothing, lambda r: r.execute_command("LOCK.STATE", K, 1, 0, 0), K),
    "rl.concurrency": (nothing, lambda r: r.execute_command("RL.CONCURRENCY", K, "a", 600000, 2), K),
    "rl.concurrency_release": (lambda r: r.execute_command("RL.CONCURRENCY", K, "a", 600000, 2),
                               lambda r: r.execute_command("RL.CONCURRENCY_RELEASE", K, "a"), K),
    "rl.gcra": (nothing, lambda r: r.execute_command("RL.GCRA", K, 5, 600000), K),
    "rl.window": (nothing, lambda r: r.execute_command("RL.WINDOW", K, 5, 600000), K),
    "cl.throttle": (nothing, lambda r: r.execute_command("CL.THROTTLE", K, 5, 5, 60), K),
    "rl.multi": (nothing, lambda r: r.execute_command("RL.MULTI", 1, 2, K, "GCRA", 5, 1000, K2, "WINDOW", 5, 1000), K2),
    "rl.refund gcra": (lambda r: r.execute_command("RL.GCRA", K, 5, 600000, "COST", 2),
                       lambda r: r.execute_command("RL.REFUND", K, 1), K),
    "rl.refund window": (lambda r: r.execute_command("RL.WINDOW", K, 5, 600000, "COST", 2),
                         lambda r: r.execute_command("RL.REFUND", K, 1), K),
    "rl.refund to empty": (spend_window, lambda r: r.execute_command("RL.REFUND", K, 5), K),
    "rl.fixed": (nothing, lambda r: r.execute_command("RL.FIXED", K, 600000), K),
    "rl.fixed elastic": (lambda r: r.execute_command("RL.FIXED", K, 600000),
                         lambda r: r.execute_command("RL.FIXED", K, 600000, "ELASTIC"), K),
    "count": (nothing, lambda r: r.execute_command("MCAPTCHA_CACHE.COUNT", K, 60), K),
    "rl.gcra_set": (nothing, lambda r: r.execute_command("RL.GCRA_SET", K, 1900000000000000, 1000, 5), K),
    "rl.window_hit": (nothing, lambda r: r.execute_command("RL.WINDOW_HIT", K, 60000, 5, 1900000000000, 1, 0), K),
    "rl.window_set": (nothing, lambda r: r.execute_command("RL.WINDOW_SET", K, 60000, 5, 1900000000000, 0), K),
    "add_captcha": (nothing, lambda r: r.execute_command(ADD_CAPTCHA, "site", CONFIG), "site"),
    "add_captcha (derived key)": (nothing, lambda r: r.execute_command(ADD_CAPTCHA, "site", CONFIG),
                                  captcha_key("site")),
    "add_visitor": (captcha, lambda r: r.execute_command(ADD_VISITOR, "site"), "site"),
    "add_visitor (derived key)": (captcha, lambda r: r.execute_command(ADD_VISITOR, "site"), captcha_key("site")),
    "delete_captcha": (captcha, lambda r: r.execute_command(DELETE_CAPTCHA, "site"), captcha_key("site")),
    "add_challenge": (captcha, lambda r: r.execute_command(ADD_CHALLENGE, "site", CHALLENGE), "site"),
    "visit_at": (captcha, lambda r: r.execute_command("MCAPTCHA_CACHE.VISIT_AT", captcha_key("site"),
                                                      1900000000000), "site"),
    "lease ends": (nothing, lease_ends, K),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_command_keeps_watch_and_tracking(server, case):
    setup, action, key = REFUSED[case]
    r = server.client()
    setup(r)
    assert not aborts_watch(server, key, action), "EXEC aborted by a command that wrote nothing"
    assert not invalidates(server, key, action), "tracking invalidated by a command that wrote nothing"


@pytest.mark.parametrize("case", sorted(WRITES))
def test_every_write_signals_its_key(server, case):
    setup, action, key = WRITES[case]
    r = server.client()
    setup(r)
    assert aborts_watch(server, key, action)
    r.flushall()
    setup(r)
    assert invalidates(server, key, action)


def test_session_release_on_disconnect_signals(server):
    assert aborts_watch(server, K, session_disconnect(server))
    server.client().flushall()
    assert invalidates(server, K, session_disconnect(server))


def test_served_waiter_signals(server):
    """A blocked LOCK.ACQUIRE ... WAIT granted from the queue writes the lock."""
    r = server.client()
    held(r)
    w = server.client(socket_timeout=30)
    import threading
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("reply", w.execute_command("LOCK.ACQUIRE", K, "b", 600000,
                                                                                  "WAIT", 20000)))
    t.start()
    wait_until(lambda: r.execute_command("LOCK.INSPECT", K, "FULL") and
               b"b" in repr(r.execute_command("LOCK.INSPECT", K, "FULL")).encode(), timeout=10, what="the waiter")
    with r.pipeline(transaction=True) as p:
        p.watch(K)
        server.client().execute_command("LOCK.RELEASE", K, "a")  # a write itself; then the grant to b
        t.join(20)
        p.multi()
        p.ping()
        with pytest.raises(redis.WatchError):
            p.execute()
    assert box["reply"][0] == 1


def test_replica_applying_writes_invalidates_its_tracking_clients(servers):
    primary = servers.new()
    replica = servers.replica_of(primary)
    p = primary.client()
    captcha(p)
    wait_replicas_synced(primary, [replica])
    for key, write in ((K, lambda: p.execute_command("LOCK.ACQUIRE", K, "a", 600000)),
                       (K2, lambda: p.execute_command("RL.GCRA", K2, 5, 600000)),
                       ("{t}w", lambda: p.execute_command("RL.WINDOW", "{t}w", 5, 600000)),
                       ("site", lambda: p.execute_command(ADD_VISITOR, "site"))):
        with RawConnection(replica.host, replica.port) as conn:
            assert conn.command("HELLO", "3").startswith(b"%")
            assert conn.command("CLIENT", "TRACKING", "ON") == b"+OK\r\n"
            conn.command("EXISTS", key)
            write()
            push = conn.read_reply()
            assert push.startswith(b">2\r\n") and key.encode() in push, push
    # a refused command replicates nothing, so the replica's clients hear nothing either
    with RawConnection(replica.host, replica.port) as conn:
        assert conn.command("HELLO", "3").startswith(b"%")
        assert conn.command("CLIENT", "TRACKING", "ON") == b"+OK\r\n"
        conn.command("EXISTS", K)
        conn.command("EXISTS", SENTINEL)
        assert p.execute_command("LOCK.ACQUIRE", K, "b", 1000)[0] == 0
        p.set(SENTINEL, 1)
        push = conn.read_reply()
        assert SENTINEL.encode() in push and K.encode() not in push.replace(SENTINEL.encode(), b""), push

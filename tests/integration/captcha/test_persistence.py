# SPDX-License-Identifier: BSD-3-Clause
"""Durability: RDB (SAVE + restart, DEBUG RELOAD), AOF (appendfsync always,
with and without the RDB preamble, kill -9, BGREWRITEAOF, replay after the
duration), replication (a long mixed workload, digests compared key by key),
DUMP/RESTORE/COPY, and RESTORE of corrupted DUMP payloads."""

import glob
import os
import random
import re
import struct
import time

import pytest

from dumps import crc64, mutate_dump, repack  # noqa: F401
import redis

from mcap import (PTTL_SLACK_MS, ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, CAPTCHA_EXISTS, CAPTCHA_TYPE,
                  CHALLENGE_TYPE, DELETE_CAPTCHA, DELETE_CHALLENGE, GET, GET_CHALLENGE,
                  RENAME_CAPTCHA, VISIT_AT, all_keys, cfg, chal, challenge_reply, chkey, ckey,
                  digest_value, error_of, now_ms, visitor_reply)
from servers import wait_replicas_synced

ZERO_DIGEST = b"0" * 40


# ------------------------------------------------------------------ helpers
def populate(r, prefix="p"):
    """A varied dataset with long durations (nothing decays during a test).
    Returns the captcha names."""
    names = []
    configs = [
        ([(50, 50), (500, 500)], 300),
        ([(0, 1)], 3600),
        ([(10, 100), (20, 200), (30, 300)], 900),
        ([(i * 3, i + 1) for i in range(128)], 600),
        ([(5, 5), (4294967295, 4294967295)], 4294967295),
    ]
    for i, (levels, duration) in enumerate(configs):
        name = "%s%d" % (prefix, i)
        names.append(name)
        assert r.execute_command(ADD_CAPTCHA, name, cfg(levels, duration=duration)) == b"OK"
        # visits spread over the past 250 s, so several slots are in use (first:
        # a visit stamped before the newest one seen is counted at that newest time)
        base = now_ms() - 250 * 1000
        k = ckey(name)
        p = r.pipeline(transaction=False)
        for j in range(i * 5):
            p.execute_command(VISIT_AT, k, base + j * 997)
        p.execute()
        p = r.pipeline(transaction=False)
        for _ in range(i * 37):
            p.execute_command(ADD_VISITOR, name)
        p.execute()
    r.execute_command(ADD_CAPTCHA, prefix + "-empty", cfg([(1, 1)], duration=30))
    names.append(prefix + "-empty")
    for i in range(6):
        r.execute_command(ADD_CHALLENGE, names[i % len(names)],
                          chal(i * 11 + 1, 300 + i, "chal-%d" % i))
    r.execute_command(ADD_CHALLENGE, "no-such-captcha", chal(7, 600, "orphan"))
    return names


def snapshot(r, names=()):
    keys = all_keys(r)
    snap = {"keys": keys, "digest": r.execute_command("DEBUG", "DIGEST")}
    for k in keys:
        snap[k] = (r.type(k), digest_value(r, k), r.execute_command("PEXPIRETIME", k))
    for n in names:
        try:
            snap["GET " + n] = r.execute_command(GET, n)
        except redis.ResponseError as e:
            snap["GET " + n] = "error: %s" % e
    return snap


def assert_same_snapshot(a, b, what):
    assert a["keys"] == b["keys"], "%s: key sets differ" % what
    for k in a["keys"]:
        assert a[k] == b[k], "%s: key %r differs: %r vs %r" % (what, k, a[k], b[k])
    for k in a:
        if isinstance(k, str) and k.startswith("GET "):
            assert a[k] == b[k], "%s: %s %r vs %r" % (what, k, a[k], b[k])
    assert a["digest"] == b["digest"], "%s: DEBUG DIGEST differs" % what


def assert_digests_nontrivial(r, keys):
    for k in keys:
        assert digest_value(r, k) != ZERO_DIGEST, "DEBUG DIGEST-VALUE %r is zero: no digest" % k


def test_digest_reflects_the_whole_state(r):
    """DEBUG DIGEST-VALUE tells captchas apart that differ only in their count,
    in the time of their visits, or in their config; and challenges likewise.
    (The replication and persistence comparisons below rely on it.)"""
    t = now_ms() - 1000
    c = cfg([(5, 5), (10, 10)], duration=300)

    def make(name, stamps, config=c):
        r.execute_command(ADD_CAPTCHA, name, config)
        for st in stamps:
            r.execute_command(VISIT_AT, ckey(name), st)
        return digest_value(r, ckey(name))

    base = make("a", [t - 5000, t])
    assert base != ZERO_DIGEST
    assert make("same", [t - 5000, t]) == base
    assert make("more", [t - 5000, t, t]) != base  # same last_ms, one more visit
    assert make("moved", [t - 9000, t]) != base  # same count and last_ms, other slot
    assert make("cfg", [t - 5000, t], cfg([(5, 5), (10, 11)], duration=300)) != base
    assert make("dur", [t - 5000, t], cfg([(5, 5), (10, 10)], duration=301)) != base
    r.execute_command(ADD_CHALLENGE, "a", chal(5, 300, "x"))
    r.execute_command(ADD_CHALLENGE, "a", chal(5, 300, "y"))
    r.execute_command(ADD_CHALLENGE, "a", chal(6, 300, "z"))
    r.execute_command(ADD_CHALLENGE, "a", chal(5, 301, "w"))
    dx = digest_value(r, chkey("a", "x"))
    assert dx != ZERO_DIGEST
    assert digest_value(r, chkey("a", "y")) == dx
    assert digest_value(r, chkey("a", "z")) != dx
    assert digest_value(r, chkey("a", "w")) != dx


def follow_count(r, name, groups, final, timeout=15.0):
    """Poll GET `name` until it reads `final`, checking every reading against
    the time the server could have read: groups = [(n, leave_lo_ms, leave_hi_ms)]
    are visits that stop counting somewhere in [leave_lo, leave_hi]; the count
    is final + the groups still there. A group read as present after its
    leave_hi, or as gone before its leave_lo, fails the test, whatever the
    machine's speed. Returns the readings."""
    seen = []
    deadline = time.time() + timeout
    while True:
        a = now_ms() - 1
        count = r.execute_command(GET, name)
        z = now_ms() + 1
        seen.append(count)
        most = final + sum(n for n, lo, hi in groups if hi >= a)   # not surely gone
        least = final + sum(n for n, lo, hi in groups if lo > z)   # surely still there
        assert least <= count <= most, (
            "GET %s read %d between %d and %d ms, expected %d..%d (groups %r)"
            % (name, count, a, z, least, most, groups))
        if count == final:
            return seen
        assert time.time() < deadline, "GET %s never reached %d: %r" % (name, final, seen[-5:])
        time.sleep(0.01)


# ------------------------------------------------------------------ RDB
def _rdb_roundtrip(server, reload):
    r = server.client()
    names = populate(r)
    # a captcha whose early visits leave ~2 s from now, and 2 that stay
    t0 = time.time()
    k = ckey("leaving")
    r.execute_command(ADD_CAPTCHA, "leaving", cfg([(3, 3), (4, 4)], duration=30))
    stamp = int(t0 * 1000) - 28000
    for _ in range(4):
        r.execute_command(VISIT_AT, k, stamp)
    r.execute_command(ADD_VISITOR, "leaving")
    r.execute_command(ADD_VISITOR, "leaving")
    assert r.execute_command(GET, "leaving") == 6
    before = snapshot(r, names)
    assert_digests_nontrivial(r, before["keys"])
    reload()
    r = server.client()
    # the stamped visits count until stamp + 30 s (+ one 117 ms slot) wherever
    # the reload put them: read right away, whatever the time now
    leaving = [(4, stamp + 30000, stamp + 30000 + 30000 // 256 + 1)]
    count = r.execute_command(GET, "leaving")
    assert count in (2, 6), count
    assert_same_snapshot(before, snapshot(r, names), "after reload")
    # the restored captchas behave: configs and challenges intact
    assert r.execute_command(ADD_VISITOR, "p0") == visitor_reply(300, 50)
    assert r.execute_command(GET_CHALLENGE, "p0", "chal-0") == challenge_reply(1, 300)
    assert r.execute_command(GET_CHALLENGE, "no-such-captcha", "orphan") == challenge_reply(7, 600)
    assert r.type(ckey("p1")) == CAPTCHA_TYPE
    assert r.type(chkey("p1", "chal-1")) == CHALLENGE_TYPE
    # the stamped visits leave at their original time (t0 + 2 s + a slot), not
    # earlier and not later, and the two real ones stay
    follow_count(r, "leaving", leaving, 2)
    assert r.execute_command(ADD_VISITOR, "leaving") == visitor_reply(30, 3)


def test_save_and_restart_keeps_everything(servers):
    s = servers.new()
    r = s.client()

    def reload():
        assert r.execute_command("SAVE")
        s.restart()

    _rdb_roundtrip(s, reload)


def test_debug_reload_keeps_everything(servers):
    s = servers.new()
    r = s.client()

    def reload():
        assert r.execute_command("DEBUG", "RELOAD") == b"OK"

    _rdb_roundtrip(s, reload)


def test_bgsave_and_restart_after_kill(servers):
    s = servers.new()
    r = s.client()
    names = populate(r)
    before = snapshot(r, names)
    r.execute_command("BGSAVE")
    s.wait_bgsave_done()
    s.restart(kill=True)
    assert_same_snapshot(before, snapshot(s.client(), names), "after BGSAVE + kill -9")


def test_rdb_expired_challenge_not_loaded(servers):
    s = servers.new()
    r = s.client()
    r.execute_command(ADD_CHALLENGE, "s", chal(5, 1, "short"))
    r.execute_command(ADD_CHALLENGE, "s", chal(5, 300, "long"))
    r.execute_command("SAVE")
    s.kill()
    time.sleep(1.2)
    s.start()
    r = s.client()
    assert error_of(r, GET_CHALLENGE, "s", "short") == "Challenge not found"
    assert r.execute_command(GET_CHALLENGE, "s", "long") == challenge_reply(5, 300)


# ------------------------------------------------------------------ AOF
@pytest.mark.parametrize("preamble", [False, True], ids=["preamble-no", "preamble-yes"])
def test_aof_kill9_acknowledged_visits_survive(aof_server, preamble):
    s = aof_server(preamble=preamble)
    r = s.client()
    r.execute_command(ADD_CAPTCHA, "c", cfg([(50, 50), (500, 500)], duration=3600))
    n = 0
    for _ in range(150):  # one by one, each acknowledged
        r.execute_command(ADD_VISITOR, "c")
        n += 1
    r.execute_command(ADD_CHALLENGE, "c", chal(50, 600, "x1"))
    # rewrite in the middle: the base becomes RDB (preamble) or commands
    r.execute_command("BGREWRITEAOF")
    s.wait_aof_rewrite_done()
    p = r.pipeline(transaction=False)
    for _ in range(450):
        p.execute_command(ADD_VISITOR, "c")
    replies = p.execute()
    n += len(replies)
    assert replies[-1] == visitor_reply(3600, 500)
    r.execute_command(ADD_CHALLENGE, "c", chal(500, 600, "x2"))
    r.execute_command(GET_CHALLENGE, "c", "x1")
    assert r.execute_command(GET, "c") == n
    before = snapshot(r, ["c"])
    s.restart(kill=True)
    r = s.client()
    assert r.execute_command(GET, "c") == n == 600
    assert_same_snapshot(before, snapshot(r, ["c"]), "after kill -9 and AOF replay")
    assert error_of(r, GET_CHALLENGE, "c", "x1") == "Challenge not found"
    assert r.execute_command(GET_CHALLENGE, "c", "x2") == challenge_reply(500, 600)


@pytest.mark.parametrize("preamble", [False, True], ids=["preamble-no", "preamble-yes"])
def test_aof_kill9_without_rewrite(aof_server, preamble):
    """Only the incremental AOF (the commands the module propagated)."""
    s = aof_server(preamble=preamble)
    r = s.client()
    names = populate(r)
    r.execute_command(RENAME_CAPTCHA, "p2", "p2-renamed")
    r.execute_command(DELETE_CAPTCHA, "p3")
    r.execute_command(DELETE_CHALLENGE, "p1", "chal-1")
    names += ["p2-renamed"]
    before = snapshot(r, names)
    s.restart(kill=True)
    assert_same_snapshot(before, snapshot(s.client(), names), "after kill -9 and AOF replay")


@pytest.mark.parametrize("preamble", [False, True], ids=["preamble-no", "preamble-yes"])
def test_bgrewriteaof_then_restart_same_state(aof_server, preamble):
    s = aof_server(preamble=preamble)
    r = s.client()
    names = populate(r)
    before = snapshot(r, names)
    assert_digests_nontrivial(r, before["keys"])
    r.execute_command("BGREWRITEAOF")
    s.wait_aof_rewrite_done()
    base = glob.glob(os.path.join(s.aof_dir(), "*.base.*"))
    assert base, os.listdir(s.aof_dir())
    if not preamble:
        data = open(base[0], "rb").read()
        assert b"MCAPTCHA_CACHE.CAPTCHA_SET" in data.upper()
        assert b"MCAPTCHA_CACHE.CHALLENGE_SET" in data.upper()
    s.restart(kill=True)
    r = s.client()
    assert_same_snapshot(before, snapshot(r, names), "after BGREWRITEAOF + restart")
    # and once more after a graceful restart
    s.restart()
    assert_same_snapshot(before, snapshot(s.client(), names), "after a second restart")


def test_aof_replayed_after_duration_gives_zero(aof_server):
    s = aof_server(preamble=False)
    r = s.client()
    r.execute_command(ADD_CAPTCHA, "short", cfg([(5, 5), (10, 10)], duration=1))
    r.execute_command(ADD_CAPTCHA, "long", cfg([(5, 5)], duration=3600))
    for _ in range(20):
        r.execute_command(ADD_VISITOR, "short")
        r.execute_command(ADD_VISITOR, "long")
    assert r.execute_command(GET, "short") == 20
    s.kill()
    time.sleep(2.0)
    s.start()
    r = s.client()
    assert r.execute_command(GET, "long") == 20, "the AOF was not replayed"
    assert r.execute_command(GET, "short") == 0, \
        "visits replayed from the AOF after their duration must not count"
    assert r.execute_command(CAPTCHA_EXISTS, "short") == 0
    assert r.execute_command(ADD_VISITOR, "short") == visitor_reply(1, 5)
    assert r.execute_command(GET, "short") == 1


def test_aof_replay_keeps_original_visit_times(aof_server):
    """Replayed visits leave at the times they were made, not at load time."""
    s = aof_server(preamble=False)
    r = s.client()
    r.execute_command(ADD_CAPTCHA, "c", cfg([(5, 5)], duration=2))
    t0 = time.time()
    for _ in range(5):
        r.execute_command(ADD_VISITOR, "c")
    t1 = time.time()
    s.kill()
    time.sleep(0.5)
    s.start()
    r = s.client()
    # made in [t0, t1]: they leave 2 s later (+ one 8 ms slot); replayed visits
    # restamped at load time (>= t1 + 0.5 s) would still count after that
    t0_ms, t1_ms = int(t0 * 1000) - 1, int(t1 * 1000) + 1
    # (each visit on its own: they may fall in two slots)
    follow_count(r, "c", [(1, t0_ms + 2000, t1_ms + 2000 + 2000 // 256 + 1)] * 5, 0)


# ------------------------------------------------------------------ replication
def random_cfg(rng):
    n = rng.randint(1, 6)
    ths = sorted(rng.sample(range(0, 2000), n))
    dfs = sorted(rng.randint(1, 100000) for _ in range(n))
    return cfg(list(zip(ths, dfs)), duration=rng.randint(600, 86400))


def mixed_ops(rng, names, n):
    ops = []
    for name in names:
        ops.append((ADD_CAPTCHA, name, random_cfg(rng)))
    while len(ops) < n:
        x = rng.random()
        name = rng.choice(names)
        ch = "ch%d" % rng.randrange(15)
        if x < 0.04:
            ops.append((ADD_CAPTCHA, name, random_cfg(rng)))
        elif x < 0.60:
            ops.append((ADD_VISITOR, name))
        elif x < 0.70:
            ops.append((ADD_CHALLENGE, name, chal(rng.randint(1, 10 ** 6), rng.randint(600, 3600),
                                                  ch)))
        elif x < 0.76:
            ops.append((GET_CHALLENGE, name, ch))
        elif x < 0.81:
            ops.append((DELETE_CHALLENGE, name, ch))
        elif x < 0.84:
            ops.append((RENAME_CAPTCHA, name, rng.choice(names)))
        elif x < 0.86:
            ops.append((DELETE_CAPTCHA, name))
        elif x < 0.88:
            ops.append((VISIT_AT, ckey(name), now_ms() - rng.randint(0, 500000)))
        elif x < 0.94:
            ops.append((GET, name))
        else:
            ops.append((CAPTCHA_EXISTS, name))
    return ops


def compare_servers(servers_, names):
    snaps = [snapshot(s.client(), names) for s in servers_]
    for s, snap in zip(servers_[1:], snaps[1:]):
        assert_same_snapshot(snaps[0], snap, "primary vs %s" % s.name)
    return snaps[0]


def test_replica_mixed_workload_digests_match(servers):
    primary = servers.new(name="primary")
    replica = servers.replica_of(primary, name="replica")
    r = primary.client()
    rng = random.Random(20240601)
    names = ["cap%d" % i for i in range(50)]
    ops = mixed_ops(rng, names, 12000)
    rc = replica.client()
    results = []
    for i in range(0, len(ops), 1000):
        stall = i // 1000 in (3, 7)
        if stall:
            # the replica applies this chunk >= 0.3 s after the primary did: a
            # command that re-read the clock there would store other times.
            # CLIENT PAUSE WRITE holds the replica's link to its primary from
            # the moment it answers (reads still answer) until CLIENT UNPAUSE.
            assert rc.execute_command("CLIENT", "PAUSE", 60000, "WRITE")
            held = rc.execute_command("DEBUG", "DIGEST")
            p_before = r.execute_command("DEBUG", "DIGEST")
        p = r.pipeline(transaction=False)
        for op in ops[i:i + 1000]:
            p.execute_command(*op)
        results += p.execute(raise_on_error=False)
        if stall:
            time.sleep(0.3)  # the delay itself: the replica's clock moves on meanwhile
            assert r.execute_command("DEBUG", "DIGEST") != p_before, "the chunk changed nothing"
            assert rc.execute_command("DEBUG", "DIGEST") == held, "the replica applied the chunk during the pause"
            assert rc.execute_command("CLIENT", "UNPAUSE")
    ok = sum(1 for x in results if not isinstance(x, Exception))
    assert ok > len(ops) // 2, "most commands of the workload should succeed"
    wait_replicas_synced(primary, [replica])
    snap = compare_servers([primary, replica], names)
    assert len(snap["keys"]) > 30
    assert_digests_nontrivial(r, snap["keys"])
    # the replica serves the read-only commands, with the same answers
    rr = replica.client()
    for name in names:
        try:
            a = r.execute_command(GET, name)
        except redis.ResponseError as e:
            a = str(e)
        try:
            b = rr.execute_command(GET, name)
        except redis.ResponseError as e:
            b = str(e)
        assert a == b, name
        assert r.execute_command(CAPTCHA_EXISTS, name) == rr.execute_command(CAPTCHA_EXISTS, name)
    # a replica started now gets everything through a full sync (RDB transfer)
    replica2 = servers.replica_of(primary, name="replica2")
    compare_servers([primary, replica2], names)


def test_replica_refuses_writes_serves_reads(replica_pair):
    primary, replica = replica_pair
    r = primary.client()
    r.execute_command(ADD_CAPTCHA, "s", cfg([(5, 5)], duration=300))
    r.execute_command(ADD_VISITOR, "s")
    wait_replicas_synced(primary, [replica])
    rr = replica.client()
    assert rr.execute_command(GET, "s") == 1
    assert rr.execute_command(CAPTCHA_EXISTS, "s") == 0
    for args in [(ADD_VISITOR, "s"), (ADD_CAPTCHA, "t", cfg([(1, 1)])), (DELETE_CAPTCHA, "s"),
                 (ADD_CHALLENGE, "s", chal(1, 30, "c")), (GET_CHALLENGE, "s", "c"),
                 (VISIT_AT, ckey("s"), now_ms())]:
        with pytest.raises(redis.ResponseError) as ei:
            rr.execute_command(*args)
        assert str(ei.value).startswith("You can't write against a read only replica"), \
            (args, str(ei.value))
    assert rr.execute_command(GET, "s") == 1


def test_replica_decays_on_the_primary_schedule(replica_pair):
    primary, replica = replica_pair
    r = primary.client()
    r.execute_command(ADD_CAPTCHA, "s", cfg([(5, 5)], duration=1))
    t0 = time.time()
    for _ in range(4):
        r.execute_command(ADD_VISITOR, "s")
    t1 = time.time()
    wait_replicas_synced(primary, [replica])
    rr = replica.client()
    assert digest_value(r, ckey("s")) == digest_value(rr, ckey("s"))
    # the replica's visits leave when the primary's do: 1 s after they were
    # made (+ one 4 ms slot), checked reading by reading on the replica
    t0_ms, t1_ms = int(t0 * 1000) - 1, int(t1 * 1000) + 1
    groups = [(1, t0_ms + 1000, t1_ms + 1000 + 1000 // 256 + 1)] * 4
    follow_count(rr, "s", groups, 0)
    follow_count(r, "s", groups, 0)
    assert digest_value(r, ckey("s")) == digest_value(rr, ckey("s"))


def test_replica_challenge_expiry_is_absolute(replica_pair):
    primary, replica = replica_pair
    r = primary.client()
    r.execute_command(ADD_CHALLENGE, "s", chal(5, 100, "c"))
    time.sleep(0.05)
    wait_replicas_synced(primary, [replica])
    k = chkey("s", "c")
    at = r.execute_command("PEXPIRETIME", k)
    assert at > 0
    assert replica.client().execute_command("PEXPIRETIME", k) == at


def test_replica_after_primary_restart_from_aof(servers):
    """Replica of a primary that is killed and restarted from its AOF: after
    the resync both have the same data."""
    primary = servers.new(name="primary", appendonly=True, appendfsync="always")
    primary.wait_aof_rewrite_done()
    replica = servers.replica_of(primary, name="replica")
    r = primary.client()
    names = populate(r)
    wait_replicas_synced(primary, [replica])
    before = compare_servers([primary, replica], names)
    primary.restart(kill=True)
    wait_replicas_synced(primary, [replica])
    after = compare_servers([primary, replica], names)
    assert_same_snapshot(before, after, "after primary restart")


# ------------------------------------------------------------------ DUMP / RESTORE / COPY
def test_dump_restore_roundtrip(r):
    r.execute_command(ADD_CAPTCHA, "a", cfg([(2, 10), (4, 20)], duration=300))
    for _ in range(3):
        r.execute_command(ADD_VISITOR, "a")
    r.execute_command(VISIT_AT, ckey("a"), now_ms() - 100000)
    r.execute_command(ADD_CHALLENGE, "a", chal(77, 300, "c"))
    payload = r.dump(ckey("a"))
    r.set("plain", "x")
    assert payload[-10:-8] == r.dump("plain")[-10:-8], "the server's own RDB version"
    assert crc64(payload[:-8]) == struct.unpack("<Q", payload[-8:])[0]
    assert r.restore(ckey("b"), 0, payload)
    assert digest_value(r, ckey("b")) == digest_value(r, ckey("a")) != ZERO_DIGEST
    assert r.execute_command(GET, "b") == 4
    assert r.execute_command(ADD_VISITOR, "b") == visitor_reply(300, 20)
    assert r.execute_command(GET, "a") == 4, "the original is independent"
    with pytest.raises(redis.ResponseError) as ei:
        r.restore(ckey("b"), 0, payload)
    assert str(ei.value).startswith("BUSYKEY")
    assert r.restore(ckey("b"), 0, payload, replace=True)
    assert r.execute_command(GET, "b") == 4
    # challenge: DUMP has no TTL; RESTORE sets one
    cp = r.dump(chkey("a", "c"))
    assert r.restore(chkey("x", "y"), 5000, cp)
    assert 0 < r.pttl(chkey("x", "y")) <= 5000 + PTTL_SLACK_MS
    assert digest_value(r, chkey("x", "y")) == digest_value(r, chkey("a", "c")) != ZERO_DIGEST
    assert r.execute_command(GET_CHALLENGE, "x", "y") == challenge_reply(77, 300)
    at = now_ms() + 60000
    assert r.restore(chkey("x", "z"), at, cp, absttl=True)
    assert r.execute_command("PEXPIRETIME", chkey("x", "z")) == at
    assert r.execute_command(GET_CHALLENGE, "x", "z") == challenge_reply(77, 300)


def test_dump_restore_across_servers(servers):
    a = servers.new(name="a")
    b = servers.new(name="b")
    ra, rb = a.client(), b.client()
    names = populate(ra)
    for k in all_keys(ra):
        ttl = ra.pttl(k)
        rb.restore(k, max(ttl, 0), ra.dump(k))
    for k in all_keys(ra):
        assert digest_value(ra, k) == digest_value(rb, k)
    for n in names:
        assert ra.execute_command(GET, n) == rb.execute_command(GET, n)


def test_copy_both_types(r):
    r.execute_command(ADD_CAPTCHA, "a", cfg([(2, 10), (4, 20)], duration=300))
    for _ in range(3):
        r.execute_command(ADD_VISITOR, "a")
    r.execute_command(ADD_CHALLENGE, "a", chal(77, 300, "c"))
    assert r.copy(ckey("a"), ckey("b"))
    assert digest_value(r, ckey("b")) == digest_value(r, ckey("a")) != ZERO_DIGEST
    assert r.execute_command(GET, "b") == 3
    assert r.execute_command(ADD_VISITOR, "b") == visitor_reply(300, 10)
    assert r.execute_command(ADD_VISITOR, "b") == visitor_reply(300, 20)
    assert r.execute_command(GET, "a") == 3, "COPY must be deep"
    assert digest_value(r, ckey("b")) != digest_value(r, ckey("a"))
    assert r.copy(chkey("a", "c"), chkey("a", "d"))
    assert digest_value(r, chkey("a", "d")) == digest_value(r, chkey("a", "c")) != ZERO_DIGEST
    assert r.execute_command("PEXPIRETIME", chkey("a", "d")) == \
        r.execute_command("PEXPIRETIME", chkey("a", "c"))
    assert r.execute_command(GET_CHALLENGE, "a", "d") == challenge_reply(77, 300)
    assert r.execute_command(GET_CHALLENGE, "a", "c") == challenge_reply(77, 300)
    # COPY onto an existing captcha needs REPLACE
    assert not r.copy(ckey("a"), ckey("b"))
    assert r.copy(ckey("a"), ckey("b"), replace=True)
    assert r.execute_command(GET, "b") == 3


def test_rename_and_move_core_commands(server, r):
    r.execute_command(ADD_CAPTCHA, "a", cfg([(2, 10)], duration=300))
    r.execute_command(ADD_VISITOR, "a")
    d = digest_value(r, ckey("a"))
    assert r.move(ckey("a"), 1)
    r1 = server.client(db=1)
    assert digest_value(r1, ckey("a")) == d
    assert r1.execute_command(GET, "a") == 1
    assert r.execute_command(CAPTCHA_EXISTS, "a") == 1
    r1.execute_command("SWAPDB", 0, 1)
    assert r.execute_command(GET, "a") == 1


# ------------------------------------------------------------------ corrupt RESTORE


def restore_checked(r, key, payload, rt_key=b"fz-roundtrip"):
    """RESTORE a (possibly corrupt) payload into the missing `key` and check the
    outcome either way: refused -> "Bad data format" and no key; accepted -> a
    key whose DUMP restores to a byte-identical value with the same, non-zero
    DEBUG DIGEST-VALUE. Returns True when accepted."""
    assert not r.exists(key)
    try:
        r.restore(key, 0, payload, replace=True)
    except redis.ResponseError as e:
        assert str(e) == "Bad data format", "refused with %r" % str(e)
        assert not r.exists(key), "a refused RESTORE left the key behind"
        return False
    assert r.exists(key) == 1
    d = r.dump(key)
    dg = r.execute_command("DEBUG", "DIGEST-VALUE", key)[0]
    assert re.fullmatch(rb"[0-9a-f]{40}", dg) and dg != b"0" * 40, dg
    assert r.restore(rt_key, 0, d, replace=True)
    assert r.dump(rt_key) == d, "the accepted value does not DUMP/RESTORE to itself"
    assert r.execute_command("DEBUG", "DIGEST-VALUE", rt_key)[0] == dg
    r.delete(rt_key)
    return True


def test_restore_fuzzed_payloads_server_survives(server, r):
    # payloads to mutate: captchas with slots, one without visits, a challenge
    r.execute_command(ADD_CAPTCHA, "src1", cfg([(2, 10), (4, 20), (100, 300)], duration=300))
    for _ in range(5):
        r.execute_command(ADD_VISITOR, "src1")
    for j in range(4):
        r.execute_command(VISIT_AT, ckey("src1"), now_ms() - 200000 + j * 5000)
    r.execute_command(ADD_CAPTCHA, "src2", cfg([(1, 1)], duration=1))
    r.execute_command(ADD_VISITOR, "src2")
    r.execute_command(ADD_CAPTCHA, "src3", cfg([(0, 5)], duration=60))
    r.execute_command(ADD_CHALLENGE, "src1", chal(123456, 300, "c"))
    bases = [r.dump(ckey("src1")), r.dump(ckey("src2")), r.dump(ckey("src3")),
             r.dump(chkey("src1", "c"))]
    for p in bases:
        assert crc64(p[:-8]) == struct.unpack("<Q", p[-8:])[0]
        # the unmodified payload (CRC recomputed) is accepted
        assert r.restore(b"fz-ok", 0, repack(p[:-10], p[-10:-8]), replace=True)
    r.delete(b"fz-ok")
    rng = random.Random(7)
    rejected = accepted = 0
    stats = {}  # kind -> [rejected, accepted]
    total = 1000
    for i in range(total):
        base = rng.choice(bases)
        kind, body, version = mutate_dump(rng, base)
        is_captcha = base is not bases[3]
        key = ckey("fz%d" % i) if is_captcha else chkey("fz%d" % i, "c")
        try:
            if not restore_checked(r, key, repack(bytes(body), version)):
                rejected += 1
                stats.setdefault(kind, [0, 0])[0] += 1
                continue
            accepted += 1
            stats.setdefault(kind, [0, 0])[1] += 1
            # exercise the accepted value
            r.type(key)
            digest_value(r, key)
            r.memory_usage(key)
            r.dump(key)
            for args in [(GET, "fz%d" % i), (ADD_VISITOR, "fz%d" % i),
                         (CAPTCHA_EXISTS, "fz%d" % i)]:
                try:
                    r.execute_command(*args)
                except redis.ResponseError:
                    pass
            r.copy(key, b"fz-copy", replace=True)
            assert digest_value(r, b"fz-copy") == digest_value(r, key)
        except redis.ConnectionError as e:
            server.check_alive()
            raise AssertionError("connection lost after payload #%d (%s): %r" % (i, kind, e))
        assert r.ping(), "server not answering after payload #%d" % i
    print("fuzzed RESTORE: %d rejected, %d accepted; per kind [rejected, accepted]: %r"
          % (rejected, accepted, stats))
    # A truncated value can still parse: Redis reads on into the 10-byte footer
    # (RDB version, CRC), so a cut just before the last number may be completed
    # by footer bytes. Most truncations must fail, though.
    t_rej, t_acc = stats.get("truncate", [0, 0])
    assert t_rej >= 0.8 * (t_rej + t_acc), "truncated payloads: %d rejected, %d accepted" % (
        t_rej, t_acc)
    assert rejected > total // 2, "only %d of %d corrupt payloads were rejected" % (rejected,
                                                                                  total)
    # whatever was accepted is a valid value: it saves and loads again (made
    # persistent first, so that a slow reload cannot outlive a short TTL; the
    # value digest does not cover the TTL)
    for k in all_keys(r):
        r.persist(k)
    before = {k: digest_value(r, k) for k in all_keys(r)}
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert {k: digest_value(r, k) for k in all_keys(r)} == before
    assert r.ping()

# SPDX-License-Identifier: BSD-3-Clause
"""Durability of the rate-limit keys (mcap-gcra, mcap-wndw): RDB (SAVE +
restart, DEBUG RELOAD), AOF (appendfsync always, no RDB preamble, kill -9,
BGREWRITEAOF), replication of a mixed workload (WAIT-served requests
included), DUMP/RESTORE/COPY, RESTORE of corrupted DUMP payloads, and the
commands in a 3-primary cluster.

Every limiter here uses long periods (minutes), so nothing decays or expires
while a test compares states; what must be equal is compared exactly: DEBUG
DIGEST-VALUE per key, DEBUG DIGEST, PEXPIRETIME (the expiry is an absolute
time), and the peeks' decisions and remaining counts (their times within a
small tolerance).
"""

import glob
import os
import random
import re
import struct
import threading
import time

import pytest
import redis

from servers import wait_replicas_synced, raw_command

from dumps import crc64, mutate_dump, repack  # noqa: F401

try:
    from cluster import key_slot, redis_cluster  # noqa: F401 (fixture)
    from conftest import _register_manager
    HAVE_CLUSTER = True
    CLUSTER_IMPORT_ERROR = None
except Exception as e:  # pragma: no cover
    HAVE_CLUSTER = False
    CLUSTER_IMPORT_ERROR = repr(e)

GCRA_TYPE = b"mcap-gcra"
WINDOW_TYPE = b"mcap-wndw"
ZERO_DIGEST = b"0" * 40


# ------------------------------------------------------------------ helpers
def now_ms():
    return int(time.time() * 1000)


def info(server, section):
    c = redis.Redis(host=server.host, port=server.port, socket_timeout=10)
    try:
        return c.info(section)
    finally:
        c.close()


def digest(r, key):
    return r.execute_command("DEBUG", "DIGEST-VALUE", key)[0]


def all_keys(r):
    return sorted(r.scan_iter(count=1000))


def wait_aof_rewrite_done(server, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        i = info(server, "persistence")
        if str(i.get("aof_rewrite_in_progress")) == "0" and \
                str(i.get("aof_rewrite_scheduled")) == "0" and str(i.get("loading")) == "0":
            assert i.get("aof_last_bgrewrite_status", "ok") == "ok", server.log_tail()
            return
        time.sleep(0.02)
    raise AssertionError("AOF rewrite still running\n" + server.log_tail())


def aof_server(servers, **kw):
    s = servers.new(appendonly=True, appendfsync="always", aof_preamble=False, **kw)
    wait_aof_rewrite_done(s)
    return s


# Limiters of the dataset: key -> the peek that reads it (COST 0: pure read)
SPECS = {
    "g1": ("RL.GCRA_PEEK", 10, 600000),
    "g2": ("RL.GCRA_PEEK", 5, 100000, "BURST", 20),
    "thr": ("RL.GCRA_PEEK", 1, 60000, "BURST", 11),      # CL.THROTTLE thr 10 1 60
    "w1": ("RL.WINDOW_PEEK", 100, 600000),
    "w2": ("RL.WINDOW_PEEK", 100000, 3600000),
    "w3": ("RL.WINDOW_PEEK", 5, 60000),
    "{m}g": ("RL.GCRA_PEEK", 10, 600000),
    "{m}w": ("RL.WINDOW_PEEK", 10, 600000),
}


def populate(r):
    """Both types, several states each; periods of minutes."""
    now = now_ms()
    r.execute_command("RL.GCRA", "g1", 10, 600000, "COST", 3)
    r.execute_command("RL.GCRA", "g2", 5, 100000, "BURST", 20, "COST", 7)
    r.execute_command("RL.GCRA", "g2", 5, 100000, "BURST", 20, "COST", 2)
    for _ in range(3):
        r.execute_command("CL.THROTTLE", "thr", 10, 1, 60)
    # hits spread over the past (ascending), then some now
    p = r.pipeline(transaction=False)
    for i in range(40):
        p.execute_command("RL.WINDOW", "w1", 100, 600000, "AT", now - 300000 + i * 7001)
    for i in range(300):
        p.execute_command("RL.WINDOW", "w2", 100000, 3600000, "AT", now - 3000000 + i * 9973,
                          "COST", 1 + i % 4)
    p.execute()
    r.execute_command("RL.WINDOW", "w1", 100, 600000, "COST", 5)
    r.execute_command("RL.WINDOW", "w3", 5, 60000, "COST", 3)
    assert r.execute_command("RL.REFUND", "w3", 1) == 1
    assert r.execute_command("RL.REFUND", "g2", 1) == 1
    assert r.execute_command("RL.MULTI", 2, 2, "{m}g", "GCRA", 10, 600000,
                             "{m}w", "WINDOW", 10, 600000)[0] == 1
    assert sorted(k.decode() for k in all_keys(r)) == sorted(SPECS)


# the keys of workload(): prefix -> peek
WORK_SPECS = [
    ("wg", ("RL.GCRA_PEEK", 20, 600000)),
    ("ww", ("RL.WINDOW_PEEK", 30, 300000)),
    ("wt", ("RL.GCRA_PEEK", 1, 60000, "BURST", 10)),      # CL.THROTTLE wtN 9 1 60
    ("wat", ("RL.WINDOW_PEEK", 10 ** 6, 600000)),
    ("{t", None),
]


def spec_of(key):
    if key in SPECS:
        return SPECS[key]
    if key.startswith("{t"):
        return ("RL.GCRA_PEEK", 15, 600000) if key.endswith("g") else ("RL.WINDOW_PEEK", 12, 600000)
    for prefix, spec in WORK_SPECS:
        if key.startswith(prefix) and key[len(prefix):].isdigit():
            return spec
    return None


def peek(r, key):
    spec = spec_of(key)
    return r.execute_command(spec[0], key, *spec[1:], "COST", 0)


def snapshot(r):
    keys = all_keys(r)
    snap = {"keys": keys, "digest": r.execute_command("DEBUG", "DIGEST")}
    for k in keys:
        snap[k] = (r.type(k), digest(r, k), r.execute_command("PEXPIRETIME", k))
        if spec_of(k.decode()) is not None:
            snap[("peek", k)] = peek(r, k.decode())
    return snap


def assert_same_state(a, b, what, tol_ms=3000):
    assert a["keys"] == b["keys"], "%s: keys %r vs %r" % (what, a["keys"], b["keys"])
    for k in a["keys"]:
        assert a[k] == b[k], "%s: key %r: %r vs %r" % (what, k, a[k], b[k])
        pa, pb = a.get(("peek", k)), b.get(("peek", k))
        if pa is not None:
            # the same decision and remaining; reset_after counts down with time
            assert pa[:3] == pb[:3], "%s: peek %r: %r vs %r" % (what, k, pa, pb)
            assert 0 <= pa[3] - pb[3] <= tol_ms, "%s: peek %r: %r vs %r" % (what, k, pa, pb)
    assert a["digest"] == b["digest"], "%s: DEBUG DIGEST differs" % what


def assert_nontrivial(r, snap):
    types = {snap[k][0] for k in snap["keys"]}
    assert types == {GCRA_TYPE, WINDOW_TYPE}, types
    for k in snap["keys"]:
        assert snap[k][1] != ZERO_DIGEST, "no digest for %r" % k
        assert snap[k][2] > now_ms(), "%r has no expiry in the future: %r" % (k, snap[k])


def workload(r, rng, n):
    """n mixed calls (allowed or refused) on a small set of long-period keys."""
    replies = []
    for _ in range(n):
        x = rng.random()
        i = rng.randrange(4)
        if x < 0.25:
            args = ("RL.GCRA", "wg%d" % i, 20, 600000, "COST", rng.randint(0, 4))
        elif x < 0.5:
            args = ("RL.WINDOW", "ww%d" % i, 30, 300000, "COST", rng.randint(0, 3))
        elif x < 0.62:
            args = ("RL.REFUND", rng.choice(["wg%d", "ww%d"]) % i, rng.randint(1, 5))
        elif x < 0.8:
            args = ("RL.MULTI", rng.randint(0, 2), 2, "{t%d}g" % i, "GCRA", 15, 600000,
                    "{t%d}w" % i, "WINDOW", 12, 600000)
        elif x < 0.95:
            args = ("CL.THROTTLE", "wt%d" % i, 9, 1, 60, rng.randint(0, 3))
        else:
            args = ("RL.WINDOW", "wat%d" % i, 10 ** 6, 600000, "AT", now_ms() - rng.randint(0, 9))
        replies.append((args, r.execute_command(*args)))
    return replies


# ==================================================================== RDB
def test_save_and_restart_keeps_state(servers):
    s = servers.new()
    r = s.client()
    populate(r)
    before = snapshot(r)
    assert_nontrivial(r, before)
    assert r.execute_command("SAVE")
    s.restart()
    r = s.client()
    after = snapshot(r)
    assert_same_state(before, after, "after SAVE + restart")
    # the TTL is an absolute time: it went down while the server was away (the
    # clock is read before each PTTL, which rounds up by at most 1 ms)
    for k in before["keys"]:
        t = now_ms()
        assert r.pttl(k) <= before[k][2] - t + 1
    # the restored limiters behave
    assert r.execute_command("RL.GCRA", "g1", 10, 600000, "COST", 7)[:2] == [1, 0]
    assert r.execute_command("RL.GCRA", "g1", 10, 600000)[0] == 0
    assert r.execute_command("RL.WINDOW", "w3", 5, 60000, "COST", 3)[:2] == [1, 0]
    assert r.execute_command("RL.WINDOW", "w3", 5, 60000)[0] == 0


def test_debug_reload_keeps_state(servers):
    s = servers.new()
    r = s.client()
    populate(r)
    before = snapshot(r)
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert_same_state(before, snapshot(r), "after DEBUG RELOAD")


# ==================================================================== AOF
def test_aof_kill9_replays_the_same_state(servers):
    s = aof_server(servers)
    r = s.client()
    populate(r)
    rng = random.Random(11)
    replies = workload(r, rng, 150)   # one by one, each acknowledged
    allowed = sum(1 for a, rep in replies if isinstance(rep, list) and
                  (rep[0] == 1 if a[0] != "CL.THROTTLE" else rep[0] == 0))
    assert allowed > 40, "the workload should write"
    before = snapshot(r)
    s.restart(kill=True)
    r = s.client()
    after = snapshot(r)
    # the same digests and expiries, and the peeks (COST 0) of every key give
    # the same remaining counts: no request was taken twice by the replay
    assert len([k for k in after["keys"] if ("peek", k) in after]) == len(after["keys"]) > 20
    assert_same_state(before, after, "after kill -9 and AOF replay")


def test_aof_replay_does_not_take_twice(servers):
    """Replay applies the logged states, not the clock-reading commands."""
    s = aof_server(servers)
    r = s.client()
    for _ in range(7):
        assert r.execute_command("RL.GCRA", "g", 10, 600000)[0] == 1
    for _ in range(4):
        assert r.execute_command("RL.WINDOW", "w", 10, 600000)[0] == 1
    for _ in range(3):
        assert r.execute_command("CL.THROTTLE", "c", 9, 1, 60)[0] == 0
    assert r.execute_command("RL.MULTI", 1, 2, "{m}g", "GCRA", 5, 600000,
                             "{m}w", "WINDOW", 5, 600000)[0] == 1
    assert r.execute_command("RL.REFUND", "w", 1) == 1
    assert r.execute_command("RL.REFUND", "g", 2) == 2
    before = {k: (digest(r, k), r.execute_command("PEXPIRETIME", k)) for k in all_keys(r)}
    s.restart(kill=True)
    r = s.client()
    assert {k: (digest(r, k), r.execute_command("PEXPIRETIME", k)) for k in all_keys(r)} == before
    assert r.execute_command("RL.GCRA_PEEK", "g", 10, 600000, "COST", 0)[1] == 5
    assert r.execute_command("RL.WINDOW_PEEK", "w", 10, 600000, "COST", 0)[1] == 7
    assert r.execute_command("CL.THROTTLE", "c", 9, 1, 60, 0)[2] == 7
    assert r.execute_command("RL.GCRA_PEEK", "{m}g", 5, 600000, "COST", 0)[1] == 4
    assert r.execute_command("RL.WINDOW_PEEK", "{m}w", 5, 600000, "COST", 0)[1] == 4


def test_bgrewriteaof_then_restart_same_state(servers):
    s = aof_server(servers)
    r = s.client()
    populate(r)
    workload(r, random.Random(5), 60)
    before = snapshot(r)
    assert r.execute_command("BGREWRITEAOF")
    wait_aof_rewrite_done(s)
    base = glob.glob(os.path.join(s.dir, "appendonlydir", "*.base.*"))
    assert base, os.listdir(os.path.join(s.dir, "appendonlydir"))
    data = open(base[0], "rb").read().upper()
    assert b"RL.GCRA_SET" in data and b"RL.WINDOW_SET" in data, \
        "the rewritten AOF (no preamble) should rebuild the limiters with the internal commands"
    s.restart(kill=True)
    r = s.client()
    assert_same_state(before, snapshot(r), "after BGREWRITEAOF + kill -9")
    # more writes on top of the rewritten base, then a graceful restart
    workload(r, random.Random(6), 40)
    before = snapshot(r)
    s.restart()
    assert_same_state(before, snapshot(s.client()), "after more writes and a restart")


# ==================================================================== replication
def test_replica_mixed_workload_digests_match(servers):
    primary = servers.new(name="primary")
    replica = servers.new(name="replica", replicaof=primary)
    wait_replicas_synced(primary, [replica])
    r = primary.client()
    populate(r)
    rng = random.Random(2024)
    workload(r, rng, 300)
    # requests served by the wait queue's timer (woken by refunds) replicate too
    r.execute_command("RL.WINDOW", "qw", 1, 600000)
    r.execute_command("RL.GCRA", "qg", 1, 600000)
    served = []

    def waiter(args):
        c = primary.client(socket_timeout=10)
        served.append((args[0], c.execute_command(*args)))

    threads = [threading.Thread(target=waiter, args=(a,)) for a in
               (("RL.WINDOW", "qw", 1, 600000, "WAIT", 5000),
                ("RL.GCRA", "qg", 1, 600000, "WAIT", 5000))]
    for t in threads:
        t.start()
    deadline = time.time() + 5
    while int(info(primary, "clients")["blocked_clients"]) < 2:
        assert time.time() < deadline, "the waiters did not block"
        time.sleep(0.01)
    assert r.execute_command("RL.REFUND", "qw", 1) == 1
    assert r.execute_command("RL.REFUND", "qg", 1) == 1
    for t in threads:
        t.join(10)
    assert sorted(x[0] for x in served) == ["RL.GCRA", "RL.WINDOW"]
    assert all(x[1][0] == 1 for x in served), served
    assert r.exists("qw", "qg") == 2
    wait_replicas_synced(primary, [replica])
    rr = replica.client()
    pk, rk = all_keys(r), all_keys(rr)
    assert pk == rk, "key sets differ: %r" % (set(pk) ^ set(rk))
    assert len(pk) > 20
    diffs = []
    for k in pk:
        a = (r.type(k), digest(r, k), r.execute_command("PEXPIRETIME", k))
        b = (rr.type(k), digest(rr, k), rr.execute_command("PEXPIRETIME", k))
        if a != b:
            diffs.append("%r: primary %r replica %r" % (k, a, b))
    assert not diffs, "\n".join(diffs)
    assert r.execute_command("DEBUG", "DIGEST") == rr.execute_command("DEBUG", "DIGEST")
    # peeks on the replica answer like the primary
    for k in SPECS:
        a, b = peek(r, k), peek(rr, k)
        assert a[:3] == b[:3] and abs(a[3] - b[3]) <= 50, (k, a, b)


# ==================================================================== DUMP / RESTORE / COPY
def test_dump_restore_and_copy_roundtrip(servers):
    s = servers.new()
    other = servers.new()
    r, ro = s.client(), other.client()
    populate(r)
    for k in SPECS:
        payload = r.dump(k)
        assert crc64(payload[:-8]) == struct.unpack("<Q", payload[-8:])[0]
        at = r.execute_command("PEXPIRETIME", k)
        # same server, another name, absolute TTL
        assert r.restore(k + "-copy", at, payload, absttl=True)
        assert digest(r, k + "-copy") == digest(r, k) != ZERO_DIGEST
        assert r.execute_command("PEXPIRETIME", k + "-copy") == at
        assert r.type(k + "-copy") == r.type(k)
        # another server
        assert ro.restore(k, at, payload, absttl=True)
        assert digest(ro, k) == digest(r, k)
        a, b = peek(r, k), peek(ro, k)
        assert a[:3] == b[:3], (k, a, b)
        with pytest.raises(redis.ResponseError) as ei:
            r.restore(k + "-copy", 0, payload)
        assert str(ei.value).startswith("BUSYKEY")
        # COPY: equal, then independent
        assert r.copy(k, k + "-c2")
        assert digest(r, k + "-c2") == digest(r, k)
        assert r.execute_command("PEXPIRETIME", k + "-c2") == at
    # mutate the copies: the originals do not move
    orig = {k: digest(r, k) for k in SPECS}
    assert r.execute_command("RL.GCRA", "g1-c2", 10, 600000)[0] == 1
    assert r.execute_command("RL.WINDOW", "w1-c2", 100, 600000)[0] == 1
    assert r.execute_command("RL.REFUND", "w2-c2", 50) == 50
    assert r.execute_command("RL.REFUND", "g2-c2", 1) == 1
    assert {k: digest(r, k) for k in SPECS} == orig
    for k in ("g1", "w1", "w2", "g2"):
        assert digest(r, k + "-c2") != digest(r, k)
    # the copies of the window behave as windows of the same length
    assert r.execute_command("RL.WINDOW", "w3-copy", 5, 60000)[0] == 1
    with pytest.raises(redis.ResponseError):
        r.execute_command("RL.WINDOW", "w3-copy", 5, 1000)
    # all of it survives a reload
    before = {k: digest(r, k) for k in all_keys(r)}
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert {k: digest(r, k) for k in all_keys(r)} == before


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


def test_restore_corrupted_payloads_never_crash(servers):
    s = servers.new()
    r = s.client()
    now = now_ms()
    r.execute_command("RL.GCRA", "b-g", 10, 600000, "COST", 4)
    r.execute_command("RL.GCRA", "b-g2", 3, 1000, "BURST", 100, "COST", 9)
    r.execute_command("RL.WINDOW", "b-w1", 5, 60000)
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.execute_command("RL.WINDOW", "b-w2", 10 ** 6, 600000, "AT", now - 590000 + i * 2900,
                          "COST", 1 + i % 7)
    p.execute()
    r.execute_command("RL.WINDOW", "b-w3", 50, 300, "COST", 3)
    bases = [r.dump(k) for k in ("b-g", "b-g2", "b-w1", "b-w2", "b-w3")]
    for pl in bases:
        assert pl is not None
        assert crc64(pl[:-8]) == struct.unpack("<Q", pl[-8:])[0]
        assert r.restore("fz-ok", 0, repack(pl[:-10], pl[-10:-8]), replace=True)
    r.delete("fz-ok", "b-w3")
    rng = random.Random(99)
    total, accepted, rejected = 400, 0, 0
    truncated_accepted = []
    for i in range(total):
        base = rng.choice(bases)
        kind, body, version = mutate_dump(rng, base)
        key = "fz%d" % i
        payload = repack(bytes(body), version)
        try:
            ok = restore_checked(r, key, payload)
        except redis.ConnectionError as e:
            s.check_alive()
            raise AssertionError("connection lost after payload #%d (%s): %r" % (i, kind, e))
        if not ok:
            rejected += 1
        else:
            accepted += 1
            if kind == "truncate":
                # RESTORE parses the whole payload, footer included: a body cut
                # just before its last value can read the 2-byte RDB version
                # (e.g. 0x0a 0x00 = the value 10, then the EOF opcode) as data.
                # That is the only way a truncated body may be accepted.
                again = r.dump(key)[:-10]
                footer = payload[len(body):]
                if not (again.startswith(bytes(body)) and
                        (bytes(body) + footer).startswith(again)):
                    truncated_accepted.append((bytes(body), again))
            # exercise whatever was accepted with every command
            r.type(key)
            digest(r, key)
            r.memory_usage(key)
            r.dump(key)
            r.copy(key, "fz-copy", replace=True)
            assert digest(r, "fz-copy") == digest(r, key)
            for args in (("RL.GCRA_PEEK", key, 10, 600000), ("RL.GCRA", key, 10, 600000),
                         ("RL.WINDOW_PEEK", key, 5, 60000), ("RL.WINDOW", key, 5, 60000),
                         ("RL.WINDOW", key, 10 ** 6, 600000), ("RL.WINDOW", key, 50, 300),
                         ("RL.REFUND", key, 3), ("CL.THROTTLE", key, 9, 1, 60),
                         ("RL.MULTI", 1, 1, key, "WINDOW", 5, 60000)):
                try:
                    r.execute_command(*args)
                except redis.ResponseError:
                    pass
        assert r.ping(), "no PING after payload #%d" % i
    print("fuzzed RESTORE of rate-limit payloads: %d rejected, %d accepted" % (rejected, accepted))
    assert not truncated_accepted, \
        "truncated payloads accepted (body, body as dumped again): %r" % truncated_accepted[:3]
    assert rejected > total // 3, "only %d of %d corrupt payloads rejected" % (rejected, total)
    # the commands above gave some keys 300 ms lifetimes; a reload on a slow
    # machine may outlast them, so the keys are made persistent first (the value
    # digest does not cover the TTL)
    for k in all_keys(r):
        r.persist(k)
    before = {k: digest(r, k) for k in all_keys(r)}
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert {k: digest(r, k) for k in all_keys(r)} == before
    assert r.ping()


# ==================================================================== cluster
def _tag_per_primary(cluster, prefix):
    """{primary port: a hash tag "<prefix><i>" whose slot that primary serves}."""
    primaries = cluster.primaries()
    slots = {p.port: set(cluster.slots_of(p)) for p in primaries}
    tags, i = {}, 0
    while len(tags) < len(primaries):
        tag = "%s%d" % (prefix, i)
        for p in primaries:
            if key_slot(tag) in slots[p.port] and p.port not in tags:
                tags[p.port] = tag
        i += 1
    return tags


@pytest.mark.skipif(not HAVE_CLUSTER, reason="cluster harness not importable (%s)"
                    % CLUSTER_IMPORT_ERROR)
def test_cluster_routes_by_key_on_every_primary(cluster):
    primaries = cluster.primaries()
    assert len(primaries) == 3
    tags = _tag_per_primary(cluster, "u")
    c = cluster.client
    for p in primaries:
        t = tags[p.port]
        g, w, th, mg, mw = ("{%s}%s" % (t, x) for x in ("g", "w", "thr", "mg", "mw"))
        assert c.execute_command("RL.GCRA", g, 5, 60000, "COST", 2)[:3] == [1, 3, -1]
        assert c.execute_command("RL.GCRA_PEEK", g, 5, 60000)[:3] == [1, 2, -1]
        assert c.execute_command("RL.WINDOW", w, 5, 60000, "COST", 3)[:3] == [1, 2, -1]
        assert c.execute_command("RL.WINDOW_PEEK", w, 5, 60000)[:3] == [1, 1, -1]
        assert c.execute_command("RL.REFUND", w, 1) == 1
        assert c.execute_command("CL.THROTTLE", th, 4, 1, 60) == [0, 5, 4, -1, 60]
        assert c.execute_command("RL.MULTI", 1, 2, mg, "GCRA", 3, 60000,
                                 mw, "WINDOW", 3, 60000) == [1, 0, -1, 2]
        assert c.execute_command("RL.GCRA", g, 5, 60000, "WAIT", 100)[:3] == [1, 2, -1]
    for p in primaries:
        t = tags[p.port]
        conn = cluster.conn(p)
        mine = sorted(conn.scan_iter(count=1000))
        assert mine == sorted("{%s}%s" % (t, x) for x in ("g", "w", "thr", "mg", "mw")), \
            (p.port, mine)
        assert conn.type("{%s}g" % t) == "mcap-gcra" and conn.type("{%s}w" % t) == "mcap-wndw"
        # the replica of each primary has the same states
        for rep in cluster.replicas_of(p):
            cluster.wait_replicas_synced(p, [rep])
            rc = cluster.conn(rep)
            for k in mine:
                assert rc.execute_command("DEBUG", "DIGEST-VALUE", k) == \
                    conn.execute_command("DEBUG", "DIGEST-VALUE", k), (p.port, k)
            # and serves the peeks (READONLY connection)
            rc.execute_command("READONLY")
            got = rc.execute_command("RL.GCRA_PEEK", "{%s}g" % t, 5, 60000, "COST", 0)
            assert got[:3] == [1, 2, -1], got
            rc.execute_command("READWRITE")
    # a single-key command sent to the wrong primary is redirected, not executed
    p0, p1 = primaries[0], primaries[1]
    rep = raw_command(p1, "RL.GCRA", "{%s}g" % tags[p0.port], 5, 60000)
    assert rep.startswith(b"-MOVED "), rep


@pytest.mark.skipif(not HAVE_CLUSTER, reason="cluster harness not importable (%s)" % CLUSTER_IMPORT_ERROR)
def test_cluster_stored_policies_are_per_node(cluster):
    """Stored policies have no key: each primary keeps its own table (set on every one,
    as docs/ratelimit.md says), its replicas receive it, and a call by POLICY on a key is
    evaluated by the key's owner with that node's policy."""
    primaries = cluster.primaries()
    tags = _tag_per_primary(cluster, "pol")
    try:
        for p in primaries:
            assert cluster.conn(p).execute_command("RL.POLICY_SET", "api", "GCRA", 5, 60000, "BURST", 2) == "OK"
        c = cluster.client
        for p in primaries:
            k = "{%s}g" % tags[p.port]
            assert c.execute_command("RL.GCRA", k, "POLICY", "api")[:2] == [1, 1]
            assert c.execute_command("RL.GCRA", k, "POLICY", "api")[:2] == [1, 0]
            assert c.execute_command("RL.GCRA", k, "POLICY", "api")[0] == 0
            for rep in cluster.replicas_of(p):
                cluster.wait_replicas_synced(p, [rep])
                assert cluster.conn(rep).execute_command("RL.POLICY_LIST") == ["api"]
                assert cluster.conn(rep).execute_command("DEBUG", "DIGEST-VALUE", k) == \
                    cluster.conn(p).execute_command("DEBUG", "DIGEST-VALUE", k)
        # a primary that lacks the policy refuses its keys' calls by it, writing nothing
        p0 = primaries[0]
        assert cluster.conn(p0).execute_command("RL.POLICY_DEL", "api") == 1
        k0 = "{%s}new" % tags[p0.port]
        with pytest.raises(redis.ResponseError, match="no such policy"):
            c.execute_command("RL.GCRA", k0, "POLICY", "api")
        assert cluster.conn(p0).exists(k0) == 0
    finally:
        for p in primaries:
            cluster.conn(p).execute_command("RL.POLICY_DEL", "api")

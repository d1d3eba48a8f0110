# SPDX-License-Identifier: BSD-3-Clause
"""MCAPTCHA_CACHE.COUNT counter-name leak-rate-s: a bare leaky-bucket counter.

From an earlier revision of the original mCaptcha cache module's README: "Every
counter has a name and a leak-rate in seconds. If counter exists, then count is
incremented. Otherwise, it is created." The reply is the count after the
increment, and each increment leaves leak-rate seconds later (at most
leak-rate/256 later: the leaky-bucket core of the captchas, core/bucket.h).

The counter is a sliding-window key (type mcap-wndw) whose key is the counter
name itself; so it persists and replicates like RL.WINDOW keys: every COUNT
replicates (and goes to the AOF) as RL.WINDOW_HIT with the time it used.

Checked here: counts go up by one per call; increments leave after the leak-rate
(1 s, observed by bounded polling, with both ends of the interval checked against
this process's clock); the key expires by itself at count 0; DEBUG RELOAD, SAVE +
restart, AOF (appendfsync always, kill -9, and after BGREWRITEAOF) and a replica
keep the exact state (DEBUG DIGEST, PEXPIRETIME); the exact error replies, each
writing nothing. The durability tests run with the module's default options (the
internal commands refused to clients), as in production.
"""

import glob
import os
import time

import pytest
import redis

from mcap import ADD_CAPTCHA, cfg, ckey
from servers import raw_command, wait_replicas_synced

COUNT = "MCAPTCHA_CACHE.COUNT"
MAX_LEAK_S = 2 ** 42 // 1000  # 4398046511: the window type's longest window, in whole seconds
HOUR = 3600
BIG = 10 ** 9  # a PEEK limit far above any count here: count = BIG - remaining


def err(text):
    return b"-" + text.encode() + b"\r\n"


RANGE = err("ERR leak-rate (seconds) must be an integer from 1 to %d" % MAX_LEAK_S)
WRONGTYPE = err("WRONGTYPE Operation against a key holding the wrong kind of value")
ARITY = err("ERR wrong number of arguments for 'mcaptcha_cache.count' command").lower()


def mismatch(have, asked):
    return err("ERR the counter's leak-rate is %s, not %s; use the same leak-rate or delete the key"
               % (have, asked))


def peek_count(r, key, leak_s):
    """The count now, read without writing (RL.WINDOW_PEEK with COST 0)."""
    rep = r.execute_command("RL.WINDOW_PEEK", key, BIG, leak_s * 1000, "COST", 0)
    return BIG - rep[1]


def state(r):
    """Every key with its value digest and absolute expiry, and the db digest."""
    keys = sorted(r.scan_iter(count=1000))
    return ({k: (r.type(k), r.execute_command("DEBUG", "DIGEST-VALUE", k)[0],
                 r.execute_command("PEXPIRETIME", k)) for k in keys},
            r.execute_command("DEBUG", "DIGEST"))


def populate(r):
    """Counters with hour-long leak-rates (nothing leaves during a test): name -> count."""
    counts = {"c1": 1, "c2": 7, "{site}:visits": 3, b"bin\x00ary": 2}
    for name, n in counts.items():
        for i in range(n):
            assert r.execute_command(COUNT, name, HOUR) == i + 1
    assert r.execute_command(COUNT, "long", MAX_LEAK_S) == 1
    counts["long"] = 1
    return counts


def check_counts(r, counts, what):
    for name, n in counts.items():
        leak = MAX_LEAK_S if name == "long" else HOUR
        assert peek_count(r, name, leak) == n, (what, name)


# ------------------------------------------------------------------ counting
def test_counts_go_up_by_one_and_the_key_is_the_name(server):
    r = server.client()
    for i in range(1, 11):
        assert r.execute_command(COUNT, "visits", 30) == i
    assert r.type("visits") == b"mcap-wndw"
    assert r.keys("*") == [b"visits"]
    # each counter is its own
    assert r.execute_command(COUNT, "other", 30) == 1
    assert r.execute_command(COUNT, "visits", 30) == 11
    # the key expires when its last increment has left: 30 s, at most 30/256 s later
    pttl = r.pttl("visits")
    assert 29000 < pttl <= 30000 + 30000 // 256 + 1, pttl
    # declared key: argument 1, as cluster clients and ACL key patterns see it
    assert raw_command(server, "COMMAND", "GETKEYS", COUNT, "visits", 30) == b"*1\r\n$6\r\nvisits\r\n"


def test_reply_is_an_integer_on_the_wire(server):
    assert raw_command(server, COUNT, "n", 5) == b":1\r\n"
    assert raw_command(server, COUNT, "n", 5) == b":2\r\n"


def test_leak_rate_ends_of_the_range(r):
    assert r.execute_command(COUNT, "lo", 1) == 1
    assert r.execute_command(COUNT, "hi", MAX_LEAK_S) == 1
    assert r.execute_command(COUNT, "hi", MAX_LEAK_S) == 2
    expires = r.execute_command("PEXPIRETIME", "hi")
    now = int(time.time() * 1000)
    assert now + MAX_LEAK_S * 1000 - 5000 < expires <= now + MAX_LEAK_S * 1000 + MAX_LEAK_S * 1000 // 256 + 5000


def test_counter_shares_the_window_type(r):
    """A counter is a sliding window: RL.WINDOW keys of a whole-second window
    count on, and RL.WINDOW_PEEK / RL.REFUND read and change a counter."""
    assert r.execute_command("RL.WINDOW", "w", 10, 60000, "COST", 3)[0] == 1
    assert r.execute_command(COUNT, "w", 60) == 4
    assert r.execute_command("RL.WINDOW_PEEK", "w", 10, 60000, "COST", 0)[1] == 6
    assert r.execute_command("RL.REFUND", "w", 2) == 2
    assert r.execute_command(COUNT, "w", 60) == 3


# ------------------------------------------------------------------ leaving
def _poll(fn, want, deadline, what):
    """Call fn() until it returns `want` (then return the time the reply came)."""
    while True:
        got = fn()
        t = time.time()
        if got == want:
            return t
        assert t < deadline, "%s: still %r, expected %r" % (what, got, want)
        time.sleep(0.01)


def test_an_increment_leaves_after_the_leak_rate(r):
    """Leak-rate 1 s: every increment counts for at least 1 s and at most
    1 s + 1000/256 ms. Two at t0, one ~0.2 s later: 3, then 1, then gone.
    Each bound is checked against this process's clock, which the server shares:
    a reply received before t0 + 1 s cannot have seen a hit leave, and one that
    shows a hit gone was computed at least 1 s after that hit was sent."""
    t0 = time.time()
    assert r.execute_command(COUNT, "k", 1) == 1
    assert r.execute_command(COUNT, "k", 1) == 2
    time.sleep(0.2)
    t1 = time.time()
    third = r.execute_command(COUNT, "k", 1)
    t1_done = time.time()
    if t1_done < t0 + 1.0:   # (a machine stalled for a second may have let the first two go)
        assert third == 3
    got = peek_count(r, "k", 1)
    if time.time() < t0 + 1.0:
        assert got == 3
    # the first two leave; the third still counts
    t_one = _poll(lambda: peek_count(r, "k", 1), 1, t1_done + 3.0, "the first two increments")
    assert t_one >= t0 + 1.0, "increments left before their leak-rate (%.3f s)" % (t_one - t0)
    assert r.exists("k") == 1
    # then the last one, and the key with it (it expires by itself at count 0)
    t_gone = _poll(lambda: r.exists("k"), 0, t1_done + 4.0, "the key")
    assert t_gone >= t1 + 1.0, "the last increment left early (%.3f s)" % (t_gone - t1)
    assert r.dbsize() == 0
    # a new counter starts again from 1
    assert r.execute_command(COUNT, "k", 1) == 1


def test_the_key_expires_on_its_own(r):
    """Redis removes the key (active expiry, no access to it) once the count is 0."""
    assert r.execute_command(COUNT, "gone", 1) == 1
    pexp = r.execute_command("PEXPIRETIME", "gone")
    assert pexp > 0
    deadline = time.time() + 5.0
    while r.dbsize():  # DBSIZE does not touch the key: only active expiry removes it
        assert time.time() < deadline, "the key did not expire by itself"
        time.sleep(0.05)
    assert time.time() * 1000 >= pexp - 5


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("leak", ["abc", "1.5", "-1", "0", "", " 5", "5s", str(MAX_LEAK_S + 1),
                                  "99999999999999999999999"])
def test_leak_rate_must_be_an_integer_in_range(server, leak):
    assert raw_command(server, COUNT, "c", leak) == RANGE
    assert server.client().dbsize() == 0


def test_arity(server):
    # the command's name is shown as registered (7.0) or as sent (newer servers)
    assert raw_command(server, COUNT).lower() == ARITY
    assert raw_command(server, COUNT, "c").lower() == ARITY
    assert raw_command(server, COUNT, "c", 10, "extra").lower() == ARITY
    assert server.client().dbsize() == 0


def test_another_leak_rate_is_refused_naming_both(server):
    r = server.client()
    assert r.execute_command(COUNT, "c", 10) == 1
    before = state(r)
    assert raw_command(server, COUNT, "c", 20) == mismatch("10 s", "20 s")
    assert raw_command(server, COUNT, "c", 1) == mismatch("10 s", "1 s")
    assert state(r) == before, "a refused COUNT wrote something"
    assert r.execute_command(COUNT, "c", 10) == 2
    # a window of no whole number of seconds (made by RL.WINDOW) is named in ms
    assert r.execute_command("RL.WINDOW", "w", 5, 1500)[0] == 1
    before = state(r)
    assert raw_command(server, COUNT, "w", 1) == mismatch("1500 ms", "1 s")
    assert state(r) == before
    # deleting the key lets a new leak-rate start
    assert r.delete("c") == 1
    assert r.execute_command(COUNT, "c", 20) == 1


@pytest.mark.parametrize("kind", ["string", "list", "gcra", "lock", "captcha"])
def test_wrongtype(server, kind):
    r = server.client()
    key = "x"
    if kind == "string":
        r.set(key, "plain")
    elif kind == "list":
        r.rpush(key, "a")
    elif kind == "gcra":
        assert r.execute_command("RL.GCRA", key, 10, 60000)[0] == 1
    elif kind == "lock":
        assert r.execute_command("LOCK.ACQUIRE", key, "owner", 60000)[0] == 1
    elif kind == "captcha":
        assert r.execute_command(ADD_CAPTCHA, "site", cfg([(5, 50)])) == b"OK"
        key = ckey("site")
    before = (r.execute_command("DUMP", key), r.execute_command("PEXPIRETIME", key))
    assert raw_command(server, COUNT, key, 10) == WRONGTYPE
    assert (r.execute_command("DUMP", key), r.execute_command("PEXPIRETIME", key)) == before


# ------------------------------------------------------------------ durability
def test_debug_reload_keeps_the_counters(servers):
    s = servers.new(module_args=())
    r = s.client()
    counts = populate(r)
    before = state(r)
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert state(r) == before
    check_counts(r, counts, "after DEBUG RELOAD")
    assert r.execute_command(COUNT, "c2", HOUR) == 8


def test_save_and_restart_keeps_the_counters(servers):
    s = servers.new(module_args=())
    r = s.client()
    counts = populate(r)
    before = state(r)
    assert r.execute_command("SAVE")
    s.restart()
    r = s.client()
    assert state(r) == before
    check_counts(r, counts, "after SAVE + restart")
    assert r.execute_command(COUNT, "c2", HOUR) == 8


def _aof_files(s):
    out = b""
    for p in sorted(glob.glob(os.path.join(s.aof_dir(), "*"))):
        if not p.endswith(".manifest"):
            out += open(p, "rb").read()
    return out.upper()


def test_aof_replays_the_same_counters(servers):
    """appendfsync always, no RDB preamble: the AOF carries RL.WINDOW_HIT with the
    time each COUNT used (never COUNT itself); kill -9 and replay give the same
    state, and so does a rewritten AOF (RL.WINDOW_SET)."""
    s = servers.new(module_args=(), appendonly=True, appendfsync="always", aof_preamble=False)
    s.wait_aof_rewrite_done()
    r = s.client()
    counts = populate(r)
    data = _aof_files(s)
    assert b"RL.WINDOW_HIT" in data and COUNT.encode() not in data
    before = state(r)
    s.restart(kill=True)
    r = s.client()
    assert state(r) == before, "after kill -9 and AOF replay"
    check_counts(r, counts, "after AOF replay")
    # a rewrite, more counts on top, then again
    assert r.execute_command("BGREWRITEAOF")
    s.wait_aof_rewrite_done()
    assert r.execute_command(COUNT, "c1", HOUR) == 2
    counts["c1"] = 2
    before = state(r)
    s.restart(kill=True)
    r = s.client()
    assert state(r) == before, "after BGREWRITEAOF, more counts and kill -9"
    check_counts(r, counts, "after the rewritten AOF")


def test_replica_has_the_same_counters(servers):
    primary = servers.new(name="primary", module_args=())
    replica = servers.replica_of(primary, name="replica", module_args=())
    r, rr = primary.client(), replica.client()
    counts = populate(r)
    wait_replicas_synced(primary, [replica])
    assert state(rr) == state(r)
    check_counts(rr, counts, "on the replica")
    # a refused COUNT replicates nothing; the next one continues on both
    with pytest.raises(redis.ResponseError):
        r.execute_command(COUNT, "c1", 5)
    assert r.execute_command(COUNT, "c1", HOUR) == 2
    wait_replicas_synced(primary, [replica])
    assert state(rr) == state(r)
    # the replica refuses the write itself
    with pytest.raises(redis.exceptions.ReadOnlyError):
        rr.execute_command(COUNT, "c1", HOUR)
    # the replica's key expires at the same absolute time as the primary's
    assert r.execute_command(COUNT, "short", 60) == 1
    wait_replicas_synced(primary, [replica])
    assert rr.execute_command("PEXPIRETIME", "short") == r.execute_command("PEXPIRETIME", "short") > 0

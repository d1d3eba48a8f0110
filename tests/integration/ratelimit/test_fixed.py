# SPDX-License-Identifier: BSD-3-Clause
"""RL.FIXED key window-ms [COST n] [ELASTIC]: the fixed-window counter (src/core/fixed.h,
src/ratelimit/fixed_cmd.c) that the `limits` storage's fixed-window strategies use.

The key is a plain string holding the count; its expiry is the window's end, set by the
first hit (ELASTIC: by every hit). Reply [count, reset_after_ms]. A hit replicates as
SET key count PXAT end, so a replica and the AOF hold the same value and the same
absolute expiry, and never run the clock-reading command.

Checked here: the reply and the key (GET, PEXPIRETIME) after hits of several costs; ELASTIC
moves the end, a plain hit keeps it; a key without expiry gets one; COST 0 looks and writes
nothing; each error (not a count, overflow, WRONGTYPE, ranges) writes nothing; the window
ends and a new one starts; keyspace events; a replica (also through MULTI and a script) and an
AOF replay (kill -9) give the same value and PEXPIRETIME, and carry SET ... PXAT, never RL.FIXED.
"""

import glob
import os

import pytest
import redis

from mcap import wait_for
from servers import wait_replicas_synced

FIXED = "RL.FIXED"
MAX_WINDOW = 2 ** 42
MAX_COST = 2 ** 32 - 1


def fixed(r, key, window_ms, *opts):
    return r.execute_command(FIXED, key, window_ms, *opts)


def state(r, key):
    """(value, PEXPIRETIME) of a key: what a window is."""
    return r.get(key), r.execute_command("PEXPIRETIME", key)


def test_hits_count_and_keep_the_first_hits_end(r):
    assert fixed(r, "f", 60000) == [1, 60000]
    end = r.execute_command("PEXPIRETIME", "f")
    assert end > 0
    count, left = fixed(r, "f", 60000, "COST", 5)
    assert count == 6 and 0 < left <= 60000
    assert fixed(r, "f", 60000, "cost", 3)[0] == 9  # options ignore case
    assert r.get("f") == b"9"
    assert r.execute_command("PEXPIRETIME", "f") == end, "a plain hit moved the window's end"
    # the count is a plain integer string: INCRBY and DECRBY keep working on it
    assert r.incrby("f", 1) == 10
    count, later = fixed(r, "f", 60000)
    assert count == 11 and 0 < later <= left
    assert r.execute_command("PEXPIRETIME", "f") == end


def test_every_hit_counts_over_any_limit(r):
    """No limit is kept: the caller compares (as `limits` does), and a client that keeps
    hitting keeps counting."""
    for i in range(1, 8):
        assert fixed(r, "over", 60000)[0] == i
    assert fixed(r, "over", 60000, "COST", MAX_COST)[0] == 7 + MAX_COST


def test_elastic_moves_the_end(r):
    fixed(r, "e", 60000)
    r.execute_command("PEXPIREAT", "e", r.execute_command("PEXPIRETIME", "e") - 30000)  # as if 30 s old
    older = r.execute_command("PEXPIRETIME", "e")
    assert fixed(r, "e", 60000, "ELASTIC") == [2, 60000]
    assert r.execute_command("PEXPIRETIME", "e") >= older + 30000
    # without ELASTIC the end stays where the elastic hit put it
    end = r.execute_command("PEXPIRETIME", "e")
    fixed(r, "e", 60000)
    assert r.execute_command("PEXPIRETIME", "e") == end


def test_a_count_without_expiry_gets_one(r):
    r.set("noexp", 41)
    assert r.pttl("noexp") == -1
    assert fixed(r, "noexp", 5000) == [42, 5000]
    assert 0 < r.pttl("noexp") <= 5000


def test_cost_0_looks_and_writes_nothing(r):
    assert fixed(r, "none", 1000, "COST", 0) == [0, 0]
    assert r.exists("none") == 0
    fixed(r, "look", 60000, "COST", 4)
    before = (r.dump("look"), r.execute_command("PEXPIRETIME", "look"))
    count, left = fixed(r, "look", 60000, "COST", 0, "ELASTIC")
    assert count == 4 and 0 < left <= 60000
    assert (r.dump("look"), r.execute_command("PEXPIRETIME", "look")) == before
    r.set("forever", 3)
    assert fixed(r, "forever", 1000, "COST", 0) == [3, -1]
    assert r.pttl("forever") == -1


@pytest.mark.parametrize("setup, args, message", [
    (lambda r: r.set("k", "abc"), ["k", 1000], "ERR the key's value is not an integer (a fixed window holds a count)"),
    (lambda r: r.set("k", "007"), ["k", 1000], "ERR the key's value is not an integer (a fixed window holds a count)"),
    (lambda r: r.set("k", " 7"), ["k", 1000], "ERR the key's value is not an integer (a fixed window holds a count)"),
    (lambda r: r.set("k", 2 ** 63 - 1, px=60000), ["k", 1000], "ERR increment would overflow the window's count"),
    (lambda r: r.set("k", 2 ** 63 - MAX_COST, px=60000), ["k", 1000, "COST", MAX_COST],
     "ERR increment would overflow the window's count"),
    (lambda r: r.rpush("k", "a"), ["k", 1000], "WRONGTYPE Operation against a key holding the wrong kind of value"),
    (lambda r: r.execute_command("RL.WINDOW", "k", 5, 1000), ["k", 1000],
     "WRONGTYPE Operation against a key holding the wrong kind of value"),
    (lambda r: r.set("k", 1, px=60000), ["k", 0], "ERR window (milliseconds) must be an integer from 1 to %d" % MAX_WINDOW),
    (lambda r: r.set("k", 1, px=60000), ["k", MAX_WINDOW + 1],
     "ERR window (milliseconds) must be an integer from 1 to %d" % MAX_WINDOW),
    (lambda r: r.set("k", 1, px=60000), ["k", 1000, "COST", MAX_COST + 1],
     "ERR COST must be an integer from 0 to %d" % MAX_COST),
    (lambda r: r.set("k", 1, px=60000), ["k", 1000, "COST", -1], "ERR COST must be an integer from 0 to %d" % MAX_COST),
    (lambda r: r.set("k", 1, px=60000), ["k", 1000, "ELASTIC", "COST"], "ERR COST needs a value (n)"),
    (lambda r: r.set("k", 1, px=60000), ["k", 1000, "LIMIT", 5],
     "ERR unknown option 'LIMIT' for RL.FIXED; expected COST n, ELASTIC"),
])
def test_errors_write_nothing(r, setup, args, message):
    setup(r)
    before = (r.dump("k"), r.execute_command("PEXPIRETIME", "k"))
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(FIXED, *args)
    # redis-py drops the "ERR " code and keeps any other
    assert str(e.value) == (message[len("ERR "):] if message.startswith("ERR ") else message)
    assert (r.dump("k"), r.execute_command("PEXPIRETIME", "k")) == before


def test_the_largest_window_and_cost_are_taken(r):
    assert fixed(r, "big", MAX_WINDOW, "COST", MAX_COST) == [MAX_COST, MAX_WINDOW]
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        r.execute_command(FIXED, "big")


def test_a_window_over_inside_multi_starts_again(r):
    """A MULTI decides expiry on the time cached when it began, so a key whose end has passed
    meanwhile is still shown. Redis 7.0 gives the module the clock itself: RL.FIXED counts
    such a window as over (a new window, an end in the future). Servers whose module clock
    also stands still in a MULTI (Valkey 8) see the window still running, consistently. Either
    way: never a negative time, never an end in the past."""
    fixed(r, "m", 5)
    with r.pipeline(transaction=True) as p:
        p.execute_command("DEBUG", "SLEEP", "0.02").execute_command(FIXED, "m", 60000)
        p.execute_command(FIXED, "m", 60000, "COST", 0)
        _, hit, look = p.execute()
    if hit[0] == 1:  # the module saw the window over: a new one
        assert hit == [1, 60000]
        assert look[0] == 1 and 0 < look[1] <= 60000
        assert r.get("m") == b"1" and 0 < r.pttl("m") <= 60000
    else:  # the clock stood still in the MULTI: the 5 ms window was still running
        assert hit[0] == 2 and 0 < hit[1] <= 5, hit
        assert look == hit


def test_the_window_ends_and_a_new_one_starts(r):
    assert fixed(r, "short", 200, "COST", 3) == [3, 200]
    wait_for(lambda: r.exists("short") == 0, 5.0, "the 200 ms window to end")
    assert fixed(r, "short", 200) == [1, 200]


def test_keyspace_events(server):
    r = server.client()
    r.config_set("notify-keyspace-events", "KEA")
    try:
        p = r.pubsub()
        p.psubscribe("__keyevent@0__:*")
        wait_for(lambda: p.get_message(timeout=0.1) is not None, 5.0, "the subscription")
        fixed(r, "ev", 60000)  # a new window: incrby, expire
        fixed(r, "ev", 60000)  # the same window: incrby only
        fixed(r, "ev", 60000, "COST", 0)  # a look: nothing
        r.execute_command("PEXPIRE", "ev", 30000)  # (expire)
        fixed(r, "ev", 60000, "ELASTIC")  # the end moves: incrby, expire
        r.set("noexp", 4)  # (set)
        fixed(r, "noexp", 60000)  # a key without expiry gets one: incrby, expire
        r.set("marker", 1)
        events = []
        while True:
            m = p.get_message(timeout=5.0)
            assert m is not None, events
            if m["type"] != "pmessage":
                continue
            events.append((m["channel"].split(b":")[-1], m["data"]))
            if m["data"] == b"marker":
                break
        assert events == [(b"incrby", b"ev"), (b"expire", b"ev"), (b"incrby", b"ev"), (b"expire", b"ev"),
                          (b"incrby", b"ev"), (b"expire", b"ev"), (b"set", b"noexp"), (b"incrby", b"noexp"),
                          (b"expire", b"noexp"), (b"set", b"marker")]
        p.close()
    finally:
        r.config_set("notify-keyspace-events", "")


def _cmdstat_calls(r, name):
    """Calls of a command (module commands keep their case in INFO: cmdstat_RL.FIXED)."""
    stats = {k.lower(): v for k, v in r.info("commandstats").items()}
    return int(stats.get("cmdstat_" + name, {}).get("calls", 0))


def test_replica_holds_the_same_windows(replica_pair):
    primary, replica = replica_pair
    r, rr = primary.client(), replica.client()
    fixed(r, "a", 60000)
    fixed(r, "a", 60000, "COST", 4)
    fixed(r, "b", 90000, "ELASTIC")
    r.set("c", 10)  # no expiry: the hit gives it one
    fixed(r, "c", 30000)
    with r.pipeline(transaction=True) as p:  # MULTI/EXEC
        p.execute_command(FIXED, "a", 60000).execute_command(FIXED, "m", 1000, "ELASTIC")
        p.execute()
    assert r.eval("return redis.call('RL.FIXED', KEYS[1], 45000, 'COST', 2)", 1, "s") == [2, 45000]
    with pytest.raises(redis.ResponseError):
        fixed(r, "a", 0)  # refused: nothing replicated
    wait_replicas_synced(primary, [replica])
    for k in ["a", "b", "c", "m", "s"]:
        assert state(rr, k) == state(r, k), k
        assert state(r, k)[1] > 0, k
    assert rr.get("a") == b"6"
    # the replica ran the results (SET ... PXAT), never the clock-reading command
    assert _cmdstat_calls(r, "rl.fixed") == 8 and _cmdstat_calls(rr, "rl.fixed") == 0  # 7 hits, 1 refused
    assert _cmdstat_calls(rr, "set") >= 7
    with pytest.raises(redis.exceptions.ReadOnlyError):
        fixed(rr, "a", 60000)


def _aof_bytes(s):
    out = b""
    for p in sorted(glob.glob(os.path.join(s.aof_dir(), "*"))):
        if not p.endswith(".manifest"):
            out += open(p, "rb").read()
    return out


def test_aof_replays_the_same_windows(aof_server):
    s = aof_server(preamble=False)
    r = s.client()
    fixed(r, "a", 600000, "COST", 7)
    fixed(r, "a", 600000)
    fixed(r, "b", 600000, "ELASTIC")
    before = {k: state(r, k) for k in ["a", "b"]}
    data = _aof_bytes(s).upper()
    assert b"PXAT" in data and b"RL.FIXED" not in data
    s.restart(kill=True)
    r = s.client()
    assert {k: state(r, k) for k in ["a", "b"]} == before
    assert fixed(r, "a", 600000)[0] == 9

# SPDX-License-Identifier: BSD-3-Clause
"""AT on the peeks and on RL.REFUND, and the fine window (a hit is gone at most
one second after its period), docs/ratelimit.md ("AT on the peeks and on RL.REFUND", "The sliding window").

- RL.GCRA_PEEK / RL.WINDOW_PEEK ... AT t answer exactly what RL.GCRA /
  RL.WINDOW ... AT t would (the write is sent right after, in one transaction),
  and change nothing.
- RL.REFUND key n AT t gives back what was taken at t less what has come back
  by itself since: GCRA n emission intervals minus (clock - t), nothing once
  that is zero; a window nothing once t is a window (and a slot) behind. The
  resulting state is what replicates (the replica's digest and TTL agree).
- A window's slots are at most 1 s wide: a hit of a one-hour window counts at
  t + 1 h and is gone by t + 1 h + 1 s, also after RDB, AOF and on a replica."""

import time

import pytest

from mcap import digest_value, now_ms
from servers import wait_replicas_synced

HOUR = 3600 * 1000
FUTURE = 4102444800000  # 2100-01-01: times far ahead of the clock, so nothing decays


def both(r, peek, write):
    p = r.pipeline(transaction=True)
    p.execute_command(*peek)
    p.execute_command(*write)
    return p.execute()


@pytest.mark.parametrize("kind", ["GCRA", "WINDOW"])
def test_peek_at_answers_as_the_write_at(r, kind):
    cmd = "RL." + kind
    t = FUTURE
    for i in range(6):
        at = t + i * 150
        got_peek, got_write = both(r, (cmd + "_PEEK", "k", 3, 1000, "AT", at), (cmd, "k", 3, 1000, "AT", at))
        assert got_peek == got_write, (i, got_peek, got_write)
    # a time behind the latest: the peek answers as the write would, and the peek wrote nothing
    d = digest_value(r, "k")
    ttl = r.pexpiretime("k")
    for back in (1, 500, HOUR):
        r.execute_command(cmd + "_PEEK", "k", 3, 1000, "AT", t - back)
        assert digest_value(r, "k") == d and r.pexpiretime("k") == ttl
    for back in (1, 500, HOUR):
        got_peek, got_write = both(r, (cmd + "_PEEK", "k", 3, 1000, "AT", t - back), (cmd, "k", 3, 1000, "AT", t - back))
        assert got_peek[:3] == got_write[:3], (back, got_peek, got_write)
    # AT far ahead: everything has come back
    assert r.execute_command(cmd + "_PEEK", "k", 3, 1000, "AT", t + HOUR)[:2] == [1, 2]
    assert r.execute_command(cmd + "_PEEK", "none", 3, 1000, "AT", t) [:2] == [1, 2]
    assert r.exists("none") == 0


def test_peek_at_with_a_policy(r):
    r.execute_command("RL.POLICY_SET", "pp", "GCRA", 2, 1000)
    assert r.execute_command("RL.GCRA", "g", "POLICY", "pp", "AT", FUTURE)[:2] == [1, 1]
    assert r.execute_command("RL.GCRA_PEEK", "g", "POLICY", "pp", "AT", FUTURE)[:2] == [1, 0]
    assert r.execute_command("RL.GCRA_PEEK", "g", "POLICY", "pp", "AT", FUTURE + 500)[:2] == [1, 1]


def test_peek_at_errors(r):
    for cmd in ("RL.GCRA_PEEK", "RL.WINDOW_PEEK"):
        with pytest.raises(Exception, match="AT must be"):
            r.execute_command(cmd, "k", 3, 1000, "AT", 0)
        with pytest.raises(Exception, match="needs a value"):
            r.execute_command(cmd, "k", 3, 1000, "AT")
        with pytest.raises(Exception, match="unknown option"):
            r.execute_command(cmd, "k", 3, 1000, "WAIT", 1)


def test_refund_gcra_at_discounts_what_came_back(r):
    now = now_ms()
    # 10 units, one per minute: the TAT is 10 minutes ahead
    assert r.execute_command("RL.GCRA", "g", 10, 10 * 60000, "COST", 10)[:2] == [1, 0]
    tat = r.pexpiretime("g")
    # 3 units taken 2 minutes ago: 2 of them have come back by themselves; 1 is given back
    assert r.execute_command("RL.REFUND", "g", 3, "AT", now - 2 * 60000) == 1
    assert abs(r.pexpiretime("g") - (tat - 60000)) <= 60, (r.pexpiretime("g"), tat)
    # taken 5 minutes ago, 4 units: all came back; a no-op (nothing changes, nothing replicated)
    d = digest_value(r, "g")
    assert r.execute_command("RL.REFUND", "g", 4, "AT", now - 5 * 60000) == 0
    assert digest_value(r, "g") == d
    # AT now or ahead: as without AT
    assert r.execute_command("RL.REFUND", "g", 2, "AT", now + HOUR) == 2
    assert r.execute_command("RL.REFUND", "g", 100, "AT", now_ms()) >= 6
    assert r.exists("g") == 0


def test_refund_window_at(r):
    now = now_ms()
    assert r.execute_command("RL.WINDOW", "w", 5, 60000, "COST", 4)[:2] == [1, 1]
    # a time a whole window (and slot) behind: those hits have left; nothing given back
    assert r.execute_command("RL.REFUND", "w", 2, "AT", now - 62000) == 0
    assert r.execute_command("RL.WINDOW_PEEK", "w", 5, 60000, "COST", 0)[1] == 1
    # within the window: given back, newest first
    assert r.execute_command("RL.REFUND", "w", 2, "AT", now - 1000) == 2
    assert r.execute_command("RL.WINDOW_PEEK", "w", 5, 60000, "COST", 0)[1] == 3


def test_refund_at_replicates_the_state(replica_pair):
    primary, replica = replica_pair
    p, rep = primary.client(), replica.client()
    now = now_ms()
    p.execute_command("RL.GCRA", "g", 10, 600000, "COST", 10)
    p.execute_command("RL.WINDOW", "w", 10, 600000, "COST", 6)
    p.execute_command("RL.GCRA", "g2", 10, 600000, "COST", 1)
    assert p.execute_command("RL.REFUND", "g", 3, "AT", now - 100000) == 2
    assert p.execute_command("RL.REFUND", "w", 2, "AT", now - 1000) == 2
    assert p.execute_command("RL.REFUND", "g2", 5, "AT", now - 10) == 1  # emptied: deleted
    time.sleep(0.002)
    wait_replicas_synced(primary, [replica])
    assert rep.exists("g2") == 0
    for k in ("g", "w"):
        assert digest_value(rep, k) == digest_value(p, k), k
        assert rep.pexpiretime(k) == p.pexpiretime(k), k


def test_refund_syntax(r):
    r.execute_command("RL.GCRA", "g", 10, 600000)
    for args, msg in ((["g", 1, "AT"], "AT needs a value"), (["g", 1, "AT", 0], "AT must be"),
                      (["g", 1, "AT", -5], "AT must be"), (["g", 1, "FOO", 5], "unknown option"),
                      (["g"], "wrong number")):
        with pytest.raises(Exception, match=msg):
            r.execute_command("RL.REFUND", *args)
    assert r.exists("g") == 1


# ---------------------------------------------------------------- the fine window

def test_one_hour_window_hit_leaves_within_one_second(r):
    t = FUTURE + 123                   # not on a slot edge
    assert r.execute_command("RL.WINDOW", "h", 1, HOUR, "AT", t)[:2] == [1, 0]
    # counts for the whole hour
    assert r.execute_command("RL.WINDOW_PEEK", "h", 1, HOUR, "AT", t + HOUR)[0] == 0
    # gone at most 1 s after (the old slot of HOUR/256 = 14 s kept it 14 s)
    assert r.execute_command("RL.WINDOW_PEEK", "h", 1, HOUR, "AT", t + HOUR + 1000)[:2] == [1, 0]
    got = r.execute_command("RL.WINDOW", "h", 1, HOUR, "AT", t + HOUR)
    assert got[0] == 0 and 0 < got[2] <= 1000, got
    # TrafficJam's day: a hit is gone a second after its day
    assert r.execute_command("RL.WINDOW", "d", 1, 24 * HOUR, "AT", t)[0] == 1
    assert r.execute_command("RL.WINDOW_PEEK", "d", 1, 24 * HOUR, "AT", t + 24 * HOUR)[0] == 0
    assert r.execute_command("RL.WINDOW_PEEK", "d", 1, 24 * HOUR, "AT", t + 24 * HOUR + 1000)[0] == 1


def test_fine_window_survives_reload_aof_and_replica(servers):
    primary = servers.new(appendonly="yes")
    replica = servers.new(replicaof=primary)
    p = primary.client()
    t = FUTURE + 77
    for i in range(50):
        p.execute_command("RL.WINDOW", "h", 100, HOUR, "AT", t + i * 1700)
    p.execute_command("RL.REFUND", "h", 3)
    wait_replicas_synced(primary, [replica])
    d = digest_value(p, "h")
    assert digest_value(replica.client(), "h") == d
    p.execute_command("DEBUG", "RELOAD")
    assert digest_value(p, "h") == d
    p.execute_command("BGREWRITEAOF")
    primary.wait_aof_rewrite_done()
    p.execute_command("DEBUG", "LOADAOF")
    assert digest_value(p, "h") == d
    # the oldest hit, at t, is gone by t + 1 h + 1 s (the reload kept the width)
    got = p.execute_command("RL.WINDOW_PEEK", "h", 100, HOUR, "AT", t + 49 * 1700)
    later = p.execute_command("RL.WINDOW_PEEK", "h", 100, HOUR, "AT", t + HOUR + 1000)
    assert later[1] == got[1] + 1, (got, later)


def test_memory_grows_with_slots_that_hold_hits_and_is_bounded(r):
    t = FUTURE
    r.execute_command("RL.WINDOW", "one", 10 ** 6, HOUR, "AT", t)
    one = r.memory_usage("one")
    p = r.pipeline(transaction=False)
    for i in range(4000):              # a hit every second, over more than the hour
        p.execute_command("RL.WINDOW", "many", 10 ** 6, HOUR, "AT", t + i * 1000)
    p.execute()
    many = r.memory_usage("many")
    assert one <= 160
    # live slots at most window/1 s + 2 = 3602, 8 bytes each
    assert many <= 160 + 8 * 3602, many
    assert many >= 8 * 3000, many

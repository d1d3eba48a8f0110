# SPDX-License-Identifier: BSD-3-Clause
"""A stored WINDOW policy whose window changes keeps working on the keys that
use it (#25 item 7, docs/ratelimit.md, "Changing a stored WINDOW policy's window"):

- the hits still counting are carried into the new window, each at the latest
  time it can have been taken (never earlier), so a key never admits more than
  the new limit within any new window from the change on;
- a peek answers on the carried hits and writes nothing; the first RL.WINDOW
  under the new length moves the key to it, admitted or refused (so hits still
  counting then are not lost later under the old length);
- an admitted call stores the carried state and replicates it whole
  (RL.WINDOW_SET), so the replica and the AOF hold the primary's value;
- explicit numbers of another length are still refused (only a policy, which is
  meant to change, carries the key over)."""

import random

import pytest

from mcap import digest_value
from servers import wait_replicas_synced

Y = 4102444800000  # 2100: times ahead of the clock, so nothing decays meanwhile
ERR_WINDOW = "the key holds a window of another length"


def test_issue_example(r):
    r.execute_command("RL.POLICY_SET", "login", "WINDOW", 2, 60000)
    assert r.execute_command("RL.WINDOW", "pol:w1", "POLICY", "login", "AT", Y)[:2] == [1, 1]
    assert r.execute_command("RL.WINDOW", "pol:w1", "POLICY", "login", "AT", Y + 10)[:2] == [1, 0]
    r.execute_command("RL.POLICY_SET", "login", "WINDOW", 5, 30000)
    # the two hits still count in the new 30 s window: 3 left, then 2 after this one
    assert r.execute_command("RL.WINDOW_PEEK", "pol:w1", "POLICY", "login", "COST", 0, "AT", Y + 20)[:2] == [1, 3]
    assert r.execute_command("RL.WINDOW", "pol:w1", "POLICY", "login", "AT", Y + 20)[:2] == [1, 2]
    # now the key holds a 30 s window: the three hits count 30 s, and leave within a slot (117 ms) more
    assert r.execute_command("RL.WINDOW_PEEK", "pol:w1", 5, 30000, "COST", 0, "AT", Y + 30009)[1] == 2
    assert r.execute_command("RL.WINDOW_PEEK", "pol:w1", 5, 30000, "COST", 0, "AT", Y + 30200)[1] == 5
    with pytest.raises(Exception, match=ERR_WINDOW):
        r.execute_command("RL.WINDOW", "pol:w1", 5, 60000, "AT", Y + 30200)


def test_peek_writes_nothing_and_a_refused_call_converts(r):
    r.execute_command("RL.POLICY_SET", "p", "WINDOW", 3, 60000)
    r.execute_command("RL.WINDOW", "k", "POLICY", "p", "COST", 3, "AT", Y)
    d, exp = digest_value(r, "k"), r.pexpiretime("k")
    r.execute_command("RL.POLICY_SET", "p", "WINDOW", 2, 120000)
    assert r.execute_command("RL.WINDOW_PEEK", "k", "POLICY", "p", "AT", Y + 1000)[:2] == [0, 0]
    assert digest_value(r, "k") == d and r.pexpiretime("k") == exp
    refused = r.execute_command("RL.WINDOW", "k", "POLICY", "p", "AT", Y + 1000)
    assert refused[0] == 0
    # the three carried hits leave 2 min after they were taken (within a slot)
    assert 119000 - 1000 <= refused[2] <= 120000, refused
    # the key now holds the 2 min window: a minute later (the old length) the hits still count
    assert digest_value(r, "k") != d and r.pexpiretime("k") > exp
    assert r.execute_command("RL.WINDOW", "k", "POLICY", "p", "AT", Y + 61000)[0] == 0
    assert r.execute_command("RL.WINDOW", "k", 2, 120000, "COST", 0, "AT", Y + 61000)[1] == 0


def test_shorter_window_drops_hits_older_than_it(r):
    r.execute_command("RL.POLICY_SET", "s", "WINDOW", 4, 600000)
    for i in range(4):
        r.execute_command("RL.WINDOW", "k", "POLICY", "s", "AT", Y + i * 100000)
    assert r.execute_command("RL.WINDOW", "k", "POLICY", "s", "AT", Y + 350000)[0] == 0
    r.execute_command("RL.POLICY_SET", "s", "WINDOW", 4, 150000)
    # at Y+353 s only the hit at Y+300 s is within 150 s (and the slots they were in)
    assert r.execute_command("RL.WINDOW", "k", "POLICY", "s", "AT", Y + 353000)[:2] == [1, 2]


def model_ok(hits, limit, window, t):
    """No window [t - window, t] holds more than `limit` hits (times in ms)."""
    return sum(1 for h in hits if t - window < h <= t) <= limit


@pytest.mark.parametrize("seed", range(6))
def test_never_more_than_the_new_limit_in_any_new_window(r, seed):
    """Random traffic while the policy changes: from each change on, no span of
    the current window admits more than its limit (counting every admitted hit
    since that change and the hits still counting at it)."""
    rnd = random.Random(seed)
    key = "prop%d" % seed
    defs = [(3, 2000), (5, 5000), (2, 1000), (4, 8000), (6, 3000)]
    limit, window = defs[0]
    r.execute_command("RL.POLICY_SET", "q", "WINDOW", limit, window)
    t, admitted = Y, []
    change_at = t
    for step in range(300):
        t += rnd.choice([0, 10, 50, 200, 700])
        if rnd.random() < 0.04:
            # the hits still counting at the change are carried; those already gone are not
            admitted = [h for h in admitted if h > t - window]
            limit, window = rnd.choice(defs)
            r.execute_command("RL.POLICY_SET", "q", "WINDOW", limit, window)
            change_at = t
        cost = rnd.choice([1, 1, 2])
        got = r.execute_command("RL.WINDOW", key, "POLICY", "q", "COST", cost, "AT", t)
        if got[0] == 1:
            admitted += [t] * cost
            # every window ending at a time since the change holds at most the limit
            for end in {t} | {h for h in admitted if h >= change_at}:
                assert model_ok(admitted, limit, window, end), (step, limit, window, end)


def test_replica_and_aof_hold_the_carried_state(servers):
    primary = servers.new(appendonly="yes")
    replica = servers.new(replicaof=primary)
    p = primary.client()
    p.execute_command("RL.POLICY_SET", "login", "WINDOW", 4, 60000)
    for i in range(3):
        p.execute_command("RL.WINDOW", "w", "POLICY", "login", "AT", Y + i * 7000)
    p.execute_command("RL.POLICY_SET", "login", "WINDOW", 6, 30000)
    assert p.execute_command("RL.WINDOW", "w", "POLICY", "login", "AT", Y + 25000)[0] == 1
    p.execute_command("RL.POLICY_SET", "login", "WINDOW", 2, 3600000)
    assert p.execute_command("RL.WINDOW", "w", "POLICY", "login", "AT", Y + 26000)[0] == 0
    p.execute_command("RL.POLICY_SET", "login", "WINDOW", 9, 3600000)
    assert p.execute_command("RL.WINDOW", "w", "POLICY", "login", "AT", Y + 27000)[0] == 1
    wait_replicas_synced(primary, [replica])
    rep = replica.client()
    d = digest_value(p, "w")
    assert digest_value(rep, "w") == d
    assert rep.pexpiretime("w") == p.pexpiretime("w")
    p.execute_command("BGREWRITEAOF")
    primary.wait_aof_rewrite_done()
    p.execute_command("DEBUG", "LOADAOF")
    assert digest_value(p, "w") == d
    # replayed from the AOF without a rewrite too (the commands as replicated)
    primary.stop()
    primary.start()
    assert digest_value(primary.client(), "w") == d

# SPDX-License-Identifier: BSD-3-Clause
"""RL.GCRA / RL.WINDOW with AT in the past: one safe rule.

A caller that sends times lagging the server clock (replaying a queue, or
with its own clock behind) must keep being limited: the key's expiry, counted
in the request's time, is pushed back by the lag, so the state does not vanish
the moment it is written. An AT earlier than the limiter has seen never lets
more through. The expiry used is replicated, so a replica and the AOF agree
with the primary."""

import time

import pytest

from mcap import wait_for
from servers import wait_replicas_synced

HOUR = 3600 * 1000


def now_ms():
    return int(time.time() * 1000)


@pytest.mark.parametrize("cmd", ["RL.GCRA", "RL.WINDOW"])
def test_lagging_caller_stays_limited(r, cmd):
    at = now_ms() - HOUR                       # an hour behind the clock, a period of one minute
    assert r.execute_command(cmd, "k", 1, 60000, "AT", at)[0] == 1
    assert r.exists("k") == 1, "the state must outlive the write"
    assert r.pttl("k") > 50000
    for i in range(5):                         # the same lagging time, and a bit later
        assert r.execute_command(cmd, "k", 1, 60000, "AT", at + i * 1000)[0] == 0
    assert r.execute_command(cmd, "k", 1, 60000, "AT", at + 61000)[0] == 1  # a period (and a slot) later: room


@pytest.mark.parametrize("cmd", ["RL.GCRA", "RL.WINDOW"])
def test_earlier_at_never_admits_more(r, cmd):
    t = now_ms()
    assert r.execute_command(cmd, "e", 2, 10000, "AT", t)[:2] == [1, 1]
    assert r.execute_command(cmd, "e", 2, 10000, "AT", t)[:2] == [1, 0]
    for back in (1, 1000, 9999, HOUR):
        assert r.execute_command(cmd, "e", 2, 10000, "AT", t - back)[0] == 0, back


def test_replica_and_aof_agree_on_the_expiry(replica_pair):
    primary, replica = replica_pair
    p = primary.client()
    p.config_set("appendonly", "yes")
    at = now_ms() - HOUR
    for i in range(20):
        p.execute_command("RL.GCRA", "g%d" % i, 1, 60000, "AT", at + i)
        p.execute_command("RL.WINDOW", "w%d" % i, 1, 60000, "AT", at + i)
    wait_replicas_synced(primary, [replica])
    rep = replica.client()
    assert rep.dbsize() == 40
    for k in ("g3", "w7"):
        assert abs(p.pexpiretime(k) - rep.pexpiretime(k)) == 0, k
        assert p.pexpiretime(k) > now_ms() + 50000
    assert p.execute_command("DEBUG", "DIGEST") == rep.execute_command("DEBUG", "DIGEST")
    primary.wait_aof_rewrite_done()   # in progress or scheduled (behind the replica sync's fork)
    before = p.execute_command("DEBUG", "DIGEST")
    p.execute_command("DEBUG", "LOADAOF")
    assert p.execute_command("DEBUG", "DIGEST") == before

# SPDX-License-Identifier: BSD-3-Clause
"""redis-cell users switch in place (#24 item 9, docs/ratelimit.md, "Switching from redis-cell").

redis-cell (brandur/redis-cell, src/cell/store.rs and src/cell/mod.rs) keeps each
limiter in the user's own key as a plain string: the TAT as a decimal integer of
nanoseconds since the Unix epoch, written with SET (or SETEX, a TTL in whole
seconds when it is above one second). A server that ran it and then loads this
module has such keys; CL.THROTTLE on one adopts it on first use: the call runs
on that TAT and the key becomes an mcap-gcra value with the same TAT (rounded up
to the microsecond), replicated as such (DEL, then RL.GCRA_SET). Any other
string is still WRONGTYPE and is left alone."""

import time

import pytest

from mcap import digest_value
from servers import wait_replicas_synced

SEC_NS = 1_000_000_000


def now_ns():
    return time.time_ns()


def cell_key(r, key, tat_ns, ttl_s=None):
    """What redis-cell's store writes (set_if_not_exists_with_ttl / compare_and_swap_with_ttl)."""
    if ttl_s and ttl_s > 1:
        r.setex(key, ttl_s, str(tat_ns))
    else:
        r.set(key, str(tat_ns))


def test_adopts_the_tat(r):
    # 5 per second (max_burst 4, 1 per 1 s): redis-cell's TAT 5 s ahead = 5 units in use
    tat = now_ns() + 5 * SEC_NS + 123
    cell_key(r, "cell", tat, ttl_s=5)
    got = r.execute_command("CL.THROTTLE", "cell", 4, 1, 1)
    assert got[:3] == [1, 5, 0] and got[3] in (1, 2), got   # limited: retry ~1 s
    assert r.type("cell") == b"mcap-gcra"
    # the same TAT as a GCRA state: the value RL.GCRA_SET makes from it
    r.execute_command("RL.GCRA_SET", "ref", (tat + 999) // 1000, 1_000_000, 5)
    assert digest_value(r, "cell") == digest_value(r, "ref")
    assert r.pexpiretime("cell") == r.pexpiretime("ref")
    # and it goes on as our limiter
    assert r.execute_command("CL.THROTTLE", "cell", 4, 1, 1)[0] == 1


def test_admits_on_the_adopted_tat(r):
    tat = now_ns() + 3 * SEC_NS // 2     # 1.5 of 5 used (half an interval from any edge)
    cell_key(r, "c2", tat)
    got = r.execute_command("CL.THROTTLE", "c2", 4, 1, 1, 2)
    assert got[:3] == [0, 5, 1], got     # 2 more fit, 1 left
    assert r.type("c2") == b"mcap-gcra"
    assert r.execute_command("CL.THROTTLE", "c2", 4, 1, 1)[:3] == [0, 5, 0]
    assert r.execute_command("CL.THROTTLE", "c2", 4, 1, 1)[0] == 1


def test_peek_adopts_too(r):
    tat = now_ns() + 5 * SEC_NS // 2
    cell_key(r, "c3", tat)
    got = r.execute_command("CL.THROTTLE", "c3", 4, 1, 1, 0)
    assert got[:3] == [0, 5, 2], got     # remaining floor((5 s - 2.5 s) / 1 s)
    assert r.type("c3") == b"mcap-gcra"


def test_a_passed_tat_is_a_full_limiter(r):
    cell_key(r, "old", now_ns() - 10 * SEC_NS)
    assert r.execute_command("CL.THROTTLE", "old", 4, 1, 1, 0) == [0, 5, 5, -1, 0]
    assert r.exists("old") == 0          # nothing to keep: as if there were no key
    cell_key(r, "old2", now_ns() - 10 * SEC_NS)
    assert r.execute_command("CL.THROTTLE", "old2", 4, 1, 1) == [0, 5, 4, -1, 1]
    assert r.type("old2") == b"mcap-gcra"


@pytest.mark.parametrize("value", [b"abc", b"-5", b"0", b"0123", b"1.5", b" 123", b"123 ", b"",
                                   b"99999999999999999999", b"9223372036854775808", b"1e18"])
def test_other_strings_stay_wrongtype(r, value):
    r.set("s", value)
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.execute_command("CL.THROTTLE", "s", 4, 1, 1)
    assert r.get("s") == value


def test_other_types_and_commands_stay_wrongtype(r):
    r.rpush("l", "1700000000000000000")
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.execute_command("CL.THROTTLE", "l", 4, 1, 1)
    # only CL.THROTTLE (redis-cell's command) adopts
    cell_key(r, "g", now_ns() + SEC_NS)
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.execute_command("RL.GCRA", "g", 5, 1000)
    assert r.type("g") == b"string"


def test_adoption_replicates_and_persists(servers):
    primary = servers.new(appendonly="yes")
    replica = servers.new(replicaof=primary)
    p = primary.client()
    wait_replicas_synced(primary, [replica])
    base = now_ns()
    for i in range(5):
        cell_key(p, "k%d" % i, base + (i + 1) * 60 * SEC_NS, ttl_s=(i + 1) * 60)
    cell_key(p, "gone", base - SEC_NS)
    for i in range(5):
        p.execute_command("CL.THROTTLE", "k%d" % i, 9, 1, 60, i % 2)
    p.execute_command("CL.THROTTLE", "gone", 9, 1, 60, 0)
    wait_replicas_synced(primary, [replica])
    rep = replica.client()
    assert rep.exists("gone") == 0
    for i in range(5):
        k = "k%d" % i
        assert rep.type(k) == b"mcap-gcra"
        assert digest_value(rep, k) == digest_value(p, k)
        assert rep.pexpiretime(k) == p.pexpiretime(k)
    before = {k: digest_value(p, "k%d" % i) for i, k in enumerate(["k%d" % i for i in range(5)])}
    primary.stop()
    primary.start()
    p = primary.client()
    assert {k: digest_value(p, k) for k in before} == before

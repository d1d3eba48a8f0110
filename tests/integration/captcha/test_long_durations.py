# SPDX-License-Identifier: BSD-3-Clause
"""One rule for over-long durations (issue #24, item 8): ADD_CAPTCHA and ADD_CHALLENGE
both take any JSON integer duration from 1 to 2^63 - 1 seconds (the original module's
u64) and keep one above 4294967295 s as 4294967295 s. A challenge's clamped duration is
what it replies, what it expires by, and what replicas and the AOF get (the internal
MCAPTCHA_CACHE.CHALLENGE_SET carries the clamped duration and the absolute expiry)."""

import pytest

from mcap import (ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, GET_CHALLENGE, cfg, chal, chkey,
                  challenge_reply, error_of, visitor_reply)

MAX_U32 = 4294967295
LONG = [MAX_U32, MAX_U32 + 1, 5_000_000_000, 2 ** 63 - 1]


def expiry_window(r, duration_s):
    """(lo, hi) of the absolute expiry a challenge added now for duration_s may get."""
    t = r.time()
    return t[0] * 1000 + t[1] // 1000 + duration_s * 1000


def add_and_bound(r, name, challenge, difficulty, duration):
    lo = expiry_window(r, min(duration, MAX_U32))
    assert r.execute_command(ADD_CHALLENGE, name, chal(difficulty, duration, challenge)) == b"OK"
    hi = expiry_window(r, min(duration, MAX_U32))
    return lo, hi


@pytest.mark.parametrize("duration", LONG)
def test_challenge_duration_kept_as_u32_max(r, duration):
    lo, hi = add_and_bound(r, "site", "n0nce", 7, duration)
    at = r.execute_command("PEXPIRETIME", chkey("site", "n0nce"))
    assert lo <= at <= hi, (lo, at, hi)
    assert r.execute_command(GET_CHALLENGE, "site", "n0nce") == challenge_reply(7, MAX_U32)


@pytest.mark.parametrize("duration", LONG)
def test_captcha_and_challenge_share_the_rule(r, duration):
    """The same duration given to ADD_CAPTCHA and to ADD_CHALLENGE is kept as the same number."""
    assert r.execute_command(ADD_CAPTCHA, "c", cfg([(0, 5)], duration=duration)) == b"OK"
    assert r.execute_command(ADD_VISITOR, "c") == visitor_reply(MAX_U32, 5)
    assert r.execute_command(ADD_CHALLENGE, "c", chal(5, duration, "x")) == b"OK"
    assert r.execute_command(GET_CHALLENGE, "c", "x") == challenge_reply(5, MAX_U32)


@pytest.mark.parametrize("duration", [0, -1, "30", 1.5, None])
def test_challenge_durations_still_refused(r, duration):
    want = ("invalid challenge: duration must be an integer from 1 to 9223372036854775807 "
            "(seconds; above 4294967295 it is kept as 4294967295)")
    assert error_of(r, ADD_CHALLENGE, "s", chal(5, duration, "x")) == want
    assert r.dbsize() == 0


def test_challenge_duration_beyond_json_integers_refused(r):
    """2^63 is beyond what the JSON parser holds as an integer: refused, nothing written."""
    text = '{"difficulty":5,"duration":%d,"challenge":"x"}' % 2 ** 63
    assert error_of(r, ADD_CHALLENGE, "s", text).startswith("invalid JSON: ")
    assert r.dbsize() == 0


def test_clamped_challenge_replicates(replica_pair, sync):
    primary, replica = replica_pair
    r, rr = primary.client(), replica.client()
    add_and_bound(r, "site", "n0nce", 9, 5_000_000_000)
    sync(primary, replica)
    key = chkey("site", "n0nce")
    assert rr.execute_command("PEXPIRETIME", key) == r.execute_command("PEXPIRETIME", key)
    assert (rr.execute_command("DEBUG", "DIGEST-VALUE", key)
            == r.execute_command("DEBUG", "DIGEST-VALUE", key))
    # The replica holds the clamped duration: promoted, it answers it.
    replica.client().execute_command("REPLICAOF", "NO", "ONE")
    assert rr.execute_command(GET_CHALLENGE, "site", "n0nce") == challenge_reply(9, MAX_U32)


@pytest.mark.parametrize("preamble", [False, True])
def test_clamped_challenge_survives_aof_replay(aof_server, preamble):
    s = aof_server(preamble=preamble)
    r = s.client()
    key = chkey("site", "n0nce")
    lo, hi = add_and_bound(r, "site", "n0nce", 11, 2 ** 63 - 1)
    at = r.execute_command("PEXPIRETIME", key)
    if preamble:
        s.client().execute_command("BGREWRITEAOF")
        s.wait_aof_rewrite_done()
    s.restart(kill=True)
    r = s.client()
    assert r.execute_command("PEXPIRETIME", key) == at
    assert lo <= at <= hi
    assert r.execute_command(GET_CHALLENGE, "site", "n0nce") == challenge_reply(11, MAX_U32)

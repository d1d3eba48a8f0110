# SPDX-License-Identifier: BSD-3-Clause
"""Every bounded integer argument, tried at both ends of the range its error states.

Each case is a command with one argument replaced by X. A value far out of range
draws the argument's range error, "ERR <what> must be an integer from <min> to
<max>"; the test reads min and max from that very text, then sends min and max
(each must be accepted: no range error, no crash, the server still answers) and
min - 1 (when min > 0) and max + 1 (each must draw the same range error, writing
nothing). So the stated range is exactly what is accepted, and the largest values
reach the arithmetic behind each argument (lease ends, periods, costs, windows).

The largest values are sent again, by the tests after the table, to keys that hold
state (LOCK.EXTEND's lease, LOCK.ADD_PERMITS / LOCK.DRAIN_PERMITS's PERMITS, RL.REFUND's
n and AT, RL.MULTI's cost, one alone or in a list): each must do what it says, and one
more must draw the range error and leave the key as it was (its DUMP unchanged).
SPDX-License-Identifier: BSD-3-Clause"""

import itertools
import re

import pytest

from servers import raw_command

RANGE = re.compile(rb"^-ERR (.+) must be an integer from (\d+) to (\d+)\r\n$")
HUGE = "99999999999999999999"
_n = itertools.count()

# (command template: "X" is the argument under test, "K" a fresh key)
CASES = [
    ["LOCK.ACQUIRE", "K", "o", "X"],
    ["LOCK.ACQUIRE", "K", "o", 1000, "PERMITS", "X"],
    ["LOCK.ACQUIRE", "K", "o", 1000, "TAKE", "X"],
    ["LOCK.ACQUIRE", "K", "o", 1000, "LOCKDELAY", "X"],
    ["LOCK.ACQUIRE", "K", "o", 1000, "WAIT", "X"],
    ["LOCK.ACQUIRE", "K", "o", 1000, "ACKS", "X", 1],  # (its timeout's maximum would wait ~35 years)
    ["LOCK.ACQUIRE_ALL", 1, "K", "o", "X"],
    ["LOCK.ACQUIRE_ALL", 1, "K", "o", 1000, "LOCKDELAY", "X"],
    ["LOCK.ACQUIRE_ALL", 1, "K", "o", 1000, "WAIT", "X"],
    ["LOCK.EXTEND", "K", "o", "X"],
    ["LOCK.ADD_PERMITS", "K", -1, "PERMITS", "X"],
    ["LOCK.DRAIN_PERMITS", "K", "PERMITS", "X"],
    ["RL.CONCURRENCY", "K", "h", "X", 2],
    ["RL.CONCURRENCY", "K", "h", 1000, "X"],
    ["RL.GCRA", "K", "X", 1000],
    ["RL.GCRA", "K", 10, "X"],
    ["RL.GCRA", "K", 10, 1000, "BURST", "X"],
    ["RL.GCRA", "K", 10, 1000, "COST", "X"],
    ["RL.GCRA", "K", 10, 1000, "WAIT", "X"],
    ["RL.GCRA", "K", 10, 1000, "AT", "X"],
    ["RL.GCRA_PEEK", "K", "X", 1000],
    ["RL.GCRA_PEEK", "K", 10, "X"],
    ["RL.WINDOW", "K", "X", 1000],
    ["RL.WINDOW", "K", 10, "X"],
    ["RL.WINDOW", "K", 10, 1000, "COST", "X"],
    ["RL.WINDOW", "K", 10, 1000, "WAIT", "X"],
    ["RL.WINDOW", "K", 10, 1000, "AT", "X"],
    ["RL.WINDOW_PEEK", "K", "X", 1000],
    ["RL.WINDOW_PEEK", "K", 10, "X"],
    ["CL.THROTTLE", "K", "X", 10, 60],
    ["CL.THROTTLE", "K", 10, "X", 60],
    ["CL.THROTTLE", "K", 10, 10, "X"],
    ["CL.THROTTLE", "K", 10, 10, 60, "X"],
    ["RL.REFUND", "K", "X"],
    ["RL.REFUND", "K", 1, "AT", "X"],
    ["RL.MULTI", "X", 1, "K", "GCRA", 10, 1000],
    ["RL.MULTI", "X", 1, "K", "WINDOW", 10, 1000],
    ["RL.MULTI", 1, "X", "K", "GCRA", 10, 1000],
    ["RL.MULTI", 1, 1, "K", "GCRA", "X", 1000],
    ["RL.MULTI", 1, 1, "K", "GCRA", 10, "X"],
    ["RL.MULTI", 1, 1, "K", "WINDOW", "X", 1000],
    ["RL.MULTI", 1, 1, "K", "WINDOW", 10, "X"],
    ["RL.POLICY_SET", "K", "GCRA", "X", 1000],
    ["RL.POLICY_SET", "K", "GCRA", 10, "X"],
    ["RL.POLICY_SET", "K", "GCRA", 10, 1000, "BURST", "X"],
    ["RL.POLICY_SET", "K", "WINDOW", "X", 1000],
    ["RL.POLICY_SET", "K", "WINDOW", 10, "X"],
    ["MCAPTCHA_CACHE.COUNT", "K", "X"],
]


def _fill(case, x, key=None):
    key = key or "re%d" % next(_n)
    return [key if a == "K" else x if a == "X" else a for a in case]


def _range_of(server, case):
    rep = raw_command(server, *_fill(case, HUGE))
    m = RANGE.match(rep)
    assert m, "no range error for %r: %r" % (case, rep)
    return rep, int(m.group(2)), int(m.group(3))


@pytest.mark.parametrize("case", CASES, ids=[" ".join(map(str, c)) for c in CASES])
def test_both_ends_of_the_stated_range(server, case):
    r = server.client()
    err, lo, hi = _range_of(server, case)
    for v in [lo, hi]:
        rep = raw_command(server, *_fill(case, v))
        assert not RANGE.match(rep), "%r at %d: %r" % (case, v, rep)
        assert r.ping()
    outside = [hi + 1] + ([lo - 1] if lo > 0 else [])
    for v in outside:
        key = "out%d" % next(_n)
        assert raw_command(server, *_fill(case, v, key)) == err, (case, v)
        assert r.exists(key) == 0 and r.execute_command("RL.POLICY_GET", key) is None, (
            "a refused %r wrote something" % (case,))


# The largest values again, on keys that hold state, so that they reach the arithmetic
# behind them; one more is refused and leaves the key exactly as it was (DUMP unchanged).
MAX_LEASE_MS = 1 << 40     # LOCK_MAX_LEASE_MS (core/lock.h)
MAX_PERMITS = 1024         # LOCK_MAX_PERMITS
MAX_COST = 2**32 - 1       # MAX_COST (ratelimit_glue.h): RL.REFUND's n, RL.MULTI's cost
MAX_AT_MS = 1 << 48        # LB_MAX_TIME_MS (core/bucket.h): RL.REFUND's AT


def _refused_unchanged(server, r, key, args, what, lo, hi):
    before = r.dump(key)
    assert before is not None
    rep = raw_command(server, *args)
    assert rep == b"-ERR %s must be an integer from %d to %d\r\n" % (what.encode(), lo, hi), rep
    assert r.dump(key) == before, "a refused %r changed %s" % (args, key)


def _holders(r, key):
    """LOCK.INSPECT's holders: {owner: (ms left, token, count)}."""
    rep = r.execute_command("LOCK.INSPECT", key)
    return {h[0]: (h[1], h[2], h[3]) for h in rep[3]}


def test_lock_extend_to_the_longest_lease(server, r):
    tok = r.execute_command("LOCK.ACQUIRE", "lx", "o", 1000)[1]
    assert r.execute_command("LOCK.EXTEND", "lx", "o", MAX_LEASE_MS) == MAX_LEASE_MS
    left, token, count = _holders(r, "lx")[b"o"]
    assert MAX_LEASE_MS - 60000 < left <= MAX_LEASE_MS and token == tok and count == 1
    assert r.execute_command("LOCK.ACQUIRE", "lx", "p", 1000)[0] == 0  # still held
    _refused_unchanged(server, r, "lx", ["LOCK.EXTEND", "lx", "o", MAX_LEASE_MS + 1],
                       "lease (milliseconds)", 1, MAX_LEASE_MS)
    assert _holders(r, "lx")[b"o"][1] == tok
    # and back to a short lease: the largest did not stick
    assert r.execute_command("LOCK.EXTEND", "lx", "o", 1000) == 1000
    assert _holders(r, "lx")[b"o"][0] <= 1000


def test_pool_permits_at_the_largest(server, r):
    # a fresh pool of the largest base: created, then sized by the delta
    assert r.execute_command("LOCK.ADD_PERMITS", "pp", -1, "PERMITS", MAX_PERMITS) == MAX_PERMITS - 1
    ins = r.execute_command("LOCK.INSPECT", "pp")
    assert ins[0] == MAX_PERMITS and ins[4] == -1 and ins[5] == MAX_PERMITS - 1
    _refused_unchanged(server, r, "pp", ["LOCK.ADD_PERMITS", "pp", 1, "PERMITS", MAX_PERMITS + 1],
                       "PERMITS", 1, MAX_PERMITS)
    _refused_unchanged(server, r, "pp", ["LOCK.DRAIN_PERMITS", "pp", "PERMITS", MAX_PERMITS + 1],
                       "PERMITS", 1, MAX_PERMITS)
    assert r.execute_command("LOCK.ADD_PERMITS", "pp", 1, "PERMITS", MAX_PERMITS) == MAX_PERMITS
    # a held semaphore of the largest size: one permit taken, the other 1023 drained
    assert r.execute_command("LOCK.ACQUIRE", "ps", "o", 60000, "PERMITS", MAX_PERMITS)[0] == 1
    assert r.execute_command("LOCK.ADD_PERMITS", "ps", 0, "PERMITS", MAX_PERMITS) == MAX_PERMITS
    _refused_unchanged(server, r, "ps", ["LOCK.DRAIN_PERMITS", "ps", "PERMITS", MAX_PERMITS + 1],
                       "PERMITS", 1, MAX_PERMITS)
    assert r.execute_command("LOCK.DRAIN_PERMITS", "ps", "PERMITS", MAX_PERMITS) == MAX_PERMITS - 1
    ins = r.execute_command("LOCK.INSPECT", "ps")
    assert ins[0] == MAX_PERMITS and ins[4] == -(MAX_PERMITS - 1) and ins[5] == 1
    assert r.execute_command("LOCK.AVAILABLE_PERMITS", "ps") == 0
    # drained on a fresh key: all of the largest pool
    assert r.execute_command("LOCK.DRAIN_PERMITS", "pd", "PERMITS", MAX_PERMITS) == MAX_PERMITS
    assert r.execute_command("LOCK.INSPECT", "pd")[5] == 0


@pytest.mark.parametrize("kind", ["GCRA", "WINDOW"])
def test_refund_of_the_largest_n_and_at(server, r, kind):
    take = (["RL.GCRA", "rf", 10, 60000, "COST", 5] if kind == "GCRA"
            else ["RL.WINDOW", "rf", 10, 60000, "COST", 5])
    assert r.execute_command(*take)[:2] == [1, 5]
    _refused_unchanged(server, r, "rf", ["RL.REFUND", "rf", MAX_COST + 1], "n", 1, MAX_COST)
    _refused_unchanged(server, r, "rf", ["RL.REFUND", "rf", 1, "AT", MAX_AT_MS + 1], "AT", 1, MAX_AT_MS)
    # the latest AT is ahead of the clock: it counts as now, one unit comes back
    assert r.execute_command("RL.REFUND", "rf", 1, "AT", MAX_AT_MS) == 1
    peek = "RL.GCRA_PEEK" if kind == "GCRA" else "RL.WINDOW_PEEK"
    assert r.execute_command(peek, "rf", 10, 60000, "COST", 0)[1] == 6
    # the largest n gives back the four left and no more; the key is gone (empty)
    assert r.execute_command("RL.REFUND", "rf", MAX_COST, "AT", MAX_AT_MS) == 4
    assert r.exists("rf") == 0


def test_multi_cost_at_the_largest(server, r):
    # the largest cost fills the largest window limit exactly, and the largest GCRA capacity
    assert r.execute_command("RL.MULTI", MAX_COST, 2, "{m}w", "WINDOW", MAX_COST, 60000,
                             "{m}g", "GCRA", MAX_COST, 60000) == [1, 0, -1, 0]
    assert r.execute_command("RL.WINDOW_PEEK", "{m}w", MAX_COST, 60000, "COST", 0)[:2] == [1, 0]
    assert r.execute_command("RL.WINDOW_PEEK", "{m}w", MAX_COST, 60000)[0] == 0
    # the GCRA limit (T = 1 us, so it refills as the test runs) was emptied: full again
    # only after its whole tolerance, MAX_COST us (~71.6 min), less the time since
    reset = r.execute_command("RL.GCRA_PEEK", "{m}g", MAX_COST, 60000, "COST", 0)[3]
    assert MAX_COST // 1000 - 60000 < reset <= MAX_COST // 1000 + 1, reset
    # above a limit: refused, never possible (-1), nothing taken
    assert r.execute_command("RL.MULTI", MAX_COST, 1, "{m}x", "WINDOW", 10, 60000) == [0, 1, -1, 10]
    assert r.exists("{m}x") == 0
    # one list item at the largest, the other 0: each limit gets its own
    assert r.execute_command("RL.MULTI", "%d,0" % MAX_COST, 2, "{m}a", "WINDOW", MAX_COST, 60000,
                             "{m}b", "WINDOW", 5, 60000)[:2] == [1, 0]
    assert r.execute_command("RL.WINDOW_PEEK", "{m}a", MAX_COST, 60000, "COST", 0)[1] == 0
    assert r.exists("{m}b") == 0
    # one more, alone or in a list, is the range error, and nothing is written
    for cost in [MAX_COST + 1, "1,%d" % (MAX_COST + 1), "%d,1" % (MAX_COST + 1)]:
        assert raw_command(server, "RL.MULTI", cost, 2, "{m}c", "WINDOW", 5, 60000, "{m}d", "GCRA", 5, 60000) == (
            b"-ERR cost must be an integer from 0 to %d\r\n" % MAX_COST), cost
        assert r.exists("{m}c", "{m}d") == 0
    _refused_unchanged(server, r, "{m}a", ["RL.MULTI", MAX_COST + 1, 1, "{m}a", "WINDOW", MAX_COST, 60000],
                       "cost", 0, MAX_COST)

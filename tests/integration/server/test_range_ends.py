# SPDX-License-Identifier: BSD-3-Clause
"""Every bounded integer argument, tried at both ends of the range its error states.

Each case is a command with one argument replaced by X. A value far out of range
draws the argument's range error, "ERR <what> must be an integer from <min> to
<max>"; the test reads min and max from that very text, then sends min and max
(each must be accepted: no range error, no crash, the server still answers) and
min - 1 (when min > 0) and max + 1 (each must draw the same range error, writing
nothing). So the stated range is exactly what is accepted, and the largest values
reach the arithmetic behind each argument (lease ends, periods, costs, windows).
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

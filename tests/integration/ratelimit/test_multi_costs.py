# SPDX-License-Identifier: BSD-3-Clause
"""RL.MULTI with a cost per limit: the cost argument is one integer (taken from
every limit) or one per limit, comma-separated, in the limits' order. All or
none as always; the arguments keep their places, so cluster routing (keys every
4 arguments from the fourth) is unchanged."""

import pytest
import redis

from servers import raw_command

LIMITS = ["{u}:s", "GCRA", 10, 1000, "{u}:m", "WINDOW", 6, 60000]


def _multi(r, cost):
    return r.execute_command("RL.MULTI", cost, 2, *LIMITS)


def _remaining(r):
    return (r.execute_command("RL.GCRA_PEEK", "{u}:s", 10, 1000, "COST", 0)[1],
            r.execute_command("RL.WINDOW_PEEK", "{u}:m", 6, 60000, "COST", 0)[1])


def test_each_limit_takes_its_own_cost(r):
    assert _multi(r, "1,5") == [1, 0, -1, 1]
    assert _remaining(r) == (9, 1)
    # the window has 1 left: a cost of 2 there refuses the whole request, and nothing is taken
    refused = _multi(r, "0,2")
    assert refused[:2] == [0, 2] and refused[2] > 0
    assert _remaining(r) == (9, 1)
    assert _multi(r, "3,1") == [1, 0, -1, 0]
    assert _remaining(r) == (6, 0)
    assert _multi(r, "4,0") == [1, 0, -1, 0]  # a cost of 0 for one limit only checks it
    assert _remaining(r) == (2, 0)


@pytest.mark.parametrize("cost,error", [
    ("1,2,3", "one per limit"), ("1", None), ("1,", "from 0 to 4294967295"), (",1", "from 0 to 4294967295"),
    ("1,,2", "from 0 to 4294967295"), ("1,-2", "from 0 to 4294967295"), ("1, 2", "from 0 to 4294967295"),
    ("1,4294967296", "from 0 to 4294967295"), ("x", "from 0 to 4294967295"), ("01,1", "from 0 to 4294967295"),
    ("1,+1", "from 0 to 4294967295"), ("0,0", None),
])
def test_cost_lists_are_checked_before_anything_is_written(r, cost, error):
    if error is None:
        assert _multi(r, cost)[0] == 1
        return
    with pytest.raises(redis.ResponseError, match=error):
        _multi(r, cost)
    assert r.exists("{u}:s", "{u}:m") == 0


def test_routing_is_unchanged(server):
    """COMMAND GETKEYS still finds the keys at their places with a cost list."""
    assert raw_command(server, "COMMAND", "GETKEYS", "RL.MULTI", "1,2", 2, *LIMITS) == \
        b"*2\r\n$5\r\n{u}:s\r\n$5\r\n{u}:m\r\n"

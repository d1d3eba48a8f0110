# SPDX-License-Identifier: BSD-3-Clause
"""Locks (and semaphores) and concurrency limits share a module type but not
their keys: a key made by one family answers WRONGTYPE to the other's writing
commands and changes nothing (LOCK.INSPECT, read-only, shows either kind). A
semaphore's size is fixed while it is held."""

import pytest
import redis

LOCK_CMDS = [
    ("LOCK.ACQUIRE", "{k}", "o2", 10000),
    ("LOCK.ACQUIRE", "{k}", "o2", 10000, "PERMITS", 2),
    ("LOCK.RELEASE", "{k}", "h"),
    ("LOCK.EXTEND", "{k}", "h", 10000),
]
CC_CMDS = [
    ("RL.CONCURRENCY", "{k}", "h2", 10000, 2),
    ("RL.CONCURRENCY_RELEASE", "{k}", "o"),
]


def _fill(cmd, key):
    return [key if a == "{k}" else a for a in cmd]


@pytest.mark.parametrize("cmd", LOCK_CMDS, ids=lambda c: " ".join(map(str, c[:1] + c[3:4])))
def test_lock_commands_refuse_a_concurrency_key(r, cmd):
    r.delete("fam:cc")
    assert r.execute_command("RL.CONCURRENCY", "fam:cc", "h", 10000, 2)[0] == 1
    before = r.dump("fam:cc")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*_fill(cmd, "fam:cc"))
    assert str(e.value).startswith("WRONGTYPE")
    assert r.dump("fam:cc") == before


@pytest.mark.parametrize("cmd", CC_CMDS, ids=lambda c: c[0])
def test_concurrency_commands_refuse_a_lock_key(r, cmd):
    r.delete("fam:lk")
    assert r.execute_command("LOCK.ACQUIRE", "fam:lk", "o", 10000)[0] == 1
    before = r.dump("fam:lk")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*_fill(cmd, "fam:lk"))
    assert str(e.value).startswith("WRONGTYPE")
    assert r.dump("fam:lk") == before


def test_semaphore_size_is_fixed_while_held(r):
    r.delete("fam:sem")
    assert r.execute_command("LOCK.ACQUIRE", "fam:sem", "a", 10000, "PERMITS", 2)[0] == 1
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LOCK.ACQUIRE", "fam:sem", "b", 10000, "PERMITS", 3)
    assert "PERMITS" in str(e.value) and "(2)" in str(e.value)
    with pytest.raises(redis.ResponseError):
        r.execute_command("LOCK.ACQUIRE", "fam:sem", "b", 10000)  # no PERMITS means 1
    assert r.execute_command("LOCK.INSPECT", "fam:sem")[0] == 2
    assert r.execute_command("LOCK.ACQUIRE", "fam:sem", "b", 10000, "PERMITS", 2)[0] == 1
    # once idle, the next acquire sets the size
    assert r.execute_command("LOCK.RELEASE", "fam:sem", "a") == 0
    assert r.execute_command("LOCK.RELEASE", "fam:sem", "b") == 0
    assert r.execute_command("LOCK.ACQUIRE", "fam:sem", "c", 10000, "PERMITS", 3)[0] == 1
    assert r.execute_command("LOCK.INSPECT", "fam:sem")[0] == 3


def test_inspect_shows_a_concurrency_key(r):
    r.delete("fam:cc2")
    assert r.execute_command("RL.CONCURRENCY", "fam:cc2", "h", 10000, 2)[0] == 1
    v = r.execute_command("LOCK.INSPECT", "fam:cc2")
    assert v[0] == 2 and [h[0] for h in v[3]] == [b"h"]

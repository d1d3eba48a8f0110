# SPDX-License-Identifier: BSD-3-Clause
"""What INFO and MEMORY USAGE say about locks is exact: `grants` counts every
grant (reentries included) and nothing else; a lock's MEMORY USAGE grows with
its holders and their owner names."""

SECTION = "mcaptcha_cache_locks"


def _grants(r):
    return int(r.info(SECTION)["mcaptcha_cache_grants"])


def test_info_grants_counts_each_grant(r):
    before = _grants(r)
    assert r.execute_command("LOCK.ACQUIRE", "acc:a", "o1", 60000)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "acc:a", "o2", 60000)[0] == 0      # refused: not counted
    assert r.execute_command("LOCK.ACQUIRE", "acc:a", "o1", 60000, "REENTRANT")[0] == 1
    assert r.execute_command("RL.CONCURRENCY", "acc:c", "h", 60000, 2)[0] == 1
    assert _grants(r) == before + 3


def test_memory_usage_follows_holders(r):
    assert r.execute_command("LOCK.ACQUIRE", "acc:sem", "a", 60000, "PERMITS", 8)[0] == 1
    one = r.memory_usage("acc:sem")
    owner = "x" * 200
    for i in range(5):
        assert r.execute_command("LOCK.ACQUIRE", "acc:sem", owner + str(i), 60000, "PERMITS", 8)[0] == 1
    six = r.memory_usage("acc:sem")
    assert six >= one + 5 * 200, (one, six)
    for i in range(5):
        assert r.execute_command("LOCK.RELEASE", "acc:sem", owner + str(i)) == 0
    assert r.memory_usage("acc:sem") < six - 5 * 200

# SPDX-License-Identifier: BSD-3-Clause
"""Fencing tokens near the top of their range stay the business of their own key.

A lock whose last token is at or near LOCK_MAX_TOKEN (2^62) -- written by
LOCK.STATE (here through the INTERNAL-COMMANDS load option the fixtures use), or
arriving by replication or an RDB load -- exhausts only itself: every other key,
existing or new, keeps getting ordinary clock-based tokens (within the clock + the
promotion margin + slack), before and after a restart and a replica promotion.
LOCK.STATE refuses a last token above 2^62 with an error that names the range.

Exact wire errors are read with servers.RawConnection."""

import redis

from servers import raw_command, wait_replicas_synced

MAX_TOKEN = 2 ** 62
FENCING_MARGIN_US = 10_000_000
SLACK_US = 5_000_000  # scheduling on 2 shared cores
EXHAUSTED = b"-ERR the lock's fencing tokens are exhausted; delete the key to reset it\r\n"
TOO_BIG = (b"-ERR invalid lock state: last_token must be an integer from 0 to 4611686018427387904 "
           b"(2^62, the largest fencing token)\r\n")


def now_us(c):
    s, us = c.time()
    return s * 1_000_000 + us


def acquire(c, key, owner, lease=60000):
    return c.execute_command("LOCK.ACQUIRE", key, owner, lease)


def assert_ordinary(c, key, owner, t0, margin=2 * FENCING_MARGIN_US):
    """Grant `key` to `owner`; its token must be clock-based: from the clock at t0
    (1 ms of slack: the module's clock has millisecond resolution on Redis 7.0) to
    the clock now + margin + slack (the start or promotion margin, plus what a
    forged token may raise the floor by). Returns the token."""
    g = acquire(c, key, owner)
    assert g[0] == 1, (key, g)
    t1 = now_us(c)
    assert t0 - 1000 <= g[1] <= t1 + margin + SLACK_US, (
        "%s got token %d, the clock reads %d: %.1f s ahead" % (key, g[1], t1, (g[1] - t1) / 1e6))
    return g[1]


def poison(s, c):
    """Key A one below the largest token (one grant left), key Z at the largest."""
    assert c.execute_command("LOCK.STATE", "A", 1, MAX_TOKEN - 1, 0) == b"OK"
    assert c.execute_command("LOCK.STATE", "Z", 1, MAX_TOKEN, 0) == b"OK"
    assert raw_command(s, "LOCK.ACQUIRE", "Z", "o", 1000) == EXHAUSTED


def test_one_key_near_the_top_does_not_exhaust_the_others(servers):
    s = servers.new()
    c = s.client()
    t0 = now_us(c)
    before = assert_ordinary(c, "B", "o1", t0)
    poison(s, c)
    g = acquire(c, "A", "a1")
    assert g[0] == 1 and g[1] == MAX_TOKEN
    assert c.execute_command("LOCK.RELEASE", "A", "a1") == 0
    assert raw_command(s, "LOCK.ACQUIRE", "A", "a2", 1000) == EXHAUSTED
    # every other key: existing, new, a concurrency limit
    assert c.execute_command("LOCK.RELEASE", "B", "o1") == 0
    after = assert_ordinary(c, "B", "o2", t0)
    assert after > before
    assert_ordinary(c, "C", "o", t0)
    assert c.execute_command("RL.CONCURRENCY", "cc", "h", 60000, 2)[0] == 1
    # the exhausted keys answer so for themselves only, and DEL resets them
    assert raw_command(s, "LOCK.ACQUIRE", "A", "a3", 1000) == EXHAUSTED
    assert raw_command(s, "LOCK.ACQUIRE", "Z", "z", 1000) == EXHAUSTED
    assert c.delete("Z") == 1
    assert_ordinary(c, "Z", "z", t0)

    # an RDB load learns the same bounded floor
    assert c.save()
    s.restart()
    c = s.client()
    t0 = now_us(c)
    assert raw_command(s, "LOCK.ACQUIRE", "A", "a4", 1000) == EXHAUSTED
    assert c.execute_command("LOCK.RELEASE", "B", "o2") == 0
    assert assert_ordinary(c, "B", "o3", t0) > after
    assert_ordinary(c, "D", "o", t0)


def test_replicated_token_near_the_top_does_not_exhaust_a_promoted_replica(servers):
    primary = servers.new(name="primary")
    replica = servers.replica_of(primary, name="replica")
    pc, rc = primary.client(), replica.client()
    t0 = now_us(pc)
    poison(primary, pc)
    assert_ordinary(pc, "B", "o", t0)
    wait_replicas_synced(primary, [replica])
    assert rc.execute_command("LOCK.INSPECT", "Z")[1] == MAX_TOKEN
    primary.kill()
    t0 = now_us(rc)
    assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    # after a promotion tokens start beyond the clock + the margin, and no further
    assert_ordinary(rc, "E", "o", t0 + FENCING_MARGIN_US)
    g = acquire(rc, "A", "a")
    assert g[0] == 1 and g[1] == MAX_TOKEN
    assert raw_command(replica, "LOCK.ACQUIRE", "Z", "z", 1000) == EXHAUSTED


def test_lock_state_refuses_a_last_token_above_the_top(servers):
    s = servers.new()
    c = s.client()
    for bad in (MAX_TOKEN + 1, 2 ** 63 - 1, 2 ** 64 - 1):
        assert raw_command(s, "LOCK.STATE", "A", 1, bad, 0) == TOO_BIG, bad
        # with holders too (their tokens are at most the last token)
        assert raw_command(s, "LOCK.STATE", "A", 1, bad, 1, "o", 2 ** 40, 1, bad) == TOO_BIG, bad
    assert c.exists("A") == 0
    assert c.execute_command("LOCK.STATE", "A", 1, MAX_TOKEN, 0) == b"OK"
    assert c.execute_command("LOCK.INSPECT", "A")[1] == MAX_TOKEN
    try:
        acquire(c, "A", "o")
        raise AssertionError("granted after the largest token")
    except redis.ResponseError:
        pass

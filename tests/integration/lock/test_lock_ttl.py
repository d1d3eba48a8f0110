# SPDX-License-Identifier: BSD-3-Clause
"""A user-set TTL on a lock-family key means the same on the primary, its
replica and an AOF replay: lock writes update the value in place (the TTL
stays), and LOCK.STATE, which carries them, keeps the TTL too."""

OPS = [
    ("LOCK.ACQUIRE", "t:lock", "a", 600000),
    ("LOCK.ACQUIRE", "t:sem", "a", 600000, "PERMITS", 3),
    ("RL.CONCURRENCY", "t:cc", "a", 600000, 3),
]
MORE = [
    ("LOCK.EXTEND", "t:lock", "a", 700000),
    ("LOCK.RELEASE", "t:lock", "a"),
    ("LOCK.ACQUIRE", "t:lock", "b", 600000),
    ("LOCK.ACQUIRE", "t:sem", "b", 600000, "PERMITS", 3),
    ("LOCK.RELEASE", "t:sem", "a"),
    ("RL.CONCURRENCY", "t:cc", "b", 600000, 3),
    ("RL.CONCURRENCY_RELEASE", "t:cc", "a"),
]
KEYS = ["t:lock", "t:sem", "t:cc"]


def _ttl_state(c):
    return {k: c.pttl(k) > 0 for k in KEYS}


def test_ttl_agrees_on_replica_and_aof(servers, sync):
    primary = servers.new(name="primary", appendonly=True, appendfsync="always")
    primary.wait_aof_rewrite_done()
    replica = servers.replica_of(primary, name="replica")
    p = primary.client()
    for op in OPS:
        assert p.execute_command(*op)[0] == 1
    for k in KEYS:
        assert p.pexpire(k, 900000)
    for op in MORE:
        p.execute_command(*op)
    sync(primary, replica)
    assert _ttl_state(p) == {k: True for k in KEYS}
    assert _ttl_state(replica.client()) == _ttl_state(p)
    assert replica.client().execute_command("DEBUG", "DIGEST") == p.execute_command("DEBUG", "DIGEST")
    primary.restart()  # replays the AOF
    assert _ttl_state(primary.client()) == {k: True for k in KEYS}

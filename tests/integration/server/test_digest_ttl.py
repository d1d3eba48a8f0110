# SPDX-License-Identifier: BSD-3-Clause
"""Primary, replica and AOF agree after mixed traffic of every family, TTLs
included.

Every write of every family -- captchas and challenges, GCRA and window limits,
CL.THROTTLE, locks, semaphores, concurrency limits -- is mixed with user TTLs
(EXPIRE, PEXPIRE, PERSIST) on the same keys, RENAME_CAPTCHA, DEL, and leases
that end by the module's timer. Then the replica's DEBUG DIGEST (which covers
every value and every key's expiry time) must equal the primary's, and so must
the primary's after a kill -9 and a restart from its AOF (appendfsync always).
Before the fix, lock writes dropped a user TTL on the replica and the AOF, and
RENAME_CAPTCHA dropped it on the primary only.

Times are chosen so nothing expires during the test by itself (TTLs of 1000 s
and more, limits over an hour) except the short leases, whose end is waited
for (the stored value no longer names the owner) before the digests are read.
"""

import random
import time

import pytest

from mcap import ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, DELETE_CAPTCHA, GET_CHALLENGE, RENAME_CAPTCHA, cfg, chal, ckey
from servers import wait_replicas_synced
from soak import scaled

OPS = scaled(1500, 20000)


def _digest(c):
    return c.execute_command("DEBUG", "DIGEST")


def _workload(c, rng):
    """Run the mixed traffic; returns {lock key: owners with short leases}."""
    captchas = ["cap%d" % i for i in range(4)]
    gcra, window = ["g%d" % i for i in range(4)], ["w%d" % i for i in range(4)]
    locks, sems, conc = ["l%d" % i for i in range(3)], ["s%d" % i for i in range(3)], ["c%d" % i for i in range(2)]
    ttl_keys = ([ckey(n) for n in captchas] + gcra + window + locks + sems + conc
                + [b"mcap:CHALLENGE:{%s}:ch%d" % (n.encode(), j) for n in captchas for j in range(8)])
    short = {}
    granted = errors = 0
    pipe = c.pipeline(transaction=False)
    for i in range(OPS):
        x = rng.random()
        if x < 0.12:
            n = rng.choice(captchas)
            pipe.execute_command(ADD_CAPTCHA, n, cfg([(5, 10), (50, 100)], duration=3600))
            pipe.execute_command(ADD_VISITOR, n)
        elif x < 0.18:
            n = rng.choice(captchas)
            ch = "ch%d" % rng.randrange(8)
            pipe.execute_command(ADD_CHALLENGE, n, chal(50, 3600, ch))
            if rng.random() < 0.5:
                pipe.execute_command(GET_CHALLENGE, n, ch)
        elif x < 0.20:
            a, b_ = rng.sample(captchas, 2)
            pipe.execute_command(RENAME_CAPTCHA, a, b_)
        elif x < 0.21:
            pipe.execute_command(DELETE_CAPTCHA, rng.choice(captchas))
        elif x < 0.30:
            pipe.execute_command("RL.GCRA", rng.choice(gcra), 5, 3_600_000, "BURST", 20)
        elif x < 0.34:
            pipe.execute_command("CL.THROTTLE", "t%d" % rng.randrange(3), 20, 5, 3600)
        elif x < 0.42:
            pipe.execute_command("RL.WINDOW", rng.choice(window), 50, 3_600_000)
        elif x < 0.44:
            pipe.execute_command("RL.REFUND", rng.choice(gcra + window), 1)
        elif x < 0.58:
            k = rng.choice(locks + sems)
            permits = 1 if k in locks else 3
            if rng.random() < 0.3:
                owner = "short%d" % i       # unique: its lease ends by the timer
                short.setdefault(k, set()).add(owner)
                pipe.execute_command("LOCK.ACQUIRE", k, owner, rng.choice([20, 40, 60]), "PERMITS", permits)
            else:
                pipe.execute_command("LOCK.ACQUIRE", k, "o%d" % rng.randrange(4), 600_000, "PERMITS", permits)
        elif x < 0.66:
            pipe.execute_command("LOCK.RELEASE", rng.choice(locks + sems), "o%d" % rng.randrange(4))
        elif x < 0.70:
            pipe.execute_command("LOCK.EXTEND", rng.choice(locks + sems), "o%d" % rng.randrange(4), 900_000)
        elif x < 0.76:
            k = rng.choice(conc)
            if rng.random() < 0.5:
                owner = "short%d" % i
                short.setdefault(k, set()).add(owner)
                pipe.execute_command("RL.CONCURRENCY", k, owner, 30, 3)
            else:
                pipe.execute_command("RL.CONCURRENCY", k, "h%d" % rng.randrange(3), 600_000, 3)
        elif x < 0.78:
            pipe.execute_command("RL.CONCURRENCY_RELEASE", rng.choice(conc), "h%d" % rng.randrange(3))
        elif x < 0.88:
            pipe.execute_command("EXPIRE", rng.choice(ttl_keys), rng.randrange(1000, 5000))
        elif x < 0.93:
            pipe.execute_command("PEXPIRE", rng.choice(ttl_keys), rng.randrange(1_000_000, 5_000_000))
        elif x < 0.97:
            pipe.execute_command("PERSIST", rng.choice(ttl_keys))
        else:
            pipe.execute_command("DEL", rng.choice(gcra + window + locks + sems))
        if len(pipe) >= 64:
            for res in pipe.execute(raise_on_error=False):
                if isinstance(res, Exception):
                    errors += 1
                elif isinstance(res, list) and res and res[0] == 1:
                    granted += 1
    for res in pipe.execute(raise_on_error=False):
        errors += isinstance(res, Exception)
    assert granted > OPS // 20, granted
    return short, errors


def _short_leases_ended(c, short):
    """Every short lease was dropped from its stored value by the module's timer
    (its end replicated and in the AOF), or its key is gone."""
    for k, owners in short.items():
        d = c.dump(k)
        if d is not None and any(o.encode() in d for o in owners):
            return False
    return True


@pytest.mark.parametrize("preamble", [True, False])
def test_primary_replica_and_aof_digests_agree(servers, preamble):
    primary = servers.new(name="primary", appendonly=True, appendfsync="always", aof_preamble=preamble)
    primary.wait_aof_rewrite_done()
    replica = servers.replica_of(primary, name="replica")
    c = primary.client()
    rng = random.Random(20251125 + preamble)
    short, errors = _workload(c, rng)
    deadline = time.monotonic() + 20
    while not _short_leases_ended(c, short):
        assert time.monotonic() < deadline, "short leases still stored"
        time.sleep(0.01)  # polling a state: the lease timers run
    keys = c.dbsize()
    with_ttl = sum(1 for k in c.keys("*") if c.pttl(k) > 0)
    assert keys > 10 and with_ttl > 5, (keys, with_ttl)
    wait_replicas_synced(primary, [replica])
    d = _digest(c)
    assert _digest(replica.client()) == d
    primary.restart(kill=True)                 # kill -9, then load the AOF
    assert _digest(primary.client()) == d
    print("keys %d (with TTL %d), error replies %d" % (keys, with_ttl, errors))

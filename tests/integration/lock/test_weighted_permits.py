# SPDX-License-Identifier: BSD-3-Clause
"""Weighted permits: LOCK.ACQUIRE key owner lease-ms PERMITS n TAKE k.

A grant takes k of the semaphore's n permits at once, all or none, with one
owner, lease, fencing token and release. Waiters are served first come first
served by whole requests: a request for k permits at the head of the queue is
not overtaken by smaller ones behind it (so it cannot starve), and those wait
behind it. LOCK.INSPECT FULL shows each holder's weight and the permits
available. The weights replicate and persist (LOCK.STATE ... TAKE i k, encver 3).
"""

import threading
import time

import pytest
import redis

from servers import raw_command, wait_until


def _pairs(flat):
    it = iter(flat)
    return {k.decode(): v for k, v in zip(it, it)}


def _available(r, key):
    return _pairs(r.execute_command("LOCK.INSPECT", key, "FULL"))["available"]


def _waiters(r, key):
    return r.execute_command("LOCK.INSPECT", key)[2]


class Waiter:
    def __init__(self, server, r, key, owner, take):
        self.c = server.client()
        self.reply = None
        n = _waiters(r, key)
        self.t = threading.Thread(target=self._run, args=(key, owner, take), daemon=True)
        self.t.start()
        wait_until(lambda: _waiters(r, key) == n + 1, owner + " queued")

    def _run(self, key, owner, take):
        self.reply = self.c.execute_command("LOCK.ACQUIRE", key, owner, 60000, "PERMITS", 5, "TAKE", take,
                                            "WAIT", 20000)

    def join(self):
        self.t.join(20)
        assert not self.t.is_alive()
        return self.reply


def test_a_grant_takes_k_permits_all_or_none(r):
    a = r.execute_command("LOCK.ACQUIRE", "s", "a", 60000, "PERMITS", 5, "TAKE", 3)
    assert a[0] == 1 and _available(r, "s") == 2
    refused = r.execute_command("LOCK.ACQUIRE", "s", "b", 60000, "PERMITS", 5, "TAKE", 3)
    assert refused[0] == 0 and _available(r, "s") == 2  # nothing partly taken
    assert r.execute_command("LOCK.ACQUIRE", "s", "b", 60000, "PERMITS", 5, "TAKE", 2)[0] == 1
    assert _available(r, "s") == 0
    assert r.execute_command("LOCK.ACQUIRE", "s", "c", 60000, "PERMITS", 5)[0] == 0
    holders = {h["owner"]: h["weight"] for h in
               (_pairs(x) for x in _pairs(r.execute_command("LOCK.INSPECT", "s", "FULL"))["holders"])}
    assert holders == {b"a": 3, b"b": 2}
    assert r.execute_command("LOCK.RELEASE", "s", "a") == 0  # one release gives back all three
    assert _available(r, "s") == 3
    assert r.execute_command("LOCK.ACQUIRE", "s", "d", 60000, "PERMITS", 5, "TAKE", 3)[0] == 1


def test_a_large_request_at_the_head_is_not_overtaken(r, server):
    assert r.execute_command("LOCK.ACQUIRE", "q", "a", 60000, "PERMITS", 5, "TAKE", 4)[0] == 1
    big = Waiter(server, r, "q", "big", 5)
    small = Waiter(server, r, "q", "small", 1)
    # one permit is free, but the small request waits behind the big one, and a newcomer too
    assert r.execute_command("LOCK.ACQUIRE", "q", "new", 60000, "PERMITS", 5)[0] == 0
    assert _waiters(r, "q") == 2 and big.reply is None and small.reply is None
    assert r.execute_command("LOCK.RELEASE", "q", "a") == 0
    assert big.join()[0] == 1
    assert _available(r, "q") == 0 and small.reply is None
    assert r.execute_command("LOCK.RELEASE", "q", "big") == 0
    assert small.join()[0] == 1


def test_a_reentry_cannot_ask_for_more_permits(r):
    assert r.execute_command("LOCK.ACQUIRE", "re", "o", 60000, "PERMITS", 4, "TAKE", 2, "REENTRANT")[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "re", "o", 60000, "PERMITS", 4, "REENTRANT")[0] == 1  # fewer: fine
    with pytest.raises(redis.ResponseError, match="a reentry takes no more permits"):
        r.execute_command("LOCK.ACQUIRE", "re", "o", 60000, "PERMITS", 4, "TAKE", 4, "REENTRANT")
    assert _available(r, "re") == 2
    assert r.execute_command("LOCK.INSPECT", "re")[3][0][3] == 2  # two acquisitions, not three


def test_lock_delays_and_weights_digest_apart(r):
    end = int(time.time() * 1000) + 600000
    assert r.execute_command("LOCK.STATE", "d", 5, 5, 1, "o", end, 1, 5, "DELAY", 0, 3) == b"OK"
    assert r.execute_command("LOCK.STATE", "w", 5, 5, 1, "o", end, 1, 5, "TAKE", 0, 3) == b"OK"
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "d") != r.execute_command("DEBUG", "DIGEST-VALUE", "w")


def test_bad_takes(r):
    with pytest.raises(redis.ResponseError, match="TAKE k must not exceed PERMITS n"):
        r.execute_command("LOCK.ACQUIRE", "b", "o", 1000, "PERMITS", 2, "TAKE", 3)
    with pytest.raises(redis.ResponseError, match="TAKE k must not exceed PERMITS n"):
        r.execute_command("LOCK.ACQUIRE", "b", "o", 1000, "TAKE", 2)
    with pytest.raises(redis.ResponseError, match="TAKE must be an integer from 1 to 1024"):
        r.execute_command("LOCK.ACQUIRE", "b", "o", 1000, "PERMITS", 2, "TAKE", 0)
    with pytest.raises(redis.ResponseError, match="TAKE needs a value"):
        r.execute_command("LOCK.ACQUIRE", "b", "o", 1000, "PERMITS", 2, "TAKE")
    assert not r.exists("b")


def _state(r, key):
    v = _pairs(r.execute_command("LOCK.INSPECT", key, "FULL"))
    return v["permits"], v["available"], sorted((_pairs(h)["owner"], _pairs(h)["weight"]) for h in v["holders"])


def test_weights_replicate_and_persist(replica_pair, sync, servers):
    primary, replica = replica_pair
    p = primary.client()
    assert p.execute_command("LOCK.ACQUIRE", "w", "a", 600000, "PERMITS", 6, "TAKE", 4)[0] == 1
    assert p.execute_command("LOCK.ACQUIRE", "w", "b", 600000, "PERMITS", 6, "TAKE", 2, "LOCKDELAY", 9000)[0] == 1
    sync(primary, replica)
    rr = replica.client()
    assert _state(rr, "w") == _state(p, "w") == (6, 0, [(b"a", 4), (b"b", 2)])
    assert rr.execute_command("DEBUG", "DIGEST-VALUE", "w") == p.execute_command("DEBUG", "DIGEST-VALUE", "w")
    p.execute_command("DEBUG", "RELOAD")
    assert _state(p, "w") == (6, 0, [(b"a", 4), (b"b", 2)])
    s = servers.new(appendonly=True, aof_preamble=False, appendfsync="always")
    s.wait_aof_rewrite_done()
    c = s.client()
    assert c.execute_command("LOCK.ACQUIRE", "w", "a", 600000, "PERMITS", 6, "TAKE", 5)[0] == 1
    c.execute_command("BGREWRITEAOF")
    s.wait_aof_rewrite_done()
    s.restart()
    c = s.client()
    assert _state(c, "w") == (6, 1, [(b"a", 5)])


@pytest.mark.parametrize("args", [
    ("LOCK.STATE", "k", 5, 5, 1, "o", 1, 1, 5, "TAKE", 0, 6),       # above the permits
    ("LOCK.STATE", "k", 5, 5, 1, "o", 1, 1, 5, "TAKE", 0, 1),       # 1 is the default, not written
    ("LOCK.STATE", "k", 5, 5, 1, "o", 1, 1, 5, "TAKE", 1, 2),       # no such holder
    ("LOCK.STATE", "k", 5, 5, 1, "o", 1, 1, 5, "TAKE", 0, 2, "TAKE", 0, 2),
    ("LOCK.STATE", "k", 5, 5, 1, "o", 1, 1, 5, "TAKE", 0, 2, "EPHEMERAL"),
], ids=lambda a: " ".join(map(str, a)))
def test_bad_weighted_states_are_refused(r, server, args):
    digest = r.execute_command("DEBUG", "DIGEST")
    rep = raw_command(server, *args)
    assert rep.startswith(b"-ERR invalid lock state"), rep
    assert r.execute_command("DEBUG", "DIGEST") == digest

# SPDX-License-Identifier: BSD-3-Clause
"""LOCK.INSPECT key FULL: every holder and every waiter, as field/value pairs.

Holders: owner, mode (write/read/permit), state (held/lock-delay), ms_left, token,
count, held_ms (-1 where the grant was not made on this node: a replica),
lock_delay_ms, session. Waiters in queue order: owner, mode, permits, lease_ms,
waited_ms, timeout_ms, client_id (the blocked connection's CLIENT ID).
"""

import threading

import pytest
import redis

from servers import wait_until


def _pairs(flat):
    it = iter(flat)
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in zip(it, it)}


def full(r, key):
    v = r.execute_command("LOCK.INSPECT", key, "FULL")
    if v is None:
        return None
    top = _pairs(v)
    top["holders"] = [_pairs(h) for h in top["holders"]]
    top["waiters"] = [_pairs(w) for w in top["waiters"]]
    return top


class _Queued:
    """LOCK.ACQUIRE ... WAIT 20000 on a connection of its own, queued when built;
    `cid` is that connection's CLIENT ID. stop() has the server close it (CLIENT
    KILL: closing a redis-py connection another thread is reading races) and
    ends the thread."""

    def __init__(self, server, r, key, owner, *opts):
        self.r = r
        self.c = server.client()
        self.cid = self.c.client_id()
        n = r.execute_command("LOCK.INSPECT", key)[2]
        self.t = threading.Thread(target=self._run, args=(key, owner, opts), daemon=True)
        self.t.start()
        wait_until(lambda: r.execute_command("LOCK.INSPECT", key)[2] == n + 1, owner + " queued")

    def _run(self, key, owner, opts):
        try:
            self.c.execute_command("LOCK.ACQUIRE", key, owner, 7000, *opts, "WAIT", 20000)
        except redis.ConnectionError:
            pass  # stop() had it closed

    def stop(self):
        self.r.execute_command("CLIENT", "KILL", "ID", self.cid)
        self.t.join(10)
        assert not self.t.is_alive()


def test_full_view_of_readers_a_lock_delay_and_waiters(r, server):
    assert r.execute_command("LOCK.INSPECT", "none", "FULL") is None
    t1 = r.execute_command("LOCK.ACQUIRE", "k", "r1", 60000, "READ", "LOCKDELAY", 250)[1]
    sess = server.client()
    t2 = sess.execute_command("LOCK.ACQUIRE", "k", "r2", 60000, "READ", "SESSION")[1]
    w = _Queued(server, r, "k", "w", "WRITE")
    r3 = _Queued(server, r, "k", "r3", "READ")
    v = full(r, "k")
    assert (v["permits"], v["last_token"], v["kind"]) == (1, t2, b"lock")
    hs = sorted(v["holders"], key=lambda h: h["token"])
    assert [(h["owner"], h["mode"], h["state"], h["token"], h["count"], h["lock_delay_ms"], h["session"])
            for h in hs] == [(b"r1", b"read", b"held", t1, 1, 250, 0), (b"r2", b"read", b"held", t2, 1, 0, 1)]
    assert all(0 < h["ms_left"] <= 60000 and 0 <= h["held_ms"] < 60000 for h in hs)
    ws = v["waiters"]
    assert [(w["owner"], w["mode"], w["permits"], w["lease_ms"], w["client_id"]) for w in ws] == \
        [(b"w", b"write", 1, 7000, w.cid), (b"r3", b"read", 1, 7000, r3.cid)]
    assert ws[0]["waited_ms"] >= ws[1]["waited_ms"] >= 0
    assert all(0 < w["timeout_ms"] <= 20000 for w in ws)
    # r1's lease ends into its lock-delay
    assert r.execute_command("LOCK.EXTEND", "k", "r1", 1) == 1
    wait_until(lambda: any(h["state"] == b"lock-delay" for h in full(r, "k")["holders"]), "r1's lock-delay")
    d = [h for h in full(r, "k")["holders"] if h["owner"] == b"r1"][0]
    assert (d["count"], d["held_ms"]) == (0, -1) and 0 < d["ms_left"] <= 250
    sess.connection_pool.disconnect()
    for q in (w, r3):
        q.stop()


def test_full_view_of_a_semaphore_and_a_concurrency_limit(r, server):
    assert r.execute_command("LOCK.ACQUIRE", "sem", "a", 60000, "PERMITS", 2)[0] == 1
    v = full(r, "sem")
    assert (v["kind"], v["permits"], [h["mode"] for h in v["holders"]], v["waiters"]) == \
        (b"semaphore", 2, [b"permit"], [])
    assert r.execute_command("RL.CONCURRENCY", "cc", "h", 60000, 3)[0] == 1
    v = full(r, "cc")
    assert (v["kind"], v["permits"], [h["owner"] for h in v["holders"]]) == (b"concurrency", 3, [b"h"])


def test_full_view_on_a_replica(replica_pair, sync):
    primary, replica = replica_pair
    p = primary.client()
    assert p.execute_command("LOCK.ACQUIRE", "k", "o", 60000)[0] == 1
    sync(primary, replica)
    hp, hr = full(p, "k")["holders"][0], full(replica.client(), "k")["holders"][0]
    assert hp["held_ms"] >= 0 and hr["held_ms"] == -1  # granted on the primary, not here
    assert (hr["owner"], hr["token"], hr["mode"]) == (hp["owner"], hp["token"], hp["mode"])


def test_bad_inspect_arguments(r):
    with pytest.raises(redis.ResponseError, match="unknown option 'FOO' for LOCK.INSPECT; expected FULL"):
        r.execute_command("LOCK.INSPECT", "k", "FOO")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        r.execute_command("LOCK.INSPECT", "k", "FULL", "x")
    r.set("s", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command("LOCK.INSPECT", "s", "FULL")

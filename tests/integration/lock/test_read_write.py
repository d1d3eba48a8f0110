# SPDX-License-Identifier: BSD-3-Clause
"""Read-write locks: LOCK.ACQUIRE ... READ (shared) and WRITE (exclusive, the default).

Many readers hold at once, a writer holds alone; every grant gets its own fencing
token. Waiters are served first come first served, and nobody passes the queue:
readers that arrive after a waiting writer wait behind it (writer preference
without starving anyone), and when a writer releases, every reader at the head
of the queue is served at once. Reentrancy: a read inside a write re-enters the
write hold; a write inside a read is refused with an error. The state replicates
and persists (LOCK.STATE ... SHARED i, mcap-lock encver 3).
"""

import threading

import pytest
import redis

from servers import raw_command, wait_until


def _holders(r, key):
    v = r.execute_command("LOCK.INSPECT", key)
    return [] if v is None else sorted(h[0] for h in v[3])


def _waiters(r, key):
    v = r.execute_command("LOCK.INSPECT", key)
    return 0 if v is None else v[2]


class Waiter:
    """A LOCK.ACQUIRE ... WAIT on a connection of its own, queued before the next one starts."""

    def __init__(self, server, r, key, owner, mode):
        self.c = server.client()
        self.reply = None
        before = _waiters(r, key)
        self.t = threading.Thread(target=self._run, args=(key, owner, mode))
        self.t.start()
        wait_until(lambda: _waiters(r, key) == before + 1, "%s queued" % owner)

    def _run(self, key, owner, mode):
        self.reply = self.c.execute_command("LOCK.ACQUIRE", key, owner, 60000, mode, "WAIT", 20000)

    def done(self):
        return not self.t.is_alive()

    def join(self):
        self.t.join(20)
        assert self.done()
        return self.reply


def test_readers_share_and_a_writer_excludes(r):
    t1 = r.execute_command("LOCK.ACQUIRE", "rw", "r1", 60000, "READ")
    t2 = r.execute_command("LOCK.ACQUIRE", "rw", "r2", 60000, "READ")
    assert t1[0] == 1 and t2[0] == 1 and t2[1] > t1[1]
    refused = r.execute_command("LOCK.ACQUIRE", "rw", "w", 60000, "WRITE")
    assert refused[0] == 0 and 0 < refused[2] <= 60000
    assert r.execute_command("LOCK.ACQUIRE", "rw", "w", 60000)[0] == 0  # WRITE is the default
    assert r.execute_command("LOCK.RELEASE", "rw", "r1") == 0
    assert r.execute_command("LOCK.ACQUIRE", "rw", "w", 60000)[0] == 0
    assert r.execute_command("LOCK.RELEASE", "rw", "r2") == 0
    w = r.execute_command("LOCK.ACQUIRE", "rw", "w", 60000, "WRITE")
    assert w[0] == 1 and w[1] > t2[1]
    assert r.execute_command("LOCK.ACQUIRE", "rw", "r3", 60000, "READ")[0] == 0
    assert r.execute_command("LOCK.INSPECT", "rw")[0] == 1


def test_reentrancy_read_inside_write_and_no_write_inside_read(r):
    w = r.execute_command("LOCK.ACQUIRE", "re", "o", 60000, "WRITE", "REENTRANT")
    inner = r.execute_command("LOCK.ACQUIRE", "re", "o", 60000, "READ", "REENTRANT")
    assert inner[:2] == w[:2]  # the same hold, counted twice
    assert r.execute_command("LOCK.INSPECT", "re")[3][0][3] == 2
    assert r.execute_command("LOCK.ACQUIRE", "re", "x", 60000, "READ")[0] == 0  # still a write hold
    assert r.execute_command("LOCK.RELEASE", "re", "o") == 1
    assert r.execute_command("LOCK.RELEASE", "re", "o") == 0
    rd = r.execute_command("LOCK.ACQUIRE", "re", "o", 60000, "READ", "REENTRANT")
    assert rd[0] == 1
    with pytest.raises(redis.ResponseError, match="holds this lock for READ"):
        r.execute_command("LOCK.ACQUIRE", "re", "o", 60000, "WRITE", "REENTRANT")
    # without REENTRANT a second acquire by the owner is refused, as for any lock
    assert r.execute_command("LOCK.ACQUIRE", "re", "o", 60000, "WRITE")[0] == 0
    assert r.execute_command("LOCK.INSPECT", "re")[3] == [[b"o", pytest.approx(60000, abs=5000), rd[1], 1]]


def test_writer_preference_and_readers_served_together(r, server):
    assert r.execute_command("LOCK.ACQUIRE", "q", "w0", 60000, "WRITE")[0] == 1
    r1 = Waiter(server, r, "q", "r1", "READ")
    r2 = Waiter(server, r, "q", "r2", "READ")
    w1 = Waiter(server, r, "q", "w1", "WRITE")
    r3 = Waiter(server, r, "q", "r3", "READ")
    # a newcomer reader does not pass the waiting writer
    assert r.execute_command("LOCK.ACQUIRE", "q", "late", 60000, "READ")[0] == 0
    assert r.execute_command("LOCK.RELEASE", "q", "w0") == 0
    # both readers at the head are served at once; the writer and the reader behind it wait
    assert r1.join()[0] == 1 and r2.join()[0] == 1
    assert _holders(r, "q") == [b"r1", b"r2"]
    assert _waiters(r, "q") == 2 and not w1.done() and not r3.done()
    assert r.execute_command("LOCK.RELEASE", "q", "r1") == 0
    assert not w1.done()
    assert r.execute_command("LOCK.RELEASE", "q", "r2") == 0
    got = w1.join()
    assert got[0] == 1 and got[1] > max(r1.reply[1], r2.reply[1])
    assert _holders(r, "q") == [b"w1"] and not r3.done()
    assert r.execute_command("LOCK.RELEASE", "q", "w1") == 0
    assert r3.join()[0] == 1 and r3.reply[1] > got[1]


def test_read_and_permits_do_not_mix(r):
    with pytest.raises(redis.ResponseError, match="not with PERMITS n > 1"):
        r.execute_command("LOCK.ACQUIRE", "m", "o", 1000, "PERMITS", 3, "READ")
    assert not r.exists("m")
    assert r.execute_command("LOCK.ACQUIRE", "m", "o", 1000, "PERMITS", 1, "READ")[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "sem", "o", 60000, "PERMITS", 3)[0] == 1
    with pytest.raises(redis.ResponseError, match="PERMITS differs"):
        r.execute_command("LOCK.ACQUIRE", "sem", "p", 60000, "READ")


def _state(r, key):
    v = r.execute_command("LOCK.INSPECT", key)
    return v[0], v[1], sorted((h[0], h[2], h[3]) for h in v[3])


def test_readers_replicate_persist_and_stay_readers(replica_pair, sync, servers):
    primary, replica = replica_pair
    p = primary.client()
    for o in ("a", "b", "c"):
        assert p.execute_command("LOCK.ACQUIRE", "rd", o, 600000, "READ")[0] == 1
    sync(primary, replica)
    rr = replica.client()
    assert _state(rr, "rd") == _state(p, "rd")
    assert rr.execute_command("DEBUG", "DIGEST-VALUE", "rd") == p.execute_command("DEBUG", "DIGEST-VALUE", "rd")
    p.execute_command("DEBUG", "RELOAD")
    assert p.execute_command("LOCK.ACQUIRE", "rd", "d", 600000, "READ")[0] == 1  # still readers
    assert p.execute_command("LOCK.ACQUIRE", "rd", "w", 600000, "WRITE")[0] == 0
    sync(primary, replica)
    rr.execute_command("REPLICAOF", "NO", "ONE")
    assert rr.execute_command("LOCK.ACQUIRE", "rd", "e", 600000, "READ")[0] == 1  # promoted: readers too
    assert rr.execute_command("LOCK.ACQUIRE", "rd", "w", 600000, "WRITE")[0] == 0
    # the AOF rewrite form (LOCK.STATE ... SHARED i) replays to the same readers
    s = servers.new(appendonly=True, aof_preamble=False, appendfsync="always")
    s.wait_aof_rewrite_done()
    c = s.client()
    for o in ("a", "b"):
        assert c.execute_command("LOCK.ACQUIRE", "rd", o, 600000, "READ")[0] == 1
    c.execute_command("BGREWRITEAOF")
    s.wait_aof_rewrite_done()
    before = (_state(c, "rd"), c.execute_command("DEBUG", "DIGEST-VALUE", "rd"))
    s.restart()
    c = s.client()
    assert (_state(c, "rd"), c.execute_command("DEBUG", "DIGEST-VALUE", "rd")) == before
    assert c.execute_command("LOCK.ACQUIRE", "rd", "z", 600000, "READ")[0] == 1


@pytest.mark.parametrize("args", [
    ("LOCK.STATE", "k", 1, 5, 0, "SHARED", 0),                           # no such holder
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 1, 5, "SHARED"),                # no index
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 1, 5, "SHARED", 0, "SHARED", 0),
    ("LOCK.STATE", "k", 2, 5, 1, "o", 1, 1, 5, "SHARED", 0),             # a semaphore
    ("LOCK.STATE", "k", 1, 5, 2, "o", 1, 1, 4, "p", 1, 1, 5, "SHARED", 0),  # a reader beside a writer
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 1, 5, "SHARED", 0, "EPHEMERAL"),
], ids=lambda a: " ".join(map(str, a)))
def test_bad_shared_states_are_refused(r, server, args):
    digest = r.execute_command("DEBUG", "DIGEST")
    rep = raw_command(server, *args)
    assert rep.startswith(b"-ERR invalid lock state"), rep
    assert r.execute_command("DEBUG", "DIGEST") == digest


def test_a_new_reader_does_not_pass_a_writer_waiting_behind_readers(r, server):
    """Readers hold, a writer waits behind them: a new reader is refused (without WAIT)
    or queued behind the writer (with WAIT), though it could share with the holders."""
    assert r.execute_command("LOCK.ACQUIRE", "wq", "r1", 60000, "READ")[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "wq", "r2", 60000, "READ")[0] == 1
    w = Waiter(server, r, "wq", "w", "WRITE")
    refused = r.execute_command("LOCK.ACQUIRE", "wq", "late", 60000, "READ")
    assert refused[0] == 0
    assert _holders(r, "wq") == [b"r1", b"r2"]
    late = Waiter(server, r, "wq", "late2", "READ")
    assert r.execute_command("LOCK.RELEASE", "wq", "r1") == 0
    assert not w.done() and not late.done()
    assert r.execute_command("LOCK.RELEASE", "wq", "r2") == 0
    assert w.join()[0] == 1
    assert _holders(r, "wq") == [b"w"] and not late.done()
    assert r.execute_command("LOCK.RELEASE", "wq", "w") == 0
    assert late.join()[0] == 1 and late.reply[1] > w.reply[1]

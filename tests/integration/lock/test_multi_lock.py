# SPDX-License-Identifier: BSD-3-Clause
"""Multi-key locks: LOCK.ACQUIRE_ALL, LOCK.RELEASE_ALL, LOCK.EXTEND_ALL (src/lock/multi.c).

Several exclusive locks of one hash slot are granted all or none, with one
fencing token valid on every key (the largest any key would issue alone), and
released together. Bad input (CROSSSLOT, a duplicate key, WRONGTYPE on any key,
an unsupported option) writes nothing. WAIT queues one waiter in every key's
queue (server/waitq.c's waitq_block_all): it is served when it heads all of its
queues and every key is free, so it never holds part of its set, two waiters
with crossed key orders cannot deadlock, and a deadline, CLIENT UNBLOCK or a
disconnect takes it out of every queue once (the waiters behind it are served).
Nothing here sleeps for time: tests wait for the state they expect.
"""

import glob
import os
import threading

import pytest
import redis

from cluster import Cluster, _module_path, key_slot, names_in_slots
from mcap import digest_value
from servers import RawConnection, raw_command, resp_encode, wait_replicas_synced, wait_until

ALL = "LOCK.ACQUIRE_ALL"
REL_ALL = "LOCK.RELEASE_ALL"
EXT_ALL = "LOCK.EXTEND_ALL"
A, B, C = "{t}a", "{t}b", "{t}c"


def acquire_all(c, keys, owner, lease, *opts):
    return c.execute_command(ALL, len(keys), *keys, owner, lease, *opts)


def release_all(c, keys, owner):
    return c.execute_command(REL_ALL, len(keys), *keys, owner)


def holder(c, key):
    """(owner, token) of the lock's one live holder, or None."""
    v = c.execute_command("LOCK.INSPECT", key)
    if v is None or not v[3]:
        return None
    (h,) = v[3]
    return (h[0].decode() if isinstance(h[0], bytes) else h[0], h[2])


def waiters(c, key):
    v = c.execute_command("LOCK.INSPECT", key)
    return 0 if v is None else v[2]


def touch(c, *keys):
    """Create the keys as free locks: LOCK.INSPECT (the waiter count) needs a key."""
    for k in keys:
        assert c.execute_command("LOCK.ACQUIRE", k, "touch", 1000)[0] == 1
        assert c.execute_command("LOCK.RELEASE", k, "touch") == 0


class Waiter:
    """A blocking command on a connection of its own (a thread), started once
    every key in `queued_on` shows one more waiter."""

    def __init__(self, server, r, args, queued_on):
        self.c = server.client(socket_timeout=30)
        self.id = self.c.client_id()
        self.reply = None
        before = {k: waiters(r, k) for k in queued_on}
        self.t = threading.Thread(target=self._run, args=(args,), daemon=True)
        self.t.start()
        for k in queued_on:
            wait_until(lambda k=k: waiters(r, k) == before[k] + 1, "waiter %s queued on %s" % (args, k))

    def _run(self, args):
        try:
            self.reply = self.c.execute_command(*args)
        except redis.ResponseError as e:
            self.reply = e

    def done(self):
        return not self.t.is_alive()

    def join(self):
        self.t.join(20)
        assert self.done(), "the waiter was not answered"
        return self.reply


def wait_all(server, r, keys, owner, lease=60000, wait=20000, queued_on=None):
    return Waiter(server, r, (ALL, len(keys), *keys, owner, lease, "WAIT", wait),
                  keys if queued_on is None else queued_on)


def wait_one(server, r, key, owner, lease=60000, wait=20000):
    return Waiter(server, r, ("LOCK.ACQUIRE", key, owner, lease, "WAIT", wait), [key])


# ------------------------------------------------------------ immediate form
def test_refusal_answers_when_the_last_taken_key_is_free(r):
    """Keys taken with leases of 2 s and 60 s: the refusal's ms is the longer one (when
    every key could be free), not the first key's nor the shortest."""
    assert r.execute_command("LOCK.ACQUIRE", A, "x", 2000)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", B, "y", 60000)[0] == 1
    for keys in ([A, B, C], [B, A, C], [C, A, B]):
        refused = acquire_all(r, keys, "bob", 30000)
        assert refused[0] == 0 and refused[1] == -1
        assert 50000 < refused[2] <= 60000, (keys, refused)


def test_all_or_none_with_one_token(r):
    g = acquire_all(r, [A, B, C], "alice", 30000)
    assert g[0] == 1 and g[2] == 30000
    assert holder(r, A) == holder(r, B) == holder(r, C) == ("alice", g[1])
    # anyone else: refused, with the ms until the keys could all be free
    refused = acquire_all(r, [C, "{t}d"], "bob", 30000)
    assert refused[0] == 0 and refused[1] == -1 and 0 < refused[2] <= 30000
    assert r.exists("{t}d") == 0, "a refused ACQUIRE_ALL wrote a key"
    # a single LOCK.ACQUIRE sees an ordinary lock
    assert r.execute_command("LOCK.ACQUIRE", B, "bob", 1000)[0] == 0
    assert release_all(r, [A, B, C], "alice") == [0, 0, 0]
    assert holder(r, A) is None and holder(r, B) is None and holder(r, C) is None


def test_partly_taken_grants_nothing(r):
    assert r.execute_command("LOCK.ACQUIRE", B, "carol", 30000)[0] == 1
    refused = acquire_all(r, [A, B], "alice", 30000)
    assert refused[0] == 0 and 29000 < refused[2] <= 30000
    assert r.exists(A) == 0
    assert r.execute_command("LOCK.RELEASE", B, "carol") == 0
    assert acquire_all(r, [A, B], "alice", 30000)[0] == 1


def test_the_token_is_the_largest_and_keeps_growing(r):
    # {t}b has issued a much larger token than the clock floor: both keys get one above it
    far = int(r.execute_command("LOCK.ACQUIRE", A, "x", 1000)[1]) + 10 ** 9
    r.execute_command("LOCK.STATE", B, 1, far, 0)
    assert r.execute_command("LOCK.RELEASE", A, "x") == 0
    g = acquire_all(r, [A, B], "alice", 30000)
    assert g[0] == 1 and g[1] == far + 1
    assert holder(r, A)[1] == holder(r, B)[1] == far + 1
    assert release_all(r, [A, B], "alice") == [0, 0]
    single = r.execute_command("LOCK.ACQUIRE", A, "bob", 30000)
    assert single[1] > far + 1
    assert r.execute_command("LOCK.RELEASE", A, "bob") == 0
    g2 = acquire_all(r, [B, A], "carol", 30000)
    assert g2[1] > single[1]


def test_exhausted_tokens_write_nothing(r):
    # the last token there is: granted on every key, as LOCK.ACQUIRE would
    r.execute_command("LOCK.STATE", B, 1, 2 ** 62 - 1, 0)
    assert acquire_all(r, [A, B], "alice", 1000)[1] == 2 ** 62
    assert release_all(r, [A, B], "alice") == [0, 0]
    r.delete(A)
    with pytest.raises(redis.ResponseError, match="exhausted"):
        r.execute_command("LOCK.ACQUIRE", B, "x", 1000)
    with pytest.raises(redis.ResponseError, match="exhausted"):
        acquire_all(r, [A, B], "alice", 1000)
    assert r.exists(A) == 0 and holder(r, B) is None


def test_crossslot_duplicates_and_options_write_nothing(r):
    with pytest.raises(redis.ResponseError, match="CROSSSLOT"):
        acquire_all(r, ["a", "b"], "alice", 1000)
    with pytest.raises(redis.ResponseError, match="CROSSSLOT"):
        release_all(r, ["a", "b"], "alice")
    with pytest.raises(redis.ResponseError, match="twice"):
        acquire_all(r, [A, A], "alice", 1000)
    for opt in (["PERMITS", 2], ["TAKE", 1], ["READ"], ["REENTRANT"], ["ACKS", 1, 100]):
        with pytest.raises(redis.ResponseError, match="one permit"):
            acquire_all(r, [A, B], "alice", 1000, *opt)
    with pytest.raises(redis.ResponseError, match="numkeys"):
        r.execute_command(ALL, 0, A, "alice", 1000)
    with pytest.raises(redis.ResponseError, match="numkeys"):
        r.execute_command(ALL, 17, *["{t}%d" % i for i in range(17)], "alice", 1000)
    with pytest.raises(redis.ResponseError, match="wrong number"):
        r.execute_command(ALL, 3, A, B, "alice")
    with pytest.raises(redis.ResponseError, match="owner"):
        acquire_all(r, [A, B], "", 1000)
    with pytest.raises(redis.ResponseError, match="lease"):
        acquire_all(r, [A, B], "alice", 0)
    assert r.exists("a", "b", A, B) == 0


def test_wrongtype_on_any_key_writes_nothing(r):
    r.set("{t}s", "x")
    r.execute_command("RL.CONCURRENCY", "{t}cc", "h", 60000, 2)
    for bad in ("{t}s", "{t}cc"):
        for cmd in (lambda k: acquire_all(r, [A, k, B], "alice", 1000),
                    lambda k: release_all(r, [A, k], "alice"),
                    lambda k: r.execute_command(EXT_ALL, 2, A, k, "alice", 1000)):
            with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
                cmd(bad)
    assert r.exists(A, B) == 0
    assert r.get("{t}s") == b"x"


def test_held_semaphore_is_refused(r):
    assert r.execute_command("LOCK.ACQUIRE", B, "s", 30000, "PERMITS", 3)[0] == 1
    with pytest.raises(redis.ResponseError, match="semaphore of 3 permits"):
        acquire_all(r, [A, B], "alice", 1000)
    assert r.exists(A) == 0


@pytest.mark.parametrize("change", [("LOCK.DRAIN_PERMITS", B, "PERMITS", 1), ("LOCK.ADD_PERMITS", B, 2, "PERMITS", 1)],
                         ids=["drained", "added"])
def test_semaphore_pool_is_refused(r, change):
    # A key whose pool size was changed is no lock of one permit, held or not: a drained
    # one (size 0) must not answer a grant that holds nothing, an enlarged one (size 3)
    # must not be taken as exclusive. Refused for good, nothing written on any key.
    r.execute_command(*change)
    before = r.execute_command("DEBUG", "DIGEST-VALUE", B)
    with pytest.raises(redis.ResponseError, match="semaphore pool of size"):
        acquire_all(r, [A, B], "alice", 1000)
    with pytest.raises(redis.ResponseError, match="semaphore pool of size"):
        acquire_all(r, [A, B], "alice", 1000, "WAIT", 5000)
    assert r.exists(A) == 0
    assert r.execute_command("DEBUG", "DIGEST-VALUE", B) == before
    assert holder(r, B) is None


def test_release_reports_what_was_not_held(r):
    assert acquire_all(r, [A, B], "alice", 30000)[0] == 1
    assert r.execute_command("LOCK.RELEASE", A, "alice") == 0
    assert release_all(r, [A, B, C], "alice") == [-1, 0, -1]
    assert holder(r, B) is None
    # another owner's hold stays
    assert acquire_all(r, [A, B], "bob", 30000)[0] == 1
    assert release_all(r, [A, B], "alice") == [-1, -1]
    assert holder(r, A)[0] == "bob"


def test_extend_all_or_none(r):
    assert acquire_all(r, [A, B], "alice", 1000)[0] == 1
    assert r.execute_command(EXT_ALL, 2, A, B, "alice", 50000) == 50000
    assert r.execute_command("LOCK.INSPECT", A)[3][0][1] > 40000
    assert r.execute_command("LOCK.RELEASE", B, "alice") == 0
    with pytest.raises(redis.ResponseError, match="not all held"):
        r.execute_command(EXT_ALL, 2, A, B, "alice", 90000)
    assert r.execute_command("LOCK.INSPECT", A)[3][0][1] <= 50000


def test_owner_holding_a_key_is_refused_at_once(server, r):
    assert r.execute_command("LOCK.ACQUIRE", B, "alice", 30000)[0] == 1
    # WAIT would wait for itself: answered at once
    assert acquire_all(r, [A, B], "alice", 1000, "WAIT", 20000)[0] == 0
    assert waiters(r, A) == 0 and r.exists(A) == 0


def test_getkeys(server):
    r = server.client(raw=True)
    assert r.execute_command("COMMAND", "GETKEYS", ALL, 2, A, B, "o", 100, "WAIT", 5) == [A.encode(), B.encode()]
    assert r.execute_command("COMMAND", "GETKEYS", REL_ALL, 3, A, B, C, "o") == [x.encode() for x in (A, B, C)]
    assert r.execute_command("COMMAND", "GETKEYS", EXT_ALL, 1, A, "o", 100) == [A.encode()]


# ------------------------------------------------------------------- waiting
def test_granted_when_the_last_key_frees(server, r):
    touch(r, A, B, C)
    assert r.execute_command("LOCK.ACQUIRE", A, "x", 60000)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", B, "y", 60000)[0] == 1
    w = wait_all(server, r, [A, B], "m")
    info = server.info("mcaptcha_cache_locks")
    assert int(info["mcaptcha_cache_max_queue_length"]) == 1 and int(info["mcaptcha_cache_waiters"]) == 1
    full = r.execute_command("LOCK.INSPECT", B, "FULL")
    (entry,) = full[full.index(b"waiters") + 1]
    assert entry[entry.index(b"mode") + 1] == b"multi"
    assert r.execute_command("LOCK.RELEASE", A, "x") == 0
    # A is free, but the waiter holds none of its keys until B frees too
    assert holder(r, A) is None and not w.done()
    assert r.execute_command("LOCK.ACQUIRE", A, "newcomer", 1000)[0] == 0  # nobody passes the queue
    assert r.execute_command("LOCK.RELEASE", B, "y") == 0
    g = w.join()
    assert g[0] == 1 and holder(r, A) == holder(r, B) == ("m", g[1])
    assert waiters(r, A) == waiters(r, B) == 0


def test_inspect_shows_waiters_on_a_key_without_a_lock(server, r):
    # B has no lock value, but the multi-key waiter heading its queue keeps it busy while
    # it waits for A: LOCK.INSPECT shows that waiter (a lock of one permit nobody holds),
    # not nil, so an operator can see why B refuses a newcomer.
    assert r.execute_command("LOCK.ACQUIRE", A, "x", 60000)[0] == 1
    assert r.execute_command("LOCK.INSPECT", B) is None
    w = wait_all(server, r, [A, B], "m", queued_on=[A])
    wait_until(lambda: r.execute_command("LOCK.INSPECT", B) is not None, "B shows its waiter")
    assert r.execute_command("LOCK.INSPECT", B) == [1, 0, 1, [], 0, 1]
    full = r.execute_command("LOCK.INSPECT", B, "FULL")
    assert full[full.index(b"holders") + 1] == []
    (entry,) = full[full.index(b"waiters") + 1]
    assert entry[entry.index(b"mode") + 1] == b"multi"
    assert r.execute_command("LOCK.ACQUIRE", B, "newcomer", 1000)[0] == 0
    assert r.exists(B) == 0  # a view, nothing written
    assert r.execute_command("LOCK.RELEASE", A, "x") == 0
    g = w.join()
    assert g[0] == 1 and holder(r, B) == ("m", g[1])


def test_fifo_across_single_and_multi_waiters(server, r):
    touch(r, A, B, C)
    assert r.execute_command("LOCK.ACQUIRE", A, "x", 60000)[0] == 1
    s = wait_one(server, r, A, "single")
    m = wait_all(server, r, [A, B], "multi")
    # B is free, but the multi waiter queued on it first: a newcomer is refused
    assert r.execute_command("LOCK.ACQUIRE", B, "newcomer", 1000)[0] == 0
    assert r.execute_command("LOCK.RELEASE", A, "x") == 0
    assert s.join()[0] == 1 and holder(r, A)[0] == "single"
    assert not m.done() and holder(r, B) is None
    assert r.execute_command("LOCK.RELEASE", A, "single") == 0
    g = m.join()
    assert g[0] == 1 and holder(r, A)[0] == holder(r, B)[0] == "multi"


def test_crossed_orders_do_not_deadlock(server, r):
    touch(r, A, B, C)
    assert acquire_all(r, [A, B], "h", 60000)[0] == 1
    m1 = wait_all(server, r, [A, B], "m1")
    m2 = wait_all(server, r, [B, A], "m2")
    m3 = wait_all(server, r, [B, C], "m3")  # C is free, behind m2 on B
    assert release_all(r, [A, B], "h") == [0, 0]
    assert m1.join()[0] == 1
    assert not m2.done() and not m3.done()
    assert release_all(r, [B, A], "m1") == [0, 0]
    assert m2.join()[0] == 1
    assert release_all(r, [A, B], "m2") == [0, 0]
    assert m3.join()[0] == 1
    assert holder(r, B)[0] == holder(r, C)[0] == "m3"
    assert waiters(r, A) == waiters(r, B) == waiters(r, C) == 0


def test_a_multi_waiter_does_not_pass_an_earlier_one(server, r):
    touch(r, A, B, C)
    assert r.execute_command("LOCK.ACQUIRE", C, "y", 60000)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", B, "z", 60000)[0] == 1
    m1 = wait_all(server, r, [A, C], "m1", wait=5000)  # A free, C held
    m2 = wait_all(server, r, [A, B], "m2")              # behind m1 on A
    # B frees: m2 heads B's queue, and A and B are both free, but m1 is ahead on A
    assert r.execute_command("LOCK.RELEASE", B, "z") == 0
    assert r.execute_command("LOCK.RELEASE", C, "y") == 0
    g1 = m1.join()
    assert g1[0] == 1 and holder(r, A)[0] == holder(r, C)[0] == "m1"
    assert not m2.done() and holder(r, B) is None
    assert release_all(r, [A, C], "m1") == [0, 0]
    assert m2.join()[0] == 1 and holder(r, A)[0] == holder(r, B)[0] == "m2"


def test_leases_end_together_and_serve_the_waiter(server, r):
    touch(r, A, B, C)
    g = acquire_all(r, [A, B], "short", 300)
    assert g[0] == 1
    m = wait_all(server, r, [B, A], "next", wait=10000)
    g2 = m.join()  # both leases end on time (each key's own timer), no release needed
    assert g2[0] == 1 and g2[1] > g[1]
    assert holder(r, A) == holder(r, B) == ("next", g2[1])


def test_no_blocking_inside_multi(server, r):
    touch(r, A, B)
    assert r.execute_command("LOCK.ACQUIRE", A, "x", 60000)[0] == 1
    p = r.pipeline(transaction=True)
    p.execute_command(ALL, 2, A, B, "m", 1000, "WAIT", 5000)
    (refused,) = p.execute()
    assert refused[0] == 0 and waiters(r, A) == 0 and holder(r, B) is None


def test_timeout_leaves_every_queue(server, r):
    touch(r, A, B, C)
    assert r.execute_command("LOCK.ACQUIRE", A, "x", 60000)[0] == 1
    m = wait_all(server, r, [A, B], "m", wait=300)
    s = wait_one(server, r, B, "behind")  # B is free: only the multi waiter is ahead
    refused = m.join()
    assert refused[0] == 0 and refused[1] == -1 and refused[2] > 0
    assert s.join()[0] == 1
    assert waiters(r, A) == 0 and waiters(r, B) == 0
    assert holder(r, A)[0] == "x"


def test_client_unblock_leaves_every_queue(server, r):
    touch(r, A, B, C)
    assert r.execute_command("LOCK.ACQUIRE", A, "x", 60000)[0] == 1
    m = wait_all(server, r, [A, B], "m")
    s = wait_one(server, r, B, "behind")
    assert r.execute_command("CLIENT", "UNBLOCK", m.id) == 1
    assert m.join()[0] == 0
    assert s.join()[0] == 1
    assert waiters(r, A) == 0 and waiters(r, B) == 0


def test_disconnect_leaves_every_queue(server, r):
    touch(r, A, B, C)
    assert r.execute_command("LOCK.ACQUIRE", A, "x", 60000)[0] == 1
    raw = RawConnection(server.host, server.port)
    raw.sock.sendall(resp_encode(ALL, 2, A, B, "m", 60000, "WAIT", 20000))
    wait_until(lambda: waiters(r, A) == 1 and waiters(r, B) == 1, "the raw waiter queued")
    s = wait_one(server, r, B, "behind")
    raw.close()
    assert s.join()[0] == 1
    wait_until(lambda: waiters(r, A) == 0, "the waiter gone from A")
    assert r.execute_command("LOCK.RELEASE", A, "x") == 0
    assert holder(r, A) is None


def test_session_releases_every_key_on_disconnect(server, r):
    touch(r, A, B, C)
    sess = server.client()
    assert acquire_all(sess, [A, B, C], "s", 60000, "SESSION")[0] == 1
    m = wait_all(server, r, [A, B], "next")
    sess.connection_pool.disconnect()
    assert m.join()[0] == 1
    wait_until(lambda: holder(r, C) is None, "C released with the session")
    assert holder(r, A)[0] == "next"


def test_lockdelay_on_every_key(server, r):
    sess = server.client()
    assert acquire_all(sess, [A, B], "s", 60000, "SESSION", "LOCKDELAY", 60000)[0] == 1
    sess.connection_pool.disconnect()
    wait_until(lambda: r.execute_command("LOCK.INSPECT", B)[3][0][3] == 0, "B in its lock-delay")
    refused = acquire_all(r, [A, B], "t", 1000)
    assert refused[0] == 0 and refused[2] > 50000


# ------------------------------------------------------ replicas, AOF, cluster
def test_replica_equals_primary(replica_pair):
    primary, replica = replica_pair
    p, rc = primary.client(), replica.client()
    assert acquire_all(p, [A, B, C], "alice", 60000)[0] == 1
    assert release_all(p, [A, B], "alice") == [0, 0]
    assert acquire_all(p, [B, A], "bob", 60000, "LOCKDELAY", 5)[0] == 1
    assert p.execute_command(EXT_ALL, 1, C, "alice", 90000) == 90000
    # a grant made from the wait queue replicates the same way
    touch(p, "{t}d")
    m = wait_all(primary, p, [A, "{t}d"], "waiter")
    assert release_all(p, [B, A], "bob") == [0, 0]
    assert m.join()[0] == 1
    wait_replicas_synced(primary, [replica])
    for k in (A, B, C, "{t}d"):
        assert digest_value(rc, k) == digest_value(p, k), k
        assert holder(rc, k) == holder(p, k), k


def test_aof_restart_same_locks(aof_server):
    s = aof_server(preamble=False)
    c = s.client()
    g = acquire_all(c, [A, B, C], "alice", 60000)
    assert release_all(c, [C], "alice") == [0]
    before = {k: (digest_value(c, k), holder(c, k)) for k in (A, B, C)}
    s.restart(kill=True)
    c = s.client()
    assert {k: (digest_value(c, k), holder(c, k)) for k in (A, B, C)} == before
    assert holder(c, A) == ("alice", g[1])
    text = b"".join(open(f, "rb").read() for f in glob.glob(os.path.join(s.aof_dir(), "*"))
                    if not f.endswith(".manifest"))
    assert b"LOCK.STATE" in text and b"_ALL" not in text, "a clock-reading command was written to the AOF"


def test_cluster_routes_by_the_keys(tmp_path):
    cl = Cluster(_module_path(), base_dir=str(tmp_path / "cluster"), replicas_per_primary=0)
    try:
        cl.start()
        cc = cl.client
        keys = ["{user:7}a", "{user:7}b"]
        g = cc.execute_command(ALL, 2, *keys, "alice", 30000)
        assert g[0] == 1
        owner = cl.owner_of(keys[0])
        assert cl.conn(owner).execute_command("LOCK.INSPECT", keys[1])[3][0][0] == "alice"
        with pytest.raises(redis.exceptions.RedisClusterException):
            cc.execute_command(ALL, 2, "{user:7}a", "{user:8}b", "alice", 30000)
        for other in cl.primaries():
            if other.port != owner.port:
                assert raw_command(other, ALL, 2, *keys, "bob", 1000).startswith(b"-MOVED")
        assert cc.execute_command(REL_ALL, 2, *keys, "alice") == [0, 0]
        # a multi-key waiter whose slot moves away gets one TRYAGAIN, and the old node keeps nothing
        src, dst = cl.primaries()[0], cl.primaries()[1]
        slot = cl.slots_of(src)[10]
        tag = names_in_slots([slot], 1, prefix="m-")[slot][0]
        mk = ["{%s}a" % tag, "{%s}b" % tag]
        assert key_slot(mk[0]) == slot
        sc = cl.conn(src)
        assert sc.execute_command("LOCK.ACQUIRE", mk[1], "holder", 800)[0] == 1
        box = {}

        def blocked():
            c = redis.Redis(host=src.host, port=src.port, socket_timeout=20)
            try:
                box["reply"] = c.execute_command(ALL, 2, *mk, "waiter", 1000, "WAIT", 10000)
            except redis.ResponseError as e:
                box["error"] = str(e)
            finally:
                c.close()

        t = threading.Thread(target=blocked, daemon=True)
        t.start()
        wait_until(lambda: sc.execute_command("LOCK.INSPECT", mk[1])[2] == 1, "the multi waiter queued")
        cl.migrate_slot_by_hand(slot, src, dst)
        t.join(15)
        assert not t.is_alive() and box.get("error", "").startswith("TRYAGAIN"), box
        assert sc.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
        assert int(src.info("mcaptcha_cache_locks")["mcaptcha_cache_waiters"]) == 0
    finally:
        cl.stop()


# ------------------------------------------------------------- history check
def test_history_mixed_single_and_multi_key_clients(server, r):
    """Jepsen-style: threads take random subsets of three keys (random orders, all or none,
    WAIT) or one key (LOCK.ACQUIRE ... WAIT), hold briefly, release. Checked afterwards:
    every call answered (no deadlock), per key the intervals each holder certainly held
    (grant reply received .. release sent) never overlap, and per key the tokens are unique
    and ordered as those intervals are; nothing is left held or queued."""
    import random
    import time

    keys = [A, B, C]
    touch(r, *keys)
    seed = random.randrange(1 << 30)
    history, lock = [], threading.Lock()

    def worker(tid):
        rnd = random.Random(seed + tid)
        c = server.client(socket_timeout=30)
        owner = "w%d" % tid
        for _ in range(25):
            ks = rnd.sample(keys, rnd.choice([1, 2, 3]))
            multi = len(ks) > 1 or rnd.random() < 0.3
            if multi:
                g = c.execute_command(ALL, len(ks), *ks, owner, 10000, "WAIT", 20000)
            else:
                g = c.execute_command("LOCK.ACQUIRE", ks[0], owner, 10000, "WAIT", 20000)
            got = time.monotonic()
            assert g[0] == 1, (owner, ks, g)
            time.sleep(rnd.random() * 0.002)
            released = time.monotonic()
            if multi:
                assert c.execute_command(REL_ALL, len(ks), *ks, owner) == [0] * len(ks)
            else:
                assert c.execute_command("LOCK.RELEASE", ks[0], owner) == 0
            with lock:
                history.append((ks, int(g[1]), got, released, owner))

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a client never got its locks (seed %d)" % seed
    assert len(history) == 6 * 25, "a worker failed (seed %d)" % seed
    for k in keys:
        ivs = sorted((got, rel, tok, who) for ks, tok, got, rel, who in history if k in ks)
        toks = [iv[2] for iv in ivs]
        assert len(set(toks)) == len(toks), "token reused on %s (seed %d)" % (k, seed)
        for a, b in zip(ivs, ivs[1:]):
            assert a[1] <= b[0], "%s held by %s and %s at once (seed %d)" % (k, a[3], b[3], seed)
            assert a[2] < b[2], "tokens on %s out of grant order (seed %d)" % (k, seed)
    for k in keys:
        assert holder(r, k) is None and waiters(r, k) == 0

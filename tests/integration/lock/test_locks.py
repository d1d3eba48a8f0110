# SPDX-License-Identifier: BSD-3-Clause
"""Leased locks and semaphores (LOCK.ACQUIRE / RELEASE / EXTEND / INSPECT / STATE):
replies, ownership, FIFO waiting without polling, leases that end on time (and
replicate that), session mode, reentrancy, semaphores, fencing tokens (many
grants, DEL, SAVE + restart, replica promotion) and a table of bad inputs.

Durability of lock keys (RDB, AOF, DUMP/RESTORE, replicas, cluster) is in
test_locks_durability.py.

Times: leases of 100-5000 ms; every "promptly" allows generous scheduling slack
(the suites share 2 cores), and no test asserts performance. Exact wire errors
are read with servers.RawConnection (redis-py strips the "ERR " code)."""

import threading
import time

import pytest
import redis

from mcap import digest_value
from servers import RawConnection, raw_command, resp_encode, wait_replicas_synced, wait_until

ACQ = "LOCK.ACQUIRE"
REL = "LOCK.RELEASE"
EXT = "LOCK.EXTEND"
INS = "LOCK.INSPECT"
STATE = "LOCK.STATE"

NOT_OWNER_WIRE = b"-ERR the lock is not held by this owner\r\n"
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
FENCING_MARGIN_US = 10_000_000


# ------------------------------------------------------------------ helpers
def acquire(c, key, owner, lease, *opts):
    return c.execute_command(ACQ, key, owner, lease, *opts)


def inspect(c, key):
    return c.execute_command(INS, key)


def holders(c, key):
    """{owner: (lease_ms_left, token, count)} of LOCK.INSPECT (None: no such lock)."""
    v = inspect(c, key)
    if v is None:
        return None
    return {h[0]: (h[1], h[2], h[3]) for h in v[3]}


def waiters(c, key):
    v = inspect(c, key)
    return 0 if v is None else v[2]


def lock_stats(server):
    """INFO mcaptcha_cache_locks as {field without prefix: int}."""
    i = server.info("mcaptcha_cache_locks")
    out = {}
    for k, v in i.items():
        k = k.decode() if isinstance(k, bytes) else k
        if k.startswith("mcaptcha_cache_"):
            out[k[len("mcaptcha_cache_"):]] = int(v)
    return out


def wait_for(pred, timeout=5.0, what="condition"):
    return wait_until(pred, what, timeout)


def wait_waiters(c, key, n, timeout=5.0):
    wait_for(lambda: waiters(c, key) == n, timeout, "%d waiter(s) on %r (now %r)"
             % (n, key, inspect(c, key)))


def now_us(c):
    s, us = c.time()
    return s * 1_000_000 + us


class Waiter(threading.Thread):
    """LOCK.ACQUIRE ... WAIT on its own connection; records the reply and when it came.
    on_reply(self) runs in the thread right after the reply."""

    def __init__(self, server, key, owner, lease, wait_ms, *opts, on_reply=None, idx=None):
        super().__init__(daemon=True)
        self.c = server.client(socket_timeout=wait_ms / 1000.0 + 10)
        self.key, self.owner, self.lease, self.wait_ms = key, owner, lease, wait_ms
        self.opts = opts
        self.on_reply = on_reply
        self.idx = idx
        self.reply = None
        self.error = None
        self.t_sent = self.t_done = None

    def run(self):
        self.t_sent = time.time()
        try:
            self.reply = self.c.execute_command(ACQ, self.key, self.owner, self.lease, *self.opts,
                                                "WAIT", self.wait_ms)
        except Exception as e:  # recorded, asserted by the test
            self.error = e
        self.t_done = time.time()
        if self.on_reply is not None:
            try:
                self.on_reply(self)
            except Exception as e:
                self.error = e

    def result(self, timeout=10.0):
        self.join(timeout)
        assert not self.is_alive(), "waiter %r still blocked after %.1fs" % (self.owner, timeout)
        assert self.error is None, "waiter %r: %r" % (self.owner, self.error)
        return self.reply


def raw_send(conn, *args):
    conn.sock.sendall(resp_encode(*args))


# ------------------------------------------------------------ 1. basics
def test_acquire_busy_release(server, r):
    before = now_us(r)
    lease = 60000  # outlives any slow machine: the refusal below cannot race its end
    t_g = time.time()
    g = acquire(r, "L", "alice", lease)
    t_g_done = time.time()
    after = now_us(r)
    assert g[0] == 1 and g[2] == lease, g
    # the clock in microseconds (of millisecond resolution on Redis 7.0), or up to
    # 10 s beyond it within 10 s of the server's start (the start margin, fencing.h)
    assert isinstance(g[1], int) and before - 1000 <= g[1] <= after + 10_000_000 + 1, (g, before, after)
    # a second owner, once the server shows 100 ms of the lease gone: [0, -1, ms
    # until the lease ends], which counts down from what LOCK.INSPECT showed
    def left_once_100ms_passed():
        x = holders(r, "L")[b"alice"][0]
        return x if x <= lease - 100 else None

    left = wait_for(left_once_100ms_passed, 10, "100 ms of alice's lease to pass")
    t_b = time.time()
    busy = acquire(r, "L", "bob", 1000)
    t_b_done = time.time()
    assert busy[0] == 0 and busy[1] == -1, busy
    lo, hi = lease - (t_b_done - t_g) * 1000 - 2, lease - (t_b - t_g_done) * 1000 + 2
    assert lo <= busy[2] <= min(hi, left), (busy, lo, hi, left)
    # release by the owner: 0, and the lock is free for bob
    assert r.execute_command(REL, "L", "alice") == 0
    assert holders(r, "L") == {}
    g2 = acquire(r, "L", "bob", 500)
    assert g2[0] == 1 and g2[1] > g[1] and g2[2] == 500
    h = holders(r, "L")
    assert list(h) == [b"bob"] and h[b"bob"][1] == g2[1] and h[b"bob"][2] == 1


def test_lock_key_has_no_ttl(server, r):
    """docs/locks.md: a lock key has no TTL: held, extended, released or with its lease
    ended, it stays (keeping its last fencing token) until it is deleted."""
    g = acquire(r, "L", "alice", 60000)
    assert g[0] == 1
    assert r.pttl("L") == -1 and r.ttl("L") == -1
    assert r.execute_command(EXT, "L", "alice", 30000) == 30000
    assert r.pttl("L") == -1
    assert acquire(r, "S", "a", 60000, "PERMITS", 3)[0] == 1
    assert acquire(r, "S", "b", 60000, "PERMITS", 3)[0] == 1
    assert r.pttl("S") == -1
    # released: the key stays, with no TTL and its last token
    assert r.execute_command(REL, "L", "alice") == 0
    assert r.exists("L") == 1 and r.pttl("L") == -1
    assert inspect(r, "L")[1] == g[1] and inspect(r, "L")[3] == []
    for o in ("a", "b"):
        assert r.execute_command(REL, "S", o) == 0
    assert r.exists("S") == 1 and r.pttl("S") == -1
    # a lease that ends by itself: the module's timer frees the lock, not a TTL
    g2 = acquire(r, "E", "bob", 100)
    assert g2[0] == 1 and r.pttl("E") == -1
    wait_for(lambda: holders(r, "E") == {}, 10, "the lease of E to end")
    assert r.exists("E") == 1 and r.pttl("E") == -1 and inspect(r, "E")[1] == g2[1]
    # it goes only when deleted
    assert r.delete("L", "S", "E") == 3


def test_release_and_extend_by_others_change_nothing(server, r):
    g = acquire(r, "L", "alice", 5000)
    assert g[0] == 1
    ins = inspect(r, "L")
    dig = digest_value(r, "L")
    for args in [(REL, "L", "bob"), (EXT, "L", "bob", 60000), (REL, "L", "ALICE"),
                 (REL, "L", "alice "), (EXT, "L", "alic", 100)]:
        assert raw_command(server, *args) == NOT_OWNER_WIRE, args
        with pytest.raises(redis.ResponseError, match="the lock is not held by this owner"):
            r.execute_command(*args)
        assert digest_value(r, "L") == dig, args
        now = inspect(r, "L")
        assert now[:3] == ins[:3] and [x[0] for x in now[3]] == [b"alice"]
        assert now[3][0][2:] == ins[3][0][2:]
        assert now[3][0][1] <= ins[3][0][1]
    # on a missing key too, and nothing is created
    assert raw_command(server, REL, "nokey", "alice") == NOT_OWNER_WIRE
    assert raw_command(server, EXT, "nokey", "alice", 100) == NOT_OWNER_WIRE
    assert r.exists("nokey") == 0
    # after the owner released, the owner itself is "anyone else"
    assert r.execute_command(REL, "L", "alice") == 0
    assert raw_command(server, REL, "L", "alice") == NOT_OWNER_WIRE
    assert raw_command(server, EXT, "L", "alice", 100) == NOT_OWNER_WIRE


def test_extend_renews_the_lease(server, r):
    # grant, look, extend, look in one MULTI: the 300 ms lease cannot end in between
    t0 = time.time()
    p = r.pipeline(transaction=True)
    p.execute_command(ACQ, "L", "alice", 300)
    p.execute_command(INS, "L")
    p.execute_command("DEBUG", "DIGEST-VALUE", "L")
    p.execute_command(EXT, "L", "alice", 10000)
    p.execute_command(INS, "L")
    g, ins0, dig, ext, ins1 = p.execute()
    t1 = time.time()
    assert g[0] == 1 and ext == 10000, (g, ext)
    [(o0, left0, tok, cnt0)], [(o1, left1, tok1, cnt)] = ins0[3], ins1[3]
    assert o0 == o1 == b"alice" and left0 <= 300 and cnt0 == 1, ins0
    assert 10000 - (t1 - t0) * 1000 - 1 <= left1 <= 10000 and tok1 == tok and cnt == 1, ins1
    assert digest_value(r, "L") != dig[0]
    # past the original lease's end the lock is still held: the server counting
    # the renewed lease down past 10000 - 300 ms means 300 ms went by since the
    # extension, so the original end (<= 300 ms after the grant) has passed
    wait_for(lambda: holders(r, "L").get(b"alice", (0,))[0] <= 10000 - 300 - 50, 10,
             "the original lease's end to pass")
    h = holders(r, "L")
    assert list(h) == [b"alice"] and h[b"alice"][1:] == (tok, 1), h
    assert acquire(r, "L", "bob", 100)[0] == 0
    # shortening works as well: the lease ends lease-ms from now
    t_s = time.time()
    p = r.pipeline(transaction=True)
    p.execute_command(EXT, "L", "alice", 100)
    p.execute_command(INS, "L")
    ext, ins2 = p.execute()
    assert ext == 100 and [h[0] for h in ins2[3]] == [b"alice"] and 0 < ins2[3][0][1] <= 100, ins2
    wait_for(lambda: holders(r, "L") == {}, 10, "the shortened lease to end")
    assert time.time() >= t_s + 0.1 - 0.002, "the lease ended before the 100 ms it was given"
    assert acquire(r, "L", "bob", 100)[0] == 1


def test_inspect_shape_missing_key_and_wrongtype(server, r):
    assert inspect(r, "none") is None
    g = acquire(r, "L", "alice", 1000)
    v = inspect(r, "L")
    assert len(v) == 6
    permits, last, nwait, hs, adjustment, size = v
    assert permits == 1 and last == g[1] and nwait == 0 and adjustment == 0 and size == 1
    assert len(hs) == 1 and len(hs[0]) == 4
    owner, left, token, count = hs[0]
    assert owner == b"alice" and 500 <= left <= 1000 and token == g[1] and count == 1
    # an unheld lock keeps permits and last token
    r.execute_command(REL, "L", "alice")
    assert inspect(r, "L") == [1, g[1], 0, [], 0, 1]
    # WRONGTYPE on a string key, for every command; the string is untouched
    r.set("s", "x")
    for args in [(ACQ, "s", "a", 100), (ACQ, "s", "a", 100, "WAIT", 100), (REL, "s", "a"),
                 (EXT, "s", "a", 100), (INS, "s"), (STATE, "s", 1, 5, 0)]:
        with pytest.raises(redis.ResponseError) as ei:
            r.execute_command(*args)
        assert str(ei.value) == WRONGTYPE, args
    assert r.get("s") == b"x"
    # and a lock key is refused by string commands
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.get("L")
    assert r.type("L") == b"mcap-lock"


# --------------------------------------------------- 2. contention, FIFO
def test_twenty_clients_mutual_exclusion_in_arrival_order(server, r):
    n = 20
    key = "contended"
    r.set("counter", 0)
    holder = acquire(r, key, "first", 10000)
    assert holder[0] == 1
    state = {"inside": False, "overlaps": 0}
    order, tokens = [], []

    def section(w):
        rep = w.reply
        if rep is None or rep[0] != 1:
            return
        if state["inside"]:
            state["overlaps"] += 1
        state["inside"] = True
        order.append(w.idx)
        tokens.append(rep[1])
        v = int(w.c.get("counter"))
        time.sleep(0.003)
        w.c.set("counter", v + 1)
        state["inside"] = False
        assert w.c.execute_command(REL, key, w.owner) == 0

    ws = []
    for i in range(n):
        w = Waiter(server, key, "client-%d" % i, 2000, 15000, on_reply=section, idx=i)
        w.start()
        ws.append(w)
        wait_waiters(r, key, i + 1)  # arrival order is the start order
        time.sleep(0.02)
    assert lock_stats(server)["waiters"] >= n
    assert r.execute_command(REL, key, "first") == 0
    for w in ws:
        rep = w.result(20)
        assert rep[0] == 1 and rep[2] == 2000, (w.owner, rep)
    assert state["overlaps"] == 0, "critical sections overlapped %d times" % state["overlaps"]
    assert int(r.get("counter")) == n
    assert order == list(range(n)), "grant order %r is not the arrival order" % order
    assert tokens == sorted(tokens) and len(set(tokens)) == n and tokens[0] > holder[1]
    assert inspect(r, key) == [1, tokens[-1], 0, [], 0, 1]


def test_newcomer_does_not_jump_the_queue(server, r):
    assert acquire(r, "L", "h", 5000)[0] == 1
    w = Waiter(server, "L", "waiter", 1000, 5000)
    w.start()
    wait_waiters(r, "L", 1)
    # release and a newcomer's acquire in one round trip: both run before the queue is served
    p = r.pipeline(transaction=False)
    p.execute_command(REL, "L", "h")
    p.execute_command(ACQ, "L", "newcomer", 1000)
    rel, newcomer = p.execute()
    assert rel == 0
    assert newcomer[0] == 0 and newcomer[1] == -1, newcomer
    assert w.result()[0] == 1
    assert list(holders(r, "L")) == [b"waiter"]


# ------------------------------------------------------------ 3. waiters
def test_waiter_woken_on_release_not_before(server, r):
    g = acquire(r, "L", "h", 5000)
    w = Waiter(server, "L", "w", 1000, 4000)
    w.start()
    wait_waiters(r, "L", 1)
    assert lock_stats(server)["waiters"] == 1
    time.sleep(0.25)
    assert w.is_alive() and w.reply is None, "the waiter was answered before the release"
    t_rel = time.time()
    assert r.execute_command(REL, "L", "h") == 0
    rep = w.result()
    assert rep[0] == 1 and rep[1] > g[1] and rep[2] == 1000
    assert w.t_done - t_rel < 2.5, "waiter answered %.3fs after the release" % (w.t_done - t_rel)
    assert waiters(r, "L") == 0
    assert holders(r, "L")[b"w"][1] == rep[1]
    assert lock_stats(server)["waiters"] == 0


def test_waiter_woken_when_lease_ends_untouched(server, r):
    t0 = time.time()
    g = acquire(r, "L", "h", 300)
    assert g[0] == 1
    w = Waiter(server, "L", "w", 1000, 3000)
    w.start()
    rep = w.result()
    dt = w.t_done - t0
    assert rep[0] == 1 and rep[1] > g[1], rep
    assert dt >= 0.29, "granted %.3fs after a 300 ms lease began" % dt
    assert dt < 2.5, "granted only %.3fs after a 300 ms lease began (WAIT 3 s)" % dt


def test_waiter_times_out(server, r):
    g = acquire(r, "L", "h", 5000)
    dig = digest_value(r, "L")
    st0 = lock_stats(server)
    w = Waiter(server, "L", "w", 1000, 200)
    w.start()
    rep = w.result()
    dt = w.t_done - w.t_sent
    assert rep[:2] == [0, -1] and 0 < rep[2] <= 5000, rep   # refused: ms until h's lease ends
    assert 0.19 <= dt < 2.0, dt
    st1 = lock_stats(server)
    assert st1["timeouts"] == st0["timeouts"] + 1
    assert st1["waits"] == st0["waits"] + 1
    assert st1["waiters"] == 0
    assert waiters(r, "L") == 0
    assert digest_value(r, "L") == dig
    assert holders(r, "L")[b"h"][1] == g[1]


def test_disconnected_waiter_leaves_the_queue(server, r):
    assert acquire(r, "L", "h", 5000)[0] == 1
    gone = RawConnection(server.host, server.port)
    try:
        raw_send(gone, ACQ, "L", "gone", 1000, "WAIT", 5000)
        wait_waiters(r, "L", 1)
        w = Waiter(server, "L", "next", 1000, 5000)
        w.start()
        wait_waiters(r, "L", 2)
    finally:
        gone.close()
    wait_waiters(r, "L", 1)
    t_rel = time.time()
    assert r.execute_command(REL, "L", "h") == 0
    rep = w.result()
    assert rep[0] == 1
    assert w.t_done - t_rel < 1.0
    assert list(holders(r, "L")) == [b"next"]
    assert waiters(r, "L") == 0 and lock_stats(server)["waiters"] == 0


def test_disconnected_head_waiter_next_gets_the_lock(server, r):
    """The waiter at the head disconnects after the lock is free for it: the next one is
    served (on a lease end, no release command)."""
    assert acquire(r, "L", "h", 400)[0] == 1
    gone = RawConnection(server.host, server.port)
    raw_send(gone, ACQ, "L", "gone", 1000, "WAIT", 5000)
    wait_waiters(r, "L", 1)
    w = Waiter(server, "L", "next", 1000, 5000)
    w.start()
    wait_waiters(r, "L", 2)
    gone.close()
    rep = w.result()
    assert rep[0] == 1
    assert list(holders(r, "L")) == [b"next"]


def test_wait_inside_multi_and_lua_answers_at_once(server, r):
    assert acquire(r, "L", "h", 5000)[0] == 1
    st0 = lock_stats(server)
    p = r.pipeline(transaction=True)
    p.execute_command(ACQ, "L", "x", 1000, "WAIT", 3000)
    t = time.time()
    res = p.execute()
    assert time.time() - t < 1.5
    assert res[0][0] == 0 and res[0][1] == -1 and 4000 <= res[0][2] <= 5000, res
    t = time.time()
    res = r.eval("return redis.call('LOCK.ACQUIRE', KEYS[1], 'y', 1000, 'WAIT', 3000)", 1, "L")
    assert time.time() - t < 1.5
    assert res[0] == 0 and res[1] == -1, res
    # granted inside MULTI when free
    p = r.pipeline(transaction=True)
    p.execute_command(REL, "L", "h")
    p.execute_command(ACQ, "L", "x", 1000, "WAIT", 3000)
    rel, g = p.execute()
    assert rel == 0 and g[0] == 1
    st1 = lock_stats(server)
    assert st1["waits"] == st0["waits"] and st1["waiters"] == 0


# ---------------------------------------------- 4. leases end on time
def test_lease_ends_on_time_and_the_end_is_replicated(replica_pair):
    primary, replica = replica_pair
    pc, rc = primary.client(), replica.client()
    e0 = lock_stats(primary)["leases_expired_while_held"]
    g = acquire(pc, "L", "alice", 1000)
    assert g[0] == 1
    wait_replicas_synced(primary, [replica])
    held = digest_value(pc, "L")
    assert digest_value(rc, "L") == held
    # `held` was read while the lease still ran (a slow ASan build under load
    # must not read the digest after the end and compare it with itself)
    assert lock_stats(primary)["leases_expired_while_held"] == e0
    # nothing was sent to the key; the module's timer ended the lease
    wait_for(lambda: lock_stats(primary)["leases_expired_while_held"] >= e0 + 1, 5.0,
             "leases_expired_while_held to grow")
    wait_replicas_synced(primary, [replica])
    after = digest_value(pc, "L")
    assert after != held, "the value still holds the ended lease"
    assert digest_value(rc, "L") == after
    # the value is exactly "unheld, last token kept"
    pc.execute_command(STATE, "expected", 1, g[1], 0)
    assert digest_value(pc, "expected") == after
    assert inspect(rc, "L") == [1, g[1], 0, [], 0, 1]


# ------------------------------------------------------- 5. session mode
@pytest.mark.parametrize("how", ["close", "client_kill"])
def test_session_holder_gone_next_waiter_gets_the_lock(server, r, how):
    hc = RawConnection(server.host, server.port)
    try:
        cid = int(hc.command("CLIENT", "ID")[1:-2])
        rep = hc.command(ACQ, "L", "holder", 5000, "SESSION")
        assert rep.startswith(b"*3\r\n:1\r\n"), rep
        w = Waiter(server, "L", "next", 1000, 4000)
        w.start()
        wait_waiters(r, "L", 1)
        t_k = time.time()
        if how == "close":
            hc.close()
        else:
            assert r.client_kill_filter(_id=cid) == 1
    finally:
        hc.close()
    got = w.result()
    assert got[0] == 1
    assert w.t_done - t_k < 4.0, "granted %.3fs after the holder left (lease 5 s)" % (
        w.t_done - t_k)
    assert list(holders(r, "L")) == [b"next"]


def test_session_holder_gone_no_waiters_lock_freed(server, r):
    hc = RawConnection(server.host, server.port)
    assert hc.command(ACQ, "L", "holder", 5000, "SESSION", "REENTRANT").startswith(b"*3\r\n:1")
    assert hc.command(ACQ, "L", "holder", 5000, "SESSION", "REENTRANT").startswith(b"*3\r\n:1")
    assert holders(r, "L")[b"holder"][2] == 2
    hc.close()
    wait_for(lambda: holders(r, "L") == {}, 1.5, "the session's lock (count 2) to be released")
    assert acquire(r, "L", "other", 1000)[0] == 1


def wait_client_gone(r, cid):
    """Wait until CLIENT LIST no longer lists the connection `cid` (the server
    has freed it, so its disconnect has been handled)."""
    wait_for(lambda: cid not in {int(c["id"]) for c in r.client_list()}, 10,
             "connection %d to close" % cid)


def test_without_session_lock_outlives_connection(server, r):
    hc = RawConnection(server.host, server.port)
    cid = int(hc.command("CLIENT", "ID")[1:-2])
    assert hc.command(ACQ, "L", "holder", 60000).startswith(b"*3\r\n:1")
    w = Waiter(server, "L", "next", 1000, 10000)
    w.start()
    wait_waiters(r, "L", 1)
    hc.close()
    wait_client_gone(r, cid)
    assert list(holders(r, "L")) == [b"holder"], "released when its (non-session) connection closed"
    assert w.is_alive() and w.reply is None and waiters(r, "L") == 1
    # its lease, shortened by its owner's name from another connection, is what frees it
    t_e = time.time()
    assert r.execute_command(EXT, "L", "holder", 200) == 200
    rep = w.result()
    assert rep[0] == 1
    dt = w.t_done - t_e
    assert dt >= 0.2 - 0.002, "granted %.3fs after a 200 ms lease began" % dt


def test_session_ends_only_that_connections_hold(server, r):
    a = RawConnection(server.host, server.port)
    aid = int(a.command("CLIENT", "ID")[1:-2])
    assert a.command(ACQ, "L", "o", 5000, "SESSION").startswith(b"*3\r\n:1")
    assert a.command(REL, "L", "o") == b":0\r\n"
    # the same owner name, taken again from another connection without SESSION
    g = acquire(r, "L", "o", 60000)
    assert g[0] == 1
    a.close()
    wait_client_gone(r, aid)
    # closed sessions are released by a timer armed at the disconnect and due at
    # once: it has run before any command sent after CLIENT LIST answered
    h = holders(r, "L")
    assert list(h) == [b"o"] and h[b"o"][1] == g[1], h


# ----------------------------------------------------- 6. fencing tokens
def test_tokens_strictly_increase_across_grants_and_del(server, r):
    tokens = []
    for rnd in range(4):
        p = r.pipeline(transaction=False)
        for i in range(50):
            p.execute_command(ACQ, "L", "o%d" % i, 1000)
            p.execute_command(REL, "L", "o%d" % i)
        res = p.execute()
        for g, rel in zip(res[0::2], res[1::2]):
            assert g[0] == 1 and rel == 0
            tokens.append(g[1])
    # semaphore grants share the sequence
    for i in range(3):
        g = acquire(r, "L", "s%d" % i, 1000, "PERMITS", 3)
        assert g[0] == 1
        tokens.append(g[1])
    assert all(a < b for a, b in zip(tokens, tokens[1:])), "tokens not strictly increasing"
    assert inspect(r, "L")[1] == tokens[-1]
    # a token is max(last + 1, clock in us): a last token ahead of the clock goes on by one
    ahead = now_us(r) + 10**12
    r.execute_command(STATE, "A", 1, ahead, 0)
    assert acquire(r, "A", "x", 1000)[1] > ahead
    # after DEL (a while later) the clock keeps them growing
    r.delete("L")
    assert inspect(r, "L") is None
    time.sleep(0.01)
    g = acquire(r, "L", "o", 1000)
    assert g[0] == 1 and g[1] > tokens[-1]


def test_tokens_increase_right_after_del(server, r):
    """DEL right after some grants (one round trip, so within the same millisecond or
    two): the next grant must still get a larger token than any before."""
    for attempt in range(5):
        p = r.pipeline(transaction=False)
        for i in range(3):
            p.execute_command(ACQ, "D", "o%d" % i, 1000)
            p.execute_command(REL, "D", "o%d" % i)
        p.delete("D")
        p.execute_command(ACQ, "D", "after-del", 1000)
        res = p.execute()
        before = [g[1] for g in res[0:6:2]]
        after = res[-1]
        assert after[0] == 1
        assert after[1] > max(before), (
            "token after DEL %d is not larger than the tokens before it %r" % (after[1], before))
        r.delete("D")


def test_tokens_increase_after_save_and_restart(servers):
    s = servers.new()
    c = s.client()
    toks = []
    for i in range(5):
        toks.append(acquire(c, "L", "o%d" % i, 60000, "PERMITS", 8)[1])
    ahead = now_us(c) + 10**12
    c.execute_command(STATE, "A", 1, ahead, 0)
    assert c.save()
    s.restart()
    c = s.client()
    assert inspect(c, "L")[1] == toks[-1]
    g = acquire(c, "L", "after", 60000, "PERMITS", 8)
    assert g[0] == 1 and g[1] > max(toks)
    assert acquire(c, "new", "x", 1000)[1] > max(toks)
    assert acquire(c, "A", "x", 1000)[1] > ahead, "last token not kept across restart"


def test_tokens_after_replica_promotion(servers):
    primary = servers.new(name="primary")
    replica = servers.replica_of(primary, name="replica")
    pc, rc = primary.client(), replica.client()
    old = []
    for i in range(5):
        g = acquire(pc, "L", "o%d" % i, 60000)
        assert g[0] == 1
        old.append(g[1])
        assert pc.execute_command(REL, "L", "o%d" % i) == 0
    held = acquire(pc, "H", "holder", 60000)
    old.append(held[1])
    wait_replicas_synced(primary, [replica])
    primary.kill()
    t_before = now_us(rc)
    assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    t_after = now_us(rc)
    g1 = acquire(rc, "L", "new", 60000)
    g2 = acquire(rc, "fresh", "new", 60000)
    assert g1[0] == 1 and g2[0] == 1
    for g in (g1, g2):
        assert g[1] > max(old)
        # (the module's clock has millisecond resolution on Redis 7.0: 1 ms of slack)
        assert g[1] >= t_before - 1000 + FENCING_MARGIN_US, (
            "token %d is only %.3f s beyond the clock at promotion"
            % (g[1], (g[1] - t_before) / 1e6))
        assert g[1] <= t_after + FENCING_MARGIN_US + 3_000_000, g
    # the next grant of the same lock goes on from there (tokens are per lock)
    assert rc.execute_command(REL, "L", "new") == 0
    g3 = acquire(rc, "L", "new2", 60000)
    assert g3[0] == 1 and g3[1] > g1[1]
    # the replicated holder is still enforced by the new primary
    assert acquire(rc, "H", "intruder", 1000)[0] == 0
    assert holders(rc, "H")[b"holder"][1] == held[1]


# ------------------------------------------------------- 7. reentrancy
def test_reentrancy(server, r):
    g1 = acquire(r, "L", "o", 300, "REENTRANT")
    g2 = acquire(r, "L", "o", 2000, "REENTRANT")
    assert g1[0] == 1 and g2[0] == 1 and g1[1] == g2[1]
    assert g2[2] == 2000
    left, tok, cnt = holders(r, "L")[b"o"]
    assert cnt == 2 and tok == g1[1] and left > 1500, "reentry renews the lease"
    # others are still refused
    assert acquire(r, "L", "x", 1000)[0] == 0
    assert r.execute_command(REL, "L", "o") == 1
    assert holders(r, "L")[b"o"][2] == 1
    assert acquire(r, "L", "x", 1000)[0] == 0, "released after one of two releases"
    assert r.execute_command(REL, "L", "o") == 0
    assert holders(r, "L") == {}
    assert raw_command(server, REL, "L", "o") == NOT_OWNER_WIRE
    # without REENTRANT a second acquire by the holder is refused and changes nothing
    g = acquire(r, "M", "o", 1000)
    dig = digest_value(r, "M")
    again = acquire(r, "M", "o", 5000)
    assert again[0] == 0 and again[1] == -1, again
    assert digest_value(r, "M") == dig
    assert holders(r, "M")[b"o"][1:] == (g[1], 1)
    assert r.execute_command(REL, "M", "o") == 0
    assert holders(r, "M") == {}


# -------------------------------------------------------- 8. semaphores
def test_semaphore_permits(server, r):
    # one MULTI: a's 300 ms lease cannot end before d's refusal
    p = r.pipeline(transaction=True)
    p.execute_command(ACQ, "S", "a", 300, "PERMITS", 3)
    p.execute_command(ACQ, "S", "b", 30000, "PERMITS", 3)
    p.execute_command(ACQ, "S", "c", 30000, "PERMITS", 3)
    p.execute_command(INS, "S")
    p.execute_command(ACQ, "S", "d", 1000, "PERMITS", 3)
    ga, gb, gc, v, d = p.execute()
    assert [ga[0], gb[0], gc[0]] == [1, 1, 1]
    assert ga[1] < gb[1] < gc[1]
    assert v[0] == 3 and v[1] == gc[1] and len(v[3]) == 3
    assert d[0] == 0 and d[1] == -1 and 0 < d[2] <= 300, "refused: ms until a's lease ends"
    # each permit has its own lease: a's ends alone
    wait_for(lambda: b"a" not in holders(r, "S"), 10, "a's lease to end")
    h = holders(r, "S")
    assert sorted(h) == [b"b", b"c"]
    # and its own extension
    t0 = time.time()
    p = r.pipeline(transaction=True)
    p.execute_command(EXT, "S", "c", 60000)
    p.execute_command(INS, "S")
    ext, v = p.execute()
    t1 = time.time()
    assert ext == 60000
    h = {x[0]: x[1] for x in v[3]}
    assert 60000 - (t1 - t0) * 1000 - 1 <= h[b"c"] <= 60000 and h[b"b"] < 30000, h
    # d takes the freed permit; e waits and gets b's when b releases
    assert acquire(r, "S", "d", 3000, "PERMITS", 3)[0] == 1
    w = Waiter(server, "S", "e", 1000, 4000, "PERMITS", 3)
    w.start()
    wait_waiters(r, "S", 1)
    time.sleep(0.1)
    assert w.is_alive()
    assert raw_command(server, REL, "S", "e") == NOT_OWNER_WIRE
    assert r.execute_command(REL, "S", "b") == 0
    rep = w.result()
    assert rep[0] == 1
    assert sorted(holders(r, "S")) == [b"c", b"d", b"e"]
    # each release is its own
    assert r.execute_command(REL, "S", "c") == 0
    assert sorted(holders(r, "S")) == [b"d", b"e"]


# -------------------------------------------------------- 10. bad input
BIG63 = str(2 ** 63)
BIG64 = str(2 ** 64)
OWNER257 = "o" * 257

BAD = [
    # LOCK.ACQUIRE arity
    ("acq no args", (ACQ,)),
    ("acq key only", (ACQ, "bad:new")),
    ("acq no lease", (ACQ, "bad:new", "o")),
    # leases
    ("acq lease word", (ACQ, "bad:new", "o", "abc")),
    ("acq lease float", (ACQ, "bad:new", "o", "1.5")),
    ("acq lease exp", (ACQ, "bad:new", "o", "1e3")),
    ("acq lease empty", (ACQ, "bad:new", "o", "")),
    ("acq lease space", (ACQ, "bad:new", "o", " 100")),
    ("acq lease 0", (ACQ, "bad:new", "o", "0")),
    ("acq lease -1", (ACQ, "bad:new", "o", "-1")),
    ("acq lease min64", (ACQ, "bad:new", "o", str(-2 ** 63))),
    ("acq lease 2^63", (ACQ, "bad:new", "o", BIG63)),
    ("acq lease 2^64", (ACQ, "bad:new", "o", BIG64)),
    ("acq lease 2^40+1", (ACQ, "bad:new", "o", str(2 ** 40 + 1))),
    ("acq held lease 0 reentrant", (ACQ, "bad:held", "holder", "0", "REENTRANT")),
    # PERMITS
    ("acq permits 0", (ACQ, "bad:new", "o", "100", "PERMITS", "0")),
    ("acq permits 1025", (ACQ, "bad:new", "o", "100", "PERMITS", "1025")),
    ("acq permits -1", (ACQ, "bad:new", "o", "100", "PERMITS", "-1")),
    ("acq permits word", (ACQ, "bad:new", "o", "100", "PERMITS", "x")),
    ("acq permits 2^64", (ACQ, "bad:new", "o", "100", "PERMITS", BIG64)),
    ("acq permits missing", (ACQ, "bad:new", "o", "100", "PERMITS")),
    ("acq permits 0 on held", (ACQ, "bad:held", "other", "100", "PERMITS", "0")),
    # WAIT
    ("acq wait -1", (ACQ, "bad:new", "o", "100", "WAIT", "-1")),
    ("acq wait word", (ACQ, "bad:new", "o", "100", "WAIT", "soon")),
    ("acq wait 2^63", (ACQ, "bad:new", "o", "100", "WAIT", BIG63)),
    ("acq wait 2^64", (ACQ, "bad:new", "o", "100", "WAIT", BIG64)),
    ("acq wait 2^40+1", (ACQ, "bad:new", "o", "100", "WAIT", str(2 ** 40 + 1))),
    ("acq wait missing", (ACQ, "bad:new", "o", "100", "WAIT")),
    ("acq wait missing on held", (ACQ, "bad:held", "other", "100", "WAIT")),
    # options
    ("acq unknown option", (ACQ, "bad:new", "o", "100", "FOO")),
    ("acq NX", (ACQ, "bad:new", "o", "100", "NX")),
    ("acq REENTRANTX", (ACQ, "bad:new", "o", "100", "REENTRANTX")),
    ("acq option then junk", (ACQ, "bad:new", "o", "100", "REENTRANT", "5")),
    ("acq extra number", (ACQ, "bad:new", "o", "100", "200")),
    # owners
    ("acq empty owner", (ACQ, "bad:new", "", "100")),
    ("acq owner 257", (ACQ, "bad:new", OWNER257, "100")),
    ("acq owner 257 held", (ACQ, "bad:held", OWNER257, "100")),
    ("acq wrongtype", (ACQ, "bad:str", "o", "100")),
    # LOCK.RELEASE
    ("rel no args", (REL,)),
    ("rel key only", (REL, "bad:held")),
    ("rel extra", (REL, "bad:held", "holder", "x")),
    ("rel missing key", (REL, "bad:new", "o")),
    ("rel not owner", (REL, "bad:held", "other")),
    ("rel empty owner", (REL, "bad:held", "")),
    ("rel wrongtype", (REL, "bad:str", "o")),
    # LOCK.EXTEND
    ("ext no args", (EXT,)),
    ("ext no lease", (EXT, "bad:held", "holder")),
    ("ext extra", (EXT, "bad:held", "holder", "100", "x")),
    ("ext lease 0", (EXT, "bad:held", "holder", "0")),
    ("ext lease -5", (EXT, "bad:held", "holder", "-5")),
    ("ext lease word", (EXT, "bad:held", "holder", "x")),
    ("ext lease float", (EXT, "bad:held", "holder", "2.5")),
    ("ext lease 2^63", (EXT, "bad:held", "holder", BIG63)),
    ("ext lease 2^64", (EXT, "bad:held", "holder", BIG64)),
    ("ext lease 2^40+1", (EXT, "bad:held", "holder", str(2 ** 40 + 1))),
    ("ext not owner", (EXT, "bad:held", "other", "100")),
    ("ext missing key", (EXT, "bad:new", "o", "100")),
    ("ext wrongtype", (EXT, "bad:str", "o", "100")),
    # LOCK.INSPECT
    ("ins no args", (INS,)),
    ("ins extra", (INS, "bad:held", "x")),
    ("ins wrongtype", (INS, "bad:str")),
    # LOCK.STATE
    ("state arity", (STATE, "bad:new", "1", "0")),
    ("state arity 2", (STATE, "bad:new")),
    ("state permits 0", (STATE, "bad:new", "0", "5", "0")),
    ("state permits 1025", (STATE, "bad:new", "1025", "5", "0")),
    ("state permits -1", (STATE, "bad:new", "-1", "5", "0")),
    ("state permits word", (STATE, "bad:new", "x", "5", "0")),
    ("state last -1", (STATE, "bad:new", "1", "-1", "0")),
    ("state last 2^63", (STATE, "bad:new", "1", BIG63, "0")),
    ("state last 2^64", (STATE, "bad:new", "1", BIG64, "0")),
    ("state last word", (STATE, "bad:new", "1", "x", "0")),
    ("state nholders -1", (STATE, "bad:new", "1", "5", "-1")),
    ("state nholders 1025", (STATE, "bad:new", "1", "5", "1025")),
    ("state nholders 1 no holder", (STATE, "bad:new", "1", "5", "1")),
    ("state nholders 0 with holder", (STATE, "bad:new", "1", "5", "0", "a", "100", "1", "3")),
    ("state holder short", (STATE, "bad:new", "1", "5", "1", "a", "100", "1")),
    ("state duplicate owners",
     (STATE, "bad:new", "2", "5", "2", "a", "100", "1", "3", "a", "100", "1", "4")),
    ("state token 0", (STATE, "bad:new", "1", "5", "1", "a", "100", "1", "0")),
    ("state token > last", (STATE, "bad:new", "1", "5", "1", "a", "100", "1", "6")),
    ("state token -1", (STATE, "bad:new", "1", "5", "1", "a", "100", "1", "-1")),
    ("state count 0", (STATE, "bad:new", "1", "5", "1", "a", "100", "0", "3")),
    ("state count 2^32", (STATE, "bad:new", "1", "5", "1", "a", "100", str(2 ** 32), "3")),
    ("state empty owner", (STATE, "bad:new", "1", "5", "1", "", "100", "1", "3")),
    ("state owner 257", (STATE, "bad:new", "1", "5", "1", OWNER257, "100", "1", "3")),
    ("state expires -1", (STATE, "bad:new", "1", "5", "1", "a", "-1", "1", "3")),
    ("state expires 2^48+1", (STATE, "bad:new", "1", "5", "1", "a", str(2 ** 48 + 1), "1", "3")),
    ("state expires word", (STATE, "bad:new", "1", "5", "1", "a", "soon", "1", "3")),
    ("state bad over held",
     (STATE, "bad:held", "1", "5", "2", "a", "100", "1", "3", "a", "100", "1", "4")),
    ("state wrongtype", (STATE, "bad:str", "1", "5", "0")),
]


@pytest.mark.parametrize("desc,args", BAD, ids=[d for d, _ in BAD])
def test_bad_input(server, r, desc, args):
    g = acquire(r, "bad:held", "holder", 60000)
    assert g[0] == 1
    r.set("bad:str", "v")
    dbsize = r.dbsize()
    digest = r.execute_command("DEBUG", "DIGEST")
    held = inspect(r, "bad:held")
    rep = raw_command(server, *args)
    assert rep.startswith(b"-"), "%s: %r answered %r, expected an error" % (desc, args, rep)
    assert r.ping()
    server.check_alive()
    assert r.dbsize() == dbsize, desc
    assert r.exists("bad:new") == 0, desc
    assert r.execute_command("DEBUG", "DIGEST") == digest, "%s changed the dataset" % desc
    now = inspect(r, "bad:held")
    assert now[:3] == held[:3] and [h[2:] for h in now[3]] == [h[2:] for h in held[3]]
    assert r.get("bad:str") == b"v"


def test_input_boundaries_accepted(server, r):
    """The other side of the table: the limits themselves are accepted."""
    o256 = "o" * 256
    g = acquire(r, "b1", o256, 1)
    assert g[0] == 1 and g[2] == 1
    assert acquire(r, "b2", "o", 2 ** 40)[2] == 2 ** 40
    assert r.execute_command(EXT, "b2", "o", 2 ** 40) == 2 ** 40
    assert acquire(r, "b3", "o", 100, "PERMITS", 1024)[0] == 1
    assert inspect(r, "b3")[0] == 1024
    assert acquire(r, "b4", "o", 100, "permits", 2, "reentrant", "session", "wait", 0)[0] == 1
    assert acquire(r, "b4", "o", 100, "permits", 2, "reentrant", "session", "wait", 0)[0] == 1
    assert holders(r, "b4")[b"o"][2] == 2
    # WAIT 0 does not block
    acquire(r, "b5", "h", 5000)
    t = time.time()
    assert acquire(r, "b5", "x", 100, "WAIT", 0)[0] == 0
    assert time.time() - t < 1.0
    assert r.execute_command(STATE, "b6", 1024, 2 ** 62, 0) == b"OK"  # the largest token (LOCK_MAX_TOKEN)
    with pytest.raises(redis.ResponseError):
        r.execute_command(STATE, "b6", 1024, 2 ** 62 + 1, 0)
    assert r.execute_command(STATE, "b7", 1, 5, 1, "a", 2 ** 48, 2 ** 32 - 1, 5) == b"OK"
    assert holders(r, "b7")[b"a"][1:] == (5, 2 ** 32 - 1)

# SPDX-License-Identifier: BSD-3-Clause
"""Edges of waiting (WAIT) shared by every family (server/waitq.c):

1. A waiter whose wait ends just as a release / lease end / capacity serves it
   gets exactly one reply; answered granted, it holds what it was granted;
   answered timed out, it holds nothing (the module owns the deadline).
2. One fairness rule for every family: while clients wait on a key, a later
   caller -- waiting or not -- is not served before them; one without WAIT is
   refused with a real retry estimate.
3. Refusals say when to retry: LOCK.ACQUIRE refused behind a queue, and
   RL.CONCURRENCY refused behind a queue or after its WAIT ran out.

Waiters are raw sockets: each reply is read off its own connection, and a
PING afterwards proves no second reply came before it. Nothing sleeps to order
events: tests wait for a state (queue length, blocked clients)."""


import pytest

from servers import RawConnection, resp_encode, wait_until

ACQ = "LOCK.ACQUIRE"
REL = "LOCK.RELEASE"
INS = "LOCK.INSPECT"
CONC = "RL.CONCURRENCY"
CONC_REL = "RL.CONCURRENCY_RELEASE"


# ------------------------------------------------------------------ helpers
def parse(raw):
    """A RESP2 reply of integers (or an array of them) as a Python value; an
    error as the string."""
    lines = raw.split(b"\r\n")
    head = lines[0]
    if head.startswith(b"-"):
        return head[1:].decode()
    if head.startswith(b":"):
        return int(head[1:])
    if head.startswith(b"*"):
        return [int(x[1:]) for x in lines[1:] if x.startswith(b":")]
    raise AssertionError("unexpected reply %r" % raw)


def wait_for(pred, timeout=5.0, what="condition"):
    return wait_until(pred, what, timeout)


def lock_waiters(r, key):
    v = r.execute_command(INS, key)
    return 0 if v is None else v[2]


def lock_holders(r, key):
    v = r.execute_command(INS, key)
    return {} if v is None else {h[0].decode(): h for h in v[3]}


def blocked(server):
    return int(server.info("clients")["blocked_clients"])


def lock_info_waiters(server):
    return int(server.info("mcaptcha_cache_locks")["mcaptcha_cache_waiters"])


def send(server, *cmd):
    c = RawConnection(server.host, server.port, timeout=10.0)
    c.sock.sendall(resp_encode(*cmd))
    return c


def collect(conns):
    """Exactly one reply per connection: read it, then PING must answer PONG
    next (a second reply would come first). Returns the parsed replies; a
    connection that never answered fails the test."""
    out, missing = [], []
    try:
        for i, c in enumerate(conns):
            try:
                out.append(parse(c.read_reply()))
            except OSError:  # socket.timeout: no reply at all
                missing.append(i)
                out.append(None)
        assert not missing, "%d of %d waiters got no reply: %r" % (len(missing), len(conns), missing)
        for i, c in enumerate(conns):
            assert c.command("PING") == b"+PONG\r\n", "waiter %d got a second reply" % i
    finally:
        for c in conns:
            c.close()
    return out


# ------------------------------------------- 1. the wait ends as it is served
@pytest.mark.parametrize("family", ["lock", "concurrency"])
def test_lock_waiters_whose_wait_ends_with_the_lease(server, r, family):
    """40 locks, each held, each with one waiter whose WAIT is the holder's
    remaining lease: the deadline and the lease end coincide. Every waiter gets
    exactly one reply; a granted one holds its lock with the token it was
    given, a timed-out one holds nothing (and nobody holds that lock)."""
    n, lease = 40, 1500
    for i in range(n):
        if family == "lock":
            assert r.execute_command(ACQ, "L%d" % i, "holder", lease)[0] == 1
        else:
            assert r.execute_command(CONC, "L%d" % i, "holder", lease, 1)[0] == 1
    conns = []
    for i in range(n):
        left = lock_holders(r, "L%d" % i)["holder"][1]
        assert left > 50, "the lease is nearly over before the waiter queued (slow machine?)"
        if family == "lock":
            conns.append(send(server, ACQ, "L%d" % i, "w", 5000, "WAIT", left))
        else:
            conns.append(send(server, CONC, "L%d" % i, "w", 5000, 1, "WAIT", left))
    replies = collect(conns)
    granted = 0
    for i, rep in enumerate(replies):
        holders = lock_holders(r, "L%d" % i)
        if rep[0] == 1:
            granted += 1
            assert list(holders) == ["w"], (i, rep, holders)
            if family == "lock":
                assert holders["w"][2] == rep[1], "token of the grant differs"
        else:
            assert holders == {}, "waiter %d timed out but the lock is held: %r" % (i, holders)
            if family == "lock":
                # refused with the estimate of the moment: the holder's lease was
                # ending (0 < ms <= what was left) or had ended (-1)
                assert rep[:2] == [0, -1] and (rep[2] == -1 or 0 < rep[2] <= lease), rep
            else:
                # refused; the slot is free (remaining 1, retry 0) once the lease ended
                assert rep[0] == 0 and rep[1] in (0, 1) and rep[2] >= 0 and rep[3] >= 0, rep
                assert rep[1] == 1 or rep[2] >= 1, rep
    print("lock waiters: %d granted, %d timed out, %d replies" % (granted, n - granted, len(replies)))
    assert blocked(server) == 0
    assert lock_info_waiters(server) == 0


def test_gcra_waiters_whose_wait_ends_at_the_retry_time(server, r):
    """30 limits of one unit per 2 s, each with one waiter whose WAIT is the
    retry time: every waiter gets exactly one reply; an allowed one took the
    unit, a timed-out one took nothing."""
    n, period = 30, 2000
    for i in range(n):
        assert r.execute_command("RL.GCRA", "g%d" % i, 1, period)[0] == 1
    conns = []
    for i in range(n):
        peek = r.execute_command("RL.GCRA_PEEK", "g%d" % i, 1, period)
        assert peek[0] == 0 and peek[2] > 50, peek
        conns.append(send(server, "RL.GCRA", "g%d" % i, 1, period, "WAIT", peek[2]))
    replies = collect(conns)
    allowed = 0
    for i, rep in enumerate(replies):
        peek = r.execute_command("RL.GCRA_PEEK", "g%d" % i, 1, period)
        if rep[0] == 1:
            allowed += 1
            assert peek[0] == 0 and peek[2] > period // 2, (i, rep, peek)
        else:
            assert rep[2] >= 0, rep  # a real retry estimate
            assert peek[0] == 1, "waiter %d timed out, yet its unit is taken: %r" % (i, peek)
    print("gcra waiters: %d allowed, %d timed out, %d replies" % (allowed, n - allowed, len(replies)))
    assert blocked(server) == 0


# ---------------------------------------------------------- 2. one fairness rule
@pytest.mark.parametrize("kind", ["gcra", "window"])
def test_rate_limit_newcomer_without_wait_does_not_overtake(server, r, kind):
    """A unit comes back (refund) while a client waits: a newcomer without WAIT,
    served before the queue is, is refused with a retry estimate; the waiter
    gets the unit."""
    cmd = ("RL.GCRA", "k", 1, 60000) if kind == "gcra" else ("RL.WINDOW", "k", 1, 60000)
    assert r.execute_command(*cmd)[0] == 1
    w = send(server, *cmd, "WAIT", 10000)
    wait_for(lambda: blocked(server) == 1, what="the waiter to block")
    p = r.pipeline(transaction=False)
    p.execute_command("RL.REFUND", "k", 1)
    p.execute_command(*cmd)
    refund, newcomer = p.execute()
    assert refund == 1
    assert newcomer[0] == 0, "the newcomer overtook the waiter: %r" % newcomer
    assert newcomer[2] >= 1, "refused without a retry estimate: %r" % newcomer
    assert collect([w])[0][0] == 1
    assert blocked(server) == 0


@pytest.mark.parametrize("kind", ["gcra", "window"])
def test_rate_limit_newcomer_is_refused_while_the_queue_waits(server, r, kind):
    """While a client waits, a newcomer without WAIT is refused even when it
    alone would fit (a bigger limit, COST the waiter cannot have yet)."""
    if kind == "gcra":
        first, waiting, small = (("RL.GCRA", "k", 2, 60000, "COST", 2), ("RL.GCRA", "k", 2, 60000, "COST", 2),
                                 ("RL.GCRA", "k", 2, 60000))
    else:
        first, waiting, small = (("RL.WINDOW", "k", 2, 60000), ("RL.WINDOW", "k", 2, 60000, "COST", 2),
                                 ("RL.WINDOW", "k", 2, 60000))
    assert r.execute_command(*first)[0] == 1
    if kind == "gcra":
        assert r.execute_command("RL.REFUND", "k", 1) == 1  # one unit free, the waiter needs two
    w = send(server, *waiting, "WAIT", 10000)
    wait_for(lambda: blocked(server) == 1, what="the waiter to block")
    rep = r.execute_command(*small)
    assert rep[0] == 0 and rep[2] >= 1, rep
    assert r.execute_command("RL.REFUND", "k", 2) >= 1
    assert collect([w])[0][0] == 1


def test_throttle_and_multi_do_not_overtake_gcra_waiters(server, r):
    """CL.THROTTLE and RL.MULTI on a key with waiters follow the same rule."""
    cmd = ("RL.GCRA", "k", 1, 60000)  # capacity 1, one per 60 s
    assert r.execute_command(*cmd)[0] == 1
    w = send(server, *cmd, "WAIT", 10000)
    wait_for(lambda: blocked(server) == 1, what="the waiter to block")
    p = r.pipeline(transaction=False)
    p.execute_command("RL.REFUND", "k", 1)
    p.execute_command("CL.THROTTLE", "k", 0, 1, 60)
    p.execute_command("RL.MULTI", 1, 1, "k", "GCRA", 1, 60000)
    refund, throttle, multi = p.execute()
    assert refund == 1
    assert throttle[0] == 1 and throttle[3] >= 1, "CL.THROTTLE overtook the waiter: %r" % throttle
    assert multi[:2] == [0, 1] and multi[2] >= 1, "RL.MULTI overtook the waiter: %r" % multi
    assert collect([w])[0][0] == 1
    # no queue any more: the same calls are answered on the state alone
    assert r.execute_command("CL.THROTTLE", "k", 0, 1, 60)[0] == 1
    assert r.execute_command("RL.GCRA_PEEK", "k", 1, 60000)[0] == 0


def test_lock_newcomer_refused_behind_the_queue_says_when(server, r):
    """A semaphore of 2: both held, a client waits; one permit frees and a
    newcomer comes before the queue is served: it is refused with the ms until
    the earliest lease ends (not -1), and the waiter gets the permit."""
    assert r.execute_command(ACQ, "S", "a", 60000, "PERMITS", 2)[0] == 1
    assert r.execute_command(ACQ, "S", "b", 30000, "PERMITS", 2)[0] == 1
    w = send(server, ACQ, "S", "w", 60000, "PERMITS", 2, "WAIT", 10000)
    wait_for(lambda: lock_waiters(r, "S") == 1, what="the waiter to queue")
    # the queue exists and a permit is busy: refused, ms until b's lease ends
    rep = r.execute_command(ACQ, "S", "x", 1000, "PERMITS", 2)
    assert rep[0] == 0 and rep[1] == -1 and 25000 < rep[2] <= 30000, rep
    p = r.pipeline(transaction=False)
    p.execute_command(REL, "S", "a")
    p.execute_command(ACQ, "S", "y", 1000, "PERMITS", 2)
    rel, newcomer = p.execute()
    assert rel == 0
    assert newcomer[0] == 0 and newcomer[1] == -1 and 25000 < newcomer[2] <= 30000, newcomer
    assert collect([w])[0][0] == 1
    assert sorted(lock_holders(r, "S")) == ["b", "w"]


# --------------------------------------------- 3. RL.CONCURRENCY's refusals
def test_concurrency_refused_behind_the_queue_says_when(server, r):
    assert r.execute_command(CONC, "c", "a", 60000, 2)[0] == 1
    assert r.execute_command(CONC, "c", "b", 30000, 2)[0] == 1
    w = send(server, CONC, "c", "w", 60000, 2, "WAIT", 10000)
    wait_for(lambda: lock_waiters(r, "c") == 1, what="the waiter to queue")
    rep = r.execute_command(CONC, "c", "x", 1000, 2)
    assert rep[0] == 0 and rep[1] == 0, rep
    assert 25000 < rep[2] <= 30000, "retry_after_ms %r: until b's lease ends" % rep
    assert 55000 < rep[3] <= 60000, "reset_after_ms %r: until a's lease ends" % rep
    p = r.pipeline(transaction=False)
    p.execute_command(CONC_REL, "c", "b")
    p.execute_command(CONC, "c", "y", 1000, 2)
    rel, newcomer = p.execute()
    assert rel == 1
    assert newcomer[0] == 0 and 55000 < newcomer[2] <= 60000 and 55000 < newcomer[3] <= 60000, newcomer
    assert collect([w])[0][0] == 1
    assert sorted(lock_holders(r, "c")) == ["a", "w"]


def test_concurrency_wait_runs_out_while_held_says_when(server, r):
    assert r.execute_command(CONC, "t", "a", 20000, 1)[0] == 1
    w = send(server, CONC, "t", "w", 1000, 1, "WAIT", 200)
    rep = collect([w])[0]
    assert rep[0] == 0 and rep[1] == 0, rep
    assert 15000 < rep[2] <= 20000, "retry_after_ms %r: until a's lease ends" % rep
    assert 15000 < rep[3] <= 20000, rep
    assert list(lock_holders(r, "t")) == ["a"]
    assert lock_waiters(r, "t") == 0


def test_client_unblock_answers_a_waiter_as_timed_out(server, r):
    """CLIENT UNBLOCK ends a wait like its timeout: the timeout reply, and the
    waiter leaves the queue holding nothing."""
    assert r.execute_command(ACQ, "U", "h", 20000)[0] == 1
    w = send(server, "CLIENT", "ID")
    cid = parse(w.read_reply())
    w.sock.sendall(resp_encode(ACQ, "U", "w", 1000, "WAIT", 10000))
    wait_for(lambda: lock_waiters(r, "U") == 1, what="the waiter to queue")
    assert r.execute_command("CLIENT", "UNBLOCK", cid) == 1
    rep = collect([w])[0]
    assert rep[:2] == [0, -1], rep
    assert list(lock_holders(r, "U")) == ["h"]
    assert lock_waiters(r, "U") == 0 and lock_info_waiters(server) == 0

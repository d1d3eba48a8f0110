# SPDX-License-Identifier: BSD-3-Clause
"""A history checker, in Jepsen's style, for leased locks, semaphores and
RL.CONCURRENCY (recorder and checker in lock_history.py).

Client threads, each with its own connection, run LOCK.ACQUIRE / RL.CONCURRENCY
with unique owners on a mutex, a PERMITS 3 semaphore and a limit-2 concurrency
key: waits that succeed or time out, attempts without WAIT, holders that release
(some after LOCK.EXTEND), holders that crash (short lease, never released),
SESSION holders that disconnect, and SESSION waiters that disconnect while
queued. The recorded history is then checked:

- every call got exactly one reply, of the documented shape; a WAIT that ran
  out did so no earlier than its timeout;
- never more holders than permits, over intervals each holder certainly held;
- fencing tokens (docs/locks.md, "Fencing tokens"): per lock, unique and ordered as the
  grants were in real time, never below the server clock, and still larger after
  the key is deleted; LOCK.INSPECT's last token is the last one granted;
- a refused or timed-out caller holds nothing; releases and EXTENDs answer as the
  lease says; INFO mcaptcha_cache_locks and the RL.CONCURRENCY counters agree
  with the history;
- afterwards no holder or waiter is left, and the concurrency key is gone;
- with a replica: the replica's LOCK.INSPECT and DEBUG DIGEST(-VALUE) equal the
  primary's.

Sizes come from soak.py: bounded under `make test`, long histories with MC_SOAK=1.
MC_HISTORY_SEED=<n> repeats one seed (thread interleavings still vary)."""

import os
import random
import time

import lock_history as H
from servers import wait_replicas_synced
from soak import scaled

THREADS = scaled(16, 16)
OPS = scaled(150, 4000)             # per thread
REPLICA_THREADS = scaled(12, 16)
REPLICA_OPS = scaled(80, 1500)

LOCKS = "mcaptcha_cache_locks"
RL = "mcaptcha_cache_ratelimit"


def _seed():
    return int(os.environ.get("MC_HISTORY_SEED") or random.randrange(1 << 30))


def _counters(c):
    i = c.info(LOCKS)
    i.update(c.info(RL))
    return {k: int(v) for k, v in i.items() if k.startswith("mcaptcha_cache_")}


def _quiesce(c, keys, timeout=15.0):
    """Wait (polling state, not ordering anything) until every short lease has ended:
    no holder and no waiter on any key, the idle concurrency key deleted. A SESSION
    holder's lease (30 s) outlasts this: only its disconnect can free it in time."""
    deadline = time.monotonic() + timeout
    while True:
        insp = {k: c.execute_command(H.INS, k) for k in keys.all()}
        waiting = int(c.info(LOCKS)["mcaptcha_cache_waiters"])
        idle = (all(v is not None and v[2] == 0 and v[3] == [] for k, v in insp.items() if k != keys.conc)
                and insp[keys.conc] is None and c.exists(keys.conc) == 0 and waiting == 0)
        if idle:
            return insp
        if time.monotonic() > deadline:
            raise AssertionError("holders or waiters left %.0f s after the run (waiters gauge %d):\n%s"
                                 % (timeout, waiting, "\n".join("  %s: %r" % kv for kv in insp.items())))
        time.sleep(0.01)


def _run_and_check(server, prefix, threads, ops):
    seed = _seed()
    keys = H.Keys(prefix)
    c = server.client()
    before = _counters(c)
    hist, problems, elapsed, t0 = H.run_history(server, keys, threads, ops, seed)
    tag = "seed %d (MC_HISTORY_SEED=%d repeats it)" % (seed, seed)

    chk = H.Checker(hist, keys, t0)
    violations = problems + chk.check()
    n = chk.counts()
    assert not violations, "%s: %d violation(s) in a history of %d operations:\n%s" % (
        tag, len(violations), len(hist), "\n".join(violations[:15]))
    assert n["ops"] == threads * ops, (tag, n)

    final = _quiesce(c, keys)
    # LOCK.INSPECT hides a lease the moment it ends; the module's timer drops it
    # from the stored value, and counts it, a moment later (the timer has ms
    # resolution, the clock of 7.2+ microseconds): wait for the count to reach
    # what the history makes certain -- a state, bounded -- then compare
    field = "mcaptcha_cache_leases_expired_while_held"
    deadline = time.monotonic() + 10
    while True:
        after = _counters(c)
        if after[field] - before.get(field, 0) >= n["expired_certain"] or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    d = {k: after[k] - before.get(k, 0) for k in after}

    # the lock keys keep their last token: the last one granted (or an abandoned
    # waiter's, granted just before it left)
    for k in keys.locks():
        permits, last, waiting, holders, adjustment, size = final[k]
        assert (permits, waiting, holders, adjustment, size) == (keys.permits[k], 0, [], 0, keys.permits[k]), \
            (tag, k, final[k])
        top = n["max_token"][k]
        if n["abandoned_on"][k] == 0:
            assert last == top, (tag, k, last, top)
        else:
            assert top is None or last >= top, (tag, k, last, top)

    n["elapsed_s"] = round(elapsed, 2)
    n["waits_info"] = d["mcaptcha_cache_waits"]
    # blocked waits that did not time out were served, or abandoned while queued
    n["served_hi"] = d["mcaptcha_cache_waits"] - d["mcaptcha_cache_timeouts"]
    n["served_lo"] = max(0, n["served_hi"] - n["abandoned"])
    n["expired_info"] = d["mcaptcha_cache_leases_expired_while_held"]
    n["threads"] = threads
    n["seed"] = seed
    n["tag"] = tag
    return keys, final, n, d, after


def _check_counters(n, d, after):
    """INFO against the history: exact where the history decides, else bounds (an
    abandoned waiter may have been granted, or a SESSION holder's lease have ended,
    before its disconnect). Checked last, all at once, so that a counter cannot
    hide a broken guarantee checked after it."""
    g = lambda f: d["mcaptcha_cache_" + f]  # noqa: E731
    wrong = []

    def want(ok, what, lo, hi, got):
        if not ok:
            wrong.append("%s: history allows %s, INFO says %d"
                         % (what, lo if lo == hi else "%d..%d" % (lo, hi), got))

    want(n["grants"] <= g("grants") <= n["grants"] + n["abandoned"], "grants",
         n["grants"], n["grants"] + n["abandoned"], g("grants"))
    want(g("timeouts") == n["timeouts"], "timeouts", n["timeouts"], n["timeouts"], g("timeouts"))
    want(n["timeouts"] <= g("waits") <= n["wait_ops"], "waits", n["timeouts"], n["wait_ops"], g("waits"))
    want(after["mcaptcha_cache_waiters"] == 0, "waiters (now)", 0, 0, after["mcaptcha_cache_waiters"])
    lo, hi = n["expired_certain"], n["expired_certain"] + n["expired_possible"]
    want(lo <= g("leases_expired_while_held") <= hi,
         "leases_expired_while_held (%d crashed holders' and released-too-late leases certainly "
         "ended while held)" % lo, lo, hi, g("leases_expired_while_held"))
    want(g("rl_concurrency_allowed") == n["conc_allowed"], "rl_concurrency_allowed",
         n["conc_allowed"], n["conc_allowed"], g("rl_concurrency_allowed"))
    want(g("rl_concurrency_refused") == n["conc_refused"], "rl_concurrency_refused",
         n["conc_refused"], n["conc_refused"], g("rl_concurrency_refused"))
    assert not wrong, "%s: INFO disagrees with the history:\n  %s" % (n["tag"], "\n  ".join(wrong))


def _tokens_grow_after_delete(c, keys, final):
    for k in keys.locks():
        last = final[k][1]
        assert c.delete(k) == 1
        got = c.execute_command(H.ACQ, k, "after-delete", 1000, "PERMITS", keys.permits[k])
        assert got[0] == 1 and got[1] > last, (k, last, got)
        assert c.execute_command(H.REL, k, "after-delete") == 0


def _report(n):
    print("\nlock history: %(threads)d clients, %(ops)d operations (%(abandoned)d abandoned waits), "
          "%(grants)d grants (%(read_grants)d READ, %(weighted_grants)d TAKE 2), %(waits_info)d blocked waits (%(served_lo)d-%(served_hi)d served "
          "from the queue, %(timeouts)d timed out), %(immediate_refusals)d immediate refusals, %(crashed_holders)d crashed holders, "
          "%(expired_info)d leases expired, %(tokens)d fencing tokens checked (%(cross_key_duplicate_tokens)d "
          "repeated across keys, which the README does not rule out), %(elapsed_s)ss, "
          "seed %(seed)d" % n)


def test_lock_history(servers):
    server = servers.new(name="history")
    keys, final, n, d, after = _run_and_check(server, "hist", THREADS, OPS)
    _tokens_grow_after_delete(server.client(), keys, final)
    _report(n)
    assert n["read_grants"] > 0 and n["weighted_grants"] > 0, n
    _check_counters(n, d, after)


def test_lock_history_replica(servers):
    primary = servers.new(name="primary")
    replica = servers.replica_of(primary, name="replica")
    keys, final, n, d, after = _run_and_check(primary, "rep", REPLICA_THREADS, REPLICA_OPS)
    wait_replicas_synced(primary, [replica])
    p, r = primary.client(), replica.client()
    for k in keys.all():
        assert r.execute_command(H.INS, k) == p.execute_command(H.INS, k), k
        assert r.exists(k) == p.exists(k), k
        if p.exists(k):
            assert r.execute_command("DEBUG", "DIGEST-VALUE", k) == \
                p.execute_command("DEBUG", "DIGEST-VALUE", k), k
    assert r.execute_command("DEBUG", "DIGEST") == p.execute_command("DEBUG", "DIGEST")
    _report(n)
    _check_counters(n, d, after)


# ------------------------------------------------- the checker catches faults
def _op(tid, i, key, kind="normal", fam="lock", lease=8000, wait=5000, permits=1, inv=0.0,
        rep=0.001, res=None, **kw):
    o = {"tid": tid, "i": i, "key": key, "fam": fam, "kind": kind, "owner": "o%d.%d" % (tid, i),
         "permits": permits, "lease": lease, "wait": wait, "srv_us": 0, "inv": inv, "rep": rep,
         "res": res, "granted": bool(res) and res[0] == 1}
    o.update(kw)
    return o


def _violations(hist):
    keys = H.Keys("k")
    return H.Checker(hist, keys, 0.0).check()


def test_checker_flags_broken_histories():
    m = "k:mutex"
    a = _op(0, 0, m, res=[1, 10, 8000], rel={"inv": 0.010, "rep": 0.011, "res": 0})
    b = _op(1, 0, m, inv=0.012, rep=0.013, res=[1, 11, 8000], rel={"inv": 0.02, "rep": 0.021, "res": 0})
    assert _violations([a, b]) == []
    # two holders of a mutex at once
    overlap = dict(b, inv=0.002, rep=0.005)
    assert any("2 holders at once" in v for v in _violations([a, overlap]))
    # a crashed holder (never released) holds until its lease ends
    crash = _op(2, 0, m, kind="crash", lease=50, res=[1, 10, 50])
    late = dict(b, inv=0.03, rep=0.031, rel={"inv": 0.04, "rep": 0.041, "res": 0})
    assert any("2 holders at once" in v for v in _violations([crash, late]))
    later = dict(b, inv=0.06, rep=0.061, rel={"inv": 0.07, "rep": 0.071, "res": 0})
    assert _violations([crash, later]) == []
    # tokens: given twice; ordered against real time
    assert any("given twice" in v for v in _violations([a, dict(b, res=[1, 10, 8000])]))
    assert any("contradicts real time" in v for v in _violations([a, dict(b, res=[1, 9, 8000])]))
    # a timed-out waiter that holds something; one refused before its WAIT ran out
    to = _op(3, 0, m, wait=20, inv=0.0, rep=0.025, res=[0, -1, -1], post=0)
    assert any("refused/timed-out" in v for v in _violations([to]))
    early = dict(to, rep=0.010, post=H.Err(H.NOT_OWNER))
    assert any("before its WAIT" in v for v in _violations([early]))
    # a release of a held lock before its lease end that does not answer 0
    assert any("did not answer 0" in v for v in
               _violations([dict(a, rel={"inv": 0.010, "rep": 0.011, "res": H.Err(H.NOT_OWNER)})]))
    # a call without a reply
    assert any("no reply" in v for v in _violations([dict(a, noreply="acquire: timeout")]))
    # a semaphore: three holders fit, a fourth does not
    s = "k:sem"
    sem = [_op(t, 0, s, permits=3, res=[1, 20 + t, 8000], rel={"inv": 0.05, "rep": 0.051, "res": 0})
           for t in range(4)]
    assert _violations(sem[:3]) == []
    assert any("4 holders at once" in v for v in _violations(sem))
    # weighted: two holders taking 2 each do not fit in 3 permits
    assert _violations([sem[0], dict(sem[1], take=2)]) == []
    assert any("4 permits taken" in v for v in _violations([dict(sem[0], take=2), dict(sem[1], take=2)]))
    # read-write: readers share; a writer beside a reader does not
    rw = "k:rw"
    r1, r2 = [_op(7 + t, 0, rw, mode="READ", res=[1, 30 + t, 8000], rel={"inv": 0.05, "rep": 0.051, "res": 0})
              for t in range(2)]
    assert _violations([r1, r2]) == []
    assert any("a writer beside" in v for v in _violations([r1, dict(r2, mode="WRITE")]))
    # refusals and grants must not contradict a holder that certainly held throughout
    nobody = _op(4, 0, m, kind="try", wait=None, inv=0.004, rep=0.005, res=[0, -1, -1],
                 post=H.Err(H.NOT_OWNER))
    assert any("as if nobody held" in v for v in _violations([a, nobody]))
    assert _violations([a, dict(nobody, res=[0, -1, 7995])]) == []
    c = "k:conc"
    h1 = _op(5, 0, c, fam="conc", permits=2, res=[1, 1, -1, 8000], rel={"inv": 0.05, "rep": 0.051, "res": 1})
    h2 = _op(6, 0, c, fam="conc", permits=2, inv=0.01, rep=0.011, res=[1, 1, -1, 8000],
             rel={"inv": 0.05, "rep": 0.051, "res": 1})
    assert any("remaining=1" in v for v in _violations([h1, h2]))
    assert _violations([h1, dict(h2, res=[1, 0, -1, 8000])]) == []

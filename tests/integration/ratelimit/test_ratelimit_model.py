# SPDX-License-Identifier: BSD-3-Clause
"""A model-based test of the rate limits: random sequences of RL.GCRA,
RL.GCRA_PEEK, CL.THROTTLE, RL.WINDOW, RL.WINDOW_PEEK, RL.REFUND and RL.MULTI
against a real primary (with a replica), every reply compared with a Python
model of docs/ratelimit.md, src/core/gcra.c, src/core/bucket.c and
src/ratelimit/*.c, interleaved with DEL, RENAME, COPY, MOVE (to db 1 and back),
SET (a key of another type), FLUSHALL, DEBUG RELOAD, SAVE + restart and a
replica compared with the primary. Stored policies: RL.POLICY_SET (a name may
change its numbers or its kind) and RL.POLICY_DEL, and RL.GCRA / RL.WINDOW with
POLICY name, modelled as the call with the policy's numbers (or its error); the
table survives FLUSHALL, DEBUG RELOAD and the restart, and reaches the replica.

Time. RL.GCRA and RL.WINDOW always pass `AT`, from a virtual clock T that
starts 1 h 2 min ahead of the server's clock and that a rule moves forward, so
their replies are exact. A few use an AT behind T (the "AT in the past" rule:
the window evaluates at the latest time it has seen, GCRA at AT itself) or
30 minutes behind the real clock (the expiry is then pushed back by the lag).
The commands without AT (the peeks, CL.THROTTLE, RL.REFUND, RL.MULTI) read the
server clock: each is sent between two TIMEs in one pipeline, and the model
accepts a reply only if some clock reading inside that bracket gives exactly
that reply. The model is a set of possible states (usually one): a write made
at the server's clock (CL.THROTTLE on a fresh key, say) leaves one candidate
per possible reading; the candidates are told apart at once by an exact read
of the TAT, `RL.GCRA key 1000 1 BURST 2^40-1 COST 0 AT X` (cost 0 writes
nothing; with a 1 us emission interval its `remaining` is the TAT in us), and
by the replies that follow.

Every limiter written at the real clock uses emission intervals of whole hours
and one-hour windows, so no key expires or decays in real time during a test:
which keys exist is always exact (checked with DBSIZE after every step).

Invariants: every reply equals the model's; after DEBUG RELOAD and SAVE +
restart the digest and PEXPIRETIME of every key are unchanged and the exact
reads and peeks equal the model; the replica's digests, expiry times and peeks
equal the primary's (and the model's).

Bounded in `make test` (tests/integration/soak.py); MC_SOAK=1 runs many more
examples.
"""

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from cluster import key_slot
from resp_conn import Conn, Err
from servers import resync_replica_now, wait_replicas_synced
from soak import model_settings

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
ERR_WINDOW = Err("ERR the key holds a window of another length; use the same window or delete the key")
ERR_NO_SUCH_KEY = Err("ERR no such key")

MIN = 60_000
HOUR = 60 * MIN
OFFSET_MS = HOUR + 2 * MIN           # T starts this far ahead of the server clock
REAL_PAST_MS = 30 * MIN              # AT this far behind the server clock
READOUT_BURST = (1 << 40) - 1        # the largest BURST: dvt = 2^40 - 1 us (12.7 days)
READOUT_BACK_MS = 24 * HOUR          # the readout's AT: a day before the test
READOUT_LIMIT = (1 << 32) - 1        # the largest window limit

# one hash tag: RL.MULTI needs its keys in one slot (standalone too)
GA, GB, WA, WB, X = "{m}ga", "{m}gb", "{m}wa", "{m}wb", "{m}x"
GCRA_KEYS = [GA, GB, X]
WINDOW_KEYS = [WA, WB, X]
KEYS = [GA, GB, WA, WB, X]
OTHER_SLOT = "solo"     # in another slot: RL.MULTI with it is refused (CROSSSLOT)
ERR_CROSSSLOT = Err("CROSSSLOT Keys in request don't hash to the same slot")
DBS = [0, 1]

# RL.GCRA (rate, period ms, BURST or None): emission 200 ms, 333.333 ms, 500 ms, 6 s
GCRA_SHORT = [(5, 1000, None), (3, 1000, None), (2, 1000, 4), (10, 60_000, 3)]
# ... whole hours (may be written at the real clock's time)
GCRA_LONG = [(2, 2 * HOUR, 3), (1, HOUR, 4)]
# RL.WINDOW (limit, window ms): slots of 1 ms, 3 ms, 234 ms
WINDOW_SHORT = [(2, 100), (3, 1000), (5, MIN)]
WINDOW_LONG = [(4, HOUR)]
# CL.THROTTLE (max_burst, count, period s): emission 1 h or 2 h
THROTTLE = [(3, 1, 3600), (1, 1, 7200), (2, 2, 7200)]
# RL.MULTI limits: GCRA (limit, period ms), WINDOW (limit, window ms)
MULTI_GCRA = [(4, 4 * HOUR), (2, 2 * HOUR)]
MULTI_WINDOW = [(3, HOUR), (5, HOUR)]
PEEK_GCRA = (5, 1000, None)
POLICY_NAMES = ["pa", "pb", "pc"]

TYPE_NAMES = {None: "none", "gcra": "mcap-gcra", "win": "mcap-wndw", "str": "string"}




def gcra_params(capacity, count, period_us):
    """gcra_params_init: (emission us, dvt us, limit)."""
    t = max(1, (period_us + count // 2) // count)
    return (t, t * capacity, capacity)


def rl_gcra_params(rate, period_ms, burst):
    return gcra_params(burst or rate, rate, period_ms * 1000)


def ceil_ms(us):
    return (us + 999) // 1000


def ceil_s(us):
    return (us + 999_999) // 1_000_000


def gcra_apply(p, tat_us, now, q):
    """core/gcra.c gcra_apply: (limited, remaining, retry_us, ttl_us, tat after)."""
    e, dvt, _ = p
    inc = e * q
    tat = tat_us if tat_us else now
    new = max(tat, now) + inc
    if new > now + dvt:
        limited, retry, ttl, after = 1, (new - now - dvt if inc <= dvt else -1), max(0, tat - now), tat_us
    else:
        limited, retry, ttl, after = 0, -1, new - now, (new if q else tat_us)
    remaining = (dvt - ttl) // e if dvt > ttl else 0
    return limited, remaining, retry, ttl, after


def slot_ms(window):
    return max(1, window // 256)


def slot_end(s, window):
    """When the hits of slot s stop counting (bucket.h)."""
    return (s + 1) * slot_ms(window) + window


def m_gcra(w, k, p, cost, now_us, apply):
    """RL.GCRA / RL.GCRA_PEEK (and one RL.MULTI GCRA limit) at now_us."""
    st_ = w.get(k)
    if st_ is not None and st_[0] != "gcra":
        return WRONGTYPE, w
    limited, rem, retry, ttl, after = gcra_apply(p, st_[1] if st_ else 0, now_us, cost)
    if apply and not limited and cost > 0:
        w = dict(w)
        w[k] = ("gcra", after, p[0], p[2])
    return [1 - limited, rem, -1 if retry < 0 else ceil_ms(retry), ceil_ms(ttl)], w


def m_window(w, k, limit, window, cost, now_ms, apply):
    """RL.WINDOW / RL.WINDOW_PEEK (and one RL.MULTI WINDOW limit): limiter.c eval_window."""
    st_ = w.get(k)
    if st_ is None:
        last, slots = 0, ()
    elif st_[0] != "win":
        return WRONGTYPE, w
    elif st_[1] != window:
        return ERR_WINDOW, w
    else:
        last, slots = st_[3], st_[4]
    eff = max(last, now_ms)
    live = [(s, c) for s, c in slots if slot_end(s, window) > eff]
    count = sum(c for _, c in live)
    if cost > limit:
        fits = None                     # never
    elif count <= limit - cost:
        fits = eff
    else:
        need, freed, fits = count - (limit - cost), 0, None
        for s, c in live:
            freed += c
            if freed >= need:
                fits = slot_end(s, window)
                break
    allowed = fits is not None and fits <= eff
    after = slots
    if allowed and apply and cost > 0:
        d = dict(live)
        s = eff // slot_ms(window)
        d[s] = d.get(s, 0) + cost
        after = tuple(sorted(d.items()))
        count = sum(d.values())
        w = dict(w)
        w[k] = ("win", window, limit, eff, after)
    empty_at = slot_end(after[-1][0], window) if after else 0
    if empty_at <= eff:
        empty_at = 0
    if allowed and not (apply and cost > 0) and cost > 0:
        count += cost
        empty_at = max(empty_at, (eff // slot_ms(window) + 1) * slot_ms(window) + window)
    rem = limit - count if count < limit else 0
    retry = -1 if allowed or fits is None else fits - eff
    return [int(allowed), rem, retry, empty_at - eff if empty_at > eff else 0], w


def m_refund(w, k, n, now_us):
    st_ = w.get(k)
    if st_ is None:
        return 0, w
    if st_[0] == "str":
        return WRONGTYPE, w
    w = dict(w)
    if st_[0] == "gcra":
        _, tat, e, lim = st_
        before = max(tat, now_us)
        if tat <= now_us:
            after = tat
        else:
            after = now_us if e * n >= tat - now_us else tat - e * n
        given = min(n, (before - max(after, now_us) + e - 1) // e)
        if after <= now_us:
            del w[k]
        else:
            w[k] = ("gcra", after, e, lim)
        return given, w
    _, window, lim, last, slots = st_
    eff = max(last, now_us // 1000)
    live = [[s, c] for s, c in slots if slot_end(s, window) > eff]
    given = 0
    while given < n and live:
        take = min(n - given, live[-1][1])
        live[-1][1] -= take
        given += take
        if live[-1][1] == 0:
            live.pop()
    if live:
        w[k] = ("win", window, lim, eff, tuple((s, c) for s, c in live))
    else:
        del w[k]
    return given, w


def m_throttle(w, k, burst, count, period_s, q, now_us):
    st_ = w.get(k)
    if st_ is not None and st_[0] != "gcra":
        return WRONGTYPE, w
    p = gcra_params(burst + 1, count, period_s * 1_000_000)
    limited, rem, retry, ttl, after = gcra_apply(p, st_[1] if st_ else 0, now_us, q)
    if not limited and q > 0:
        w = dict(w)
        w[k] = ("gcra", after, p[0], p[2])
    return [limited, p[2], rem, -1 if retry < 0 else ceil_s(retry), ceil_s(ttl)], w


def m_multi(w, costs, limits, now_us):
    """RL.MULTI: limits [(key, "GCRA"|"WINDOW", limit, period ms)], costs [cost of each limit]."""
    def one(w, cost, key, kind, limit, period, apply):
        k = (0, key)
        if kind == "GCRA":
            return m_gcra(w, k, gcra_params(limit, limit, period * 1000), cost, now_us, apply)
        return m_window(w, k, limit, period, cost, now_us // 1000, apply)

    if len({key_slot(lim[0]) for lim in limits}) > 1:
        return ERR_CROSSSLOT, w
    refused, retry, never, remaining = 0, -1, False, None
    for i, lim in enumerate(limits):
        res, _ = one(w, costs[i], *lim, apply=False)
        if isinstance(res, Err):
            return res, w
        if not res[0]:
            refused = refused or i + 1
            never = never or res[2] < 0
            retry = max(retry, res[2])
        remaining = res[1] if remaining is None else min(remaining, res[1])
    if not refused:
        for cost, lim in zip(costs, limits):
            _, w = one(w, cost, *lim, apply=True)
    return [int(not refused), refused, retry if refused and not never else -1, remaining], w


def freeze(w):
    return tuple(sorted(w.items()))


def short(worlds):
    return "\n".join("  %r" % (freeze(w),) for w in worlds[:4]) + ("\n  ..." if len(worlds) > 4 else "")


# ------------------------------------------------------------------ the machine
class RateLimitModel(RuleBasedStateMachine):
    primary = replica = None
    ms_clock = True
    conns = None        # db -> Conn to the primary

    @classmethod
    def connect(cls):
        if cls.conns:
            for c in cls.conns.values():
                c.close()
        cls.conns = {db: Conn(cls.primary, db) for db in DBS}

    def __init__(self):
        super().__init__()
        c = self.conns[0]
        assert c.call("FLUSHALL") == "OK"
        for name in c.call("RL.POLICY_LIST"):  # FLUSHALL keeps them
            assert c.call("RL.POLICY_DEL", name) == 1
        self.policies = {}  # name -> ("GCRA", rate, period, burst) | ("WINDOW", limit, window)
        now_ms = c.timed("PING")[1] // 1000
        self.t_ref = now_ms
        self.T = now_ms + OFFSET_MS
        self.readout_at = now_ms - READOUT_BACK_MS
        self.worlds = [{}]
        self.restarted = False

    # ------------------------------------------------------------ plumbing
    def expect(self, what, actual, fn):
        """A command whose reply does not depend on the clock: fn(world) ->
        (reply, world after). Keeps the candidate states that explain `actual`."""
        out, seen = {}, []
        for w in self.worlds:
            exp, after = fn(w)
            if exp == actual:
                out[freeze(after)] = after
            elif len(seen) < 3:
                seen.append(exp)
        assert out, "%r: the server replied %r, the model expected %r\nmodel states:\n%s" % (
            what, actual, seen, short(self.worlds))
        self.worlds = list(out.values())

    def clock_candidates(self, t0, t1):
        if self.ms_clock:   # Redis 7.0: RedisModule_Milliseconds
            return [m * 1000 for m in range(t0 // 1000, t1 // 1000 + 1)]
        return range(t0, t1 + 1)

    def expect_clock(self, what, conn, args, fn):
        """A command that reads the server clock: sent between two TIMEs;
        fn(world, now_us) -> (reply, world after) must explain the reply for
        some reading of the clock inside the bracket."""
        actual, t0, t1 = conn.timed(*args)
        out, seen = {}, []
        for w in self.worlds:
            for now in self.clock_candidates(t0, t1):
                exp, after = fn(w, now)
                if exp == actual:
                    out[freeze(after)] = after
                elif len(seen) < 3 and exp not in seen:
                    seen.append(exp)
        assert out, "%r: the server replied %r; the model, for a clock in [%d, %d] us, expected %r\n" \
                    "model states:\n%s" % (what or args, actual, t0, t1, seen, short(self.worlds))
        self.worlds = list(out.values())
        self.resolve()
        return actual

    def state_of(self, k):
        states = {w.get(k) for w in self.worlds}
        return states.pop() if len(states) == 1 else "?"

    def resolve(self):
        """Several candidate states: read the keys they disagree on."""
        if len(self.worlds) == 1:
            return
        keys = {k for w in self.worlds for k in w}
        for k in sorted(keys):
            if len({w.get(k) for w in self.worlds}) > 1:
                self.read_exact(k)
        assert len(self.worlds) <= 64, "the model lost track: %d candidate states" % len(self.worlds)

    def read_exact(self, k):
        """TYPE, and a cost-0 RL.GCRA / RL.WINDOW (which write nothing) whose
        reply pins the state down: a GCRA key's exact TAT, a window's count and
        newest slot relative to the latest time it has seen."""
        db, key = k
        c = self.conns[db]
        self.expect(("TYPE", k), c.call("TYPE", key),
                    lambda w: (TYPE_NAMES[(w.get(k) or (None,))[0]], w))
        if any((w.get(k) or (None,))[0] == "gcra" for w in self.worlds):
            p = gcra_params(READOUT_BURST, 1000, 1000)
            assert p[0] == 1
            args = ("RL.GCRA", key, 1000, 1, "BURST", READOUT_BURST, "COST", 0, "AT", self.readout_at)
            self.expect(args, c.call(*args),
                        lambda w: m_gcra(w, k, p, 0, self.readout_at * 1000, True))
        for window in sorted({w[k][1] for w in self.worlds if (w.get(k) or (None,))[0] == "win"}):
            # AT 1: evaluated at the latest time the window has seen; remaining
            # = 2^32-1 - count there, reset = when its newest slot leaves - that time
            args = ("RL.WINDOW", key, READOUT_LIMIT, window, "COST", 0, "AT", 1)
            self.expect(args, c.call(*args), lambda w: m_window(w, k, READOUT_LIMIT, window, 0, 1, True))

    def pick(self, i, kinds):
        """A key of db 0 for a rule: mostly one the model holds a value of kind
        `kinds` at (so that sequences build up state), else any."""
        held = [key for key in KEYS if (self.worlds[0].get((0, key)) or (None,))[0] in kinds]
        if held and i % 4:
            return held[i % len(held)]
        return KEYS[i % len(KEYS)]

    def at_of(self, when, back):
        return {"T": self.T, "behind_T": self.T - back, "real_past": self.t_ref - REAL_PAST_MS}[when]

    def keys_in_model(self, db):
        counts = {sum(1 for k in w if k[0] == db) for w in self.worlds}
        assert len(counts) == 1, "candidate states disagree on the keys: %r" % counts
        return counts.pop()

    # --------------------------------------------------- the native limiters
    @rule(key=st.sampled_from(GCRA_KEYS), params=st.sampled_from(GCRA_SHORT + GCRA_LONG),
          cost=st.sampled_from([0, 1, 1, 2, 3]), when=st.sampled_from(["T", "T", "behind_T"]),
          back=st.sampled_from([1, 700, 3000]), times=st.integers(1, 4), gap=st.sampled_from([0, 0, 1, 40, 300]))
    def gcra(self, key, params, cost, when, back, times, gap):
        """`times` requests, the virtual clock `gap` ms further each time."""
        rate, period, burst = params
        p = rl_gcra_params(rate, period, burst)
        for i in range(times):
            self.T += gap if i else 0
            at = self.at_of(when, back)
            args = ["RL.GCRA", key, rate, period] + (["BURST", burst] if burst else []) + ["COST", cost, "AT", at]
            self.expect(args, self.conns[0].call(*args), lambda w: m_gcra(w, (0, key), p, cost, at * 1000, True))

    @rule(key=st.sampled_from(GCRA_KEYS), params=st.sampled_from(GCRA_LONG), cost=st.sampled_from([0, 1, 2]))
    def gcra_real_past(self, key, params, cost):
        """AT half an hour behind the server clock: GCRA evaluates at AT."""
        rate, period, burst = params
        at = self.at_of("real_past", 0)
        args = ["RL.GCRA", key, rate, period, "BURST", burst, "COST", cost, "AT", at]
        p = rl_gcra_params(rate, period, burst)
        self.expect(args, self.conns[0].call(*args), lambda w: m_gcra(w, (0, key), p, cost, at * 1000, True))

    @rule(i=st.integers(0, 99), params=st.sampled_from(GCRA_SHORT + GCRA_LONG),
          cost=st.sampled_from([0, 1, 2, 5]))
    def gcra_peek(self, i, params, cost):
        key = self.pick(i, ("gcra",))
        rate, period, burst = params
        args = ["RL.GCRA_PEEK", key, rate, period] + (["BURST", burst] if burst else []) + ["COST", cost]
        p = rl_gcra_params(rate, period, burst)
        self.expect_clock(args, self.conns[0], args, lambda w, now: m_gcra(w, (0, key), p, cost, now, False))

    @rule(i=st.integers(0, 99), params=st.sampled_from(THROTTLE), q=st.sampled_from([0, 1, 1, 2]),
          times=st.integers(1, 3))
    def throttle(self, i, params, q, times):
        key = self.pick(i, ("gcra",))
        burst, count, period = params
        args = ["CL.THROTTLE", key, burst, count, period, q]
        for _ in range(times):
            self.expect_clock(args, self.conns[0], args,
                              lambda w, now: m_throttle(w, (0, key), burst, count, period, q, now))

    @rule(key=st.sampled_from(WINDOW_KEYS), params=st.sampled_from(WINDOW_SHORT + WINDOW_LONG),
          cost=st.sampled_from([0, 1, 1, 2, 3]), when=st.sampled_from(["T", "T", "behind_T"]),
          back=st.sampled_from([1, 700, 3000]), times=st.integers(1, 4), gap=st.sampled_from([0, 0, 1, 40, 300]))
    def window(self, key, params, cost, when, back, times, gap):
        """`times` requests, the virtual clock `gap` ms further each time (hits in several slots)."""
        limit, window = params
        for i in range(times):
            self.T += gap if i else 0
            at = self.at_of(when, back)
            args = ["RL.WINDOW", key, limit, window, "COST", cost, "AT", at]
            self.expect(args, self.conns[0].call(*args),
                        lambda w: m_window(w, (0, key), limit, window, cost, at, True))

    @rule(key=st.sampled_from(WINDOW_KEYS), params=st.sampled_from(WINDOW_LONG), cost=st.sampled_from([0, 1, 2]))
    def window_real_past(self, key, params, cost):
        """AT half an hour behind the server clock: the window evaluates at the
        latest time it has seen."""
        limit, window = params
        at = self.at_of("real_past", 0)
        args = ["RL.WINDOW", key, limit, window, "COST", cost, "AT", at]
        self.expect(args, self.conns[0].call(*args), lambda w: m_window(w, (0, key), limit, window, cost, at, True))

    @rule(i=st.integers(0, 99), params=st.sampled_from(WINDOW_SHORT + WINDOW_LONG),
          cost=st.sampled_from([0, 1, 2, 6]))
    def window_peek(self, i, params, cost):
        key = self.pick(i, ("win",))
        st_ = self.state_of((0, key))
        if i % 3 and st_ not in ("?", None) and st_[0] == "win":
            params = (params[0], st_[1])    # mostly the key's own window
        limit, window = params
        args = ["RL.WINDOW_PEEK", key, limit, window, "COST", cost]
        self.expect_clock(args, self.conns[0], args,
                          lambda w, now: m_window(w, (0, key), limit, window, cost, now // 1000, False))

    # ----------------------------------------------------- stored policies
    @rule(name=st.sampled_from(POLICY_NAMES),
          defn=st.one_of(st.sampled_from(GCRA_SHORT + GCRA_LONG).map(lambda p: ("GCRA",) + p),
                         st.sampled_from(WINDOW_SHORT + WINDOW_LONG).map(lambda p: ("WINDOW",) + p)))
    def policy_set(self, name, defn):
        """Define or change a policy (its numbers, or its kind)."""
        args = ["RL.POLICY_SET", name] + [x for x in defn if x is not None]
        if defn[0] == "GCRA" and defn[3] is not None:
            args = args[:-1] + ["BURST", defn[3]]
        assert self.conns[0].call(*args) == "OK"
        self.policies[name] = defn

    @rule(name=st.sampled_from(POLICY_NAMES))
    def policy_del(self, name):
        assert self.conns[0].call("RL.POLICY_DEL", name) == (1 if name in self.policies else 0)
        self.policies.pop(name, None)

    def policy_error(self, name, kind, cmd):
        """The error of `cmd key POLICY name` when the policy is missing or of the other kind."""
        d = self.policies.get(name)
        if d is None:
            return Err("ERR no such policy '%s' (RL.POLICY_SET defines it)" % name)
        if d[0] != kind:
            return Err("ERR policy '%s' is a %s policy; %s takes a %s policy" % (name, d[0], cmd, kind))
        return None

    @rule(key=st.sampled_from(GCRA_KEYS + WINDOW_KEYS), name=st.sampled_from(POLICY_NAMES),
          cost=st.sampled_from([0, 1, 1, 2, 3]), times=st.integers(1, 3), gap=st.sampled_from([0, 1, 40, 300]),
          window=st.booleans())
    def limit_by_policy(self, key, name, cost, times, gap, window):
        """RL.GCRA / RL.WINDOW key POLICY name: the call with the policy's numbers."""
        cmd, kind = ("RL.WINDOW", "WINDOW") if window else ("RL.GCRA", "GCRA")
        for i in range(times):
            self.T += gap if i else 0
            at = self.T
            args = [cmd, key, "POLICY", name, "COST", cost, "AT", at]
            e = self.policy_error(name, kind, cmd)
            if e is not None:
                self.expect(args, self.conns[0].call(*args), lambda w: (e, w))
            elif window:
                _, limit, win = self.policies[name]
                self.expect(args, self.conns[0].call(*args),
                            lambda w: m_window(w, (0, key), limit, win, cost, at, True))
            else:
                p = rl_gcra_params(*self.policies[name][1:])
                self.expect(args, self.conns[0].call(*args), lambda w: m_gcra(w, (0, key), p, cost, at * 1000, True))

    def check_policies(self, conn, label=""):
        """The node's policy table is the model's."""
        got = {}
        for name in conn.call("RL.POLICY_LIST"):
            d = [x.decode() if isinstance(x, bytes) else x for x in conn.call("RL.POLICY_GET", name)]
            got[name.decode()] = tuple(d[:3]) + ((d[4],) if len(d) == 5 else (None,) if d[0] == "GCRA" else ())
        assert got == self.policies, (label, got, self.policies)

    @rule(i=st.integers(0, 99), n=st.sampled_from([1, 1, 2, 5]))
    def refund(self, i, n):
        """Newest units first, never below empty; then the key is read back."""
        key = self.pick(i, ("gcra", "win", "str"))
        args = ["RL.REFUND", key, n]
        self.expect_clock(args, self.conns[0], args, lambda w, now: m_refund(w, (0, key), n, now))
        self.check_key((0, key))

    @rule(cost=st.sampled_from([0, 1, 1, 2, 3]),
          limits=st.lists(st.tuples(st.sampled_from(KEYS * 3 + [OTHER_SLOT]), st.sampled_from(["GCRA", "WINDOW"]),
                                    st.integers(0, 1)),
                          min_size=1, max_size=3, unique_by=lambda t: t[0]),
          per_limit=st.lists(st.sampled_from([0, 1, 1, 2, 3]), min_size=3, max_size=3), one_each=st.booleans())
    def multi(self, cost, limits, per_limit, one_each):
        """All or nothing; keys of another slot are refused first (CROSSSLOT). The cost is
        one integer for every limit, or (one_each) one per limit: "c1,c2,..."."""
        lims = [(key, kind) + (MULTI_GCRA if kind == "GCRA" else MULTI_WINDOW)[i] for key, kind, i in limits]
        costs = per_limit[:len(lims)] if one_each else [cost] * len(lims)
        args = ["RL.MULTI", ",".join(map(str, costs)) if one_each else cost, len(lims)]
        for key, kind, limit, period in lims:
            args += [key, kind, limit, period]
        self.expect_clock(args, self.conns[0], args, lambda w, now: m_multi(w, costs, lims, now))

    @rule(dt=st.sampled_from([1, 10, 250, 1000, 5000, 20_000]))
    def advance(self, dt):
        """The virtual clock moves forward (no real time passes)."""
        self.T += dt

    @rule(key=st.sampled_from(KEYS), db=st.sampled_from(DBS))
    def read_back(self, key, db):
        self.check_key((db, key))

    # ------------------------------------------------------ the keyspace
    @rule(op=st.sampled_from(["DEL", "DEL", "RENAME", "RENAME", "COPY", "MOVE", "MOVE", "SET"]),
          i=st.integers(0, 99), j=st.integers(0, 99), db=st.sampled_from(DBS))
    def keyspace(self, op, i, j, db):
        """DEL, RENAME, COPY [DB 1], MOVE to db 1 and back, SET (a key of another type)."""
        src, dst = self.pick(i, ("gcra", "win", "str")), KEYS[j % len(KEYS)]
        c = self.conns[0]
        if op == "DEL":
            keys = sorted({src, dst})

            def fn(w):
                w = dict(w)
                return sum(w.pop((0, key), None) is not None for key in keys), w
            self.expect(["DEL"] + keys, c.call("DEL", *keys), fn)
        elif op == "RENAME":
            def fn(w):
                if (0, src) not in w:
                    return ERR_NO_SUCH_KEY, w
                w = dict(w)
                w[(0, dst)] = w.pop((0, src))
                return "OK", w
            self.expect(("RENAME", src, dst), c.call("RENAME", src, dst), fn)
        elif op == "COPY":
            if src == dst and db == 0:
                return  # an error of COPY's own, not this module's

            def fn(w):
                if (0, src) not in w or (db, dst) in w:
                    return 0, w
                w = dict(w)
                w[(db, dst)] = w[(0, src)]
                return 1, w
            args = ("COPY", src, dst) + (("DB", db) if db else ())
            self.expect(args, c.call(*args), fn)
        elif op == "MOVE":
            frm = db
            key = src if frm == 0 else dst
            to = 1 - frm

            def fn(w):
                if (frm, key) not in w or (to, key) in w:
                    return 0, w
                w = dict(w)
                w[(to, key)] = w.pop((frm, key))
                return 1, w
            self.expect(("MOVE", key, to, "from db", frm), self.conns[frm].call("MOVE", key, to), fn)
        else:
            def fn(w):
                w = dict(w)
                w[(0, X)] = ("str",)
                return "OK", w
            self.expect(("SET", X), c.call("SET", X, "not a limiter"), fn)

    @precondition(lambda self: len(self.worlds[0]) >= 4)
    @rule()
    def flushall(self):
        self.expect("FLUSHALL", self.conns[0].call("FLUSHALL"), lambda w: ("OK", {}))
        self.check_policies(self.conns[0], "after FLUSHALL")

    # -------------------------------------------------- durability
    def snapshot(self, conns):
        """Every key of the model: (TYPE, DEBUG DIGEST-VALUE, PEXPIRETIME)."""
        out = {}
        for db in DBS:
            for key in KEYS:
                t, d, x = conns[db].pipe(("TYPE", key), ("DEBUG", "DIGEST-VALUE", key), ("PEXPIRETIME", key))
                out[(db, key)] = (t, d, x)
        return out

    def check_key(self, k, conns=None, label=""):
        """One key against the model: TYPE, its exact TAT (on the primary), the peeks."""
        db, key = k
        if conns is None:
            conns = self.conns
            self.read_exact(k)
        else:
            self.expect((label, "TYPE", k), conns[db].call("TYPE", key),
                        lambda w: (TYPE_NAMES[(w.get(k) or (None,))[0]], w))
        s = self.state_of(k)
        if s == "?" or s is None or s[0] == "gcra":
            p = rl_gcra_params(*PEEK_GCRA)
            args = ["RL.GCRA_PEEK", key, PEEK_GCRA[0], PEEK_GCRA[1], "COST", 1]
            self.expect_clock((label, db, args), conns[db], args, lambda w, now: m_gcra(w, k, p, 1, now, False))
        windows = {w[k][1] for w in self.worlds if (w.get(k) or (None,))[0] == "win"}
        for window in sorted(windows):
            for cost in (0, 1):
                args = ["RL.WINDOW_PEEK", key, 3, window, "COST", cost]
                self.expect_clock((label, db, args), conns[db], args,
                                  lambda w, now: m_window(w, k, 3, window, cost, now // 1000, False))

    def check_all(self, conns=None, label=""):
        """Every key against the model (conns: the replica's)."""
        for db in DBS:
            assert (conns or self.conns)[db].call("DBSIZE") == self.keys_in_model(db), (label, db)
            for key in KEYS:
                self.check_key((db, key), conns, label)

    @rule()
    def debug_reload(self):
        before = self.snapshot(self.conns)
        assert self.conns[0].call("DEBUG", "RELOAD") == "OK"
        assert self.snapshot(self.conns) == before
        self.check_all(label="after DEBUG RELOAD")
        self.check_policies(self.conns[0], "after DEBUG RELOAD")

    @precondition(lambda self: not self.restarted)
    @rule()
    def save_and_restart(self):
        """SAVE, kill -9, start again on that RDB (at most once per example)."""
        self.restarted = True
        before = self.snapshot(self.conns)
        assert self.primary.save_now()   # waits for a replica sync's RDB child first
        self.primary.restart(kill=True)
        type(self).connect()
        assert self.snapshot(self.conns) == before
        self.check_all(label="after restart")
        self.check_policies(self.conns[0], "after restart")
        resync_replica_now(self.replica, self.primary)

    @rule()
    def replica_agrees(self):
        wait_replicas_synced(self.primary, [self.replica], timeout=30)
        rconns = {db: Conn(self.replica, db) for db in DBS}
        try:
            assert self.snapshot(rconns) == self.snapshot(self.conns)
            self.check_all(rconns, label="replica")
            self.check_policies(rconns[0], "replica")
        finally:
            for c in rconns.values():
                c.close()

    # ---------------------------------------------------------- invariant
    @invariant()
    def keyspace_agrees(self):
        assert self.conns[0].call("DBSIZE") == self.keys_in_model(0)


def server_has_ms_clock(server):
    """Redis 7.0 gives modules a millisecond clock; 7.2+ and Valkey microseconds."""
    i = server.info("server")
    if "valkey_version" in i or "server_name" in i and i["server_name"] != "redis":
        return False
    major, minor = (int(x) for x in i["redis_version"].split(".")[:2])
    return (major, minor) < (7, 2)


def test_ratelimit_model(servers):
    RateLimitModel.primary = servers.new(name="primary")
    RateLimitModel.replica = servers.replica_of(RateLimitModel.primary, name="replica")
    RateLimitModel.ms_clock = server_has_ms_clock(RateLimitModel.primary)
    RateLimitModel.connect()
    try:
        run_state_machine_as_test(RateLimitModel, settings=model_settings(examples=60, steps=50))
    finally:
        for c in RateLimitModel.conns.values():
            c.close()
        RateLimitModel.conns = None

# SPDX-License-Identifier: BSD-3-Clause
"""A model-based test of the lock family: random sequences of commands against
a real primary (with a replica), every reply compared with a Python model.

The rules: LOCK.ACQUIRE (mutex and PERMITS 2 semaphores with TAKE 1 or 2, READ
and WRITE holds of read-write locks, REENTRANT, SESSION, LOCKDELAY, WAIT), RELEASE and EXTEND by owners and strangers,
a semaphore pool's LOCK.ADD_PERMITS, LOCK.DRAIN_PERMITS and LOCK.AVAILABLE_PERMITS (the
adjustment on the acquirers' PERMITS n; added permits serve the waiters), waiters that queue, time
out or disconnect, a lease made to end (the waiter behind it must be served by
the module's timer), a session connection that closes, DEL/UNLINK/FLUSHALL/
FLUSHDB of held locks with waiters (the head waiter is served at once), RENAME,
MOVE (to db 1) and COPY, DEBUG RELOAD, SAVE + kill -9 + restart, and a replica
compared with the primary (DEBUG DIGEST, LOCK.INSPECT).

After every step every lock is read back with LOCK.INSPECT and compared with the
model (permits, last token, waiters, holders with token and count, lease left
within the lease, the pool's adjustment and size). Fencing tokens are checked to grow strictly, across keys and
across every reload and restart of the process (docs/locks.md, "Fencing tokens").

Leases and lock-delays are long (10 minutes), so nothing ends unless a rule
makes it end: the model is exact. A grant with LOCKDELAY whose lease a rule
ends, or whose session closes, leaves a lock-delay (LOCK.INSPECT: count 0) that
takes its permit until the key is deleted; nobody can release it. A rule that needs a state (a waiter queued, a lease ended, a
disconnect seen) polls for it; nothing waits for a time.

Bounded in `make test` (tests/integration/soak.py); MC_SOAK=1 (`make soak`)
runs many more examples.
"""


import redis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from servers import read_reply, wait_replicas_synced, wait_until
from soak import model_settings

LEASE = 600_000
NAMES = ["a", "b"]
DBS = [0, 1]
OWNERS = ["o1", "o2", "o3"]
HOLDER = "<a holder>"
DB = st.sampled_from([0, 0, 0, 1])   # db 1 now and then (MOVE, FLUSHDB, timers there)
NOT_OWNER = b"the lock is not held by this owner"
INFO_LOCKS = "mcaptcha_cache_locks"


def poll(what, cond, timeout=10.0):
    """Wait for a state (not a time): cond() true, or fail naming `what`."""
    return wait_until(cond, what, timeout)


read = read_reply


class Holder:
    def __init__(self, owner, token, session=None, delay=False, shared=False, weight=1):
        self.owner, self.token, self.count, self.session, self.delay = owner, token, 1, session, delay
        self.shared, self.weight = shared, weight


class LockM:
    def __init__(self, permits):
        self.permits, self.last_token, self.holders = permits, 0, {}
        self.slots = []   # lock-delays: (owner, token, shared, weight), each taking its permits
        self.adjust = 0   # the semaphore pool's adjustment (LOCK.ADD_PERMITS, LOCK.DRAIN_PERMITS)

    def size(self, permits=None):
        """The pool's size: (this base, or `permits`) + the adjustment, clamped to 0..1024."""
        return max(0, min(1024, (self.permits if permits is None else permits) + self.adjust))

    def entries(self):
        return len(self.holders) + len(self.slots)

    def taken(self):
        return sum(h.weight for h in self.holders.values()) + sum(w for _, _, _, w in self.slots)

    def all_shared(self):
        return all(h.shared for h in self.holders.values()) and all(sh for _, _, sh, _ in self.slots)

    def end_hold(self, owner):
        """owner's hold ends without a release: a lock-delay if it has one."""
        h = self.holders.pop(owner)
        if h.delay:
            self.slots.append((owner, h.token, h.shared, h.weight))
            STATS["lock-delays"] += 1
        return h


class Waiter:
    """A blocked LOCK.ACQUIRE ... WAIT on its own connection."""

    def __init__(self, conn, owner, permits, shared=False, take=1):
        self.conn, self.owner, self.permits, self.shared, self.take = conn, owner, permits, shared, take


STATS = {"examples": 0, "steps": 0, "grants": 0, "waiters served": 0, "timeouts": 0, "restarts": 0,
         "lock-delays": 0, "read grants": 0, "upgrades refused": 0, "weighted grants": 0,
         "pool changes": 0, "pool refusals": 0}


class LockMachine(RuleBasedStateMachine):
    primary = replica = None
    max_token = 0      # the largest token this test saw: every new one is larger

    def __init__(self):
        super().__init__()
        self.locks = {}    # (db, name) -> LockM
        self.queues = {}   # (db, name) -> [Waiter]
        self.seq = 0
        self.sessions = []  # open session connections
        self.restarts = 0   # at most one per example (a restart costs the replica ~1 s to reconnect)

    # ---------------------------------------------------------------- plumbing
    def c(self, db):
        return self.clients[db]

    def conn(self, db):
        c = redis.Connection(host=self.primary.host, port=self.primary.port, db=db, socket_timeout=10)
        c.connect()
        return c

    def fresh(self, prefix):
        self.seq += 1
        return "%s%d" % (prefix, self.seq)

    def new_token(self, key, token):
        """A grant's token: larger than the key's last and than any token seen."""
        assert isinstance(token, int)
        lk = self.locks[key]
        assert token > lk.last_token, (key, token, lk.last_token)
        assert token > LockMachine.max_token, (key, token, LockMachine.max_token)
        lk.last_token = token
        LockMachine.max_token = token
        STATS["grants"] += 1
        return token

    def try_acquire(self, key, owner, permits, reentrant, shared=False, take=1):
        """The model of one attempt with no queue ahead: ('granted', holder) |
        ('reentered', holder) | ('owned',) | ('busy',) | ('permits',) | ('upgrade',)
        (WRITE inside READ) | ('more',) (a reentry asking for more permits than held) |
        ('readpool',) (READ on a pool with an adjustment). `shared`: READ, on a lock of one permit; `take`:
        the permits a new grant takes."""
        lk = self.locks.get(key)
        if lk is not None and lk.entries() and lk.permits != permits:
            return ("permits",)
        if lk is not None and shared and lk.adjust != 0:
            return ("readpool",)
        if lk is not None and owner in lk.holders:
            if not reentrant:
                return ("owned",)
            if lk.holders[owner].shared and not shared:
                return ("upgrade",)
            if take > lk.holders[owner].weight:
                return ("more",)   # a reentry takes no more permits
            lk.holders[owner].count += 1
            return ("reentered", lk.holders[owner])
        if lk is not None and (not lk.all_shared() if shared else lk.taken() + take > lk.size(permits)):
            return ("busy",)           # refused: the lock is left as it was
        if lk is None:
            lk = self.locks[key] = LockM(permits)
        lk.permits = permits           # an unheld lock takes the size of its next grant
        return ("granted", None)

    def check_refusal(self, key, rep):
        assert rep[0] == 0 and rep[1] == -1, rep
        lk = self.locks.get(key)
        if lk is None or not lk.entries():
            assert rep[2] == -1, rep
        else:   # a lease with a lock-delay frees its permit when the delay ends too
            assert 0 < rep[2] <= (2 * LEASE if any(h.delay for h in lk.holders.values()) else LEASE), rep

    def serve(self, key):
        """The key's permits may have come free: its waiters are served first
        come first served, each read from its connection (must arrive)."""
        q = self.queues.get(key, [])
        while q:
            w = q[0]
            out = self.try_acquire(key, w.owner, w.permits, False, w.shared, w.take)
            if out[0] == "busy":
                return
            q.pop(0)
            rep = read(w.conn)
            if out[0] == "permits":
                assert isinstance(rep, redis.ResponseError) and "PERMITS differs" in str(rep), rep
            elif out[0] == "readpool":
                assert isinstance(rep, redis.ResponseError) and "READ is for a read-write lock" in str(rep), rep
            else:
                assert out[0] == "granted", out
                assert rep[0] == 1 and rep[2] == LEASE, rep
                self.locks[key].holders[w.owner] = Holder(w.owner, self.new_token(key, rep[1]), shared=w.shared,
                                                          weight=w.take)
                STATS["weighted grants"] += w.take > 1
            STATS["waiters served"] += 1
            w.conn.disconnect()

    def drop_key(self, key):
        """The key was deleted: its session holders lose their key too."""
        self.locks.pop(key, None)

    # ------------------------------------------------------------------ setup
    @initialize()
    def setup(self):
        self.clients = {db: redis.Redis(host=self.primary.host, port=self.primary.port, db=db, socket_timeout=10)
                        for db in DBS}
        self.c(0).flushall()
        STATS["examples"] += 1

    def teardown(self):
        for q in self.queues.values():
            for w in q:
                w.conn.disconnect()
        for s in self.sessions:
            s.disconnect()
        for c in getattr(self, "clients", {}).values():
            c.connection_pool.disconnect()

    # ------------------------------------------------------------------ rules
    @rule(name=st.sampled_from(NAMES), db=DB, owner=st.sampled_from(OWNERS),
          permits=st.sampled_from([1, 1, 2]), reentrant=st.booleans(), delay=st.sampled_from([False, False, True]),
          mode=st.sampled_from([None, None, "READ", "READ", "WRITE"]), take=st.sampled_from([1, 1, 2]))
    def acquire(self, name, db, owner, permits, reentrant, delay, mode, take=1):
        key = (db, name)
        shared = mode == "READ"
        args = ["LOCK.ACQUIRE", name, owner, LEASE, "PERMITS", permits] + (["REENTRANT"] if reentrant else [])
        args += ["LOCKDELAY", LEASE] if delay else []
        args += [mode] if mode else []
        args += ["TAKE", take] if take > 1 else []
        try:
            rep = self.c(db).execute_command(*args)
        except redis.ResponseError as e:
            rep = e
        if mode and permits > 1:
            assert isinstance(rep, redis.ResponseError) and "not with PERMITS" in str(rep), rep
            return
        if take > permits:
            assert isinstance(rep, redis.ResponseError) and "TAKE k must not exceed" in str(rep), rep
            return
        if self.queues.get(key):
            lk = self.locks.get(key)
            if reentrant and lk is not None and owner in lk.holders:
                out = self.try_acquire(key, owner, permits, reentrant, shared, take)
                assert out[0] in ("reentered", "permits", "upgrade", "more", "readpool"), out
            else:
                out = ("queued",)
        else:
            out = self.try_acquire(key, owner, permits, reentrant, shared, take)
        if out[0] == "upgrade":
            assert isinstance(rep, redis.ResponseError) and "holds this lock for READ" in str(rep), rep
            STATS["upgrades refused"] += 1
        elif out[0] == "more":
            assert isinstance(rep, redis.ResponseError) and "a reentry takes no more permits" in str(rep), rep
        elif out[0] == "permits":
            assert isinstance(rep, redis.ResponseError) and "PERMITS differs" in str(rep), rep
        elif out[0] == "readpool":
            assert isinstance(rep, redis.ResponseError) and "READ is for a read-write lock" in str(rep), rep
        elif out[0] == "reentered":
            assert rep == [1, out[1].token, LEASE], (rep, out[1].token)
        elif out[0] == "granted":
            assert rep[0] == 1 and rep[2] == LEASE, rep
            self.locks[key].holders[owner] = Holder(owner, self.new_token(key, rep[1]), delay=delay, shared=shared,
                                                    weight=take)
            STATS["read grants"] += shared
            STATS["weighted grants"] += take > 1
        else:
            self.check_refusal(key, rep)

    @rule(name=st.sampled_from(NAMES), db=DB, permits=st.sampled_from([1, 1, 2]), reader=st.booleans())
    def wait(self, name, db, permits, reader=False):
        """A new owner waits (WAIT 10 minutes): granted at once, or queued."""
        key = (db, name)
        owner = self.fresh("w")
        shared = reader and permits == 1
        take = 2 if reader and permits == 2 else 1   # a semaphore's "reader" asks for both permits
        conn = self.conn(db)
        conn.send_command("LOCK.ACQUIRE", name, owner, LEASE, "PERMITS", permits, "WAIT", LEASE,
                          *(["READ"] if shared else []), *(["TAKE", 2] if take > 1 else []))
        out = ("queued",) if self.queues.get(key) else self.try_acquire(key, owner, permits, False, shared, take)
        if out[0] == "queued" or out[0] == "busy":
            self.queues.setdefault(key, []).append(Waiter(conn, owner, permits, shared, take))
            poll("waiter %s queued on %s" % (owner, key),
                 lambda: self.c(db).execute_command("LOCK.INSPECT", name)[2] == len(self.queues[key]))
            return
        rep = read(conn)
        conn.disconnect()
        if out[0] == "permits":
            assert isinstance(rep, redis.ResponseError) and "PERMITS differs" in str(rep), rep
        elif out[0] == "readpool":
            assert isinstance(rep, redis.ResponseError) and "READ is for a read-write lock" in str(rep), rep
        else:
            assert out[0] == "granted" and rep[0] == 1, (out, rep)
            self.locks[key].holders[owner] = Holder(owner, self.new_token(key, rep[1]), shared=shared, weight=take)
            STATS["weighted grants"] += take > 1

    @precondition(lambda self: any(self.queues.values()))
    @rule(data=st.data())
    def waiter_times_out(self, data):
        """A waiter with a short WAIT behind a busy queue: refused once (with the
        ms until the earliest lease ends), holding nothing; the queue as before."""
        key = data.draw(st.sampled_from(sorted(k for k, q in self.queues.items() if q)))
        db, name = key
        owner = self.fresh("t")
        conn = self.conn(db)
        try:
            rep = conn.send_command("LOCK.ACQUIRE", name, owner, LEASE, "PERMITS", self.queues[key][0].permits,
                                    "WAIT", 5) or read(conn)
            self.check_refusal(key, rep)
            STATS["timeouts"] += 1
        finally:
            conn.disconnect()
        with_err = self.c(db)
        try:
            with_err.execute_command("LOCK.RELEASE", name, owner)
            raise AssertionError("a timed-out waiter holds %s" % (key,))
        except redis.ResponseError as e:
            assert NOT_OWNER in str(e).encode()
        self.serve(key)   # the queue was served at the deadline: its head tried again
        poll("queue of %s back to %d" % (key, len(self.queues[key])),
             lambda: self.c(db).execute_command("LOCK.INSPECT", name)[2] == len(self.queues[key]))

    @precondition(lambda self: any(self.queues.values()))
    @rule(data=st.data())
    def waiter_disconnects(self, data):
        key = data.draw(st.sampled_from(sorted(k for k, q in self.queues.items() if q)))
        q = self.queues[key]
        w = q.pop(data.draw(st.integers(0, len(q) - 1)))
        w.conn.disconnect()
        db, name = key
        # the new head is tried: one whose PERMITS differ from the held lock's
        # is answered with that error now (as serve() models)
        self.serve(key)
        poll("waiter left %s" % (key,), lambda: self.c(db).execute_command("LOCK.INSPECT", name)[2] == len(q))

    def pick_owner(self, key, owner):
        """`owner`, or for HOLDER the first current holder of the key (waiters
        granted earlier hold under names of their own)."""
        lk = self.locks.get(key)
        if owner == HOLDER:
            owner = next(iter(lk.holders), OWNERS[0]) if lk else OWNERS[0]
        return owner

    @rule(name=st.sampled_from(NAMES), db=DB, owner=st.sampled_from(OWNERS + [HOLDER] * 3))
    def release(self, name, db, owner):
        key = (db, name)
        owner = self.pick_owner(key, owner)
        lk = self.locks.get(key)
        h = lk.holders.get(owner) if lk else None
        try:
            rep = self.c(db).execute_command("LOCK.RELEASE", name, owner)
        except redis.ResponseError as e:
            assert h is None and NOT_OWNER in str(e).encode(), (key, owner, e)
            return
        assert h is not None, (key, owner, rep)
        h.count -= 1
        assert rep == h.count, (rep, h.count)
        if h.count == 0:
            del lk.holders[owner]
            self.serve(key)

    @rule(name=st.sampled_from(NAMES), db=DB, owner=st.sampled_from(OWNERS + [HOLDER]))
    def extend(self, name, db, owner):
        key = (db, name)
        owner = self.pick_owner(key, owner)
        lk = self.locks.get(key)
        held = lk is not None and owner in lk.holders
        try:
            rep = self.c(db).execute_command("LOCK.EXTEND", name, owner, LEASE)
            assert held and rep == LEASE, (key, owner, rep)
        except redis.ResponseError as e:
            assert not held and NOT_OWNER in str(e).encode(), (key, owner, e)

    @precondition(lambda self: any(lk.holders for lk in self.locks.values()))
    @rule(data=st.data())
    def lease_ends(self, data):
        """A holder's lease is cut to 5 ms: the module's timer ends it (the stored
        value drops it, untouched) and serves the waiters behind it."""
        key = data.draw(st.sampled_from(sorted(k for k, lk in self.locks.items() if lk.holders)))
        lk = self.locks[key]
        owner = data.draw(st.sampled_from(sorted(lk.holders)))
        db, name = key
        ended = int(self.c(db).info(INFO_LOCKS)["mcaptcha_cache_leases_expired_while_held"])
        assert self.c(db).execute_command("LOCK.EXTEND", name, owner, 5) == 5
        h = lk.end_hold(owner)
        if h.session is not None:
            h.session.holds.discard(key)
        # the timer ended the lease in the stored value (INFO counts it; LOCK.INSPECT would
        # hide an ended lease before that): a lock-delay, or the permit freed
        poll("the lease of %s on %s ended" % (owner, key),
             lambda: int(self.c(db).info(INFO_LOCKS)["mcaptcha_cache_leases_expired_while_held"]) > ended)
        if h.delay:
            assert [owner.encode(), h.token, 0] in [[x[0], x[2], x[3]] for x in
                                                    self.c(db).execute_command("LOCK.INSPECT", name)[3]]
            self.serve(key)      # nobody is served: the permit is still taken
        elif self.queues.get(key):
            self.serve(key)      # served by the timer (none may be: a writer still waits for a reader)
        # (else nobody waits: the stored value changed without anyone touching the key; the
        # owner's name may still be in it, as a lock-delay of an earlier grant)

    @rule(name=st.sampled_from(NAMES), db=DB, delay=st.booleans())
    def session_acquire(self, name, db, delay):
        """SESSION on a connection of its own, later closed (session_closes)."""
        key = (db, name)
        if self.queues.get(key):
            return
        owner = self.fresh("s")
        conn = self.conn(db)
        rep = conn.send_command("LOCK.ACQUIRE", name, owner, LEASE, "SESSION",
                                *(["LOCKDELAY", LEASE] if delay else [])) or read(conn)
        out = self.try_acquire(key, owner, 1, False)
        if out[0] == "granted":
            assert rep[0] == 1, rep
            conn.holds = {key}
            conn.owner = owner
            self.locks[key].holders[owner] = Holder(owner, self.new_token(key, rep[1]), session=conn, delay=delay)
            self.sessions.append(conn)
        else:
            conn.disconnect()
            if out[0] == "permits":
                assert isinstance(rep, redis.ResponseError), rep
            else:
                self.check_refusal(key, rep)

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def session_closes(self, data):
        conn = self.sessions.pop(data.draw(st.integers(0, len(self.sessions) - 1)))
        conn.disconnect()
        for key in sorted(conn.holds):
            lk = self.locks.get(key)
            if lk is None or conn.owner not in lk.holders:
                continue
            h = lk.end_hold(conn.owner)
            db, name = key
            poll("session %s released %s" % (conn.owner, key),
                 lambda: all(x[0] != conn.owner.encode() or (h.delay and x[3] == 0)
                             for x in self.c(db).execute_command("LOCK.INSPECT", name)[3]))
            self.serve(key)

    @rule(name=st.sampled_from(NAMES), db=DB, how=st.sampled_from(["DEL", "UNLINK"]))
    def delete(self, name, db, how):
        """Deleting a held lock serves its head waiter at once."""
        key = (db, name)
        assert self.c(db).execute_command(how, name) == (1 if key in self.locks else 0)
        self.drop_key(key)
        self.serve(key)

    @rule(how=st.sampled_from(["FLUSHALL", "FLUSHDB"]))
    def flush(self, how):
        self.c(1).execute_command(how)
        for key in sorted(self.locks):
            if how == "FLUSHALL" or key[0] == 1:
                self.drop_key(key)
        for key in sorted(self.queues):
            if how == "FLUSHALL" or key[0] == 1:
                self.serve(key)

    def movable(self, key):
        lk = self.locks.get(key)
        return (lk is not None and not self.queues.get(key)
                and all(h.session is None for h in lk.holders.values()))

    @rule(src=st.sampled_from(NAMES), dst=st.sampled_from(NAMES), db=DB,
          how=st.sampled_from(["RENAME", "COPY"]))
    def rename_or_copy(self, src, dst, db, how):
        """The lease (and its timer) goes with the key: lease_ends checks it later."""
        s, d = (db, src), (db, dst)
        if src == dst or not self.movable(s) or d in self.locks or self.queues.get(d):
            return
        self.c(db).execute_command(how, src, dst)
        lk = self.locks[s]
        copy = LockM(lk.permits)
        copy.last_token, copy.adjust = lk.last_token, lk.adjust
        copy.slots = list(lk.slots)
        copy.holders = {o: Holder(o, h.token, delay=h.delay, shared=h.shared, weight=h.weight)
                        for o, h in lk.holders.items()}
        for o, h in lk.holders.items():
            copy.holders[o].count = h.count
        self.locks[d] = copy
        if how == "RENAME":
            del self.locks[s]

    @rule(name=st.sampled_from(NAMES), db=DB)
    def move(self, name, db):
        s, d = (db, name), (1 - db, name)
        if not self.movable(s) or d in self.locks or self.queues.get(d):
            return
        assert self.c(db).execute_command("MOVE", name, 1 - db) == 1
        self.locks[d] = self.locks.pop(s)

    @precondition(lambda self: not self.sessions)
    @rule()
    def debug_reload(self):
        """Everything reloads as it was; queued waiters stay queued; tokens keep growing."""
        assert self.c(0).execute_command("DEBUG", "RELOAD") in (b"OK", "OK", True)

    @precondition(lambda self: not self.sessions and not any(self.queues.values()) and self.restarts == 0)
    @rule()
    def save_kill_restart(self):
        """SAVE, kill -9, start again on the same RDB: the same locks, and every
        token after the restart is larger than every token before it."""
        assert self.primary.save_now()   # waits for a replica sync's RDB child first
        for c in self.clients.values():
            c.connection_pool.disconnect()
        self.primary.restart(kill=True)
        self.restarts += 1
        STATS["restarts"] += 1

    @rule()
    def replica_agrees(self):
        wait_replicas_synced(self.primary, [self.replica], timeout=30)
        rc = {db: self.replica.client(db=db) for db in DBS}
        assert rc[0].execute_command("DEBUG", "DIGEST") == self.c(0).execute_command("DEBUG", "DIGEST")
        for (db, name) in sorted(self.locks):
            p = self.c(db).execute_command("LOCK.INSPECT", name)
            r = rc[db].execute_command("LOCK.INSPECT", name)
            assert r[:2] == p[:2] and r[2] == 0 and r[4:] == p[4:], (db, name, p, r)
            assert sorted((h[0], h[2], h[3]) for h in r[3]) == sorted((h[0], h[2], h[3]) for h in p[3])
        for c in rc.values():
            c.connection_pool.disconnect()

    def pool_refusal(self, key, n):
        """The error a LOCK.*_PERMITS call with PERMITS n (None: without) gets on `key`
        before it changes anything, or None."""
        lk = self.locks.get(key)
        if lk is None:
            return "no such semaphore" if n is None else None
        if (any(h.shared for h in lk.holders.values()) or any(sh for _, _, sh, _ in lk.slots)
                or any(w.shared for w in self.queues.get(key, []))):
            return "read-write lock used with READ"
        if n is not None and n != lk.permits and lk.entries():
            return "PERMITS differs"
        return None

    @rule(name=st.sampled_from(NAMES), db=DB, delta=st.sampled_from([-2, -1, 1, 1, 2, 3]),
          n=st.sampled_from([None, 1, 2, 2]), drain=st.sampled_from([False, False, True]))
    def pool_change(self, name, db, delta, n, drain):
        """LOCK.ADD_PERMITS (a size outside 0..1024 is refused) or LOCK.DRAIN_PERMITS; permits
        that come free serve the waiters, first come first served."""
        key = (db, name)
        args = ["LOCK.DRAIN_PERMITS", name] if drain else ["LOCK.ADD_PERMITS", name, delta]
        args += ["PERMITS", n] if n is not None else []
        try:
            rep = self.c(db).execute_command(*args)
        except redis.ResponseError as e:
            rep = e
        err = self.pool_refusal(key, n)
        lk = self.locks.get(key)
        model = lk if lk is not None else LockM(n)
        base = n if n is not None else model.permits
        if (err is None and not drain and delta > 0 and lk is not None and lk.permits == 1 and lk.adjust == 0
                and lk.entries()):
            err = "lock of one permit, held"  # exclusive: a second permit would let another owner in
        if err is None and not drain and not 0 <= model.size(base) + delta <= 1024:
            err = "must stay from 0 to 1024"
        if err is not None:
            assert isinstance(rep, redis.ResponseError) and err in str(rep), (args, rep)
            STATS["pool refusals"] += 1
            return
        old = (model.permits, model.adjust)
        if drain:
            size = model.size(base)
            got = max(0, size - model.taken())
            model.adjust = size - got - base
        else:
            got = model.size(base) + delta
            model.adjust = got - base
        model.permits = base
        assert rep == got, (args, rep, got)
        changed = (model.permits, model.adjust) != old if lk is not None else model.adjust != 0
        if changed:
            STATS["pool changes"] += 1
            self.locks[key] = model
            self.serve(key)

    @rule(name=st.sampled_from(NAMES), db=DB, n=st.sampled_from([None, 1, 2]))
    def pool_available(self, name, db, n):
        key = (db, name)
        args = ["LOCK.AVAILABLE_PERMITS", name] + (["PERMITS", n] if n is not None else [])
        try:
            rep = self.c(db).execute_command(*args)
        except redis.ResponseError as e:
            rep = e
        lk = self.locks.get(key)
        if lk is None:
            assert rep == n, (args, rep)
            return
        err = self.pool_refusal(key, n)
        if err is not None:
            assert isinstance(rep, redis.ResponseError) and err in str(rep), (args, rep)
            return
        assert rep == max(0, lk.size(n) - lk.taken()), (args, rep, lk.size(n), lk.taken())

    # Rules drawn more often: they make queues form and drain.
    @rule(name=st.sampled_from(NAMES), db=DB, permits=st.sampled_from([1, 1, 2]), reader=st.booleans())
    def wait_more(self, name, db, permits, reader):
        self.wait(name, db, permits, reader)

    @rule(name=st.sampled_from(NAMES), db=DB)
    def holder_releases(self, name, db):
        self.release(name, db, HOLDER)

    # -------------------------------------------------------------- invariant
    @invariant()
    def inspect_agrees(self):
        if not hasattr(self, "clients"):
            return
        STATS["steps"] += 1
        for db in DBS:
            for name in NAMES:
                key = (db, name)
                got = self.c(db).execute_command("LOCK.INSPECT", name)
                lk = self.locks.get(key)
                if lk is None:
                    assert got is None, (key, got)
                    assert not self.queues.get(key), key
                    continue
                assert got is not None, (key, "missing")
                permits, last, waiters, holders, adjust, size = got
                assert (permits, last, waiters) == (lk.permits, lk.last_token, len(self.queues.get(key, []))), \
                    (key, got, lk.permits, lk.last_token)
                assert (adjust, size) == (lk.adjust, lk.size()), (key, got, lk.adjust)
                want = sorted([(o.encode(), h.token, h.count) for o, h in lk.holders.items()] +
                              [(o.encode(), t, 0) for o, t, _, _ in lk.slots])
                assert sorted((h[0], h[2], h[3]) for h in holders) == want, (key, holders, want)
                assert all(0 < h[1] <= LEASE for h in holders), holders
        for q in self.queues.values():
            for w in q:   # a queued waiter has had no reply
                assert not w.conn.can_read(timeout=0), ("a queued waiter got a reply", w.owner)


def test_lock_model(servers):
    LockMachine.primary = servers.new(name="primary", save="")
    LockMachine.replica = servers.replica_of(LockMachine.primary, name="replica")
    LockMachine.max_token = 0
    run_state_machine_as_test(LockMachine, settings=model_settings(examples=40, steps=60))
    print("lock model:", STATS)
    assert STATS["waiters served"] > 0 and STATS["grants"] > STATS["examples"], STATS
    assert STATS["lock-delays"] > 0 and STATS["read grants"] > 0 and STATS["weighted grants"] > 0, STATS
    assert STATS["pool changes"] > 0 and STATS["pool refusals"] > 0, STATS

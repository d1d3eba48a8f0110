# SPDX-License-Identifier: BSD-3-Clause
"""A model-based test of multi-key locks mixed with single-key ones: random
sequences of commands on four keys of one hash slot against a real primary
(with a replica), every reply compared with a Python model.

The rules: LOCK.ACQUIRE (REENTRANT now and then) / LOCK.RELEASE / LOCK.EXTEND
on one key; LOCK.ACQUIRE_ALL over random subsets of 1-4 keys in random order
(LOCKDELAY now and then; WAIT inside MULTI: answered at once) / LOCK.RELEASE_ALL
/ LOCK.EXTEND_ALL (by holders and strangers, over sets the owner holds in part
or not at all); WAIT on one key or on a subset (new owners, or a fixed owner
that may hold one of the keys: refused at once; SESSION now and then), among
them a multi-key waiter behind a queue on one key whose other keys are free;
SESSION grants whose connection closes; waiters that time out (a short WAIT
at the tail, or ahead of others that are then served), are CLIENT UNBLOCKed
(TIMEOUT or ERROR) or disconnect, also under CLIENT PAUSE WRITE (nobody is
granted until CLIENT UNPAUSE); leases made to end (one key of a hold, or every
key of an owner at once: EXTEND to 5 ms, then the module's timers end them;
with LOCKDELAY the key stays taken); DEL, UNLINK, PEXPIRE, RENAME, FLUSHALL and
FLUSHDB; DEBUG RELOAD; a replica compared with the primary (DEBUG DIGEST,
LOCK.INSPECT).

The model's queue rule (server/waitq.h): a waiter -- one key or several -- is
in every queue of its keys in arrival order and is served only when it heads
every one of them and every key is free (a multi-key waiter whose owner holds
one of its keys then is refused at once); a newcomer without WAIT is refused
while anyone waits on any of its keys, one with WAIT queues at the tail. The
model computes the fixpoint of that rule after every change and reads each
predicted reply from its waiter's connection, in the order predicted, then a
PING's PONG (no second reply).

After every step each key is read back with LOCK.INSPECT (holder, token,
count, lock-delay, last token, waiter count) and LOCK.INSPECT FULL (the
waiters' owners and client ids in queue order, mode `multi` for a multi-key
waiter), INFO's waiters and max_queue_length equal the model's, and no queued
waiter has had a reply. Every grant's token is larger than every earlier token
of each of its keys (across DEL, FLUSH and DEBUG RELOAD); a multi-key grant has
one token on every key.

Leases and waits are long (10 minutes): nothing ends unless a rule makes it
end. A rule that needs a state (a waiter queued, a lease ended, a disconnect
seen) polls for it; nothing waits for a time.

Bounded in `make test` (tests/integration/soak.py); MC_SOAK=1 (`make soak`, whose
test_*_model.py wildcard lists this file) runs many more examples.

Found while probing, and fixed (the test at the end): SWAPDB did not serve the
waiters of the swapped keys at once.
"""

import time

import pytest
import redis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from servers import read_reply, wait_replicas_synced, wait_until
from soak import model_settings

LEASE = 600_000
KEYS = ["{m}a", "{m}b", "{m}c", "{m}d"]
OWNERS = ["o1", "o2", "o3"]
NOT_OWNER = b"the lock is not held by this owner"
NOT_ALL = b"the locks are not all held by this owner"
INFO_LOCKS = "mcaptcha_cache_locks"

SUBSET = st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True)   # random order too


def poll(what, cond, timeout=20.0):
    """Wait for a state (not a time): cond() true, or fail naming `what`."""
    return wait_until(cond, what, timeout)


read = read_reply


def s(x):
    return x.decode() if isinstance(x, bytes) else x


class Hold:
    def __init__(self, owner, token, session=None, delay=False):
        self.owner, self.token, self.count, self.session, self.delay = owner, token, 1, session, delay


def finish(conn):
    """After a waiter's one reply: nothing more was sent to it (a PING's PONG comes
    next), then close it."""
    conn.send_command("PING")
    assert conn.read_response() in (b"PONG", "PONG", True), "a second reply to a waiter"
    conn.disconnect()


class Waiter:
    """A blocked LOCK.ACQUIRE ... WAIT (one key) or LOCK.ACQUIRE_ALL ... WAIT on its own connection."""

    def __init__(self, conn, owner, keys, multi, client_id):
        self.conn, self.owner, self.keys, self.multi, self.client_id = conn, owner, tuple(keys), multi, client_id

    def mode(self):
        return "multi" if len(self.keys) > 1 else "write"


STATS = {"examples": 0, "steps": 0, "grants": 0, "multi grants": 0, "single waiters served": 0,
         "multi waiters served": 0, "multi waiters queued": 0,
         "timeouts": 0, "unblocked": 0, "disconnects": 0, "leases ended": 0, "deletes": 0, "reloads": 0,
         "refused (queue)": 0, "refused (owned)": 0, "refused (busy)": 0, "refused at the head (owned)": 0,
         "reentries": 0, "timed out ahead of others": 0, "left while paused": 0, "unblocked with an error": 0,
         "renames": 0, "session waiters served": 0, "lock-delays": 0, "in MULTI": 0, "flushes": 0,
         "queued behind with free keys": 0, "session grants": 0, "session keys released": 0,
         "release_all partial": 0, "extend_all refused": 0, "max waiters": 0}


class MultiLockMachine(RuleBasedStateMachine):
    primary = replica = None

    def __init__(self):
        super().__init__()
        self.holds = {}      # key -> Hold (no entry: not held by a lease)
        self.slots = {}      # key -> the Hold whose lease ended into its lock-delay (the key stays taken)
        self.exists = set()  # keys that exist (LOCK.INSPECT answers nil for the others)
        self.last = {}       # key -> the key's last token (0 after DEL)
        self.queues = {k: [] for k in KEYS}   # key -> [Waiter], head first
        self.waiting = []    # every waiter, in arrival order
        self.sessions = []   # open connections that took keys with SESSION
        self.seq = 0

    # ---------------------------------------------------------------- plumbing
    def conn(self):
        c = redis.Connection(host=self.primary.host, port=self.primary.port, socket_timeout=20)
        c.connect()
        return c

    def fresh(self, prefix):
        self.seq += 1
        return "%s%d" % (prefix, self.seq)

    def info(self, field):
        return int(self.c.info(INFO_LOCKS)["mcaptcha_cache_" + field])

    def taken(self, k):
        """Held by a lease, or by a lock-delay (a hold with LOCKDELAY that ended without a release)."""
        return k in self.holds or k in self.slots

    def end_hold(self, k):
        """k's hold ends without a release (its lease, its session): a lock-delay if it has one."""
        h = self.holds.pop(k)
        if h.delay:
            self.slots[k] = h
            STATS["lock-delays"] += 1

    def grant(self, keys, owner, rep, session=None, delay=False):
        """A grant of `keys` to `owner` with reply `rep`: one token, larger than every earlier one of each key."""
        assert isinstance(rep, list) and rep[0] == 1 and rep[2] == LEASE, (keys, owner, rep)
        token = rep[1]
        for k in keys:
            assert not self.taken(k), (k, "granted while taken")
            assert token > self.last.get(k, 0), (k, token, self.last.get(k))
            assert token > MultiLockMachine.max_token[k], (k, token, MultiLockMachine.max_token[k])
            MultiLockMachine.max_token[k] = token
            self.last[k] = token
            self.holds[k] = Hold(owner, token, session, delay)
            self.exists.add(k)
        STATS["grants"] += 1
        STATS["multi grants"] += len(keys) > 1

    def check_refusal(self, keys, rep):
        """[0, -1, ms]: -1 when none of the keys is taken, else within the lease (and its lock-delay)."""
        assert isinstance(rep, list) and rep[0] == 0 and rep[1] == -1, (keys, rep)
        if any(self.taken(k) for k in keys):
            assert 0 < rep[2] <= 2 * LEASE, (keys, rep)
        else:
            assert rep[2] == -1, (keys, rep)

    def queued(self, keys):
        return any(self.queues[k] for k in keys)

    def remove(self, w):
        self.waiting.remove(w)
        for k in w.keys:
            self.queues[k].remove(w)

    def serve(self):
        """The queue rule's fixpoint: a waiter heading every queue of its keys is tried
        (all free: granted; its owner holds one: refused; else it waits). Each predicted
        reply is read from its connection (it must arrive), in the order predicted."""
        progress = True
        while progress:
            progress = False
            for w in list(self.waiting):
                if w not in self.waiting or any(self.queues[k][0] is not w for k in w.keys):
                    continue
                owned = w.multi and any(k in self.holds and self.holds[k].owner == w.owner for k in w.keys)
                if not owned and any(self.taken(k) for k in w.keys):
                    continue
                self.remove(w)
                try:
                    rep = read(w.conn)
                except redis.TimeoutError:
                    raise AssertionError("the model serves waiter %s on %s now: no reply came" % (w.owner, w.keys))
                if owned:
                    self.check_refusal(w.keys, rep)
                    STATS["refused at the head (owned)"] += 1
                    finish(w.conn)
                else:
                    self.granted_waiter(w, rep)
                    STATS["multi waiters served" if w.multi else "single waiters served"] += 1
                    STATS["session waiters served"] += w.session
                progress = True

    def wait_queued(self, what):
        """The server shows the model's waiters (every queue, and INFO's count)."""
        n = len(self.waiting)
        poll(what, lambda: self.info("waiters") == n)
        STATS["max waiters"] = max(STATS["max waiters"], n)

    def holders_of(self, owner):
        return [k for k in KEYS if k in self.holds and self.holds[k].owner == owner]

    def owners(self):
        return sorted(set(OWNERS) | {h.owner for h in self.holds.values()})

    # ------------------------------------------------------------------ setup
    @initialize()
    def setup(self):
        self.c = redis.Redis(host=self.primary.host, port=self.primary.port, socket_timeout=20)
        self.c.flushall()
        for k in KEYS[:3]:   # free locks with a token; {m}d starts missing
            rep = self.c.execute_command("LOCK.ACQUIRE", k, "touch", LEASE)
            self.grant([k], "touch", rep)
            assert self.c.execute_command("LOCK.RELEASE", k, "touch") == 0
            del self.holds[k]
        STATS["examples"] += 1

    def teardown(self):
        for w in self.waiting:
            w.conn.disconnect()
        for c in self.sessions:
            c.disconnect()
        if hasattr(self, "c"):
            self.c.connection_pool.disconnect()

    # ------------------------------------------------------------ single key
    @rule(key=st.sampled_from(KEYS), owner=st.sampled_from(OWNERS), reentrant=st.sampled_from([False, False, True]))
    def acquire(self, key, owner, reentrant):
        rep = self.c.execute_command("LOCK.ACQUIRE", key, owner, LEASE, *(["REENTRANT"] if reentrant else []))
        h = self.holds.get(key)
        if reentrant and h is not None and h.owner == owner:
            # a holder re-entering is not behind the queue
            assert rep == [1, h.token, LEASE], (key, owner, rep, h.token)
            h.count += 1
            STATS["reentries"] += 1
        elif self.queued([key]) or self.taken(key):
            self.check_refusal([key], rep)
            STATS["refused (queue)" if self.queued([key]) else "refused (busy)"] += 1
        else:
            self.grant([key], owner, rep)

    def send_wait(self, keys, owner, multi, wait_ms=LEASE, delay=False, session=False):
        conn = self.conn()
        conn.send_command("CLIENT", "ID")
        cid = conn.read_response()
        if multi:
            conn.send_command("LOCK.ACQUIRE_ALL", len(keys), *keys, owner, LEASE, "WAIT", wait_ms,
                              *(["LOCKDELAY", LEASE] if delay else []), *(["SESSION"] if session else []))
        else:
            conn.send_command("LOCK.ACQUIRE", keys[0], owner, LEASE, "WAIT", wait_ms)
        w = Waiter(conn, owner, keys, multi, cid)
        w.delay, w.session = delay, session
        return w

    def granted_waiter(self, w, rep):
        """w's grant: a session waiter's connection stays open (its session), others close."""
        self.grant(w.keys, w.owner, rep, session=w.conn if w.session else None, delay=w.delay)
        if w.session:
            w.conn.send_command("PING")
            assert w.conn.read_response() in (b"PONG", "PONG", True), "a second reply to a waiter"
            w.conn.owner = w.owner
            self.sessions.append(w.conn)
            STATS["session grants"] += 1
        else:
            finish(w.conn)

    @rule(key=st.sampled_from(KEYS))
    def wait_one(self, key):
        """A new owner waits on one key: granted at once, or queued at the tail."""
        w = self.send_wait([key], self.fresh("s"), False)
        if self.queued([key]) or self.taken(key):
            self.waiting.append(w)
            self.queues[key].append(w)
            self.wait_queued("single waiter %s queued on %s" % (w.owner, key))
            return
        self.grant([key], w.owner, read(w.conn))
        finish(w.conn)

    @rule(key=st.sampled_from(KEYS), owner=st.sampled_from(OWNERS))
    def release(self, key, owner):
        self.release_by(key, owner)

    def release_by(self, key, owner):
        h = self.holds.get(key)
        try:
            rep = self.c.execute_command("LOCK.RELEASE", key, owner)
        except redis.ResponseError as e:
            assert (h is None or h.owner != owner) and NOT_OWNER in str(e).encode(), (key, owner, e)
            return
        assert h is not None and h.owner == owner, (key, owner, rep)
        h.count -= 1
        assert rep == h.count, (key, rep, h.count)
        if h.count == 0:
            del self.holds[key]
            self.serve()

    @precondition(lambda self: self.holds)
    @rule(data=st.data())
    def holder_releases(self, data):
        key = data.draw(st.sampled_from(sorted(self.holds)))
        self.release_by(key, self.holds[key].owner)

    @rule(key=st.sampled_from(KEYS), owner=st.sampled_from(OWNERS + [None]))
    def extend(self, key, owner):
        if owner is None:
            owner = self.holds[key].owner if key in self.holds else OWNERS[0]
        held = key in self.holds and self.holds[key].owner == owner
        try:
            rep = self.c.execute_command("LOCK.EXTEND", key, owner, LEASE)
            assert held and rep == LEASE, (key, owner, rep)
        except redis.ResponseError as e:
            assert not held and NOT_OWNER in str(e).encode(), (key, owner, e)

    # ------------------------------------------------------------- multi key
    @rule(keys=SUBSET, owner=st.sampled_from(OWNERS), delay=st.sampled_from([False, False, True]),
          in_multi=st.sampled_from([False, False, False, True]))
    def acquire_all(self, keys, owner, delay=False, in_multi=False):
        """Without WAIT, or with WAIT inside MULTI/EXEC (answered at once there)."""
        args = ["LOCK.ACQUIRE_ALL", len(keys), *keys, owner, LEASE] + (["LOCKDELAY", LEASE] if delay else [])
        if in_multi:
            p = self.c.pipeline(transaction=True)
            p.execute_command(*args, "WAIT", LEASE)
            (rep,) = p.execute()
            STATS["in MULTI"] += 1
        else:
            rep = self.c.execute_command(*args)
        if self.holders_of(owner) and set(self.holders_of(owner)) & set(keys):
            self.check_refusal(keys, rep)
            STATS["refused (owned)"] += 1
        elif self.queued(keys):
            self.check_refusal(keys, rep)
            STATS["refused (queue)"] += 1
        elif any(self.taken(k) for k in keys):
            self.check_refusal(keys, rep)
            STATS["refused (busy)"] += 1
        else:
            self.grant(keys, owner, rep, delay=delay)

    @rule(keys=SUBSET, owner=st.sampled_from([None, None, None] + OWNERS), delay=st.sampled_from([False, False, True]),
          session=st.sampled_from([False, False, True]))
    def wait_all(self, keys, owner, delay=False, session=False):
        """WAIT on a subset: granted at once, refused at once (the owner holds one of
        the keys: waiting would not help), or queued in every key's queue."""
        owner = owner or self.fresh("m")
        w = self.send_wait(keys, owner, True, delay=delay, session=session)
        if any(k in self.holds and self.holds[k].owner == owner for k in keys):
            rep = read(w.conn)
            finish(w.conn)
            self.check_refusal(keys, rep)
            STATS["refused (owned)"] += 1
        elif self.queued(keys) or any(self.taken(k) for k in keys):
            self.waiting.append(w)
            for k in keys:
                self.queues[k].append(w)
            STATS["multi waiters queued"] += len(keys) > 1
            self.wait_queued("multi waiter %s queued on %s" % (owner, keys))
        else:
            self.granted_waiter(w, read(w.conn))

    @precondition(lambda self: self.waiting)
    @rule(data=st.data())
    def wait_all_behind(self, data):
        """A new multi-key waiter behind a queue on one key, its other keys free and
        unqueued: it heads their queues but must not pass the waiters ahead of it."""
        key = data.draw(st.sampled_from([k for k in KEYS if self.queues[k]]))
        free = [k for k in KEYS if not self.queues[k] and not self.taken(k)]
        keys = data.draw(st.permutations([key] + data.draw(st.lists(st.sampled_from(free), min_size=1, unique=True)))) \
            if free else [key]
        self.wait_all(keys, None)
        STATS["queued behind with free keys"] += len(keys) > 1

    def do_release_all(self, keys, owner):
        """LOCK.RELEASE_ALL of `keys` by `owner`, checked against the model (per key: the
        count still held, -1 where the owner held nothing); serves the waiters after a
        release freed a key. Returns the expected reply."""
        rep = self.c.execute_command("LOCK.RELEASE_ALL", len(keys), *keys, owner)
        want, freed = [], False
        for k in keys:
            h = self.holds.get(k)
            if h is None or h.owner != owner:
                want.append(-1)
                continue
            h.count -= 1
            want.append(h.count)
            if h.count == 0:
                del self.holds[k]
                freed = True
        assert rep == want, (keys, owner, rep, want)
        if freed:
            self.serve()
        return want

    @rule(keys=SUBSET, data=st.data())
    def release_all(self, keys, data):
        owner = data.draw(st.sampled_from(self.owners()))
        want = self.do_release_all(keys, owner)
        STATS["release_all partial"] += -1 in want and any(x >= 0 for x in want)

    @precondition(lambda self: self.holds)
    @rule(data=st.data(), extra=st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    def holder_releases_all(self, data, extra):
        """A holder releases every key it holds (in a random order), sometimes with others."""
        owner = data.draw(st.sampled_from(sorted({h.owner for h in self.holds.values()})))
        keys = data.draw(st.permutations(sorted(set(self.holders_of(owner)) | set(extra))))
        self.do_release_all(keys, owner)

    @rule(keys=SUBSET, data=st.data())
    def extend_all(self, keys, data):
        owner = data.draw(st.sampled_from(self.owners()))
        held = all(k in self.holds and self.holds[k].owner == owner for k in keys)
        try:
            rep = self.c.execute_command("LOCK.EXTEND_ALL", len(keys), *keys, owner, LEASE)
            assert held and rep == LEASE, (keys, owner, rep)
        except redis.ResponseError as e:
            assert not held and NOT_ALL in str(e).encode(), (keys, owner, e)
            STATS["extend_all refused"] += 1

    # ----------------------------------------------------- waits that end early
    @precondition(lambda self: self.waiting or self.holds)
    @rule(keys=SUBSET, multi=st.booleans())
    def waiter_times_out(self, keys, multi):
        """A new owner with a 5 ms WAIT on keys of which one is held or queued on:
        it cannot be served before its deadline (nothing else changes meanwhile);
        refused once, holding nothing, and every queue as before."""
        keys = keys if multi else keys[:1]
        if not (self.queued(keys) or any(self.taken(k) for k in keys)):
            return
        before = self.info("timeouts")
        w = self.send_wait(keys, self.fresh("t"), multi, wait_ms=5)
        rep = read(w.conn)
        finish(w.conn)
        self.check_refusal(keys, rep)
        assert self.info("timeouts") == before + 1
        STATS["timeouts"] += 1
        for k in keys:
            assert k not in self.holds or self.holds[k].owner != w.owner
        self.serve()   # nothing: it headed no queue that had a waiter behind it
        self.wait_queued("the queues as before the timed-out waiter")

    @precondition(lambda self: any(self.taken(k) for k in KEYS) and
                  any(not self.taken(k) and not self.queues[k] for k in KEYS))
    @rule(data=st.data(), behind=st.lists(st.booleans(), min_size=1, max_size=3))
    def waiter_times_out_ahead(self, data, behind):
        """A multi-key waiter X with a 50 ms WAIT on a taken key and a free one, then
        waiters on the free key behind it (with long WAITs, some on other free keys too):
        X's deadline answers it (the module's own timer, while others wait behind it),
        and those behind are served. Had X timed out before one of them came, that one
        would have been granted at once: the same end, so nothing depends on the time."""
        j = data.draw(st.sampled_from([k for k in KEYS if self.taken(k)]))
        free = [k for k in KEYS if not self.taken(k) and not self.queues[k]]
        k = data.draw(st.sampled_from(free))
        x = self.send_wait(data.draw(st.permutations([k, j])), self.fresh("x"), True, wait_ms=50)
        self.waiting.append(x)
        for key in x.keys:
            self.queues[key].append(x)
        for multi in behind:
            keys = [k] + (data.draw(st.lists(st.sampled_from(free), unique=True, max_size=2)) if multi else [])
            keys = data.draw(st.permutations(list(dict.fromkeys(keys))))
            w = self.send_wait(keys, self.fresh("y"), multi)
            self.waiting.append(w)
            for key in keys:
                self.queues[key].append(w)
        rep = read(x.conn)
        finish(x.conn)
        self.remove(x)
        self.check_refusal(x.keys, rep)
        STATS["timed out ahead of others"] += 1
        self.serve()
        self.wait_queued("the waiters behind %s" % x.owner)

    @precondition(lambda self: self.waiting)
    @rule(data=st.data(), how=st.sampled_from(["TIMEOUT", "TIMEOUT", "ERROR"]))
    def client_unblock(self, data, how):
        """CLIENT UNBLOCK ends a wait like its deadline (TIMEOUT: refused once), or with
        Redis's -UNBLOCKED error (ERROR: the waiter leaves as on a disconnect); the
        waiters behind it, in each of its queues, may be served now."""
        w = data.draw(st.sampled_from(self.waiting))
        assert self.c.execute_command("CLIENT", "UNBLOCK", w.client_id, how) == 1
        self.remove(w)
        rep = read(w.conn)
        if how == "ERROR":
            assert isinstance(rep, redis.ResponseError) and "UNBLOCKED" in str(rep), rep
        else:
            self.check_refusal(w.keys, rep)
        finish(w.conn)
        STATS["unblocked" if how == "TIMEOUT" else "unblocked with an error"] += 1
        self.serve()
        self.wait_queued("waiter %s unblocked" % w.owner)

    @precondition(lambda self: self.waiting)
    @rule(data=st.data())
    def waiter_disconnects(self, data):
        w = data.draw(st.sampled_from(self.waiting))
        w.conn.disconnect()
        self.remove(w)
        STATS["disconnects"] += 1
        self.serve()
        self.wait_queued("waiter %s gone from %s" % (w.owner, w.keys))

    @precondition(lambda self: self.waiting)
    @rule(data=st.data(), how=st.sampled_from(["UNBLOCK", "DISCONNECT"]))
    def waiter_leaves_while_paused(self, data, how):
        """Under CLIENT PAUSE WRITE a waiter leaves (CLIENT UNBLOCK: refused at once, or a
        disconnect): nobody is granted while writes are paused -- every other waiter is
        still queued once the one that left is gone -- and after CLIENT UNPAUSE the
        waiters the model serves are served."""
        w = data.draw(st.sampled_from(self.waiting))
        assert self.c.execute_command("CLIENT", "PAUSE", 600000, "WRITE") in (b"OK", "OK", True)
        try:
            self.remove(w)
            if how == "UNBLOCK":
                assert self.c.execute_command("CLIENT", "UNBLOCK", w.client_id) == 1
                self.check_refusal(w.keys, read(w.conn))
                finish(w.conn)
            else:
                w.conn.disconnect()
            self.wait_queued("waiter %s gone while paused" % w.owner)
            for k in KEYS:
                if k in self.exists:
                    got = self.c.execute_command("LOCK.INSPECT", k)[2]
                    assert got == len(self.queues[k]), (k, "served while paused")
        finally:
            assert self.c.execute_command("CLIENT", "UNPAUSE") in (b"OK", "OK", True)
        STATS["left while paused"] += 1
        self.serve()

    # --------------------------------------------------------- leases, keys
    @precondition(lambda self: self.holds)
    @rule(data=st.data(), every=st.booleans())
    def lease_ends(self, data, every):
        """A holder's lease on one key, or on every key it holds (LOCK.EXTEND_ALL), is
        cut to 5 ms: the module's timers end them (INFO counts each) and serve the
        waiters."""
        key = data.draw(st.sampled_from(sorted(self.holds)))
        owner = self.holds[key].owner
        keys = data.draw(st.permutations(self.holders_of(owner))) if every else [key]
        ended = self.info("leases_expired_while_held")
        if every:
            assert self.c.execute_command("LOCK.EXTEND_ALL", len(keys), *keys, owner, 5) == 5
        else:
            assert self.c.execute_command("LOCK.EXTEND", key, owner, 5) == 5
        for k in keys:
            self.end_hold(k)
        poll("the leases of %s on %s ended" % (owner, keys),
             lambda: self.info("leases_expired_while_held") >= ended + len(keys))
        STATS["leases ended"] += len(keys)
        self.serve()

    @rule(key=st.sampled_from(KEYS), how=st.sampled_from(["DEL", "DEL", "UNLINK", "PEXPIRE"]))
    def delete(self, key, how):
        """DEL, UNLINK or an expiry frees the key at once (its waiters are served; a
        lock-delay goes too) and resets its last token; tokens still grow (the clock floor)."""
        there = 1 if key in self.exists else 0
        if how == "PEXPIRE":
            expired = self.c.info("stats")["expired_keys"]
            assert self.c.execute_command("PEXPIRE", key, 1) == there
            # the expiry itself (INFO counts it), not the key's absence: a waiter served
            # at once may create the key again before a check for its absence runs
            poll("%s expired" % key, lambda: self.c.info("stats")["expired_keys"] >= expired + there)
        else:
            assert self.c.execute_command(how, key) == there
        self.exists.discard(key)
        self.holds.pop(key, None)
        self.slots.pop(key, None)
        self.last.pop(key, None)
        STATS["deletes"] += 1
        self.serve()

    @rule(keys=SUBSET, delay=st.booleans(), owner=st.sampled_from([None, None] + OWNERS))
    def session_acquire_all(self, keys, delay, owner):
        """ACQUIRE_ALL ... SESSION on a connection of its own, later closed (session_closes)."""
        owner = owner or self.fresh("ss")
        conn = self.conn()
        conn.send_command("LOCK.ACQUIRE_ALL", len(keys), *keys, owner, LEASE, "SESSION",
                          *(["LOCKDELAY", LEASE] if delay else []))
        rep = read(conn)
        if self.queued(keys) or any(self.taken(k) for k in keys):   # (owned or not: refused)
            conn.disconnect()
            self.check_refusal(keys, rep)
            return
        self.grant(keys, owner, rep, session=conn, delay=delay)
        conn.owner = owner
        self.sessions.append(conn)
        STATS["session grants"] += 1

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def session_closes(self, data):
        """The connection closes: every key its grant still holds is released (and its
        waiters served); keys released, deleted or ended before are left alone."""
        conn = self.sessions.pop(data.draw(st.integers(0, len(self.sessions) - 1)))
        keys = [k for k in KEYS if k in self.holds and self.holds[k].session is conn]
        token = {k: self.holds[k].token for k in keys}
        conn.disconnect()
        for k in keys:
            self.end_hold(k)
        # (the state: no live hold with that grant's token; a waiter may be granted at once)
        poll("session %s released %s" % (conn.owner, keys),
             lambda: all(all(x[2] != token[k] or x[3] == 0
                             for x in (self.c.execute_command("LOCK.INSPECT", k) or [0, 0, 0, []])[3])
                         for k in keys))
        STATS["session keys released"] += len(keys)
        self.serve()

    @rule(src=st.sampled_from(KEYS), dst=st.sampled_from(KEYS))
    def rename(self, src, dst):
        """RENAME moves the lock (holder, lease timer, lock-delay, last token) to a key of
        the same slot, over whatever was there; the waiters stay on their key names, and
        both keys' queues are served at once (each key left the keyspace)."""
        h = self.holds.get(src)
        if src == dst or src not in self.exists or (h is not None and h.session is not None):
            return   # (a SESSION grant is tied to its key name)
        assert self.c.execute_command("RENAME", src, dst) in (b"OK", "OK", True)
        for m in (self.holds, self.slots, self.last):
            m.pop(dst, None)
            if src in m:
                m[dst] = m.pop(src)
        self.exists.discard(src)
        self.exists.add(dst)
        STATS["renames"] += 1
        self.serve()

    @precondition(lambda self: self.waiting)
    @rule(how=st.sampled_from(["FLUSHALL", "FLUSHDB"]))
    def flush(self, how):
        """Every key goes: every queue is served at once (each head whose keys are all gone)."""
        self.c.execute_command(how)
        self.exists.clear()
        self.holds.clear()
        self.slots.clear()
        self.last.clear()
        STATS["flushes"] += 1
        self.serve()

    @precondition(lambda self: not self.sessions)
    @rule()
    def debug_reload(self):
        """Everything reloads as it was; queued waiters stay queued; tokens keep growing."""
        assert self.c.execute_command("DEBUG", "RELOAD") in (b"OK", "OK", True)
        STATS["reloads"] += 1

    @rule()
    def replica_agrees(self):
        wait_replicas_synced(self.primary, [self.replica], timeout=30)
        rc = self.replica.client()
        assert rc.execute_command("DEBUG", "DIGEST") == self.c.execute_command("DEBUG", "DIGEST")
        for k in KEYS:
            p = self.c.execute_command("LOCK.INSPECT", k)
            r = rc.execute_command("LOCK.INSPECT", k)
            if p is None or not self.c.exists(k):  # no value (the primary may show its waiters)
                assert r is None, (k, r)
                continue
            assert r[:2] == p[:2] and r[2] == 0 and r[4:] == p[4:], (k, p, r)
            assert [(h[0], h[2], h[3]) for h in r[3]] == [(h[0], h[2], h[3]) for h in p[3]], (k, p, r)
        rc.connection_pool.disconnect()

    # Rules drawn more often: they make queues form (multi-key ones across single-key ones) and drain.
    @rule(keys=SUBSET)
    def wait_all_more(self, keys):
        self.wait_all(keys, None)

    @rule(key=st.sampled_from(KEYS), owner=st.sampled_from(OWNERS))
    def acquire_more(self, key, owner):
        self.acquire(key, owner, False)

    # -------------------------------------------------------------- invariant
    @invariant()
    def inspect_agrees(self):
        if not hasattr(self, "c"):
            return
        STATS["steps"] += 1
        for k in KEYS:
            got = self.c.execute_command("LOCK.INSPECT", k)
            if k not in self.exists:
                # no lock value: nil, unless clients wait on the key (a multi-key waiter
                # keeps a free key busy): then a lock of one permit nobody holds
                want_none = [1, 0, len(self.queues[k]), [], 0, 1] if self.queues[k] else None
                assert got == want_none, (k, got, [w.owner for w in self.queues[k]])
                if not self.queues[k]:
                    continue
                got = None
            if got is not None:
                permits, last, nwait, holders = got[:4]
                assert (permits, last, nwait) == (1, self.last[k], len(self.queues[k])), \
                    (k, got, self.last[k], [w.owner for w in self.queues[k]])
            else:
                holders = []
            h, d = self.holds.get(k), self.slots.get(k)
            assert len(holders) <= 1, (k, "held by two", holders)
            want = [(h.owner, h.token, h.count)] if h else [(d.owner, d.token, 0)] if d else []
            assert [(s(x[0]), x[2], x[3]) for x in holders] == want, (k, holders, want)
            assert all(0 < x[1] <= LEASE for x in holders), holders
            if self.queues[k]:
                full = self.c.execute_command("LOCK.INSPECT", k, "FULL")
                ws = full[full.index(b"waiters") + 1]
                got_q = [(s(e[e.index(b"owner") + 1]), s(e[e.index(b"mode") + 1]), e[e.index(b"client_id") + 1])
                         for e in ws]
                assert got_q == [(w.owner, w.mode(), w.client_id) for w in self.queues[k]], (k, got_q)
        info = self.c.info(INFO_LOCKS)
        assert int(info["mcaptcha_cache_waiters"]) == len(self.waiting), (info, len(self.waiting))
        assert int(info["mcaptcha_cache_max_queue_length"]) == max(len(q) for q in self.queues.values()), info
        for w in self.waiting:   # a queued waiter has had no reply
            assert not w.conn.can_read(timeout=0), ("a queued waiter got a reply", w.owner, w.keys)


def test_multi_lock_model(servers):
    MultiLockMachine.primary = servers.new(name="primary", save="")
    MultiLockMachine.replica = servers.replica_of(MultiLockMachine.primary, name="replica")
    MultiLockMachine.max_token = {k: 0 for k in KEYS}
    start = time.monotonic()
    run_state_machine_as_test(MultiLockMachine, settings=model_settings(examples=60, steps=80))
    print("multi lock model (%.1f s):" % (time.monotonic() - start), STATS)
    assert STATS["multi grants"] > 0 and STATS["multi waiters served"] > 0, STATS
    assert STATS["single waiters served"] > 0 and STATS["multi waiters queued"] > 0, STATS
    assert STATS["timeouts"] > 0 and STATS["unblocked"] > 0 and STATS["disconnects"] > 0, STATS
    assert STATS["leases ended"] > 0 and STATS["refused (queue)"] > 0 and STATS["refused (owned)"] > 0, STATS
    assert STATS["timed out ahead of others"] > 0 and STATS["left while paused"] > 0, STATS
    assert STATS["queued behind with free keys"] > 0 and STATS["session waiters served"] > 0, STATS
    assert STATS["lock-delays"] > 0 and STATS["session keys released"] > 0 and STATS["renames"] > 0, STATS


# --------------------------------------------------------------- found while probing
@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_swapdb_serves_the_waiters_at_once(server, r, multi):
    """SWAPDB 0 1 takes the held lock out of db 0 (as FLUSHDB or DEL would): the waiter
    on db 0's key -- LOCK.ACQUIRE or LOCK.ACQUIRE_ALL -- is granted at once, not when the
    swapped-away holder's lease would have ended (10 minutes here: the socket's 60 s
    timeout sits far below it)."""
    assert r.execute_command("LOCK.ACQUIRE", "{m}a", "h", LEASE)[0] == 1
    w = redis.Connection(host=server.host, port=server.port, socket_timeout=60)
    w.connect()
    try:
        if multi:
            w.send_command("LOCK.ACQUIRE_ALL", 2, "{m}a", "{m}b", "w", LEASE, "WAIT", LEASE)
        else:
            w.send_command("LOCK.ACQUIRE", "{m}a", "w", LEASE, "WAIT", LEASE)
        poll("the waiter queued", lambda: r.execute_command("LOCK.INSPECT", "{m}a")[2] == 1)
        assert r.execute_command("SWAPDB", 0, 1)
        try:
            rep = w.read_response()
        except redis.TimeoutError:
            rep = None
        assert rep is not None and rep[0] == 1, rep
        assert r.execute_command("LOCK.INSPECT", "{m}a")[3][0][0] == b"w"
        # the old holder's lock went to db 1, held as it was
        r1 = server.client(db=1)
        assert r1.execute_command("LOCK.INSPECT", "{m}a")[3][0][0] == b"h"
    finally:
        w.disconnect()

# SPDX-License-Identifier: BSD-3-Clause
"""A Jepsen-style history recorder and checker for the module's leased locks,
semaphores (with TAKE 1 or 2), read-write locks (READ and WRITE holds) and
RL.CONCURRENCY (used by test_lock_history.py).

Many client threads, each with its own connection, run a bounded number of
operations against one server. Every operation has a unique owner and records,
on the client's monotonic clock, when each call was sent (`inv`, taken just
before sending) and answered (`rep`, just after the reply), with the exact reply
(wire errors keep their code). The checker then judges the whole history; only
the documented millisecond-clock slack (SLACK) enters a timing argument, and
every bound is taken on the safe side:

- a holder *certainly* holds from its grant's reply until its release is sent,
  or, when it never releases (crashed), until its acquire was sent + lease - SLACK
  (the server granted no earlier than the call was sent); a SESSION holder that
  closes its connection, until the close;
- a lease *certainly* ended once the reply of its grant (or EXTEND) + lease +
  SLACK has passed, so a release sent after that must find nothing held; a
  release answered before acquire-sent + lease - SLACK must find it held.
"""

import heapq
import random
import socket
import threading
import time

from servers import resp_encode

ACQ, REL, EXT, INS = "LOCK.ACQUIRE", "LOCK.RELEASE", "LOCK.EXTEND", "LOCK.INSPECT"
CACQ, CREL = "RL.CONCURRENCY", "RL.CONCURRENCY_RELEASE"

NOT_OWNER = "ERR the lock is not held by this owner"
SLACK = 0.002            # s: leases, deadlines and tokens are on a millisecond clock
LONG_LEASE = 8000        # ms: holders that release
SESSION_LEASE = 30000    # ms: SESSION holders; their disconnect, not the lease, must free them
LONG_WAIT = 5000         # ms
ABANDON_WAIT = 600000    # ms: a waiter that disconnects never times out first
SOCKET_TIMEOUT = LONG_WAIT / 1000.0 + 25.0   # comfortably above every WAIT that is read


class Err(str):
    """An error reply, as on the wire without the leading '-'."""


class NoReply(Exception):
    pass


class Resp:
    """A minimal RESP2 client on a plain socket: replies as Python values, error
    replies as Err (code kept), and a check for unread (stray) replies."""

    def __init__(self, host, port, timeout=SOCKET_TIMEOUT):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def send(self, *args):
        self.sock.sendall(resp_encode(*args))

    def _fill(self):
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise NoReply("no reply within %.0f s" % self.sock.gettimeout())
        if not data:
            raise NoReply("connection closed by the server")
        self.buf += data

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return line
            self._fill()

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return Err(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data = bytes(self.buf[:n])
            del self.buf[:n + 2]
            return data
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ValueError("unexpected reply %r" % line)

    def call(self, *args):
        self.send(*args)
        return self.read()

    def pending(self):
        """True when bytes that no call asked for are waiting (a second reply)."""
        if self.buf:
            return True
        self.sock.setblocking(False)
        try:
            return len(self.sock.recv(1, socket.MSG_PEEK)) > 0
        except (BlockingIOError, InterruptedError):
            return False
        finally:
            self.sock.settimeout(SOCKET_TIMEOUT)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# ------------------------------------------------------------------ the run
class Keys:
    """The keys of one run: a mutex, a semaphore, a read-write lock and a
    concurrency limit."""

    def __init__(self, prefix, sem_permits=3, conc_limit=2):
        self.mutex = prefix + ":mutex"
        self.sem = prefix + ":sem"
        self.rw = prefix + ":rw"
        self.conc = prefix + ":conc"
        self.permits = {self.mutex: 1, self.sem: sem_permits, self.rw: 1, self.conc: conc_limit}
        self.family = {self.mutex: "lock", self.sem: "lock", self.rw: "lock", self.conc: "conc"}

    def locks(self):
        return [self.mutex, self.sem, self.rw]

    def all(self):
        return [self.mutex, self.sem, self.rw, self.conc]


def mono():
    return time.monotonic()


class Worker(threading.Thread):
    def __init__(self, server, keys, tid, nops, seed, barrier, history, lock):
        super().__init__(daemon=True, name="history-%d" % tid)
        self.server, self.keys, self.tid, self.nops = server, keys, tid, nops
        self.rng = random.Random(seed * 1000 + tid)
        self.barrier, self.history, self.hlock = barrier, history, lock
        self.failure = None       # an exception outside any operation
        self.final_ping = None

    def conn(self):
        return Resp(self.server.host, self.server.port)

    def crit(self):
        """The simulated critical section."""
        d = self.rng.choice((0, 0, 0, 0.0005, 0.001, 0.002))
        if d:
            time.sleep(d)

    def wait_ms(self):
        return self.rng.choice((LONG_WAIT, LONG_WAIT, self.rng.randint(1, 30)))

    def run(self):
        main = None
        try:
            main = self.conn()
            self.barrier.wait(60)
            for i in range(self.nops):
                op = {"tid": self.tid, "i": i}
                try:
                    self.one(main, op)
                except (NoReply, OSError) as e:
                    op["noreply"] = "%s: %s" % (op.get("stage"), e)
                    main.close()
                    main = self.conn()
                with self.hlock:
                    self.history.append(op)
            # a call answered twice would leave the extra reply in front of this one
            self.final_ping = main.call("PING")
        except Exception as e:  # pragma: no cover - reported by the test
            self.failure = repr(e)
        finally:
            if main is not None:
                main.close()

    def one(self, main, op):
        rng = self.rng
        r = rng.random()
        key = (self.keys.mutex if r < 0.3 else self.keys.sem if r < 0.55 else self.keys.rw if r < 0.8
               else self.keys.conc)
        fam = self.keys.family[key]
        permits = self.keys.permits[key]
        mode = ("READ" if rng.random() < 0.6 else "WRITE") if key == self.keys.rw else None
        take = rng.choice((1, 1, 2)) if key == self.keys.sem else 1
        r = rng.random()
        if fam == "lock":
            kind = ("normal" if r < 0.55 else "crash" if r < 0.70 else "session" if r < 0.82
                    else "try" if r < 0.94 else "abandon")
        else:
            kind = "normal" if r < 0.65 else "crash" if r < 0.85 else "try"
        owner = "%s-t%d-o%d" % (self.keys.mutex.split(":")[0], self.tid, op["i"])
        op.update(key=key, fam=fam, kind=kind, owner=owner, permits=permits, mode=mode, take=take)

        op["stage"] = "TIME"
        s, us = main.call("TIME")
        op["srv_us"] = int(s) * 1_000_000 + int(us)   # the server clock before the call

        lease = (rng.randint(15, 60) if kind == "crash" else
                 SESSION_LEASE if kind in ("session", "abandon") else LONG_LEASE)
        wait = None if kind == "try" else ABANDON_WAIT if kind == "abandon" else self.wait_ms()
        op.update(lease=lease, wait=wait)
        if fam == "lock":
            args = [ACQ, key, owner, lease, "PERMITS", permits]
            if mode:
                args.append(mode)
            if take > 1:
                args += ["TAKE", take]
            if kind in ("session", "abandon"):
                args.append("SESSION")
        else:
            args = [CACQ, key, owner, lease, permits]
        if wait is not None:
            args += ["WAIT", wait]

        own = kind in ("crash", "session", "abandon")
        c = self.conn() if own else main
        try:
            op["stage"] = "acquire"
            if kind == "abandon":
                op["inv"] = mono()
                c.send(*args)
                d = rng.choice((0, 0.001, 0.003))
                if d:
                    time.sleep(d)
                op["close"] = mono()
                c.close()
                return
            op["inv"] = mono()
            res = c.call(*args)
            op["rep"] = mono()
            op["res"] = res
            granted = isinstance(res, list) and len(res) >= 1 and res[0] == 1
            op["granted"] = granted
            if granted:
                self.crit()
                if fam == "lock" and rng.random() < 0.25:
                    lease2 = rng.randint(15, 60) if kind == "crash" else lease
                    op["stage"] = "extend"
                    ext = {"lease": lease2, "inv": mono()}
                    ext["res"] = c.call(EXT, key, owner, lease2)
                    ext["rep"] = mono()
                    op["ext"] = ext
                    self.crit()
                if kind in ("normal", "try"):
                    op["stage"] = "release"
                    rel = {"inv": mono()}
                    rel["res"] = c.call(REL if fam == "lock" else CREL, key, owner)
                    rel["rep"] = mono()
                    op["rel"] = rel
            else:
                # a refused or timed-out caller must hold nothing
                op["stage"] = "release after refusal"
                op["post"] = c.call(REL if fam == "lock" else CREL, key, owner)
            if own:
                op["stray"] = c.pending()
                op["close"] = mono()
                c.close()
        finally:
            if own:
                c.close()
        op.pop("stage", None)


def run_history(server, keys, threads, ops_per_thread, seed):
    history, lock = [], threading.Lock()
    barrier = threading.Barrier(threads)
    workers = [Worker(server, keys, t, ops_per_thread, seed, barrier, history, lock)
               for t in range(threads)]
    t0 = mono()
    for w in workers:
        w.start()
    # generous: a hang shows as a thread still running (each call has its socket timeout)
    deadline = t0 + 120 + ops_per_thread * 2.0
    for w in workers:
        w.join(max(0.0, deadline - mono()))
    elapsed = mono() - t0
    stuck = [w.name for w in workers if w.is_alive()]
    problems = []
    if stuck:
        problems.append("threads still running (a call never answered?): %s" % stuck)
    for w in workers:
        if w.failure:
            problems.append("%s failed: %s" % (w.name, w.failure))
        elif not w.is_alive() and w.final_ping != "PONG":
            problems.append("%s: final PING answered %r (a stray reply?)" % (w.name, w.final_ping))
    with lock:
        hist = list(history)
    return hist, problems, elapsed, t0


# ---------------------------------------------------------------- checking
def fmt(op, t0):
    """One operation, times in ms since the run began."""
    def ms(t):
        return None if t is None else round((t - t0) * 1000, 2)
    parts = ["t%d#%d %s %s %s lease=%s wait=%s" % (op["tid"], op["i"], op["kind"], op["key"],
                                                  op["owner"], op.get("lease"), op.get("wait"))]
    if "inv" in op:
        parts.append("acq inv=%s rep=%s -> %r" % (ms(op.get("inv")), ms(op.get("rep")), op.get("res")))
    if "ext" in op:
        e = op["ext"]
        parts.append("ext(%s) inv=%s rep=%s -> %r" % (e["lease"], ms(e["inv"]), ms(e.get("rep")), e.get("res")))
    if "rel" in op:
        e = op["rel"]
        parts.append("rel inv=%s rep=%s -> %r" % (ms(e["inv"]), ms(e.get("rep")), e.get("res")))
    if "post" in op:
        parts.append("release after refusal -> %r" % (op["post"],))
    if "close" in op:
        parts.append("closed=%s" % ms(op["close"]))
    if "noreply" in op:
        parts.append("NO REPLY at %s" % op["noreply"])
    return "; ".join(parts)


def ext_ok(op):
    e = op.get("ext")
    return e is not None and e.get("res") == e["lease"]


def lease_end_lower(op, upto=None):
    """The lease certainly lasted until here (client clock), from the acquire or
    the last successful EXTEND sent before `upto`."""
    e = op.get("ext")
    if ext_ok(op) and (upto is None or e["rep"] <= upto):
        return e["inv"] + e["lease"] / 1000.0 - SLACK
    return op["inv"] + op["lease"] / 1000.0 - SLACK


def lease_end_upper(op, upto=None):
    """The lease certainly ended by here (client clock)."""
    e = op.get("ext")
    if ext_ok(op) and (upto is None or e["rep"] <= upto):
        return e["rep"] + e["lease"] / 1000.0 + SLACK
    return op["rep"] + op["lease"] / 1000.0 + SLACK


def released_ok(op):
    rel = op.get("rel")
    if rel is None:
        return False
    return rel["res"] == (0 if op["fam"] == "lock" else 1)


def held_interval(op):
    """[start, end) during which op's owner certainly held its permit."""
    start = op["rep"]
    if released_ok(op):
        end = op["rel"]["inv"]
    elif op["kind"] == "session" and "close" in op:
        end = min(op["close"], lease_end_lower(op))
    else:  # crashed, or its lease ran out before it released or extended
        end = lease_end_lower(op)
        if op.get("ext") is not None and not ext_ok(op):
            end = min(end, op["ext"]["rep"])
    return start, end


def covering(ivs, calls):
    """{id(call): [ops whose interval in `ivs` ((start, end, op), ...) covers the whole
    call, from its "inv" to its "rep"]}, by one sweep (a point is covered by at most
    `permits` intervals unless exclusion is broken, so this stays near linear)."""
    ivs = sorted(ivs, key=lambda x: x[0])
    out, heap, j = {}, [], 0
    for o in sorted(calls, key=lambda c: c["inv"]):
        while j < len(ivs) and ivs[j][0] <= o["inv"]:
            heapq.heappush(heap, (ivs[j][1], j, ivs[j][2]))
            j += 1
        while heap and heap[0][0] < o["inv"]:
            heapq.heappop(heap)
        out[id(o)] = [p for e, _, p in heap if e >= o["rep"] and p is not o]
    return out


class Checker:
    def __init__(self, history, keys, t0):
        self.h = history
        self.keys = keys
        self.t0 = t0
        self.violations = []

    def bad(self, what, *ops):
        self.violations.append(what + "\n" + "\n".join("    " + fmt(o, self.t0) for o in ops))

    def answered(self):
        return [o for o in self.h if "noreply" not in o and o["kind"] != "abandon"]

    def grants(self, key=None):
        return [o for o in self.answered() if o.get("granted") and (key is None or o["key"] == key)]

    # --- every call answered once, with the documented shape
    def check_replies(self):
        for o in self.h:
            if "noreply" in o:
                self.bad("a call got no reply", o)
                continue
            if o["kind"] == "abandon":
                continue
            if o.get("stray"):
                self.bad("unread bytes after the last reply (a call answered twice?)", o)
            res, fam, wait = o["res"], o["fam"], o["wait"]
            if fam == "lock":
                ok = isinstance(res, list) and len(res) == 3 and all(isinstance(x, int) for x in res)
                if ok and res[0] == 1:
                    ok = res[1] > 0 and res[2] == o["lease"]
                elif ok and res[0] == 0:   # refused, or its WAIT ran out:
                    # [0, -1, ms until the earliest lease ends | -1 when nobody holds it]
                    ok = res[1] == -1 and res[2] >= -1 and res[2] != 0
                else:
                    ok = False
                if not ok:
                    self.bad("LOCK.ACQUIRE reply of the wrong shape", o)
            else:
                n = o["permits"]
                ok = isinstance(res, list) and len(res) == 4 and all(isinstance(x, int) for x in res)
                if ok and res[0] == 1:
                    ok = 0 <= res[1] <= n - 1 and res[2] == -1 and res[3] >= o["lease"]
                elif ok and res[0] == 0:
                    ok = 0 <= res[1] <= n and res[2] >= 0 and res[3] >= 0
                else:
                    ok = False
                if not ok:
                    self.bad("RL.CONCURRENCY reply of the wrong shape", o)
            if not o.get("granted") and wait is not None and o["rep"] - o["inv"] < wait / 1000.0 - SLACK:
                self.bad("refused before its WAIT of %d ms ran out" % wait, o)

    # --- refused callers hold nothing; releases and extensions answer by the lease
    def check_ownership(self):
        for o in self.answered():
            if not o.get("granted"):
                want = Err(NOT_OWNER) if o["fam"] == "lock" else 0
                if o.get("post") != want:
                    self.bad("a refused/timed-out caller's release answered %r, not %r"
                             % (o.get("post"), want), o)
                continue
            ext = o.get("ext")
            if ext is not None:
                if ext["res"] == ext["lease"]:
                    if ext["inv"] > lease_end_upper(o, upto=ext["inv"]):
                        self.bad("EXTEND succeeded after the lease had certainly ended", o)
                elif ext["res"] == Err(NOT_OWNER):
                    if ext["rep"] < lease_end_lower(o, upto=ext["inv"]):
                        self.bad("EXTEND refused while the lease certainly ran", o)
                else:
                    self.bad("EXTEND answered %r" % (ext["res"],), o)
            rel = o.get("rel")
            if rel is None:
                continue
            ok_val = 0 if o["fam"] == "lock" else 1
            gone_val = Err(NOT_OWNER) if o["fam"] == "lock" else 0
            expired_before = ext is not None and not ext_ok(o)
            if rel["res"] == ok_val:
                if expired_before or rel["inv"] > lease_end_upper(o):
                    self.bad("release found the permit held after its lease had certainly ended", o)
            elif rel["res"] == gone_val:
                if not expired_before and rel["rep"] < lease_end_lower(o):
                    self.bad("release of a held permit, before its lease end, did not answer %r"
                             % ok_val, o)
            else:
                self.bad("release answered %r" % (rel["res"],), o)

    # --- at most `permits` taken at once (each holder its TAKE); a writer alone
    def check_exclusion(self):
        for key in self.keys.all():
            n = self.keys.permits[key]
            ivs = []
            for o in self.grants(key):
                s, e = held_interval(o)
                if e > s:
                    ivs.append((s, e, o))
            events = sorted([(s, 1, i) for i, (s, e, o) in enumerate(ivs)] +
                            [(e, 0, i) for i, (s, e, o) in enumerate(ivs)])
            active = set()
            reported = 0
            for t, kind, i in events:
                if kind == 0:
                    active.discard(i)
                    continue
                active.add(i)
                ops = [ivs[j][2] for j in sorted(active)]
                if key == self.keys.rw:   # readers share; a writer holds alone
                    broken = len(ops) > 1 and any(o.get("mode") != "READ" for o in ops)
                    what = "a writer beside other holders"
                else:
                    broken = sum(o.get("take", 1) for o in ops) > n
                    what = "%d permits taken (at most %d)" % (sum(o.get("take", 1) for o in ops), n)
                if broken and reported < 3:
                    reported += 1
                    self.bad("%d holders at once on %s, %s, at %.2f ms"
                             % (len(ops), key, what, (t - self.t0) * 1000), *ops)
            # a refusal says "nobody holds it" (LOCK: -1; RL.CONCURRENCY: retry 0) only
            # when no holder certainly held it throughout the call
            refusals = []
            for o in self.answered():
                if o["key"] != key or o.get("granted"):
                    continue
                if o["fam"] == "lock" and (o["wait"] is not None or o["res"][2] != -1):
                    continue
                if o["fam"] == "conc" and o["res"][2] != 0:
                    continue
                refusals.append(o)
            cover = covering(ivs, refusals)
            for o in refusals:
                if cover[id(o)]:
                    self.bad("refused as if nobody held %s while this holder certainly did" % key,
                             o, cover[id(o)][0])
            # a grant's `remaining` counts the holders certainly there throughout the call
            if self.keys.family[key] == "conc":
                gs = self.grants(key)
                cover = covering(ivs, gs)
                for o in gs:
                    others = len(cover[id(o)])
                    if o["res"][1] > n - 1 - others:
                        self.bad("granted with remaining=%d while %d other holders certainly held"
                                 % (o["res"][1], others), o, *cover[id(o)])

    # --- fencing tokens
    def check_tokens(self):
        for key in self.keys.locks():
            gs = sorted(self.grants(key), key=lambda o: o["res"][1])
            for a, b in zip(gs, gs[1:]):
                if a["res"][1] == b["res"][1]:
                    self.bad("fencing token %d given twice on %s" % (a["res"][1], key), a, b)
            # real-time order: a grant answered before another was sent has the smaller token
            best = None
            for o in gs:
                if best is not None and best["inv"] > o["rep"]:
                    self.bad("token order contradicts real time on %s: the larger token was "
                             "granted before the smaller one was asked for" % key, o, best)
                if best is None or o["inv"] > best["inv"]:
                    best = o
        for o in self.grants():
            if o["fam"] == "lock" and o["res"][1] < o["srv_us"] - SLACK * 1e6:
                self.bad("token %d below the server clock (%d us) read before the call"
                         % (o["res"][1], o["srv_us"]), o)

    def check(self):
        self.check_replies()
        self.check_ownership()
        self.check_exclusion()
        self.check_tokens()
        return self.violations

    # --- figures and counter bounds
    def counts(self):
        ans = self.answered()
        grants = [o for o in ans if o.get("granted")]
        waited = [o for o in ans if o["wait"] is not None]
        timeouts = [o for o in waited if not o.get("granted")]
        abandoned = [o for o in self.h if o["kind"] == "abandon"]
        certain_expired = 0
        possible_expired = 0
        for o in grants:
            if o["kind"] == "crash":
                certain_expired += 1
            elif o["kind"] == "session":
                possible_expired += 1
            elif o.get("ext") is not None and not ext_ok(o):
                certain_expired += 1
            elif o.get("rel") is not None and not released_ok(o):
                certain_expired += 1
        conc = [o for o in ans if o["fam"] == "conc"]
        lock_tokens = [o["res"][1] for o in grants if o["fam"] == "lock"]
        return {
            "ops": len(self.h),
            "answered": len(ans),
            "grants": len(grants),
            "wait_ops": len(waited) + len(abandoned),
            "timeouts": len(timeouts),
            "immediate_refusals": len([o for o in ans if o["wait"] is None and not o.get("granted")]),
            "abandoned": len(abandoned),
            "crashed_holders": len([o for o in grants if o["kind"] in ("crash", "session")]),
            "extends": len([o for o in ans if "ext" in o]),
            "releases": len([o for o in ans if "rel" in o]),
            "expired_certain": certain_expired,
            "expired_possible": possible_expired + len(abandoned),
            "conc_allowed": len([o for o in conc if o.get("granted")]),
            "read_grants": len([o for o in grants if o.get("mode") == "READ"]),
            "weighted_grants": len([o for o in grants if o.get("take", 1) > 1]),
            "conc_refused": len([o for o in conc if not o.get("granted")]),
            "tokens": len(lock_tokens),
            "cross_key_duplicate_tokens": len(lock_tokens) - len(set(lock_tokens)),
            "max_token": {k: max([o["res"][1] for o in grants if o["key"] == k], default=None)
                          for k in self.keys.locks()},
            "abandoned_on": {k: len([o for o in abandoned if o["key"] == k]) for k in self.keys.locks()},
        }

# SPDX-License-Identifier: BSD-3-Clause
"""Hardening: memory limits, ACLs, client pause, and a bad-input matrix over
every command of the module (the internal ones included).

ACL rules (tested below). On Redis 7.0 module commands have no ACL categories
(SetCommandACLCategories is 7.2+), so they are granted by name; ``~*`` because
the MCAPTCHA_CACHE.* commands declare the captcha *name* as their key, not the
derived ``mcap:...`` key they touch, so key patterns cannot separate captchas.

Each rule set is one ACL SETUSER command (wrapped here). A read-only user (may
look, never change anything)::

    ACL SETUSER reader on >reader-password ~* -@all
        +MCAPTCHA_CACHE.GET +MCAPTCHA_CACHE.CAPTCHA_EXISTS
        +RL.GCRA_PEEK +RL.WINDOW_PEEK +LOCK.INSPECT

A user for the application (every module command)::

    ACL SETUSER writer on >writer-password ~* -@all
        +MCAPTCHA_CACHE.GET +MCAPTCHA_CACHE.CAPTCHA_EXISTS
        +RL.GCRA_PEEK +RL.WINDOW_PEEK +LOCK.INSPECT
        +MCAPTCHA_CACHE.ADD_CAPTCHA +MCAPTCHA_CACHE.ADD_VISITOR
        +MCAPTCHA_CACHE.DELETE_CAPTCHA +MCAPTCHA_CACHE.RENAME_CAPTCHA
        +MCAPTCHA_CACHE.ADD_CHALLENGE +MCAPTCHA_CACHE.GET_CHALLENGE
        +MCAPTCHA_CACHE.DELETE_CHALLENGE +MCAPTCHA_CACHE.COUNT
        +CL.THROTTLE +RL.GCRA +RL.WINDOW +RL.REFUND +RL.MULTI
        +LOCK.ACQUIRE +LOCK.RELEASE +LOCK.EXTEND
        +MCAPTCHA_CACHE.VISIT_AT +MCAPTCHA_CACHE.CAPTCHA_SET
        +MCAPTCHA_CACHE.CHALLENGE_SET +RL.GCRA_SET +RL.WINDOW_HIT
        +RL.WINDOW_SET +LOCK.STATE

(the last three lines are the internal commands that replication and the AOF
use; the replication link and AOF loading bypass ACLs, so an application user
may leave them out. A client library may need more, e.g. ``+ping +hello
+client|setname``.)

Every reply is read as raw RESP bytes (servers.RawConnection) so the exact
error codes (OOM, NOPERM, WRONGTYPE, ERR) are checked. All the time-dependent
state made here lives for an hour or more (so DEBUG DIGEST cannot change by an
expiry during a comparison), except in the client-pause test, which is about
timing: it leaves >= 100 ms of slack at each edge and starts over (fresh keys,
at most 3 attempts) when this process was descheduled past one.

The bad-input matrix prints how many invocations it sends (run with -s).
"""

import select
import time

import pytest
import redis

from mcap import (ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, CAPTCHA_EXISTS, CAPTCHA_SET,
                  CHALLENGE_SET, DELETE_CAPTCHA, DELETE_CHALLENGE, GET, GET_CHALLENGE,
                  RENAME_CAPTCHA, VISIT_AT, cfg, chal, chkey, ckey)
from servers import RawConnection, resp_encode, wait_replicas_synced

COUNT = "MCAPTCHA_CACHE.COUNT"  # a leaky-bucket counter on the window type (rate-limit family)

# ------------------------------------------------------------------ commands
READ_CMDS = [GET, CAPTCHA_EXISTS, "RL.GCRA_PEEK", "RL.WINDOW_PEEK", "LOCK.INSPECT"]
ALLOC_WRITERS = [ADD_CAPTCHA, ADD_VISITOR, RENAME_CAPTCHA, ADD_CHALLENGE, VISIT_AT, CAPTCHA_SET,
                 CHALLENGE_SET, COUNT, "CL.THROTTLE", "RL.GCRA", "RL.WINDOW", "RL.MULTI", "RL.GCRA_SET",
                 "RL.WINDOW_HIT", "RL.WINDOW_SET", "LOCK.ACQUIRE", "LOCK.EXTEND", "LOCK.STATE"]
FREEING_WRITERS = [DELETE_CAPTCHA, DELETE_CHALLENGE, GET_CHALLENGE, "RL.REFUND", "LOCK.RELEASE"]
WRITE_CMDS = ALLOC_WRITERS + FREEING_WRITERS
ALL_CMDS = WRITE_CMDS + READ_CMDS

# arity as declared in the families' <family>_info.c (COMMAND INFO must agree)
ARITY = {
    ADD_CAPTCHA: 3, ADD_VISITOR: 2, GET: 2, CAPTCHA_EXISTS: 2, DELETE_CAPTCHA: 2,
    RENAME_CAPTCHA: 3, ADD_CHALLENGE: 3, GET_CHALLENGE: 3, DELETE_CHALLENGE: 3,
    VISIT_AT: 3, CAPTCHA_SET: -8, CHALLENGE_SET: -4, COUNT: 3,
    "CL.THROTTLE": -5, "RL.GCRA": -4, "RL.GCRA_PEEK": -4, "RL.WINDOW": -4, "RL.WINDOW_PEEK": -4,
    "RL.REFUND": 3, "RL.MULTI": -7, "RL.GCRA_SET": 5, "RL.WINDOW_HIT": 7, "RL.WINDOW_SET": -6,
    "LOCK.ACQUIRE": -4, "LOCK.RELEASE": 3, "LOCK.EXTEND": 4, "LOCK.INSPECT": -2, "LOCK.STATE": -5,
}
assert sorted(ARITY) == sorted(ALL_CMDS) and len(ALL_CMDS) == 28

READER_RULES = ["~*", "-@all"] + ["+" + c for c in READ_CMDS]
WRITER_RULES = ["~*", "-@all"] + ["+" + c for c in ALL_CMDS]

CFG = cfg([(50, 50), (500, 500)], duration=30)
LONG = 3600000           # ms: every limiter / lease / window here lives an hour
W30 = 30000 // 256       # slot width of a 30 s captcha
WLONG = LONG // 256      # slot width of a one-hour window
BARE_ERRORS = (b"Captcha not found", b"Challenge not found", b"Challenge already exists")


def now_ms():
    return int(time.time() * 1000)


# ------------------------------------------------------------- raw RESP helpers
def is_err(rep):
    return rep.startswith(b"-")


def err_line(rep):
    return rep[1:].rstrip(b"\r\n")


def parse(rep):
    """Raw RESP2 bytes -> Python (int, bytes, None, list; errors as ('ERR', line))."""
    val, pos = _parse(rep, 0)
    assert pos == len(rep), rep
    return val


def _parse(b, i):
    j = b.index(b"\r\n", i)
    t, line = b[i:i + 1], b[i + 1:j]
    i = j + 2
    if t == b"+":
        return line, i
    if t == b"-":
        return ("ERR", line), i
    if t == b":":
        return int(line), i
    if t == b"$":
        n = int(line)
        if n < 0:
            return None, i
        return b[i:i + n], i + n + 2
    if t == b"*":
        n = int(line)
        if n < 0:
            return None, i
        out = []
        for _ in range(n):
            v, i = _parse(b, i)
            out.append(v)
        return out, i
    raise ValueError("unexpected RESP %r" % b[i - 1:i + 20])


def pipeline(conn, cmds):
    """Send every command in one write, read every reply (raw bytes)."""
    conn.sock.sendall(b"".join(resp_encode(*c) for c in cmds))
    return [conn.read_reply() for _ in cmds]


def short(x, n=60):
    """repr of an argument list with long values cut."""
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(short(a, n) for a in x) + "]"
    if isinstance(x, (bytes, str)) and len(x) > n:
        return "%r...(%d bytes)" % (x[:20], len(x))
    return repr(x)


def info_field(conn, section, field):
    text = conn.command("INFO", section).decode()
    for line in text.split("\r\n"):
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    raise AssertionError("no %s in INFO %s" % (field, section))


def state(conn):
    """(DBSIZE, DEBUG DIGEST) of the whole db."""
    size, dig = pipeline(conn, [("DBSIZE",), ("DEBUG", "DIGEST")])
    return size, dig


# ------------------------------------------------------- valid invocations
class Case:
    """A valid invocation of `cmd`: run `setup` first, then `cmd *args`.

    free     -- argument positions where any string is acceptable input (a key,
                a name, an owner, a challenge string): a substitution there may
                get a normal reply; everywhere else it must get an error.
    targets  -- (key, kind, keep_setup): the Redis keys the command touches; for
                the wrong-type cases a value of another type is put there
                (keep_setup: the rest of the setup is still needed).
    """

    def __init__(self, cmd, args, setup=(), free=(), targets=()):
        self.cmd = cmd
        self.args = list(args)
        self.setup = [tuple(s) for s in setup]
        self.free = set(free)
        self.targets = list(targets)


def cases_for(cmd, n, now):
    """Valid invocations of `cmd` on fresh keys (suffix n)."""
    s = str(n)
    name, name2, key, ch, own = "nm" + s, "nb" + s, "k" + s, "c" + s, "o" + s
    add = (ADD_CAPTCHA, name, CFG)
    visit = (ADD_VISITOR, name)
    acquire = ("LOCK.ACQUIRE", key, own, LONG)
    tat_us = (now + LONG) * 1000
    token = now * 1000
    C = Case
    if cmd == ADD_CAPTCHA:
        return [C(cmd, [name, CFG], free={0}, targets=[(ckey(name), "captcha", False)])]
    if cmd == ADD_VISITOR:
        return [C(cmd, [name], [add], free={0}, targets=[(ckey(name), "captcha", False)])]
    if cmd in (GET, CAPTCHA_EXISTS, DELETE_CAPTCHA):
        return [C(cmd, [name], [add, visit], free={0}, targets=[(ckey(name), "captcha", False)])]
    if cmd == RENAME_CAPTCHA:
        return [C(cmd, [name, name2], [add, visit], free={0, 1},
                  targets=[(ckey(name), "captcha", False), (ckey(name2), "captcha", True)])]
    if cmd == ADD_CHALLENGE:
        return [C(cmd, [name, chal(5, 600, ch)], free={0},
                  targets=[(chkey(name, ch), "challenge", False)])]
    if cmd in (GET_CHALLENGE, DELETE_CHALLENGE):
        return [C(cmd, [name, ch], [(ADD_CHALLENGE, name, chal(5, 600, ch))], free={0, 1},
                  targets=[(chkey(name, ch), "challenge", False)])]
    if cmd == VISIT_AT:
        return [C(cmd, [ckey(name), now], [add], free={0}, targets=[(ckey(name), "captcha", False)])]
    if cmd == CAPTCHA_SET:
        return [C(cmd, [ckey(name), 30, 2, 50, 50, 500, 500, now, 1, now // W30, 3], free={0},
                  targets=[(ckey(name), "captcha", False)])]
    if cmd == CHALLENGE_SET:
        return [C(cmd, [chkey(name, ch), 5, 600, "PXAT", now + 600000], free={0},
                  targets=[(chkey(name, ch), "challenge", False)])]
    if cmd == COUNT:
        return [C(cmd, [key, LONG // 1000], free={0}, targets=[(key, "window", False)])]
    if cmd == "CL.THROTTLE":
        return [C(cmd, [key, 5, 10, 3600, 1], free={0}, targets=[(key, "gcra", False)])]
    if cmd == "RL.GCRA":  # AT (explicit time) is in COMMAND DOCS, not in the summary being checked
        return [C(cmd, [key, 10, LONG, "BURST", 20, "COST", 1, "WAIT", 100], free={0},
                  targets=[(key, "gcra", False)]),
                C(cmd, [key, 10, LONG, "AT", now], free={0}, targets=[(key, "gcra", False)])]
    if cmd == "RL.GCRA_PEEK":
        return [C(cmd, [key, 10, LONG, "BURST", 20, "COST", 1], [("RL.GCRA", key, 10, LONG)],
                  free={0}, targets=[(key, "gcra", False)])]
    if cmd == "RL.WINDOW":
        return [C(cmd, [key, 10, LONG, "COST", 1, "WAIT", 100], free={0},
                  targets=[(key, "window", False)]),
                C(cmd, [key, 10, LONG, "AT", now], free={0}, targets=[(key, "window", False)])]
    if cmd == "RL.WINDOW_PEEK":
        return [C(cmd, [key, 10, LONG, "COST", 1], [("RL.WINDOW", key, 10, LONG)], free={0},
                  targets=[(key, "window", False)])]
    if cmd == "RL.REFUND":
        return [C(cmd, [key, 1], [("RL.WINDOW", key, 10, LONG, "COST", 3)], free={0},
                  targets=[(key, "limiter", False)]),
                C(cmd, [key, 1], [("RL.GCRA", key, 10, LONG, "COST", 3)], free={0},
                  targets=[(key, "limiter", False)])]
    if cmd == "RL.MULTI":
        ka, kb = "{m%s}a" % s, "{m%s}b" % s
        return [C(cmd, [1, 2, ka, "GCRA", 10, LONG, kb, "WINDOW", 10, LONG], free={2, 6},
                  targets=[(ka, "gcra", False), (kb, "window", False)])]
    if cmd == "RL.GCRA_SET":
        return [C(cmd, [key, tat_us, 1000000, 10], free={0}, targets=[(key, "gcra", False)])]
    if cmd == "RL.WINDOW_HIT":
        return [C(cmd, [key, LONG, 10, now, 1, 0], free={0}, targets=[(key, "window", False)])]
    if cmd == "RL.WINDOW_SET":
        return [C(cmd, [key, LONG, 10, now, 1, now // WLONG, 2], free={0},
                  targets=[(key, "window", False)])]
    if cmd == "LOCK.ACQUIRE":
        return [C(cmd, [key, own, LONG, "PERMITS", 2, "REENTRANT", "SESSION", "WAIT", 100],
                  free={0, 1}, targets=[(key, "lock", False)])]
    if cmd == "LOCK.RELEASE":
        return [C(cmd, [key, own], [acquire], free={0, 1}, targets=[(key, "lock", False)])]
    if cmd == "LOCK.EXTEND":
        return [C(cmd, [key, own, LONG], [acquire], free={0, 1}, targets=[(key, "lock", False)])]
    if cmd == "LOCK.INSPECT":
        return [C(cmd, [key], [acquire], free={0}, targets=[(key, "lock", False)])]
    if cmd == "LOCK.STATE":
        return [C(cmd, [key, 2, token, 1, own, now + LONG, 1, token], free={0, 4},
                  targets=[(key, "lock", False)])]
    raise KeyError(cmd)


def other_type_setup(key, kind, now):
    """A value of another module type at `key` (kind: what the command expects)."""
    if kind == "captcha":
        return [(CHALLENGE_SET, key, 5, 600, "PXAT", now + 600000)]
    if kind == "challenge":
        return [(CAPTCHA_SET, key, 30, 1, 50, 50, now, 0)]
    if kind == "gcra":
        return [("RL.WINDOW_HIT", key, LONG, 10, now, 1, 0)]
    if kind in ("window", "lock"):
        return [("RL.GCRA_SET", key, (now + LONG) * 1000, 1000000, 10)]
    if kind == "limiter":  # RL.REFUND takes both limiter types
        return [("LOCK.STATE", key, 1, 5, 0)]
    raise KeyError(kind)


class Counter:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1
        return self.n


# =====================================================================
# 1. Memory limits
# =====================================================================
def test_oom_refuses_every_allocating_command_and_lets_freeing_ones_run(servers):
    s = servers.new()
    c = RawConnection(s.host, s.port, timeout=30)
    now = now_ms()
    fresh = Counter()

    # plain data, so that maxmemory can sit below the usage
    pad = b"x" * 1000
    for base in range(0, 3000, 500):
        reps = pipeline(c, [("SET", "pad:%d" % i, pad) for i in range(base, base + 500)])
        assert all(r == b"+OK\r\n" for r in reps)

    # what is refused under OOM (and run for real once the limit is lifted)
    alloc = [cases_for(cmd, fresh(), now)[0] for cmd in ALLOC_WRITERS]
    # what must still run: the freeing commands (on state made now) and the reads
    free_cases = [cases_for(cmd, fresh(), now)[0] for cmd in FREEING_WRITERS]
    free_cases.append(cases_for("RL.REFUND", fresh(), now)[1])  # a GCRA refund too
    read_cases = [cases_for(cmd, fresh(), now)[0] for cmd in READ_CMDS]
    for case in alloc + free_cases + read_cases:
        for rep, cmd in zip(pipeline(c, case.setup), case.setup):
            assert not is_err(rep), "setup %s: %r" % (short(cmd), rep)

    used = int(info_field(c, "memory", "used_memory"))
    limit = used - 512 * 1024
    assert pipeline(c, [("CONFIG", "SET", "maxmemory-policy", "noeviction"),
                        ("CONFIG", "SET", "maxmemory", limit)]) == [b"+OK\r\n"] * 2
    try:
        # the server really refuses writes now
        rep = c.command("SET", "plain", "1")
        assert rep.startswith(b"-OOM"), rep

        before = state(c)
        problems = []
        for case in alloc:
            rep = c.command(case.cmd, *case.args)
            if not rep.startswith(b"-OOM"):
                problems.append("%s %s: %r (expected an -OOM error)" % (case.cmd, short(case.args), rep))
            after = state(c)
            if after != before:
                problems.append("%s changed DBSIZE/DIGEST under OOM: %r -> %r" % (case.cmd, before, after))
                before = after
        assert not problems, "\n".join(problems)

        # freeing commands and reads still run
        for case in free_cases + read_cases:
            rep = c.command(case.cmd, *case.args)
            assert not is_err(rep), "%s %s under OOM: %r" % (case.cmd, short(case.args), rep)
            if case.cmd in (DELETE_CAPTCHA, DELETE_CHALLENGE):
                assert rep == b"+OK\r\n", (case.cmd, rep)
            if case.cmd == GET_CHALLENGE:
                assert rep.endswith(b'{"difficulty_factor":5,"duration":600}\r\n'), rep
            if case.cmd == "RL.REFUND":
                assert rep == b":1\r\n", (case.cmd, case.setup, rep)
            if case.cmd == "LOCK.RELEASE":
                assert rep == b":0\r\n", rep
        # they did free what they said
        for case in free_cases:
            if case.cmd in (DELETE_CHALLENGE, GET_CHALLENGE, DELETE_CAPTCHA):
                k = ckey(case.args[0]) if case.cmd == DELETE_CAPTCHA else chkey(*case.args)
                assert c.command("EXISTS", k) == b":0\r\n", (case.cmd, k)
        assert int(info_field(c, "memory", "used_memory")) > limit, "dropped below maxmemory"
    finally:
        c.command("CONFIG", "SET", "maxmemory", 0)

    # the refused invocations were valid: without the limit they all succeed
    for case in alloc:
        rep = c.command(case.cmd, *case.args)
        assert not is_err(rep), "%s %s without a limit: %r" % (case.cmd, short(case.args), rep)
    assert c.command("PING") == b"+PONG\r\n"
    c.close()


def test_module_memory_is_counted_by_redis(servers):
    """used_memory grows by (at least half) what MEMORY USAGE reports: the
    module allocates through Redis, not behind its back."""
    s = servers.new()
    c = RawConnection(s.host, s.port, timeout=30)
    n = 2000

    def used():
        return int(info_field(c, "memory", "used_memory"))

    def run(cmds):
        for i in range(0, len(cmds), 1000):
            reps = pipeline(c, cmds[i:i + 1000])
            bad = [r for r in reps if is_err(r)]
            assert not bad, bad[:3]

    def usage(keys):
        reps = pipeline(c, [("MEMORY", "USAGE", k) for k in keys])
        vals = [parse(r) for r in reps]
        assert all(isinstance(v, int) for v in vals), vals[:3]
        return vals

    # captchas with visits
    u0 = used()
    cmds = []
    for i in range(n):
        cmds += [(ADD_CAPTCHA, "m%d" % i, CFG), (ADD_VISITOR, "m%d" % i), (ADD_VISITOR, "m%d" % i)]
    run(cmds)
    u1 = used()
    cap_usage = usage([ckey("m%d" % i) for i in range(n)])
    # windows with hits
    u2 = used()
    run([("RL.WINDOW", "w%d" % i, 100, LONG, "COST", 3) for i in range(n)])
    u3 = used()
    win_usage = usage(["w%d" % i for i in range(n)])

    print("\ncaptchas: used_memory +%d, sum of MEMORY USAGE %d (%d each)"
          % (u1 - u0, sum(cap_usage), cap_usage[0]))
    print("windows:  used_memory +%d, sum of MEMORY USAGE %d (%d each)"
          % (u3 - u2, sum(win_usage), win_usage[0]))
    assert u1 - u0 >= 0.5 * sum(cap_usage), (u1 - u0, sum(cap_usage))
    assert u3 - u2 >= 0.5 * sum(win_usage), (u3 - u2, sum(win_usage))
    assert all(0 < v <= 4096 for v in cap_usage), (min(cap_usage), max(cap_usage))
    assert all(0 < v <= 4096 for v in win_usage), (min(win_usage), max(win_usage))
    c.close()


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random"])
def test_allkeys_eviction_removes_module_keys_and_the_server_stays_consistent(servers, policy):
    """docs/operations.md (Memory and eviction): with allkeys-* policies module keys are
    evicted like any other -- an evicted captcha, limiter or lock is simply gone
    (count, limit, lease reset) -- and the server stays consistent: survivors
    intact, lease timers of evicted locks harmless, a reload gives them back."""
    s = servers.new()
    c = s.client()
    n = 1200
    lease = 1500
    kinds = {"captcha": [ckey("e%d" % i) for i in range(n)],
             "gcra": ["g%d" % i for i in range(n)],
             "window": ["w%d" % i for i in range(n)],
             "lock": ["l%d" % i for i in range(n)]}
    p = c.pipeline(transaction=False)
    for i in range(n):  # interleaved, so that no type is older than another (LRU)
        p.execute_command(ADD_CAPTCHA, "e%d" % i, CFG)
        p.execute_command(ADD_VISITOR, "e%d" % i)
        p.execute_command(ADD_VISITOR, "e%d" % i)
        p.execute_command("RL.GCRA", "g%d" % i, 100, LONG, "COST", 7)
        p.execute_command("RL.WINDOW", "w%d" % i, 100, LONG, "COST", 3)
        p.execute_command("LOCK.ACQUIRE", "l%d" % i, "o%d" % i, lease)
    replies = p.execute()
    assert all(not isinstance(x, Exception) for x in replies)
    # each LOCK.ACQUIRE's token, from its reply (reading the keys again would make
    # the locks the most recently used keys, which allkeys-lru then never evicts)
    tokens = {"l%d" % i: replies[6 * i + 5][1] for i in range(n)}
    assert c.dbsize() == 4 * n
    used = int(c.info("memory")["used_memory"])
    base = int(c.info("memory")["used_memory_startup"])
    limit = base + (used - base) * 6 // 10
    assert c.config_set("maxmemory-policy", policy)
    assert c.config_set("maxmemory", limit)
    # eviction runs before the next commands (and on a timer until under the limit)
    deadline = time.time() + 20
    while int(c.info("memory")["used_memory"]) > limit:
        assert time.time() < deadline, "never got under maxmemory"
        c.set("trigger", "x")
        time.sleep(0.01)
    # lift the limit, so that what is examined below stops changing
    assert c.config_set("maxmemory", 0)
    evicted = int(c.info("stats")["evicted_keys"])
    assert evicted > 0
    left = {kind: [k for k in keys if c.exists(k)] for kind, keys in kinds.items()}
    gone = {kind: sorted(set(keys) - set(left[kind])) for kind, keys in kinds.items()}
    print("\n%s: evicted %d keys; gone per type %r" % (
        policy, evicted, {k: len(v) for k, v in gone.items()}))
    for kind in kinds:
        assert gone[kind], "no %s key was evicted" % kind
        assert left[kind], "every %s key was evicted" % kind
    # survivors are intact
    types = {"captcha": b"mcaptmcap", "gcra": b"mcap-gcra", "window": b"mcap-wndw",
             "lock": b"mcap-lock"}
    for kind, keys in left.items():
        for k in keys[:50]:
            assert c.type(k) == types[kind], (k, c.type(k))
    for k in left["captcha"][:50]:
        name = k[len(b"mcap:captcha::{"):-1].decode()
        assert c.execute_command(GET, name) == 2
    for k in left["gcra"][:50]:
        assert c.execute_command("RL.GCRA_PEEK", k, 100, LONG)[1] == 92
    for k in left["window"][:50]:
        assert c.execute_command("RL.WINDOW_PEEK", k, 100, LONG)[1] == 96
    # evicted ones are simply gone: the count, limit or lease starts over
    for k in gone["captcha"][:50]:
        name = k[len(b"mcap:captcha::{"):-1].decode()
        assert c.execute_command(CAPTCHA_EXISTS, name) == 1
        with pytest.raises(redis.ResponseError, match="^Captcha not found$"):
            c.execute_command(GET, name)
    for k in gone["gcra"][:20]:
        assert c.execute_command("RL.GCRA_PEEK", k, 100, LONG)[1] == 99
    for k in gone["window"][:20]:
        assert c.execute_command("RL.WINDOW_PEEK", k, 100, LONG)[1] == 99
    for k in gone["lock"][:20]:
        assert c.execute_command("LOCK.INSPECT", k) is None
        g = c.execute_command("LOCK.ACQUIRE", k, "new", LONG)
        # the lease reset; the fencing token still never goes back
        assert g[0] == 1 and g[1] > tokens[k], (k, g, tokens[k])
        c.execute_command("LOCK.RELEASE", k, "new")
    # the leases end on their timers (evicted locks' timers included) without harm
    wait_for_ = time.time() + 20
    while any(c.execute_command("LOCK.INSPECT", k)[3] for k in left["lock"][:50]):
        assert time.time() < wait_for_, "the surviving leases never ended"
        time.sleep(0.02)
    assert int(c.info("mcaptcha_cache_locks")["mcaptcha_cache_waiters"]) == 0
    s.check_alive()
    # consistent enough to save and load: survivors come back identical
    sample = [k for keys in left.values() for k in keys[:30] if c.exists(k)]
    before = {k: c.execute_command("DEBUG", "DIGEST-VALUE", k) for k in sample}
    assert c.execute_command("DEBUG", "RELOAD")
    assert {k: c.execute_command("DEBUG", "DIGEST-VALUE", k) for k in sample} == before
    assert c.ping()


def test_memory_usage_of_every_key_type_is_bounded(servers):
    s = servers.new()
    c = RawConnection(s.host, s.port, timeout=30)
    now = now_ms()
    # worst cases: 128 levels and a 1 s duration (the largest ring of a captcha),
    # every ring slot non-zero; a 511 ms window (the largest ring of a window).
    # The hits are a minute ahead (explicit times), so nothing expires meanwhile.
    ahead = now + 60000
    big = cfg([(i, i) for i in range(1, 129)], duration=1)
    cmds = [(ADD_CAPTCHA, "empty", CFG), (ADD_CAPTCHA, "two", CFG), (ADD_VISITOR, "two"),
            (ADD_CAPTCHA, "big", big)]
    cmds += [(VISIT_AT, ckey("big"), ahead - 1000 + 3 * i) for i in range(334)]
    cmds += [(ADD_CHALLENGE, "two", chal(5, 600, "c1")),
             ("RL.GCRA", "g", 10, LONG), ("CL.THROTTLE", "t", 5, 10, 3600),
             ("RL.WINDOW", "w", 10, LONG), ("RL.WINDOW_HIT", "wsmall", 511, 10, ahead, 1, 0)]
    cmds += [("RL.WINDOW_HIT", "wfull", 511, 1000, ahead - 510 + i, 1, 0) for i in range(511)]
    cmds += [("LOCK.ACQUIRE", "l", "owner", LONG),
             ("LOCK.ACQUIRE", "sem", "o" * 256, LONG, "PERMITS", 8)]
    reps = pipeline(c, cmds)
    bad = [(short(cm), r) for cm, r in zip(cmds, reps) if is_err(r)]
    assert not bad, bad[:3]
    assert parse(c.command(GET, "big")) == 334  # every slot of the ring holds a visit

    keys = {"captcha without visits": (ckey("empty"), True),
            "captcha with visits": (ckey("two"), True),
            "captcha 128 levels, 1 s, all slots": (ckey("big"), True),
            "challenge": (chkey("two", "c1"), False), "gcra": ("g", False),
            "cl.throttle": ("t", False), "window 1 h": ("w", True), "window 511 ms": ("wsmall", True),
            "window 511 ms, all slots": ("wfull", True), "lock": ("l", False),
            "semaphore, 256-byte owner": ("sem", False)}
    sizes = {}
    for label, (k, bounded) in keys.items():
        v = parse(c.command("MEMORY", "USAGE", k))
        sizes[label] = v
        assert isinstance(v, int) and v > 0, (label, v)
        if bounded:
            assert v <= 4096, (label, v)
    print("\nMEMORY USAGE: " + ", ".join("%s %d" % kv for kv in sizes.items()))
    # a ring is allocated and counted once there is a visit / hit
    assert sizes["captcha with visits"] > sizes["captcha without visits"] + 4 * 200
    assert sizes["window 511 ms"] > 4 * 500
    c.close()


# =====================================================================
# 2. ACLs and command flags
# =====================================================================
def test_acl_reader_cannot_write_and_writer_can(servers):
    s = servers.new()
    admin = RawConnection(s.host, s.port, timeout=30)
    assert admin.command("ACL", "SETUSER", "reader", "reset", "on", ">rpw", *READER_RULES) == b"+OK\r\n"
    assert admin.command("ACL", "SETUSER", "writer", "reset", "on", ">wpw", *WRITER_RULES) == b"+OK\r\n"
    now = now_ms()
    fresh = Counter()

    reader = RawConnection(s.host, s.port, timeout=30)
    assert reader.command("AUTH", "reader", "rpw") == b"+OK\r\n"
    writer = RawConnection(s.host, s.port, timeout=30)
    assert writer.command("AUTH", "writer", "wpw") == b"+OK\r\n"

    # state for the reader to try to change (made by the default user)
    w_cases = [cases_for(cmd, fresh(), now)[0] for cmd in WRITE_CMDS]
    r_cases = [cases_for(cmd, fresh(), now)[0] for cmd in READ_CMDS]
    for case in w_cases + r_cases:
        for rep in pipeline(admin, case.setup):
            assert not is_err(rep), rep

    before = state(admin)
    problems = []
    for case in w_cases:
        rep = reader.command(case.cmd, *case.args)
        if not rep.startswith(b"-NOPERM"):
            problems.append("reader %s: %r (expected -NOPERM)" % (case.cmd, rep))
        after = state(admin)
        if after != before:
            problems.append("reader %s changed the db: %r -> %r" % (case.cmd, before, after))
            before = after
    # and nothing else either
    for cmd in (("SET", "x", "1"), ("DEL", ckey(w_cases[0].args[0])), ("FLUSHALL",)):
        rep = reader.command(*cmd)
        if not rep.startswith(b"-NOPERM"):
            problems.append("reader %s: %r (expected -NOPERM)" % (short(cmd), rep))
    assert state(admin) == before
    # the reader reads
    for case in r_cases:
        rep = reader.command(case.cmd, *case.args)
        if is_err(rep):
            problems.append("reader %s %s: %r" % (case.cmd, short(case.args), rep))
        elif case.cmd == GET and rep != b":1\r\n":
            problems.append("reader GET: %r" % rep)
        elif case.cmd == CAPTCHA_EXISTS and rep != b":0\r\n":
            problems.append("reader CAPTCHA_EXISTS: %r" % rep)
        elif case.cmd == "LOCK.INSPECT" and parse(rep)[3][0][0] != case.setup[0][2].encode():
            problems.append("reader LOCK.INSPECT: %r" % rep)
    assert state(admin) == before, "a read changed the db"

    # the writer does everything: its own setup, then the command
    for cmd in ALL_CMDS:
        for bi in range(len(cases_for(cmd, 0, now))):
            case = cases_for(cmd, fresh(), now)[bi]
            reps = pipeline(writer, case.setup + [(case.cmd,) + tuple(case.args)])
            for sent, rep in zip(case.setup + [(case.cmd,) + tuple(case.args)], reps):
                if is_err(rep):
                    problems.append("writer %s: %r" % (short(sent), rep))
    assert state(admin) != before
    assert not problems, "\n".join(problems)
    for conn in (admin, reader, writer):
        conn.close()


def test_acl_read_only_key_permission_follows_the_key_specs(servers):
    """A user with every module command but read-only key access (%R~*): the
    key specs of the families' <family>_info.c must mark every writer's keys as written (so it
    is refused) and every reader's as only read (so it runs)."""
    s = servers.new()
    admin = RawConnection(s.host, s.port, timeout=30)
    assert admin.command("ACL", "SETUSER", "rokeys", "reset", "on", ">pw", "%R~*", "-@all",
                         *["+" + c for c in ALL_CMDS]) == b"+OK\r\n"
    u = RawConnection(s.host, s.port, timeout=30)
    assert u.command("AUTH", "rokeys", "pw") == b"+OK\r\n"
    now = now_ms()
    fresh = Counter()
    problems = []
    for cmd in ALL_CMDS:
        for bi in range(len(cases_for(cmd, 0, now))):
            case = cases_for(cmd, fresh(), now)[bi]
            assert not any(is_err(r) for r in pipeline(admin, case.setup))
            before = state(admin)
            rep = u.command(case.cmd, *case.args)
            if cmd in READ_CMDS:
                if is_err(rep):
                    problems.append("%s with read-only key access: %r" % (cmd, rep))
            elif not rep.startswith(b"-NOPERM"):
                problems.append("%s with read-only key access: %r (expected -NOPERM)" % (cmd, rep))
            if state(admin) != before:
                problems.append("%s changed the db" % cmd)
    assert not problems, "\n".join(problems)
    admin.close()
    u.close()


def test_command_info_flags_and_arity(servers):
    s = servers.new()
    c = RawConnection(s.host, s.port)
    problems = []
    for cmd in ALL_CMDS:
        info = parse(c.command("COMMAND", "INFO", cmd))
        assert len(info) == 1 and info[0] is not None, (cmd, info)
        name, arity, flags = info[0][0], info[0][1], [f.decode() for f in info[0][2]]
        if name.decode().upper() != cmd.upper():
            problems.append("%s: name %r" % (cmd, name))
        if arity != ARITY[cmd]:
            problems.append("%s: arity %d, expected %d" % (cmd, arity, ARITY[cmd]))
        if cmd in WRITE_CMDS:
            if "write" not in flags or "readonly" in flags:
                problems.append("%s: flags %r, expected write" % (cmd, flags))
        else:
            if "readonly" not in flags or "write" in flags or "denyoom" in flags:
                problems.append("%s: flags %r, expected readonly" % (cmd, flags))
        if cmd in ALLOC_WRITERS and "denyoom" not in flags:
            problems.append("%s: flags %r, expected denyoom" % (cmd, flags))
        if cmd in FREEING_WRITERS and "denyoom" in flags:
            problems.append("%s: flags %r: a freeing command must run under OOM" % (cmd, flags))
    assert not problems, "\n".join(problems)
    c.close()


# =====================================================================
# 3. Client pause
# =====================================================================
def _readable(conn, timeout=0.0):
    """True when a reply (or EOF) is waiting on a raw connection (nothing was
    read from it before, so no data sits in its file buffer)."""
    r, _, _ = select.select([conn.sock], [], [], timeout)
    return bool(r)


def _wait_until(pred, what, timeout=10.0):
    """Poll pred until it holds (a deadline for a state, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out after %.0f s waiting for %s" % (timeout, what)
        time.sleep(0.002)


def _reply_with_time(conn, timeout=6.0):
    conn.sock.settimeout(timeout)
    rep = conn.read_reply()
    return rep, time.monotonic()


def test_client_pause_write_with_waiters_and_a_replica(servers):
    """CLIENT PAUSE 1000 WRITE starts ~100 ms before a 300 ms lease ends, with
    clients blocked on the lock (LOCK.ACQUIRE WAIT), on a sliding window and on
    a GCRA (RL.* WAIT); during the pause a SESSION holder disconnects and a
    lock waiter times out. Nothing may reach the replica during the pause (no
    timer may write), reads and PING answer, writes wait; after it every
    waiter is served and the replica converges."""
    conf = {"repl-ping-replica-period": 60, "repl-timeout": 120}  # no replication PINGs meanwhile
    prim = servers.new(name="primary", config=conf)
    repl = servers.replica_of(prim, name="replica", config=conf)
    pc = RawConnection(prim.host, prim.port, timeout=10)
    rc = RawConnection(repl.host, repl.port, timeout=10)
    zero = b"*1\r\n+" + b"0" * 40 + b"\r\n"

    attempt_errors = []
    for attempt in range(3):
        conns = []

        def conn():
            x = RawConnection(prim.host, prim.port, timeout=10)
            conns.append(x)
            return x

        lk, wk, gk, sk, pk = ("%s%d" % (p_, attempt) for p_ in ("lk", "wk", "gk", "sk", "paused"))
        a, b, w, g, tw, sess, ctl, d, e = (conn() for _ in range(9))
        assert parse(sess.command("LOCK.ACQUIRE", sk, "S", LONG, "SESSION"))[0] == 1
        t0 = time.monotonic()
        got = parse(a.command("LOCK.ACQUIRE", lk, "A", 300))
        assert got[0] == 1, got
        token_a = got[1]
        t_hits = time.time()  # the window's hit and the GCRA's unit are taken after this
        assert parse(a.command("RL.WINDOW", wk, 1, 800))[0] == 1
        assert parse(a.command("RL.GCRA", gk, 1, 800))[0] == 1
        b.sock.sendall(resp_encode("LOCK.ACQUIRE", lk, "B", 10000, "WAIT", 5000))
        w.sock.sendall(resp_encode("RL.WINDOW", wk, 1, 800, "WAIT", 5000))
        g.sock.sendall(resp_encode("RL.GCRA", gk, 1, 800, "WAIT", 5000))
        # all four blocked (tw queues behind b, times out during the pause)

        def queued(blocked, on_lock):
            """Wait until `blocked` clients are blocked, `on_lock` of them in lk's
            queue; False when A's lease ended first (b was served: too slow)."""
            deadline = time.monotonic() + 10
            while True:
                if _readable(b):
                    return False
                nb = info_field(pc, "clients", "blocked_clients")
                nw = parse(e.command("LOCK.INSPECT", lk))[2]
                if nb == str(blocked) and nw == on_lock:
                    return True
                assert time.monotonic() < deadline, (
                    "never %d blocked clients, %d on the lock (now %s, %d)" % (blocked, on_lock, nb, nw))
                time.sleep(0.002)

        ok = queued(3, 1)
        if ok:
            tw.sock.sendall(resp_encode("LOCK.ACQUIRE", lk, "T", 10000, "WAIT", 350))
            ok = queued(4, 2)
        if not ok:
            attempt_errors.append("attempt %d: A's lease ended before the waiters queued" % attempt)
            for x in conns:
                x.close()
            continue
        # pause writes right before A's lease ends (300 ms after the grant)
        time.sleep(max(0.0, t0 + 0.2 - time.monotonic()))
        t_pause = time.monotonic()
        assert ctl.command("CLIENT", "PAUSE", 1000, "WRITE") == b"+OK\r\n"
        pause_end = t_pause + 1.0
        off0 = info_field(pc, "replication", "master_repl_offset")
        insp = parse(e.command("LOCK.INSPECT", lk))
        if not insp[3] or _readable(b):
            # too slow: the lease had ended before the pause; try again
            attempt_errors.append("attempt %d: the lease ended before the pause (%r)" % (attempt, insp))
            time.sleep(max(0.0, pause_end - time.monotonic()) + 0.2)
            for x in conns:
                x.close()
            continue

        # a module write sent during the pause waits for its end; reads do not
        d.sock.sendall(resp_encode(ADD_CAPTCHA, pk, CFG))
        t_read = time.monotonic()
        wp = parse(e.command("RL.WINDOW_PEEK", wk, 1, 800))
        gp = parse(e.command("RL.GCRA_PEEK", gk, 1, 800))
        t_peeked = time.time()
        assert parse(e.command(CAPTCHA_EXISTS, pk)) == 1
        assert time.monotonic() - t_read < 0.4, "reads were held up by the pause"
        if t_peeked >= t_hits + 0.8:
            # too slow: the peeks may have run after the hit / unit came back
            attempt_errors.append("attempt %d: the peeks ended %.3f s after the hits"
                                  % (attempt, t_peeked - t_hits))
            time.sleep(max(0.0, pause_end - time.monotonic()) + 0.2)
            for x in conns:
                x.close()
            continue
        # the peeks ran within 800 ms of the hits: the limits are still full,
        # and they say for how long (the waiters are not served meanwhile)
        assert wp[:2] == [0, 0] and 0 < wp[2] <= 800 + 800 // 256 + 1, wp
        assert gp[:2] == [0, 0] and 0 < gp[2] <= 800, gp
        # the SESSION holder goes away during the pause
        sess.close()

        # the server stays up and answers during the pause; past the lease end
        time.sleep(max(0.0, t0 + 0.45 - time.monotonic()))
        assert e.command("PING") == b"+PONG\r\n"
        insp = parse(e.command("LOCK.INSPECT", lk))
        assert insp[3] == [], "during the pause: %r" % (insp,)
        time.sleep(max(0.0, pause_end - 0.2 - time.monotonic()))
        assert e.command("PING") == b"+PONG\r\n"
        off1 = info_field(pc, "replication", "master_repl_offset")
        early = [name for name, x in (("lock waiter", b), ("window waiter", w), ("gcra waiter", g),
                                      ("ADD_CAPTCHA", d)) if _readable(x)]
        t_check = time.monotonic()
        if t_check >= pause_end - 0.02:
            # this process was descheduled for ~200 ms: the checks are void; try again
            attempt_errors.append("attempt %d: the checks ran %.3f s late" % (attempt, t_check - pause_end))
            time.sleep(max(0.0, pause_end - time.monotonic()) + 0.2)
            for x in conns:
                x.close()
            continue
        assert off1 == off0, "the primary propagated during CLIENT PAUSE WRITE: offset %s -> %s" % (off0, off1)
        assert rc.command("DEBUG", "DIGEST-VALUE", ckey(pk)) == zero
        assert not early, "answered during the pause: %s" % early

        # after the pause: everyone served
        rep_b, t_b = _reply_with_time(b)
        rep_w, t_w = _reply_with_time(w)
        rep_g, t_g = _reply_with_time(g)
        rep_d, t_d = _reply_with_time(d)
        rep_t, _ = _reply_with_time(tw)
        got_b, got_w, got_g = parse(rep_b), parse(rep_w), parse(rep_g)
        assert got_b[0] == 1 and got_b[1] > token_a and got_b[2] == 10000, got_b
        assert got_w[0] == 1 and got_w[2] == -1, got_w
        assert got_g[0] == 1 and got_g[2] == -1, got_g
        assert rep_d == b"+OK\r\n", rep_d
        got_t = parse(rep_t)   # refused at its deadline: A's lease ended (-1) or was ending
        assert got_t[:2] == [0, -1] and (got_t[2] == -1 or 0 < got_t[2] <= 300), rep_t
        slack = 0.02  # the server's pause end is >= t_pause + 1 s on its own clock
        for what, t_ in (("lock waiter", t_b), ("window waiter", t_w), ("gcra waiter", t_g),
                         ("ADD_CAPTCHA", t_d)):
            assert t_ >= pause_end - slack, "%s answered %.3f s before the pause ended" % (what, pause_end - t_)
        assert all(x.command("PING") == b"+PONG\r\n" for x in (a, e))
        # the SESSION lock is released once writes are allowed again
        deadline = time.monotonic() + 2
        while parse(e.command("LOCK.INSPECT", sk))[3] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert parse(e.command("LOCK.INSPECT", sk))[3] == [], "the SESSION holder's lock is still held"
        prim.check_alive()

        # the replica converges
        wait_replicas_synced(prim, [repl])
        for k in (lk, sk, ckey(pk)):
            dv = pc.command("DEBUG", "DIGEST-VALUE", k)
            assert dv != zero, k
            assert rc.command("DEBUG", "DIGEST-VALUE", k) == dv, k
        assert parse(rc.command("LOCK.INSPECT", lk))[3][0][0] == b"B"
        assert parse(rc.command("LOCK.INSPECT", sk))[3] == []
        deadline = time.monotonic() + 5
        while True:
            dp, dr = pc.command("DEBUG", "DIGEST"), rc.command("DEBUG", "DIGEST")
            if dp == dr or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert dp == dr, "replica digest %r, primary %r" % (dr, dp)
        for x in conns:
            x.close()
        break
    else:
        raise AssertionError("no attempt ran in time: %s" % attempt_errors)
    pc.close()
    rc.close()


# =====================================================================
# 4. Bad-input matrix
# =====================================================================
SUBSTITUTES = [
    ("abc", b"abc"),
    ("negative", b"-1"),
    ("2^63", b"9223372036854775808"),
    ("2^64", b"18446744073709551616"),
    ("empty", b""),
    ("1MB", b"a" * (1 << 20)),
    ("bad-utf8", b"\xff\xfe"),
]


def _invocations(cmd, fresh, now):
    """(label, setup, argv, expect) for one command; expect in ok, either, error,
    arity, wrongtype. Every invocation uses fresh keys."""
    out = []
    nb = len(cases_for(cmd, 0, now))
    arity = ARITY[cmd]
    min_args = abs(arity) - 1
    for bi in range(nb):
        def case():
            return cases_for(cmd, fresh(), now)[bi]

        tag = "%s#%d" % (cmd, bi) if nb > 1 else cmd
        c = case()
        out.append((tag + " baseline", c.setup, [cmd] + c.args, "ok"))
        # arity
        if bi == 0:
            c = case()
            out.append((tag + " no args", c.setup, [cmd], "arity"))
            if min_args > 1:
                c = case()
                out.append((tag + " too few", c.setup, [cmd] + c.args[:min_args - 1], "arity"))
        c = case()
        out.append((tag + " too many", c.setup, [cmd] + c.args + ["extra"],
                    "arity" if arity > 0 else "error"))
        if arity < 0 and cmd != "CL.THROTTLE":  # the last optional argument cut in half
            c = case()
            out.append((tag + " last arg missing", c.setup, [cmd] + c.args[:-1], "error"))
        # substitutions, one position at a time
        for pos in range(len(c.args)):
            for sname, val in SUBSTITUTES:
                c = case()
                args = list(c.args)
                args[pos] = val
                out.append(("%s arg%d=%s" % (tag, pos + 1, sname), c.setup, [cmd] + args,
                            "either" if pos in c.free else "error"))
        # wrong types at every key the command touches
        for ti in range(len(c.targets)):
            for kind_name in ("string", "other module type"):
                c = case()
                key, kind, keep = c.targets[ti]
                setup = list(c.setup) if keep else []
                if kind_name == "string":
                    setup.append(("SET", key, "plain"))
                else:
                    setup += other_type_setup(key, kind, now)
                out.append(("%s %s at %r" % (tag, kind_name, key), setup, [cmd] + c.args, "wrongtype"))
    return out


def test_binary_keys_that_differ_after_a_nul_byte_are_distinct(servers):
    """Keys are binary: "x\\0a" and "x\\0b" are two keys. Waiting (RL.* / LOCK.*
    WAIT) and lease timers must not mix them up."""
    s = servers.new()
    conns = [RawConnection(s.host, s.port, timeout=10) for _ in range(4)]
    c, w1, w2, ctl = conns
    problems = []

    def expired():
        return int(info_field(ctl, "mcaptcha_cache_locks", "mcaptcha_cache_leases_expired_while_held"))

    # a client waiting on one lock does not make another lock look busy
    assert parse(c.command("LOCK.ACQUIRE", b"x\x00a", "A", LONG))[0] == 1
    w1.sock.sendall(resp_encode("LOCK.ACQUIRE", b"x\x00a", "B", LONG, "WAIT", LONG))
    _wait_until(lambda: parse(ctl.command("LOCK.INSPECT", b"x\x00a"))[2] == 1, "B queued on 'x\\0a'")
    got = parse(c.command("LOCK.ACQUIRE", b"x\x00b", "C", LONG))
    if got[0] != 1:
        problems.append("LOCK.ACQUIRE of the free key 'x\\0b' while a client waits on 'x\\0a': %r" % (got,))

    # nor another rate limiter
    assert parse(c.command("RL.WINDOW", b"w\x00a", 1, LONG))[0] == 1
    w2.sock.sendall(resp_encode("RL.WINDOW", b"w\x00a", 1, LONG, "WAIT", LONG))
    # w1 and w2 are the only clients that can block here
    _wait_until(lambda: info_field(ctl, "clients", "blocked_clients") == "2", "w2 blocked on 'w\\0a'")
    t = time.monotonic()
    got = parse(c.command("RL.WINDOW", b"w\x00b", 1, LONG, "WAIT", 500))
    if got[0] != 1:
        problems.append("RL.WINDOW of the fresh key 'w\\0b' WAIT 500 while a client waits on 'w\\0a': "
                        "%r after %.3f s" % (got, time.monotonic() - t))

    # each lock's lease ends on time, by its own timer
    e0 = expired()
    assert parse(c.command("LOCK.ACQUIRE", b"z\x00a", "A", 300))[0] == 1
    assert parse(c.command("LOCK.ACQUIRE", b"z\x00b", "A", LONG))[0] == 1
    assert parse(c.command("LOCK.ACQUIRE", "control", "A", 300))[0] == 1
    # only INFO is read meanwhile (no command touches the keys): the timers end them
    deadline = time.monotonic() + 10
    while expired() < e0 + 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    if expired() != e0 + 2:
        problems.append("300 ms leases on 'z\\0a' and 'control' (and a 1 h lease on 'z\\0b'): "
                        "leases_expired_while_held went from %d to %d, expected %d"
                        % (e0, expired(), e0 + 2))
    for k, want in ((b"z\x00a", []), (b"control", []), (b"z\x00b", [b"A"])):
        got = [h[0] for h in parse(c.command("LOCK.INSPECT", k))[3]]
        if got != want:
            problems.append("after the two 300 ms leases ended, %r is held by %r, expected %r" % (k, got, want))
    assert c.command("PING") == b"+PONG\r\n"
    for x in conns:
        x.close()
    assert not problems, "\n".join(problems)


def test_bad_input_matrix(servers):
    s = servers.new()
    conn = RawConnection(s.host, s.port, timeout=60)
    now = now_ms()
    fresh = Counter()
    problems = []
    tally = {}
    total = 0
    t_start = time.monotonic()
    for cmd in ALL_CMDS:
        assert conn.command("FLUSHALL") == b"+OK\r\n"
        invs = _invocations(cmd, fresh, now)
        total += len(invs)
        batch = []
        for _, setup, argv, _ in invs:
            batch += list(setup)
            batch += [("DBSIZE",), ("DEBUG", "DIGEST"), tuple(argv), ("DBSIZE",), ("DEBUG", "DIGEST"),
                      ("PING",)]
        conn.sock.sendall(b"".join(resp_encode(*x) for x in batch))
        for label, setup, argv, expect in invs:
            try:
                set_reps = [conn.read_reply() for _ in setup]
                size0, dig0, rep, size1, dig1, pong = [conn.read_reply() for _ in range(6)]
            except (OSError, ConnectionError) as e:
                raise AssertionError("connection lost at %s: %s -> %r (server alive: %s)\n%s"
                                     % (label, short(argv), e, s.running(), s.log_tail(30)))
            where = "%s: %s" % (label, short(argv))
            for sent, r in zip(setup, set_reps):
                if is_err(r):
                    problems.append("%s: setup %s failed: %r (test bug)" % (where, short(sent), r))
            if pong != b"+PONG\r\n":
                problems.append("%s: PING after it: %r" % (where, pong))
            err = is_err(rep)
            if expect == "ok" and err:
                problems.append("%s: baseline refused: %r" % (where, rep))
            if expect in ("error", "arity", "wrongtype") and not err:
                problems.append("%s: expected an error, got %s" % (where, short(rep, 120)))
            if expect == "arity" and err and b"wrong number of arguments" not in rep:
                problems.append("%s: expected a wrong-arity error, got %r" % (where, rep))
            if expect == "wrongtype" and err and not rep.startswith(b"-WRONGTYPE"):
                problems.append("%s: expected WRONGTYPE, got %r" % (where, rep))
            if err:
                line = err_line(rep)
                code = line.split(b" ", 1)[0]
                if line not in BARE_ERRORS and not (code.isupper() and code.isalpha()):
                    problems.append("%s: error without a code: %r" % (where, rep))
                if (size0, dig0) != (size1, dig1):
                    problems.append("%s: error %r but the db changed (DBSIZE %r -> %r, DIGEST %r -> %r)"
                                    % (where, rep, size0, size1, dig0, dig1))
            elif argv[0] in READ_CMDS and (size0, dig0) != (size1, dig1):
                problems.append("%s: a read changed the db" % where)
            outcome = "error" if err else ("changed" if (size0, dig0) != (size1, dig1) else "unchanged")
            tally[(expect, outcome)] = tally.get((expect, outcome), 0) + 1
        s.check_alive()
    elapsed = time.monotonic() - t_start
    print("\nbad-input matrix: %d invocations over %d commands in %.1f s (expectation, reply: count) %s"
          % (total, len(ALL_CMDS), elapsed, sorted(tally.items())))
    conn.close()
    assert not problems, "%d problems in %d invocations:\n%s" % (
        len(problems), total, "\n".join(problems[:80]))

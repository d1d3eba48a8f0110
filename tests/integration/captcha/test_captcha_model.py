# SPDX-License-Identifier: BSD-3-Clause
"""A model-based test of the mCaptcha commands: random sequences of
MCAPTCHA_CACHE.ADD_CAPTCHA (valid and invalid configs), ADD_VISITOR, GET,
CAPTCHA_EXISTS, DELETE_CAPTCHA, RENAME_CAPTCHA, ADD_CHALLENGE (valid and
invalid), GET_CHALLENGE and DELETE_CHALLENGE against a real primary (with a
replica), every reply compared byte for byte with a Python model of
docs/protocol.md and docs/captcha.md, interleaved with plain keys written over the
module's keys (WRONGTYPE) and deleted, the client's own token keys (left
alone), MCAPTCHA_CACHE.COUNT counters, DEBUG RELOAD, SAVE + restart and a
replica compared with the primary.

Captcha durations are an hour or more (and 2^40 s, which is kept as
4294967295 s), challenges live an hour or more: no visit leaves and no
challenge expires during a test, so counts and difficulties are exact. The
difficulty is the one of docs/protocol.md, "Difficulty rule": the
difficulty_factor of the highest level whose visitor_threshold is strictly
below the count after the visit, else the lowest level's.

Invariants: every reply equals the model's; DBSIZE equals the model's key
count after every step; a challenge's PEXPIRETIME lies within its
ADD_CHALLENGE call (read between two TIMEs) plus its duration; after DEBUG
RELOAD and SAVE + restart every key's digest and PEXPIRETIME are unchanged and
GET / CAPTCHA_EXISTS / the challenges equal the model; the replica's digests,
expiry times and read-only replies equal the primary's.

MCAPTCHA_CACHE.COUNT <counter> <leak-rate s> (src/ratelimit/count_cmd.c: a
leaky-bucket counter whose key is its name, type mcap-wndw) is modelled too,
with leak-rates of an hour or more: +1 per call, another leak-rate refused,
WRONGTYPE on a token or captcha key; its counts survive reload and restart.

Bounded in `make test` (tests/integration/soak.py); MC_SOAK=1 runs many more
examples.
"""

import json
from collections import namedtuple

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from resp_conn import Conn, Err
from servers import resync_replica_now, wait_replicas_synced
from soak import model_settings

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
CAPTCHA_NOT_FOUND = Err("Captcha not found")          # bare: the protocol's exact bytes
CHALLENGE_NOT_FOUND = Err("Challenge not found")
CHALLENGE_EXISTS = Err("Challenge already exists")
CAPTCHA_TAKEN = Err("ERR captcha already exists")
TARGET_EXISTS = Err("ERR target captcha already exists")

P = "MCAPTCHA_CACHE."
NAMES = ["s1", "s2", "site:3"]
CHALLENGES = ["n0nce", "c2"]
TOKENS = ["mcaptcha:token:s1:t1", "mcaptcha:token:s2:t2"]   # the client's own keys
MAX_U32 = 4294967295
DURATIONS = [3600, 86400, 1 << 40]        # 2^40 s is kept as 4294967295 s
CHALLENGE_DURATIONS = [3600, 7200, MAX_U32]
LEAK_RATES = [3600, 7200]                 # MCAPTCHA_CACHE.COUNT leak-rates (s)


def ckey(name):
    return "mcap:captcha::{%s}" % name


def chkey(name, challenge):
    return "mcap:CHALLENGE:{%s}:%s" % (name, challenge)


# counter names of MCAPTCHA_CACHE.COUNT (the key is the name): two of their own,
# a token key and a captcha's key (WRONGTYPE when that holds a token or a captcha)
COUNTERS = ["cnt:a", "cnt:b", TOKENS[0], ckey(NAMES[0])]
ALL_KEYS = sorted(set([ckey(n) for n in NAMES] + [chkey(n, ch) for n in NAMES for ch in CHALLENGES] + TOKENS
                      + COUNTERS))
TYPE_NAMES = {None: "none", "captcha": "mcaptmcap", "challenge": "mcaptchal", "counter": "mcap-wndw",
              "plain": "string"}


def dumps(x):
    return json.dumps(x, separators=(",", ":"))




Captcha = namedtuple("Captcha", "levels duration count")   # levels sorted by threshold


def difficulty(levels, count):
    """docs/protocol.md, "Difficulty rule"."""
    below = [d for t, d in levels if t < count]
    return below[-1] if below else levels[0][1]


def visitor_reply(duration, diff):
    return b'{"duration":%d,"difficulty_factor":%d}' % (duration, diff)


def challenge_reply(diff, duration):
    return b'{"difficulty_factor":%d,"duration":%d}' % (diff, duration)


@st.composite
def valid_config(draw):
    """(json, sorted levels, reported duration): distinct thresholds in any
    order, difficulties that do not fall as the threshold grows (equal allowed)."""
    thresholds = draw(st.lists(st.integers(0, 10) | st.sampled_from([MAX_U32]), min_size=1, max_size=5, unique=True))
    diffs = sorted(draw(st.lists(st.integers(1, 5) | st.sampled_from([1000, MAX_U32]),
                                 min_size=len(thresholds), max_size=len(thresholds))))
    by_rank = dict(zip(sorted(thresholds), diffs))
    duration = draw(st.sampled_from(DURATIONS))
    extra = draw(st.booleans())
    doc = {"levels": [{"visitor_threshold": t, "difficulty_factor": by_rank[t]} for t in thresholds],
           "duration": duration}
    if extra:
        doc["unknown_field"] = [1, 2]      # ignored
    return dumps(doc), tuple(sorted(by_rank.items())), min(duration, MAX_U32)


# each: (json, the error's prefix)
BAD_CONFIGS = [
    ('{"levels":[],"duration":3600}', "ERR invalid config: "),
    ('{"levels":[{"visitor_threshold":1,"difficulty_factor":5},{"visitor_threshold":1,"difficulty_factor":6}],'
     '"duration":3600}', "ERR invalid config: "),
    ('{"levels":[{"visitor_threshold":1,"difficulty_factor":0}],"duration":3600}', "ERR invalid config: "),
    ('{"levels":[{"visitor_threshold":1,"difficulty_factor":9},{"visitor_threshold":2,"difficulty_factor":8}],'
     '"duration":3600}', "ERR invalid config: "),
    ('{"levels":[{"visitor_threshold":1,"difficulty_factor":5}],"duration":0}', "ERR invalid config: "),
    ('{"levels":[{"visitor_threshold":4294967296,"difficulty_factor":5}],"duration":3600}', "ERR invalid config: "),
    ('{"levels":[{"visitor_threshold":1,"difficulty_factor":5}]}', "ERR invalid config: "),
    ('{"levels":[{"visitor_threshold":1,"difficulty_factor":5}],"duration":3600', "ERR invalid JSON: "),
    ('{"levels":[],"levels":[],"duration":3600}', "ERR invalid JSON: "),
]

BAD_CHALLENGES = [
    ('{"difficulty":5,"duration":0,"challenge":"n0nce"}', "ERR invalid challenge: "),
    ('{"difficulty":-1,"duration":60,"challenge":"n0nce"}', "ERR invalid challenge: "),
    ('{"difficulty":5,"duration":60}', "ERR invalid challenge: "),
    ('{"difficulty":5,"duration":60,"challenge":"%s"}' % ("x" * 513), "ERR invalid challenge: "),
    ('{"difficulty":5,"duration":60,"challenge":"n0nce"', "ERR invalid JSON: "),
]


def prefix_of(actual, prefix):
    """An error reply starting with `prefix` stands for the model's Err(prefix)."""
    if isinstance(actual, Err) and actual.msg.startswith(prefix):
        return Err(prefix)
    return actual


# ------------------------------------------------------------------ the machine
class CaptchaModel(RuleBasedStateMachine):
    """The model is the keyspace: key -> ("captcha", Captcha) | ("challenge",
    difficulty, duration, expiry lo ms, expiry hi ms) | ("counter", leak s, count)
    | ("plain",)."""
    primary = replica = None
    conns = None

    @classmethod
    def connect(cls):
        if cls.conns:
            for c in cls.conns.values():
                c.close()
        cls.conns = {0: Conn(cls.primary)}

    def __init__(self):
        super().__init__()
        assert self.conns[0].call("FLUSHALL") == "OK"
        self.kv = {}
        self.restarted = False

    @property
    def c(self):
        return self.conns[0]

    def kind(self, key):
        v = self.kv.get(key)
        return v[0] if v else None

    def captcha(self, name):
        """The captcha of `name`, None when absent, WRONGTYPE when its key holds something else."""
        v = self.kv.get(ckey(name))
        return None if v is None else v[1] if v[0] == "captcha" else WRONGTYPE

    def pick(self, i):
        """A name for a rule: mostly one whose captcha exists, else any."""
        held = [n for n in NAMES if self.kind(ckey(n)) == "captcha"]
        return held[i % len(held)] if held and i % 4 else NAMES[i % len(NAMES)]

    def pick_challenge(self, i):
        held = [(n, ch) for n in NAMES for ch in CHALLENGES if self.kind(chkey(n, ch)) == "challenge"]
        if held and i % 4:
            return held[i % len(held)]
        return NAMES[i % len(NAMES)], CHALLENGES[i // len(NAMES) % len(CHALLENGES)]

    def check(self, what, actual, expected):
        assert actual == expected, "%r: the server replied %r, the model expected %r" % (what, actual, expected)

    # ------------------------------------------------------------- captchas
    @rule(name=st.sampled_from(NAMES), cfg=valid_config())
    def add_captcha(self, name, cfg):
        text, levels, duration = cfg
        args = (P + "ADD_CAPTCHA", name, text)
        cap = self.captcha(name)
        if cap is WRONGTYPE:
            exp = WRONGTYPE
        elif cap is not None:
            exp = CAPTCHA_TAKEN
        else:
            exp = "OK"
            self.kv[ckey(name)] = ("captcha", Captcha(levels, duration, 0))
        self.check(args, self.c.call(*args), exp)

    @rule(name=st.sampled_from(NAMES), bad=st.sampled_from(BAD_CONFIGS))
    def add_bad_captcha(self, name, bad):
        """Refused, and nothing is stored (DBSIZE is checked after every step)."""
        text, prefix = bad
        args = (P + "ADD_CAPTCHA", name, text)
        cap = self.captcha(name)
        exp = WRONGTYPE if cap is WRONGTYPE else CAPTCHA_TAKEN if cap is not None else Err(prefix)
        self.check(args, prefix_of(self.c.call(*args), prefix), exp)

    @rule(i=st.integers(0, 99), times=st.integers(1, 8))
    def add_visitor(self, i, times):
        name = self.pick(i)
        for _ in range(times):
            args = (P + "ADD_VISITOR", name)
            cap = self.captcha(name)
            if cap is WRONGTYPE:
                exp = WRONGTYPE
            elif cap is None:
                exp = CAPTCHA_NOT_FOUND
            else:
                cap = cap._replace(count=cap.count + 1)
                self.kv[ckey(name)] = ("captcha", cap)
                exp = visitor_reply(cap.duration, difficulty(cap.levels, cap.count))
            self.check(args, self.c.call(*args), exp)
            if isinstance(exp, Err):
                break

    def exp_get(self, name):
        cap = self.captcha(name)
        return cap if cap is WRONGTYPE else CAPTCHA_NOT_FOUND if cap is None else cap.count

    def exp_exists(self, name):
        cap = self.captcha(name)
        return cap if cap is WRONGTYPE else 1 if cap is None else 0     # inverted, as mCaptcha expects

    @rule(i=st.integers(0, 99))
    def get_and_exists(self, i):
        name = self.pick(i)
        self.check(("GET", name), self.c.call(P + "GET", name), self.exp_get(name))
        self.check(("CAPTCHA_EXISTS", name), self.c.call(P + "CAPTCHA_EXISTS", name), self.exp_exists(name))

    @rule(i=st.integers(0, 99))
    def delete_captcha(self, i):
        """Only the captcha goes: its challenges stay."""
        name = self.pick(i)
        cap = self.captcha(name)
        if cap is WRONGTYPE:
            exp = WRONGTYPE
        elif cap is None:
            exp = CAPTCHA_NOT_FOUND
        else:
            del self.kv[ckey(name)]
            exp = "OK"
        self.check(("DELETE_CAPTCHA", name), self.c.call(P + "DELETE_CAPTCHA", name), exp)

    @rule(i=st.integers(0, 99), new=st.sampled_from(NAMES))
    def rename_captcha(self, i, new):
        """The whole state moves, the live count included; the challenges stay."""
        old = self.pick(i)
        src, dst = self.captcha(old), self.captcha(new)
        if src is WRONGTYPE:
            exp = WRONGTYPE
        elif src is None or old == new:
            exp = "OK"
        elif dst is WRONGTYPE:
            exp = WRONGTYPE
        elif dst is not None:
            exp = TARGET_EXISTS
        else:
            self.kv[ckey(new)] = self.kv.pop(ckey(old))
            exp = "OK"
        self.check(("RENAME_CAPTCHA", old, new), self.c.call(P + "RENAME_CAPTCHA", old, new), exp)

    # ----------------------------------------------------------- challenges
    @rule(name=st.sampled_from(NAMES), ch=st.sampled_from(CHALLENGES), diff=st.sampled_from([0, 1, 50, MAX_U32]),
          duration=st.sampled_from(CHALLENGE_DURATIONS))
    def add_challenge(self, name, ch, diff, duration):
        """The captcha need not exist; the expiry is set absolute, now + duration."""
        text = dumps({"difficulty": diff, "duration": duration, "challenge": ch})
        args = (P + "ADD_CHALLENGE", name, text)
        k = chkey(name, ch)
        actual, t0, t1 = self.c.timed(*args)
        t0, t1 = t0 // 1000, t1 // 1000   # ms
        if self.kind(k) not in (None, "challenge"):
            exp = WRONGTYPE
        elif self.kind(k) == "challenge":
            exp = CHALLENGE_EXISTS
        else:
            exp = "OK"
            self.kv[k] = ("challenge", diff, duration, t0 + duration * 1000, t1 + duration * 1000)
        self.check(args, actual, exp)
        if exp == "OK":
            at = self.c.call("PEXPIRETIME", k)
            assert t0 + duration * 1000 <= at <= t1 + duration * 1000, (k, at, t0, t1, duration)

    @rule(name=st.sampled_from(NAMES), bad=st.sampled_from(BAD_CHALLENGES))
    def add_bad_challenge(self, name, bad):
        """The JSON is checked first: an error even over a key of another type; nothing stored."""
        text, prefix = bad
        args = (P + "ADD_CHALLENGE", name, text)
        self.check(args, prefix_of(self.c.call(*args), prefix), Err(prefix))

    def take(self, name, ch, value):
        k = chkey(name, ch)
        kind = self.kind(k)
        if kind is None:
            return CHALLENGE_NOT_FOUND
        if kind != "challenge":
            return WRONGTYPE
        _, diff, duration, _, _ = self.kv.pop(k)
        return challenge_reply(diff, duration) if value else "OK"

    @rule(i=st.integers(0, 99), times=st.integers(1, 2))
    def get_challenge(self, i, times):
        """Returned once, then gone."""
        name, ch = self.pick_challenge(i)
        for _ in range(times):
            exp = self.take(name, ch, True)
            self.check(("GET_CHALLENGE", name, ch), self.c.call(P + "GET_CHALLENGE", name, ch), exp)

    @rule(i=st.integers(0, 99))
    def delete_challenge(self, i):
        name, ch = self.pick_challenge(i)
        exp = self.take(name, ch, False)
        self.check(("DELETE_CHALLENGE", name, ch), self.c.call(P + "DELETE_CHALLENGE", name, ch), exp)

    # ------------------------------------------------------------- counters
    @rule(key=st.sampled_from(COUNTERS), leak=st.sampled_from(LEAK_RATES), times=st.integers(1, 4))
    def count(self, key, leak, times):
        """MCAPTCHA_CACHE.COUNT counter leak-rate: +1 (the key is the counter's
        name); another leak-rate than the counter's, or a key of another type,
        is refused and writes nothing."""
        for _ in range(times):
            v = self.kv.get(key)
            args = (P + "COUNT", key, leak)
            actual = self.c.call(*args)
            if v is None or v[0] == "counter" and v[1] == leak:
                n = (v[2] if v else 0) + 1
                self.kv[key] = ("counter", leak, n)
                self.check(args, actual, n)
            elif v[0] == "counter":
                assert isinstance(actual, Err) and actual.msg.startswith("ERR ") \
                    and "%d s" % v[1] in actual.msg and "%d s" % leak in actual.msg, (args, actual, v)
            else:
                self.check(args, actual, WRONGTYPE)

    # ------------------------------------------------------- plain keys
    @rule(key=st.sampled_from(ALL_KEYS), op=st.sampled_from(["SET", "DEL"]))
    def plain_key(self, key, op):
        """SET writes a plain string over a captcha, challenge or counter key
        (it replaces it; the module's commands then answer WRONGTYPE), or a
        token key of the client; DEL removes any of them."""
        if op == "SET":
            self.kv[key] = ("plain",)
            self.check(("SET", key), self.c.call("SET", key, "plain"), "OK")
        else:
            n = int(self.kv.pop(key, None) is not None)
            self.check(("DEL", key), self.c.call("DEL", key), n)

    # ------------------------------------------------------- durability
    def snapshot(self, conns):
        """Every key: (TYPE, DEBUG DIGEST-VALUE, PEXPIRETIME)."""
        return {k: tuple(conns[0].pipe(("TYPE", k), ("DEBUG", "DIGEST-VALUE", k), ("PEXPIRETIME", k)))
                for k in ALL_KEYS}

    def check_all(self, conns=None, label=""):
        """Reads only (they run on a replica too): every name's GET and
        CAPTCHA_EXISTS, every key's type, every challenge's expiry."""
        c = (conns or self.conns)[0]
        assert c.call("DBSIZE") == len(self.kv), label
        for name in NAMES:
            self.check((label, "GET", name), c.call(P + "GET", name), self.exp_get(name))
            self.check((label, "CAPTCHA_EXISTS", name), c.call(P + "CAPTCHA_EXISTS", name), self.exp_exists(name))
        for k in ALL_KEYS:
            self.check((label, "TYPE", k), c.call("TYPE", k), TYPE_NAMES[self.kind(k)])
            if self.kind(k) == "challenge":
                lo, hi = self.kv[k][3:]
                at = c.call("PEXPIRETIME", k)
                assert lo <= at <= hi, (label, k, at, lo, hi)
            elif self.kind(k) != "counter":    # a counter expires when its last increment has left
                self.check((label, "PEXPIRETIME", k), c.call("PEXPIRETIME", k), -1 if k in self.kv else -2)

    def read_back(self):
        """GET_CHALLENGE every challenge (which deletes it: its value survived),
        and one more COUNT of every counter (its count survived)."""
        for n in NAMES:
            for ch in CHALLENGES:
                if self.kind(chkey(n, ch)) == "challenge":
                    exp = self.take(n, ch, True)
                    self.check(("GET_CHALLENGE", n, ch), self.c.call(P + "GET_CHALLENGE", n, ch), exp)
        for k in COUNTERS:
            if self.kind(k) == "counter":
                self.count(k, self.kv[k][1], 1)

    @rule(read=st.booleans())
    def debug_reload(self, read):
        before = self.snapshot(self.conns)
        assert self.c.call("DEBUG", "RELOAD") == "OK"
        assert self.snapshot(self.conns) == before
        self.check_all(label="after DEBUG RELOAD")
        if read:
            self.read_back()

    @precondition(lambda self: not self.restarted)
    @rule(read=st.booleans())
    def save_and_restart(self, read):
        """SAVE, kill -9, start again on that RDB (at most once per example)."""
        self.restarted = True
        before = self.snapshot(self.conns)
        assert self.primary.save_now()   # waits for a replica sync's RDB child first
        self.primary.restart(kill=True)
        type(self).connect()
        assert self.snapshot(self.conns) == before
        self.check_all(label="after restart")
        if read:
            self.read_back()
        resync_replica_now(self.replica, self.primary)

    @rule()
    def replica_agrees(self):
        wait_replicas_synced(self.primary, [self.replica], timeout=30)
        rconns = {0: Conn(self.replica)}
        try:
            assert self.snapshot(rconns) == self.snapshot(self.conns)
            self.check_all(rconns, label="replica")
        finally:
            rconns[0].close()

    # ---------------------------------------------------------- invariant
    @invariant()
    def keyspace_agrees(self):
        assert self.c.call("DBSIZE") == len(self.kv)


def test_captcha_model(servers):
    CaptchaModel.primary = servers.new(name="primary")
    CaptchaModel.replica = servers.replica_of(CaptchaModel.primary, name="replica")
    CaptchaModel.connect()
    try:
        run_state_machine_as_test(CaptchaModel, settings=model_settings(examples=60, steps=50))
    finally:
        for c in CaptchaModel.conns.values():
            c.close()
        CaptchaModel.conns = None

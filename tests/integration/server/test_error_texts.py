# SPDX-License-Identifier: BSD-3-Clause
"""Exact error texts (wire bytes, "-ERR ..."), as a user reads them.

- Every command that takes options names an unknown option and lists the valid
  ones, as its COMMAND DOCS syntax line spells them; a known option given
  without its value says so. Nothing is written either way.
- The duration (and difficulty) texts of MCAPTCHA_CACHE.ADD_CAPTCHA's config and
  of ADD_CHALLENGE: a non-integer, a missing value and 0 each get a text whose
  stated range is exactly what is accepted (the ends of each range are tried)."""

import json

import pytest

from mcap import ADD_CAPTCHA, ADD_CHALLENGE, CHALLENGE_SET, cfg, chal, chkey
from servers import raw_command


def err(text):
    return b"-" + text.encode() + b"\r\n"


def unknown(cmd, opt, valid):
    return err("ERR unknown option '%s' for %s; expected %s" % (opt, cmd, valid))


def needs(opt, value):
    return err("ERR %s needs a value (%s)" % (opt, value))


LOCK_ACQUIRE = ("PERMITS n, TAKE k, READ, WRITE, REENTRANT, SESSION, LOCKDELAY delay-ms, WAIT timeout-ms, "
                "ACKS numreplicas timeout-ms")
GCRA = "BURST capacity, COST n, WAIT timeout-ms, AT unix-ms"
GCRA_PEEK = "BURST capacity, COST n, AT unix-ms"
WINDOW = "COST n, WAIT timeout-ms, AT unix-ms"
WINDOW_PEEK = "COST n, AT unix-ms"

# command -> (the arguments before its options, the valid options as the error lists them)
OPTION_COMMANDS = {
    "LOCK.ACQUIRE": (["ek", "owner", 10000], LOCK_ACQUIRE),
    "RL.CONCURRENCY": (["ek", "holder", 10000, 2], "WAIT timeout-ms"),
    "RL.GCRA": (["ek", 10, 1000], GCRA),
    "RL.GCRA_PEEK": (["ek", 10, 1000], GCRA_PEEK),
    "RL.WINDOW": (["ek", 10, 1000], WINDOW),
    "RL.WINDOW_PEEK": (["ek", 10, 1000], WINDOW_PEEK),
    "RL.REFUND": (["ek", 1], "AT unix-ms"),
    "RL.FIXED": (["ek", 1000], "COST n, ELASTIC"),
    CHALLENGE_SET: ([chkey("s", "c"), 5, 30], "PXAT unix-time-milliseconds"),
    "MC.CHALLENGE_SET": ([chkey("s", "c"), 5, 30], "PXAT unix-time-milliseconds"),  # its short name
    "LOCK.INSPECT": (["ek"], "FULL"),
    "LOCK.ACQUIRE_ALL": ([2, "{ek}a", "{ek}b", "owner", 10000], "WRITE, SESSION, LOCKDELAY delay-ms, WAIT timeout-ms"),
    "LOCK.ADD_PERMITS": (["ek", 1], "PERMITS n"),
    "LOCK.DRAIN_PERMITS": (["ek"], "PERMITS n"),
    "LOCK.AVAILABLE_PERMITS": (["ek"], "PERMITS n"),
}

# (command, arguments after the fixed ones, exact reply)
CASES = [
    ("LOCK.INSPECT", ["FOO"], unknown("LOCK.INSPECT", "FOO", "FULL")),
    ("LOCK.ADD_PERMITS", ["FOO"], unknown("LOCK.ADD_PERMITS", "FOO", "PERMITS n")),
    ("LOCK.ADD_PERMITS", ["PERMITS"], needs("PERMITS", "n")),
    ("LOCK.DRAIN_PERMITS", ["PERMITS", 2, "X"], unknown("LOCK.DRAIN_PERMITS", "X", "PERMITS n")),
    ("LOCK.AVAILABLE_PERMITS", ["permits"], needs("PERMITS", "n")),
    # an unknown option, anywhere among the options
    ("LOCK.ACQUIRE_ALL", ["FOO"], unknown("LOCK.ACQUIRE_ALL", "FOO", "WRITE, SESSION, LOCKDELAY delay-ms, WAIT timeout-ms")),
    ("LOCK.ACQUIRE_ALL", ["SESSION", "NX"], unknown("LOCK.ACQUIRE_ALL", "NX", "WRITE, SESSION, LOCKDELAY delay-ms, WAIT timeout-ms")),
    ("LOCK.ACQUIRE_ALL", ["WAIT"], needs("WAIT", "timeout-ms")),
    ("LOCK.ACQUIRE_ALL", ["LOCKDELAY"], needs("LOCKDELAY", "delay-ms")),
    ("LOCK.ACQUIRE", ["FOO"], unknown("LOCK.ACQUIRE", "FOO", LOCK_ACQUIRE)),
    ("LOCK.ACQUIRE", ["REENTRANT", "WAIT", 5, "NX"], unknown("LOCK.ACQUIRE", "NX", LOCK_ACQUIRE)),
    ("RL.CONCURRENCY", ["FOO"], unknown("RL.CONCURRENCY", "FOO", "WAIT timeout-ms")),
    ("RL.CONCURRENCY", ["FOO", 5], unknown("RL.CONCURRENCY", "FOO", "WAIT timeout-ms")),
    ("RL.CONCURRENCY", ["WAIT", 5, "BAR"], unknown("RL.CONCURRENCY", "BAR", "WAIT timeout-ms")),
    ("RL.GCRA", ["FOO", 1], unknown("RL.GCRA", "FOO", GCRA)),
    ("RL.GCRA", ["COST", 1, "FOO"], unknown("RL.GCRA", "FOO", GCRA)),
    ("RL.GCRA_PEEK", ["WAIT", 5], unknown("RL.GCRA_PEEK", "WAIT", GCRA_PEEK)),
    ("RL.GCRA_PEEK", ["COST", 1, "FOO"], unknown("RL.GCRA_PEEK", "FOO", GCRA_PEEK)),
    ("RL.REFUND", ["FOO", 5], unknown("RL.REFUND", "FOO", "AT unix-ms")),
    ("RL.REFUND", ["AT", 5, "WAIT", 1], unknown("RL.REFUND", "WAIT", "AT unix-ms")),
    ("RL.REFUND", ["AT"], needs("AT", "unix-ms")),
    ("RL.FIXED", ["FOO"], unknown("RL.FIXED", "FOO", "COST n, ELASTIC")),
    ("RL.FIXED", ["ELASTIC", "WAIT", 1], unknown("RL.FIXED", "WAIT", "COST n, ELASTIC")),
    ("RL.FIXED", ["ELASTIC", "COST"], needs("COST", "n")),
    ("RL.GCRA_PEEK", ["AT"], needs("AT", "unix-ms")),
    ("RL.WINDOW_PEEK", ["COST", 1, "AT"], needs("AT", "unix-ms")),
    ("RL.WINDOW", ["BURST", 2], unknown("RL.WINDOW", "BURST", WINDOW)),
    ("RL.WINDOW", ["FOO", 1], unknown("RL.WINDOW", "FOO", WINDOW)),
    ("RL.WINDOW_PEEK", ["BURST", 2], unknown("RL.WINDOW_PEEK", "BURST", WINDOW_PEEK)),
    ("RL.WINDOW_PEEK", ["WAIT", 2], unknown("RL.WINDOW_PEEK", "WAIT", WINDOW_PEEK)),
    (CHALLENGE_SET, ["EXAT", 1], unknown(CHALLENGE_SET, "EXAT", "PXAT unix-time-milliseconds")),
    ("MC.CHALLENGE_SET", ["EXAT", 1], unknown("MC.CHALLENGE_SET", "EXAT", "PXAT unix-time-milliseconds")),
    (CHALLENGE_SET, ["EXAT"], unknown(CHALLENGE_SET, "EXAT", "PXAT unix-time-milliseconds")),
    # the option as sent (case kept), cut to 64 bytes, unprintable bytes as '?'
    ("RL.GCRA", ["foo", 1], unknown("RL.GCRA", "foo", GCRA)),
    ("RL.GCRA", ["x" * 100, 1], unknown("RL.GCRA", "x" * 64 + "...", GCRA)),
    ("RL.GCRA", [b"a\r\nb\x00\xff", 1], unknown("RL.GCRA", "a??b??", GCRA)),
    # a known option without its value (named as the syntax line does, whatever the case sent)
    ("LOCK.ACQUIRE", ["WAIT"], needs("WAIT", "timeout-ms")),
    ("LOCK.ACQUIRE", ["SESSION", "wait"], needs("WAIT", "timeout-ms")),
    ("LOCK.ACQUIRE", ["PERMITS"], needs("PERMITS", "n")),
    ("RL.CONCURRENCY", ["WAIT"], needs("WAIT", "timeout-ms")),
    ("RL.GCRA", ["BURST"], needs("BURST", "capacity")),
    ("RL.GCRA", ["COST"], needs("COST", "n")),
    ("RL.GCRA", ["COST", 1, "WAIT"], needs("WAIT", "timeout-ms")),
    ("RL.GCRA", ["AT"], needs("AT", "unix-ms")),
    ("RL.GCRA_PEEK", ["BURST"], needs("BURST", "capacity")),
    ("RL.WINDOW", ["COST"], needs("COST", "n")),
    ("RL.WINDOW", ["WAIT"], needs("WAIT", "timeout-ms")),
    ("RL.WINDOW", ["at"], needs("AT", "unix-ms")),
    ("RL.WINDOW_PEEK", ["COST"], needs("COST", "n")),
    (CHALLENGE_SET, ["PXAT"], needs("PXAT", "unix-time-milliseconds")),
    # and a value out of range names its range
    (CHALLENGE_SET, ["PXAT", 0], err("ERR PXAT must be an integer number of Unix milliseconds from 1 to 2^48")),
    ("LOCK.ACQUIRE", ["WAIT", "soon"], err("ERR WAIT must be an integer from 0 to 1099511627776")),
]


@pytest.mark.parametrize("cmd,opts,want", CASES,
                         ids=["%s %s" % (c[0], " ".join(map(str, c[1]))[:40]) for c in CASES])
def test_option_errors_exact(server, cmd, opts, want):
    fixed, _ = OPTION_COMMANDS[cmd]
    got = raw_command(server, cmd, *(fixed + opts))
    assert got == want
    assert server.client().dbsize() == 0, "an error wrote something"


def _pairs(flat):
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def _raw(r, *args):
    """A reply without redis-py's parsing of COMMAND replies."""
    conn = r.connection_pool.get_connection("_")
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def _options_in_docs(r, name):
    """The command's options as its COMMAND DOCS spells them: "TOKEN value" or "TOKEN"."""
    docs = _raw(r, "COMMAND", "DOCS", name)
    out = []

    def walk(args, in_block=False):
        words = []
        for x in args:
            a = _pairs(x)
            if a["type"] == b"block":
                inner = walk(a["arguments"], True)
                if inner and inner[0].isupper():
                    out.append(" ".join(inner))
            elif "token" in a:
                w = a["token"].decode()
                if a["type"] != b"pure-token":
                    w += " " + a["name"].decode()
                (words if in_block else out).append(w)
            elif in_block:
                words.append(a["name"].decode())
        return words

    walk(_pairs(docs[1]).get("arguments", []))
    return out


def test_every_command_with_options_is_covered_and_lists_its_docs(r):
    """Every command with optional tokens in COMMAND DOCS is in the table above, and
    the options its error lists are those of its syntax line, in order. LOCK.STATE's
    trailing EPHEMERAL is a state flag, not an option: its error restates the syntax
    (test_lock_state_syntax_error); so is RL.WINDOW_SET's trailing SLOTMS (a window
    state's slot width, tests/integration/ratelimit/test_window_golden.py)."""
    names = [n.decode() for n in _raw(r, "COMMAND", "LIST", "FILTERBY", "MODULE", "mcaptcha_cache")]
    with_options = {n.upper() for n in names if _options_in_docs(r, n)}
    assert with_options == set(OPTION_COMMANDS) | {"LOCK.STATE", "RL.WINDOW_SET"}
    for name, (_, valid) in OPTION_COMMANDS.items():
        assert ", ".join(_options_in_docs(r, name)) == valid, name
    covered = {c[0] for c in CASES}
    assert covered == set(OPTION_COMMANDS)


def test_lock_state_syntax_error(server):
    want = err("ERR invalid lock state: expected permits last_token nholders "
               "[owner expires_ms count token]... [DELAY index ms]... [SHARED index]... [TAKE index k]... "
               "[ADJUST a] [EPHEMERAL]")
    assert raw_command(server, "LOCK.STATE", "ls", 1, 5, 0, "EPHEMERAL", "FOO") == want
    assert raw_command(server, "LOCK.STATE", "ls", 1, 5, 0, "FOO") == want
    assert raw_command(server, "LOCK.STATE", "ls", 1, 5, 0, "EPHEMERAL") == b"+OK\r\n"


def test_window_hit_width_argument(server):
    assert raw_command(server, "RL.WINDOW_HIT", "wh", 1000, 5, 1700000000000, 1, 2) == \
        err("ERR width must be 0 (window/256) or 1 (fine)")


# ---------------------------------------------------------------- duration texts

CAPTCHA_DURATION = ("ERR invalid config: duration must be an integer from 1 to 9223372036854775807 "
                    "(seconds; above 4294967295 it is kept as 4294967295)")
CAPTCHA_DURATION_ZERO = "ERR invalid config: duration must be greater than zero"
CHALLENGE_DURATION = ("ERR invalid challenge: duration must be an integer from 1 to 9223372036854775807 "
                      "(seconds; above 4294967295 it is kept as 4294967295)")
LEVELS = [{"visitor_threshold": 5, "difficulty_factor": 50}]


def _captcha_json(**fields):
    d = {"levels": LEVELS}
    d.update(fields)
    return json.dumps(d)


@pytest.mark.parametrize("label,config,want", [
    ("non-integer string", _captcha_json(duration="30"), CAPTCHA_DURATION),
    ("non-integer fraction", _captcha_json(duration=1.5), CAPTCHA_DURATION),
    ("negative", _captcha_json(duration=-1), CAPTCHA_DURATION),
    ("null", _captcha_json(duration=None), CAPTCHA_DURATION),
    ("missing", _captcha_json(), CAPTCHA_DURATION),
    ("zero", _captcha_json(duration=0), CAPTCHA_DURATION_ZERO),
    ("difficulty non-integer",
     json.dumps({"levels": [{"visitor_threshold": 5, "difficulty_factor": "x"}], "duration": 30}),
     "ERR invalid config: difficulty_factor must be an integer from 1 to 4294967295"),
    ("difficulty above u32",
     json.dumps({"levels": [{"visitor_threshold": 5, "difficulty_factor": 4294967296}], "duration": 30}),
     "ERR invalid config: difficulty_factor must be an integer from 1 to 4294967295"),
    ("difficulty zero",
     json.dumps({"levels": [{"visitor_threshold": 5, "difficulty_factor": 0}], "duration": 30}),
     "ERR invalid config: difficulty_factor must be greater than zero"),
    ("threshold non-integer",
     json.dumps({"levels": [{"visitor_threshold": "x", "difficulty_factor": 5}], "duration": 30}),
     "ERR invalid config: visitor_threshold must be an integer from 0 to 4294967295"),
])
def test_add_captcha_texts(server, label, config, want):
    assert raw_command(server, ADD_CAPTCHA, "c1", config) == err(want), label
    assert server.client().dbsize() == 0


def test_add_captcha_ranges_hold_at_their_ends(r):
    """What the texts claim is accepted is accepted: duration 1 and 2^63 - 1, threshold 0,
    difficulty 1 and 4294967295."""
    assert r.execute_command(ADD_CAPTCHA, "lo", cfg([(0, 1)], duration=1)) == b"OK"
    assert r.execute_command(ADD_CAPTCHA, "hi", cfg([(4294967295, 4294967295)], duration=2**63 - 1)) == b"OK"


@pytest.mark.parametrize("label,fields,want", [
    ("non-integer string", {"difficulty": 5, "duration": "30"}, CHALLENGE_DURATION),
    ("non-integer fraction", {"difficulty": 5, "duration": 1.5}, CHALLENGE_DURATION),
    ("negative", {"difficulty": 5, "duration": -1}, CHALLENGE_DURATION),
    ("missing", {"difficulty": 5}, CHALLENGE_DURATION),
    ("zero", {"difficulty": 5, "duration": 0}, CHALLENGE_DURATION),
    ("difficulty non-integer", {"difficulty": "x", "duration": 30},
     "ERR invalid challenge: difficulty must be an integer from 0 to 4294967295"),
])
def test_add_challenge_texts(server, label, fields, want):
    fields = dict(fields, challenge="n0nce")
    assert raw_command(server, ADD_CHALLENGE, "c1", json.dumps(fields)) == err(want), label
    assert server.client().dbsize() == 0


def test_add_challenge_ranges_hold_at_their_ends(r):
    """Duration 1 and 4294967295, difficulty 0 and 4294967295: accepted, as the texts say."""
    assert r.execute_command(ADD_CHALLENGE, "c1", chal(0, 1, "lo")) == b"OK"
    assert r.execute_command(ADD_CHALLENGE, "c1", chal(4294967295, 4294967295, "hi")) == b"OK"

# SPDX-License-Identifier: BSD-3-Clause
"""mcaptcha-cache specific helpers shared by the test files."""

import json
import time

import pytest
import redis

P = "MCAPTCHA_CACHE."
ADD_CAPTCHA = P + "ADD_CAPTCHA"
ADD_VISITOR = P + "ADD_VISITOR"
GET = P + "GET"
CAPTCHA_EXISTS = P + "CAPTCHA_EXISTS"
DELETE_CAPTCHA = P + "DELETE_CAPTCHA"
RENAME_CAPTCHA = P + "RENAME_CAPTCHA"
ADD_CHALLENGE = P + "ADD_CHALLENGE"
GET_CHALLENGE = P + "GET_CHALLENGE"
DELETE_CHALLENGE = P + "DELETE_CHALLENGE"
VISIT_AT = P + "VISIT_AT"
CAPTCHA_SET = P + "CAPTCHA_SET"
CHALLENGE_SET = P + "CHALLENGE_SET"

PUBLIC_COMMANDS = [ADD_CAPTCHA, ADD_VISITOR, GET, CAPTCHA_EXISTS, DELETE_CAPTCHA,
                   RENAME_CAPTCHA, ADD_CHALLENGE, GET_CHALLENGE, DELETE_CHALLENGE]
INTERNAL_COMMANDS = [VISIT_AT, CAPTCHA_SET, CHALLENGE_SET]

CAPTCHA_TYPE = b"mcaptmcap"
CHALLENGE_TYPE = b"mcaptchal"

# the three bare (code-less) errors, as on the wire
CAPTCHA_NOT_FOUND = "Captcha not found"
CHALLENGE_NOT_FOUND = "Challenge not found"
CHALLENGE_EXISTS = "Challenge already exists"


def b(x):
    if isinstance(x, bytes):
        return x
    if isinstance(x, int):
        return str(x).encode()
    return x.encode()


def ckey(name):
    """Redis key of captcha `name`."""
    return b"mcap:captcha::{" + b(name) + b"}"


def chkey(name, challenge):
    """Redis key of challenge `challenge` of captcha `name`."""
    return b"mcap:CHALLENGE:{" + b(name) + b"}:" + b(challenge)


def cfg(levels, duration=30, **extra):
    """ADD_CAPTCHA JSON. levels: [(threshold, difficulty), ...]."""
    d = {"levels": [{"visitor_threshold": t, "difficulty_factor": f} for t, f in levels],
         "duration": duration}
    d.update(extra)
    return json.dumps(d, separators=(",", ":")).encode()


def chal(difficulty, duration, challenge):
    """ADD_CHALLENGE JSON."""
    return json.dumps({"difficulty": difficulty, "duration": duration, "challenge": challenge},
                      separators=(",", ":")).encode()


def visitor_reply(duration, difficulty):
    return b'{"duration":%d,"difficulty_factor":%d}' % (duration, difficulty)


def challenge_reply(difficulty, duration):
    return b'{"difficulty_factor":%d,"duration":%d}' % (difficulty, duration)


def now_ms():
    return int(time.time() * 1000)


def error_of(r, *args):
    """Run a command that must fail; return str(ResponseError).

    How redis-py 4.3.4 presents errors (connection.BaseParser.parse_error): it
    strips the code only when it is one it knows ("ERR ", "LOADING ", "READONLY "
    ...), so "-ERR captcha already exists" reads "captcha already exists", while
    "-WRONGTYPE ..." and the bare "-Captcha not found" keep their full text.
    Exact wire bytes are checked with servers.RawConnection."""
    with pytest.raises(redis.ResponseError) as ei:
        r.execute_command(*args)
    return str(ei.value)


def assert_error(r, args, exact=None, startswith=None, any_of=None):
    msg = error_of(r, *args)
    if exact is not None:
        assert msg == exact, "%r: error %r, expected exactly %r" % (args, msg, exact)
    if startswith is not None:
        assert msg.startswith(startswith), "%r: error %r, expected to start with %r" % (
            args, msg, startswith)
    if any_of is not None:
        assert any(msg.startswith(p) for p in any_of), "%r: error %r, expected one of %r" % (
            args, msg, any_of)
    return msg


def all_keys(r):
    return sorted(r.scan_iter(count=1000))


def digest_value(r, key):
    return r.execute_command("DEBUG", "DIGEST-VALUE", key)[0]


def sleep_until(t):
    d = t - time.time()
    if d > 0:
        time.sleep(d)


def wait_for(pred, timeout=10.0, what="condition"):
    """Poll `pred` until it is true; fail after `timeout` seconds (a deadline
    for a state, never a fixed sleep)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.005)
    raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))


# PTTL on Redis 7.2+ and Valkey rounds the remaining time up to the next ms
# (7.0 rounds down): an upper bound on a PTTL allows this much above it.
PTTL_SLACK_MS = 1

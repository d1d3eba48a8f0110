# SPDX-License-Identifier: BSD-3-Clause
"""Helpers for the legacy-upgrade tests and for tests/fixtures/rdb/make_fixtures.py:
build the TEST-ONLY legacy_writer module, and the exact payloads the original
mCaptcha cache module (Rust) wrote (docs/protocol.md, "Original key layout and
RDB payloads")."""

import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
WRITER_SO = os.path.join(REPO_ROOT, "build", "legacy", "legacy_writer.so")
FIXTURES_DIR = os.path.join(REPO_ROOT, "tests", "fixtures", "rdb")
LEGACY_FIXTURE = os.path.join(FIXTURES_DIR, "legacy-original-encver0.rdb")
ENCVER1_FIXTURE = os.path.join(FIXTURES_DIR, "mcaptcha-encver1.rdb")

CAPTCHA_TYPE = "mcaptmcap"
CHALLENGE_TYPE = "mcaptchal"
BUCKET_TYPE = "mcaptbuck"
SAFETY_TYPE = "mcaptsafe"


class WriterBuildError(RuntimeError):
    pass


def build_writer():
    """Build build/legacy/legacy_writer.so with tests/legacy/Makefile; return its path.
    Raises WriterBuildError with the compiler's output when the build fails."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    p = subprocess.run(["make", "--no-print-directory", "-C", HERE], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    out = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0 or not os.path.isfile(WRITER_SO):
        raise WriterBuildError("building the legacy writer failed (make -C %s, exit %d):\n%s"
                               % (HERE, p.returncode, out))
    return WRITER_SO


def _compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def levels_json(levels):
    """The original's serde_json array of levels: [(threshold, difficulty), ...]."""
    return _compact([{"visitor_threshold": t, "difficulty_factor": f} for t, f in levels])


def captcha_payload(live, levels, duration, current=0):
    return (b'{"m":{"visitor_threshold":%d,"defense":{"levels":%s,"current_visitor_threshold":%d},'
            b'"duration":%d}}' % (live, levels_json(levels), current, duration))


def challenge_payload(difficulty, duration):
    return b'{"duration":%d,"difficulty_factor":%d}' % (duration, difficulty)


def bucket_payload(instant, decrements):
    """decrements: [(captcha key bytes, count), ...] in order."""
    parts = b",".join(_compact(k.decode("utf-8")) + b":%d" % n for k, n in decrements)
    return b'{"timer":1,"bucket_instant":%d,"decrement":{%s}}' % (instant, parts)


SAFETY_PAYLOAD = b"SAFETY"


def bkey(node, instant):
    return b"mcap:bucket:{%s}:%d" % (node.encode(), instant)


def tkey(node, instant):
    return b"timer:" + bkey(node, instant)


def skey(name):
    return b"safety:mcap:captcha::{" + (name.encode() if isinstance(name, str) else name) + b"}"


def legacy_captcha(r, name, duration, live, levels, current=0):
    """LEGACY.CAPTCHA on a server running the writer."""
    args = ["LEGACY.CAPTCHA", name, duration, live, levels_json(levels)]
    if current:
        args.append(current)
    assert r.execute_command(*args) in (b"OK", "OK", True)


def legacy_challenge(r, name, challenge, difficulty, duration):
    assert r.execute_command("LEGACY.CHALLENGE", name, challenge, difficulty, duration) in (
        b"OK", "OK", True)


def legacy_bucket(r, node, instant, decrements, timer_ttl=None):
    """LEGACY.BUCKET, and its `timer:` string key (SET ... EX timer_ttl) unless timer_ttl is None."""
    args = ["LEGACY.BUCKET", node, instant]
    for k, n in decrements:
        args += [k, n]
    assert r.execute_command(*args) in (b"OK", "OK", True)
    if timer_ttl is not None:
        assert r.set(tkey(node, instant), b"1", ex=timer_ttl)


def legacy_safety(r, name, ttl):
    assert r.execute_command("LEGACY.SAFETY", name, ttl) in (b"OK", "OK", True)

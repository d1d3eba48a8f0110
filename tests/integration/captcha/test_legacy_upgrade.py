# SPDX-License-Identifier: BSD-3-Clause
"""In-place upgrade from the original mCaptcha cache module (Rust): an operator
stops Redis, swaps the original module for mcaptcha_cache and starts Redis on
the same dump.rdb (docs/protocol.md, "Original key layout and RDB payloads" and
"Upgrading in place").

The original's RDB files are written by tests/legacy/legacy_writer.c, a
TEST-ONLY module built here (a failed build fails the tests) that registers the
original's four type names at encver 0 and saves exactly the original's
payloads. tests/legacy/rdb_reader.py reads RDB files independently of Redis, so
the tests also check what each file holds on disk (type, encver, payload, TTL).

- test_upgrade_in_place: original's RDB (captchas, challenges, buckets, timer and
  safety keys) -> our module loads it: captchas keep levels, duration and live
  count, challenges keep their TTL, bucket/safety/timer keys are gone; SAVE +
  restart keeps that state, now in our encver 1.
- test_golden_legacy_rdb / test_golden_encver1_rdb: the committed golden files
  in tests/fixtures/rdb/ (made by make_fixtures.py there) load into the exact
  state written out below.
"""

import os
import shutil
import sys
import time

import pytest

from mcap import (ADD_VISITOR, CAPTCHA_EXISTS, CAPTCHA_NOT_FOUND, CHALLENGE_NOT_FOUND, GET,
                  GET_CHALLENGE, challenge_reply, chkey, ckey, digest_value, error_of,
                  sleep_until, visitor_reply)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "legacy"))

import legacy as L  # noqa: E402
from rdb_reader import read_rdb  # noqa: E402

YEAR_2100_MS = 4102444800000
LONG = 4294967295


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def writer_so():
    try:
        return L.build_writer()
    except L.WriterBuildError as e:
        pytest.fail(str(e), pytrace=False)


def keyset(r):
    return set(r.keys("*"))


def type_of(r, key):
    return r.type(key)


def start_ours_on(servers, dir, name):
    """Start redis-server with our module on `dir`; returns (server, client, time ready)."""
    s = servers.new(name=name, dir=dir)
    ready = time.time()
    return s, s.client(), ready


def assert_module_entry(e, type_name, encver, payload=None, ttl=None):
    assert e is not None
    assert e.kind == "module", e
    assert (e.type_name, e.encver) == (type_name, encver), e
    if payload is not None:
        assert e.fields == [("string", payload)], e
    if ttl == "none":
        assert e.expire_ms is None, e
    elif ttl == "some":
        assert e.expire_ms is not None, e


# ---------------------------------------------------------- the upgrade itself
def test_upgrade_in_place(servers, writer_so, tmp_path):
    data = str(tmp_path / "data")
    orig = servers.new(name="original", module=writer_so, dir=data)
    w = orig.client()

    # --- the original's data --------------------------------------------------
    LIVE_LEVELS = [(7, 10), (8, 20), (50, 300)]
    SHORT_LEVELS = [(1, 3), (2, 30)]
    IDLE_LEVELS = [(0, 5), (2, 50)]
    L.legacy_captcha(w, "site-live", 600, 7, LIVE_LEVELS)
    L.legacy_captcha(w, "site-short", 2, 4, SHORT_LEVELS, current=1)
    L.legacy_captcha(w, "site-idle", 3600, 0, IDLE_LEVELS)
    L.legacy_challenge(w, "site-live", "ch-1", 10, 600)
    L.legacy_challenge(w, "site-live", "ch-2", 20, 600)
    L.legacy_challenge(w, "nobody", "orphan", 7, 900)
    L.legacy_challenge(w, "site-short", "ch-short", 3, 6)
    now_s = int(time.time())
    buckets = [  # node, instant, decrements, timer TTL (None: a leaked bucket)
        ("node-a", now_s + 600, [(ckey("site-live"), 7)], 630),
        ("node-a", now_s + 2, [(ckey("site-short"), 4)], 32),
        ("node-b", now_s + 600, [(ckey("site-live"), 1), (ckey("site-short"), 2)], None),
    ]
    for node, instant, decs, timer_ttl in buckets:
        L.legacy_bucket(w, node, instant, decs, timer_ttl)
    L.legacy_safety(w, "site-live", 1200)
    L.legacy_safety(w, "site-short", 4)
    token = b"mcaptcha:token:site-live:tok-xyz"  # the client's own key: must survive
    w.set(token, b"1", ex=600)
    ch_keys = {ch: chkey(cap, ch) for cap, ch in
               [("site-live", "ch-1"), ("site-live", "ch-2"), ("nobody", "orphan"),
                ("site-short", "ch-short")]}
    expire_at = {k: w.execute_command("PEXPIRETIME", k) for k in ch_keys.values()}
    assert w.execute_command("SAVE")
    orig.stop()

    # --- what the writer put on disk is the original's layout, byte for byte --
    disk = read_rdb(os.path.join(data, "dump.rdb"))
    captcha_keys = {ckey(n) for n in ("site-live", "site-short", "site-idle")}
    bucket_keys = {L.bkey(n, i) for n, i, _, _ in buckets}
    timer_keys = {L.tkey(n, i) for n, i, _, t in buckets if t is not None}
    safety_keys = {L.skey("site-live"), L.skey("site-short")}
    assert set(disk) == (captcha_keys | set(ch_keys.values()) | bucket_keys | timer_keys
                         | safety_keys | {token})
    assert_module_entry(disk[ckey("site-live")], "mcaptmcap", 0,
                        L.captcha_payload(7, LIVE_LEVELS, 600), "none")
    assert disk[ckey("site-live")].fields[0][1] == (
        b'{"m":{"visitor_threshold":7,"defense":{"levels":[{"visitor_threshold":7,'
        b'"difficulty_factor":10},{"visitor_threshold":8,"difficulty_factor":20},'
        b'{"visitor_threshold":50,"difficulty_factor":300}],"current_visitor_threshold":0},'
        b'"duration":600}}')
    assert_module_entry(disk[ckey("site-short")], "mcaptmcap", 0,
                        L.captcha_payload(4, SHORT_LEVELS, 2, current=1), "none")
    assert_module_entry(disk[ckey("site-idle")], "mcaptmcap", 0,
                        L.captcha_payload(0, IDLE_LEVELS, 3600), "none")
    assert_module_entry(disk[ch_keys["ch-1"]], "mcaptchal", 0,
                        b'{"duration":600,"difficulty_factor":10}', "some")
    assert_module_entry(disk[ch_keys["orphan"]], "mcaptchal", 0,
                        L.challenge_payload(7, 900), "some")
    for k, ms in expire_at.items():
        assert disk[k].expire_ms == ms
    for node, instant, decs, _ in buckets:
        assert_module_entry(disk[L.bkey(node, instant)], "mcaptbuck", 0,
                            L.bucket_payload(instant, decs), "none")
    assert disk[L.bkey("node-b", now_s + 600)].fields[0][1] == (
        b'{"timer":1,"bucket_instant":%d,"decrement":{"mcap:captcha::{site-live}":1,'
        b'"mcap:captcha::{site-short}":2}}' % (now_s + 600))
    for k in safety_keys:
        assert_module_entry(disk[k], "mcaptsafe", 0, b"SAFETY", "some")
    for k in timer_keys:
        assert disk[k].kind == "string" and disk[k].value == b"1" and disk[k].expire_ms

    # --- our module on the same directory ---------------------------------------
    ours, r, ready = start_ours_on(servers, data, "upgraded")
    # the 2 s captcha first: its live count must be there right after the load
    assert r.execute_command(GET, "site-short") == 4
    assert r.execute_command(GET, "site-live") == 7
    assert r.execute_command(GET, "site-idle") == 0

    expected_keys = captcha_keys | set(ch_keys.values()) | {token}
    assert keyset(r) == expected_keys, "bucket, safety and timer keys must be gone"
    for k in captcha_keys:
        assert type_of(r, k) == b"mcaptmcap"
    for k in ch_keys.values():
        assert type_of(r, k) == b"mcaptchal"
        assert r.pttl(k) > 0
        assert r.execute_command("PEXPIRETIME", k) == expire_at[k], "a challenge's TTL moved"
    assert r.get(token) == b"1" and r.ttl(token) > 0
    assert r.execute_command(CAPTCHA_EXISTS, "site-live") == 0

    # levels and duration kept: site-live has 7 live visits and levels (7,10) (8,20):
    # the 8th visit sees 10, the 9th 20 (a lost live count would give 10, 10)
    assert r.execute_command(ADD_VISITOR, "site-live") == visitor_reply(600, 10)
    assert r.execute_command(ADD_VISITOR, "site-live") == visitor_reply(600, 20)
    assert r.execute_command(GET, "site-live") == 9
    assert [r.execute_command(ADD_VISITOR, "site-idle") for _ in range(3)] == [
        visitor_reply(3600, 5), visitor_reply(3600, 5), visitor_reply(3600, 50)]

    # challenges work (one-shot) until their TTL
    assert r.execute_command(GET_CHALLENGE, "site-live", "ch-1") == challenge_reply(10, 600)
    assert error_of(r, GET_CHALLENGE, "site-live", "ch-1") == CHALLENGE_NOT_FOUND
    assert r.execute_command(GET_CHALLENGE, "nobody", "orphan") == challenge_reply(7, 900)

    # the 2 s captcha's live visits leave 2 s after the load
    sleep_until(ready + 2.5)
    assert r.execute_command(GET, "site-short") == 0
    assert [r.execute_command(ADD_VISITOR, "site-short") for _ in range(3)] == [
        visitor_reply(2, 3), visitor_reply(2, 3), visitor_reply(2, 30)]
    # and the 6 s challenge is gone after its (original) expiry time
    sleep_until(expire_at[ch_keys["ch-short"]] / 1000.0 + 0.2)
    assert error_of(r, GET_CHALLENGE, "site-short", "ch-short") == CHALLENGE_NOT_FOUND

    remaining = captcha_keys | {ch_keys["ch-2"], token}
    assert keyset(r) == remaining
    digests = {k: digest_value(r, k) for k in (ckey("site-live"), ckey("site-idle"))}

    # --- SAVE and restart: the same state, now in our encver 1 ------------------
    assert r.execute_command("SAVE")
    disk2 = read_rdb(os.path.join(data, "dump.rdb"))
    assert set(disk2) == remaining
    for k in captcha_keys:
        assert (disk2[k].type_name, disk2[k].encver) == ("mcaptmcap", 1), disk2[k]
        assert all(kind == "uint" for kind, _ in disk2[k].fields), disk2[k]
    assert (disk2[ch_keys["ch-2"]].type_name, disk2[ch_keys["ch-2"]].encver) == ("mcaptchal", 1)
    assert disk2[ch_keys["ch-2"]].expire_ms == expire_at[ch_keys["ch-2"]]

    ours.restart()
    r = ours.client()
    assert keyset(r) == remaining
    for k, d in digests.items():
        assert digest_value(r, k) == d, "state of %r changed across SAVE + restart" % k
    assert r.execute_command(GET, "site-live") == 9
    assert r.execute_command(GET, "site-idle") == 3
    assert r.execute_command(ADD_VISITOR, "site-live") == visitor_reply(600, 20)
    assert r.execute_command("PEXPIRETIME", ch_keys["ch-2"]) == expire_at[ch_keys["ch-2"]]
    assert r.execute_command(GET_CHALLENGE, "site-live", "ch-2") == challenge_reply(20, 600)
    sleep_until(time.time() + 2.1)  # site-short's visits are all older than 2 s now
    assert r.execute_command(GET, "site-short") == 0
    assert r.execute_command(ADD_VISITOR, "site-short") == visitor_reply(2, 3)
    for k in captcha_keys:
        assert type_of(r, k) == b"mcaptmcap"


# --------------------------------------------------------------- golden files
def _load_golden(servers, tmp_path, fixture, name):
    assert os.path.isfile(fixture), "golden file missing: %s (committed with the tests)" % fixture
    d = tmp_path / name
    d.mkdir()
    shutil.copyfile(fixture, str(d / "dump.rdb"))
    return start_ours_on(servers, str(d), name)


# What tests/fixtures/rdb/legacy-original-encver0.rdb holds (the original's layout).
GOLD_LEGACY_CAPTCHAS = {  # name: (duration, live count, levels, current level index)
    "site-a": (600, 7, [(7, 10), (8, 20), (50, 300)], 0),
    "site-b": (30, 0, [(0, 5), (2, 50)], 0),
    "site-big": (3600, 100000, [(50, 50), (500, 500)], 1),
    "sit\u00e9-\u00fc": (120, 3, [(i * 3, i + 1) for i in range(128)], 0),
}
GOLD_LEGACY_CHALLENGES = {  # (captcha, challenge): (difficulty, duration)
    ("site-a", "tok-1"): (10, LONG),
    ("site-a", "tok-2"): (20, LONG),
    ("no-such-captcha", "orphan"): (7, LONG),
}
GOLD_LEGACY_EXPIRED = [chkey("site-b", "expired"), L.skey("site-b")]  # expired when loaded
GOLD_LEGACY_BUCKETS = [
    ("node-1", 1763787000, [(ckey("site-a"), 7)], True),
    ("node-1", 1763787001, [(ckey("site-big"), 3), (ckey("sit\u00e9-\u00fc"), 2)], True),
    ("node-2", 1763787000, [(ckey("site-a"), 1)], False),  # its timer was lost
]
GOLD_LEGACY_SAFETY = [L.skey("site-a"), L.skey("site-big")]
GOLD_LEGACY_PLAIN = {b"mcaptcha:token:site-a:tok-9": b"1", b"plain-unrelated-key": b"hello"}


def test_golden_legacy_rdb(servers, tmp_path):
    # the committed file holds the original's layout
    disk = read_rdb(L.LEGACY_FIXTURE)
    ckeys = {ckey(n) for n in GOLD_LEGACY_CAPTCHAS}
    chkeys = {chkey(c, ch) for c, ch in GOLD_LEGACY_CHALLENGES}
    bkeys = {L.bkey(n, i) for n, i, _, _ in GOLD_LEGACY_BUCKETS}
    tkeys = {L.tkey(n, i) for n, i, _, timer in GOLD_LEGACY_BUCKETS if timer}
    assert set(disk) == (ckeys | chkeys | bkeys | tkeys | set(GOLD_LEGACY_SAFETY)
                         | set(GOLD_LEGACY_EXPIRED) | set(GOLD_LEGACY_PLAIN))
    for n, (duration, live, levels, cur) in GOLD_LEGACY_CAPTCHAS.items():
        assert_module_entry(disk[ckey(n)], "mcaptmcap", 0,
                            L.captcha_payload(live, levels, duration, cur), "none")
    for (c, ch), (difficulty, duration) in GOLD_LEGACY_CHALLENGES.items():
        e = disk[chkey(c, ch)]
        assert_module_entry(e, "mcaptchal", 0, L.challenge_payload(difficulty, duration), "some")
        assert e.expire_ms > YEAR_2100_MS
    for n, i, decs, _ in GOLD_LEGACY_BUCKETS:
        assert_module_entry(disk[L.bkey(n, i)], "mcaptbuck", 0, L.bucket_payload(i, decs), "none")
    for k in GOLD_LEGACY_SAFETY:
        assert_module_entry(disk[k], "mcaptsafe", 0, b"SAFETY", "some")
    for k in GOLD_LEGACY_EXPIRED:
        assert disk[k].encver == 0 and disk[k].expire_ms < YEAR_2100_MS
    for k in tkeys:
        assert disk[k].kind == "string" and disk[k].value == b"1"
        assert disk[k].expire_ms > YEAR_2100_MS

    s, r, _ = _load_golden(servers, tmp_path, L.LEGACY_FIXTURE, "golden-legacy")
    assert {n: r.execute_command(GET, n) for n in GOLD_LEGACY_CAPTCHAS} == {
        n: live for n, (_, live, _, _) in GOLD_LEGACY_CAPTCHAS.items()}
    assert keyset(r) == ckeys | chkeys | set(GOLD_LEGACY_PLAIN)
    for k in ckeys:
        assert type_of(r, k) == b"mcaptmcap"
    for k in chkeys:
        assert type_of(r, k) == b"mcaptchal"
        assert r.execute_command("PEXPIRETIME", k) == disk[k].expire_ms
    for k, v in GOLD_LEGACY_PLAIN.items():
        assert r.get(k) == v
    assert r.ttl(b"plain-unrelated-key") == -1

    assert r.execute_command(ADD_VISITOR, "site-a") == visitor_reply(600, 10)
    assert r.execute_command(ADD_VISITOR, "site-a") == visitor_reply(600, 20)
    assert [r.execute_command(ADD_VISITOR, "site-b") for _ in range(3)] == [
        visitor_reply(30, 5), visitor_reply(30, 5), visitor_reply(30, 50)]
    assert r.execute_command(ADD_VISITOR, "site-big") == visitor_reply(3600, 500)
    assert r.execute_command(ADD_VISITOR, "sit\u00e9-\u00fc") == visitor_reply(120, 2)
    assert r.execute_command(GET, "site-big") == 100001
    for (c, ch), (difficulty, duration) in GOLD_LEGACY_CHALLENGES.items():
        assert r.execute_command(GET_CHALLENGE, c, ch) == challenge_reply(difficulty, duration)
        assert error_of(r, GET_CHALLENGE, c, ch) == CHALLENGE_NOT_FOUND
    assert error_of(r, GET_CHALLENGE, "site-b", "expired") == CHALLENGE_NOT_FOUND
    assert error_of(r, GET, "no-such-captcha") == CAPTCHA_NOT_FOUND

    # nothing of the original's comes back after SAVE + restart
    assert r.execute_command("SAVE")
    after = read_rdb(os.path.join(s.dir, "dump.rdb"))
    assert {(e.type_name, e.encver) for e in after.values() if e.kind == "module"} == {
        ("mcaptmcap", 1)}
    s.restart()
    r = s.client()
    assert keyset(r) == ckeys | set(GOLD_LEGACY_PLAIN)
    assert r.execute_command(GET, "site-big") == 100001


# What tests/fixtures/rdb/mcaptcha-encver1.rdb holds (written by our module):
# name: (duration, levels, number of visits, all at fixed past times, newest visit ms)
GOLD_V1_CAPTCHAS = {
    "gold-a": (LONG, [(2, 10), (4, 40), (100, 1000)], 5, 1700000001000),
    "gold-b": (60, [(1, 7), (3, 70)], 4, 1700000000000),  # decayed long ago
    "gold-empty": (LONG, [(0, 1)], 0, 0),
    "gold-spread": (LONG, [(i * 10, i + 1) for i in range(20)], 25, 1744000000000),
}
GOLD_V1_CHALLENGES = {  # key: (difficulty, duration, PEXPIRETIME)
    chkey("gold-a", "c-1"): (5, 30, -1),
    chkey("gold-a", "c-2"): (9, 45, YEAR_2100_MS),
    chkey("orphan-cap", "c-3"): (1, LONG, -1),
}
GOLD_V1_EXPIRED = chkey("gold-b", "c-soon")


def test_golden_encver1_rdb(servers, tmp_path):
    disk = read_rdb(L.ENCVER1_FIXTURE)
    ckeys = {ckey(n) for n in GOLD_V1_CAPTCHAS}
    assert set(disk) == ckeys | set(GOLD_V1_CHALLENGES) | {GOLD_V1_EXPIRED, b"plain-key"}
    for n, (duration, levels, _, last_ms) in GOLD_V1_CAPTCHAS.items():
        e = disk[ckey(n)]
        assert_module_entry(e, "mcaptmcap", 1, ttl="none")
        values = [v for kind, v in e.fields if kind == "uint"]
        assert len(values) == len(e.fields) and values[0] == duration, e
        assert last_ms in values[1:], e
    for k, (difficulty, duration, pexpireat) in GOLD_V1_CHALLENGES.items():
        e = disk[k]
        assert_module_entry(e, "mcaptchal", 1)
        assert e.fields == [("uint", difficulty), ("uint", duration)]
        assert e.expire_ms == (None if pexpireat == -1 else pexpireat)
    assert disk[GOLD_V1_EXPIRED].expire_ms < YEAR_2100_MS

    s, r, _ = _load_golden(servers, tmp_path, L.ENCVER1_FIXTURE, "golden-encver1")
    assert {n: r.execute_command(GET, n) for n in GOLD_V1_CAPTCHAS} == {
        "gold-a": 5, "gold-b": 0, "gold-empty": 0, "gold-spread": 25}
    assert keyset(r) == ckeys | set(GOLD_V1_CHALLENGES) | {b"plain-key"}
    assert r.get(b"plain-key") == b"v1"
    for k in ckeys:
        assert type_of(r, k) == b"mcaptmcap"
    for k, (_, _, pexpireat) in GOLD_V1_CHALLENGES.items():
        assert type_of(r, k) == b"mcaptchal"
        assert r.execute_command("PEXPIRETIME", k) == pexpireat
    # counts 6, 1, 1, 26 -> the difficulty of each captcha's levels
    assert r.execute_command(ADD_VISITOR, "gold-a") == visitor_reply(LONG, 40)
    assert r.execute_command(ADD_VISITOR, "gold-b") == visitor_reply(60, 7)
    assert r.execute_command(ADD_VISITOR, "gold-empty") == visitor_reply(LONG, 1)
    assert r.execute_command(ADD_VISITOR, "gold-spread") == visitor_reply(LONG, 3)
    assert r.execute_command(GET, "gold-spread") == 26
    assert r.execute_command(GET_CHALLENGE, "gold-a", "c-1") == challenge_reply(5, 30)
    assert r.execute_command(GET_CHALLENGE, "gold-a", "c-2") == challenge_reply(9, 45)
    assert r.execute_command(GET_CHALLENGE, "orphan-cap", "c-3") == challenge_reply(1, LONG)
    assert error_of(r, GET_CHALLENGE, "gold-b", "c-soon") == CHALLENGE_NOT_FOUND

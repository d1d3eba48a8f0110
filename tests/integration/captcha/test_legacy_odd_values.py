# SPDX-License-Identifier: BSD-3-Clause
"""Redis starts on any data the original module could have written.

The original (v0.1.x, libmcaptcha 0.2.x) stored u64 numbers and validated
little: more than 128 levels, durations beyond u32 seconds, duplicate
thresholds, difficulty 0, duration 0, empty level lists, challenges of
duration 0 already expired when the RDB is loaded (7.0 runs the module's
loader before it drops an expired key), huge challenge durations, and bytes
that are not the expected JSON at all. One such key used to stop Redis from
starting. Now each value is normalised (docs/protocol.md, "Upgrading in
place") with one warning in the log, or, when it cannot be read at all, kept
as its bytes: it survives RDB, DUMP/RESTORE and AOF rewrite, answers a clear
error on use and can be deleted."""

import json
import os
import sys
import time

import pytest
import redis

from mcap import (ADD_CAPTCHA, ADD_VISITOR, CAPTCHA_EXISTS, DELETE_CAPTCHA, DELETE_CHALLENGE, GET, GET_CHALLENGE,
                  cfg, chkey, ckey, digest_value, visitor_reply)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "legacy"))

import legacy as L  # noqa: E402

UNREADABLE = "stored by the original module in a form that cannot be read"


def _captcha(live, levels, duration):
    return json.dumps({"m": {"visitor_threshold": live, "duration": duration,
                             "defense": {"levels": [{"visitor_threshold": t, "difficulty_factor": d}
                                                    for t, d in levels], "current_visitor_threshold": 0}}},
                      separators=(",", ":"))


ODD_CAPTCHAS = {
    "many": _captcha(0, [(i * 10, i + 1) for i in range(300)], 30),          # 300 levels, > 16 KiB
    "bigdur": _captcha(2, [(0, 5)], 2 ** 40),                                 # u64 seconds
    "dups": _captcha(0, [(10, 4), (10, 9), (0, 1)], 30),                      # duplicate threshold
    "df0": _captcha(0, [(0, 0), (5, 3)], 30),                                 # difficulty 0
    "dur0": _captcha(0, [(0, 7)], 0),                                         # duration 0
    "falling": _captcha(0, [(0, 50), (10, 5)], 30),                           # difficulty falls
    "bigcount": _captcha(2 ** 40, [(0, 2), (100, 8)], 30),                    # live count beyond u32
}
UNREADABLE_CAPTCHAS = {
    "nolevels": _captcha(0, [], 30),
    "notjson": "not json at all \x00\xff",
    "huge": '{"m":{"visitor_threshold":18446744073709551615,"duration":30,'
            '"defense":{"levels":[{"visitor_threshold":0,"difficulty_factor":1}]}}}',
}


@pytest.fixture(scope="module")
def writer_so():
    try:
        return L.build_writer()
    except L.WriterBuildError as e:
        pytest.fail(str(e), pytrace=False)


def test_redis_starts_on_every_odd_value(servers, writer_so, tmp_path):
    data = str(tmp_path / "data")
    orig = servers.new(name="original", module=writer_so, dir=data)
    w = orig.client()
    L.legacy_captcha(w, "good", 600, 3, [(1, 10), (5, 20)])
    for name, payload in {**ODD_CAPTCHAS, **UNREADABLE_CAPTCHAS}.items():
        assert w.execute_command("LEGACY.RAW", "captcha", ckey(name), payload) == b"OK"
    # a challenge of duration 0 that will have expired when ours loads it
    assert w.execute_command("LEGACY.RAW", "challenge", chkey("good", "zero"),
                             '{"duration":0,"difficulty_factor":9}', 300) == b"OK"
    expire_zero = w.execute_command("PEXPIRETIME", chkey("good", "zero"))
    assert w.execute_command("LEGACY.RAW", "challenge", chkey("good", "long"),
                             '{"duration":99999999999,"difficulty_factor":9}', 600000) == b"OK"
    assert w.execute_command("LEGACY.RAW", "challenge", chkey("good", "junk"), "{oops", 600000) == b"OK"
    assert w.execute_command("SAVE")
    orig.stop()
    while time.time() * 1000 <= expire_zero + 5:  # the state the test needs: that key's time has passed
        time.sleep(0.01)

    ours = servers.new(name="ours", dir=data)  # starts: the point of this test
    r = ours.client()
    log = open(ours.logfile, encoding="utf-8", errors="replace").read()
    assert r.execute_command(GET, "good") == 3
    # normalised, and working
    assert r.execute_command(ADD_VISITOR, "many") == visitor_reply(30, 1)
    for _ in range(24):
        r.execute_command(ADD_VISITOR, "many")
    assert r.execute_command(ADD_VISITOR, "many") == visitor_reply(30, 3)   # 26 > 20: the third level
    assert r.execute_command(ADD_VISITOR, "bigdur") == visitor_reply(4294967295, 5)
    assert r.execute_command(GET, "bigdur") == 3
    assert r.execute_command(ADD_VISITOR, "dups") == visitor_reply(30, 1)   # 1 > 0: level (0, 1)
    for _ in range(10):
        r.execute_command(ADD_VISITOR, "dups")
    assert r.execute_command(ADD_VISITOR, "dups") == visitor_reply(30, 9)   # the duplicate's highest
    assert r.execute_command(ADD_VISITOR, "df0") == visitor_reply(30, 1)    # 0 raised to 1
    assert r.execute_command(ADD_VISITOR, "dur0") == visitor_reply(1, 7)    # 0 s raised to 1 s
    for _ in range(11):
        r.execute_command(ADD_VISITOR, "falling")
    assert r.execute_command(ADD_VISITOR, "falling") == visitor_reply(30, 50)  # never easier than below
    assert r.execute_command(GET, "bigcount") == 4294967295
    assert "legacy captcha normalised" in log
    # unreadable: kept, an error on use, deletable
    for name in UNREADABLE_CAPTCHAS:
        assert r.execute_command(CAPTCHA_EXISTS, name) == 0
        for cmd in (GET, ADD_VISITOR):
            with pytest.raises(redis.ResponseError) as e:
                r.execute_command(cmd, name)
            assert UNREADABLE in str(e.value)
    assert log.count("the value is kept as it is") >= len(UNREADABLE_CAPTCHAS) + 1
    # challenges: the expired one is gone, the long one clamped, the junk one kept
    assert r.exists(chkey("good", "zero")) == 0
    assert json.loads(r.execute_command(GET_CHALLENGE, "good", "long")) == {"difficulty_factor": 9,
                                                                           "duration": 4294967295}
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(GET_CHALLENGE, "good", "junk")
    assert UNREADABLE in str(e.value)
    assert r.exists(chkey("good", "junk")) == 1

    # the kept bytes survive DUMP/RESTORE, DEBUG RELOAD and an AOF rewrite + load
    before = {k: digest_value(r, k) for k in [ckey(n) for n in UNREADABLE_CAPTCHAS] + [chkey("good", "junk")]}
    for n in UNREADABLE_CAPTCHAS:
        r.restore(ckey(n + "-copy"), 0, r.dump(ckey(n)))
        assert digest_value(r, ckey(n + "-copy")) == before[ckey(n)]
    r.execute_command("DEBUG", "RELOAD")
    assert {k: digest_value(r, k) for k in before} == before
    r.config_set("appendonly", "yes")
    deadline = time.time() + 30
    while time.time() < deadline:
        info = r.info("persistence")
        if info["aof_rewrite_in_progress"] == 0 and info["aof_rewrite_scheduled"] == 0 and \
                info.get("aof_last_bgrewrite_status") == "ok":
            break
        time.sleep(0.02)
    r.execute_command("DEBUG", "LOADAOF")
    assert {k: digest_value(r, k) for k in before} == before
    with pytest.raises(redis.ResponseError):
        r.execute_command(GET, "notjson")
    # and they go away on request
    for name in UNREADABLE_CAPTCHAS:
        assert r.execute_command(DELETE_CAPTCHA, name) == b"OK"
        assert r.execute_command(CAPTCHA_EXISTS, name) == 1
    assert r.execute_command(DELETE_CHALLENGE, "good", "junk") == b"OK"
    assert r.exists(chkey("good", "junk")) == 0
    assert r.execute_command(ADD_CAPTCHA, "notjson", cfg([(0, 2)])) == b"OK"

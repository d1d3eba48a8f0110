# SPDX-License-Identifier: BSD-3-Clause
"""The nine public commands: replies, errors (exact wire bytes), keys, types,
registration metadata (MODULE LIST, COMMAND INFO/DOCS/GETKEYS)."""

import time

import pytest

from mcap import (PTTL_SLACK_MS, ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, CAPTCHA_EXISTS, CAPTCHA_NOT_FOUND,
                  CAPTCHA_SET, CAPTCHA_TYPE, CHALLENGE_EXISTS, CHALLENGE_NOT_FOUND,
                  CHALLENGE_SET, CHALLENGE_TYPE, DELETE_CAPTCHA, DELETE_CHALLENGE, GET,
                  GET_CHALLENGE, INTERNAL_COMMANDS, PUBLIC_COMMANDS, RENAME_CAPTCHA, VISIT_AT,
                  all_keys, cfg, chal, challenge_reply, chkey, ckey, error_of,
                  now_ms, visitor_reply)
from servers import raw_command

CFG = cfg([(50, 50), (500, 500)], duration=30)


# ------------------------------------------------------------ registration
def test_module_list_first_entry_is_mcaptcha_cache(server):
    """libmcaptcha reads only MODULE LIST's first entry. Servers that list
    modules of their own (Valkey 9's built-in `lua`) order the list by a hash
    table, so this holds there only with module-list-first (docs/operations.md)."""
    raw = server.client(raw=True)
    raw.execute_command("CONFIG", "SET", "mcaptcha_cache.module-list-first", "yes")
    try:
        mods = raw.execute_command("MODULE", "LIST")
    finally:
        raw.execute_command("CONFIG", "SET", "mcaptcha_cache.module-list-first", "no")
    assert len(mods) >= 1
    first = mods[0]
    d = dict(zip(first[::2], first[1::2]))
    assert d[b"name"] == b"mcaptcha_cache"
    # the client looks for the text anywhere in the first entry
    assert b"mcaptcha_cache" in repr(first).encode()


@pytest.mark.parametrize("cmd", PUBLIC_COMMANDS)
def test_command_info_non_nil(server, cmd):
    raw = server.client(raw=True)
    for name in (cmd, cmd.lower()):
        info = raw.execute_command("COMMAND", "INFO", name)
        assert len(info) == 1
        assert info[0] is not None, "COMMAND INFO %s is nil" % name
        assert info[0][0].lower() == cmd.lower().encode()


@pytest.mark.parametrize("cmd", PUBLIC_COMMANDS + INTERNAL_COMMANDS)
def test_command_docs_summary(server, cmd):
    raw = server.client(raw=True)
    docs = raw.execute_command("COMMAND", "DOCS", cmd)
    assert len(docs) == 2, "COMMAND DOCS %s: %r" % (cmd, docs)
    assert docs[0].lower() == cmd.lower().encode()
    fields = dict(zip(docs[1][::2], docs[1][1::2]))
    assert fields.get(b"summary"), "no summary in COMMAND DOCS %s: %r" % (cmd, fields)


def _flags(raw, cmd):
    info = raw.execute_command("COMMAND", "INFO", cmd)
    assert info[0] is not None, "COMMAND INFO %s is nil" % cmd
    return set(info[0][2])


@pytest.mark.parametrize("cmd", [ADD_CAPTCHA, ADD_VISITOR, ADD_CHALLENGE,
                                 VISIT_AT, CAPTCHA_SET, CHALLENGE_SET])
def test_flags_write_denyoom(server, cmd):
    f = _flags(server.client(raw=True), cmd)
    assert b"write" in f and b"denyoom" in f, f
    assert b"readonly" not in f


@pytest.mark.parametrize("cmd", [DELETE_CAPTCHA, RENAME_CAPTCHA, GET_CHALLENGE,
                                 DELETE_CHALLENGE])
def test_flags_write(server, cmd):
    f = _flags(server.client(raw=True), cmd)
    assert b"write" in f, f
    assert b"readonly" not in f


@pytest.mark.parametrize("cmd", [GET, CAPTCHA_EXISTS])
def test_flags_readonly_fast(server, cmd):
    f = _flags(server.client(raw=True), cmd)
    assert b"readonly" in f and b"fast" in f, f
    assert b"write" not in f


GETKEYS_CASES = [
    ((ADD_CAPTCHA, "site1", CFG), [b"site1"]),
    ((ADD_VISITOR, "site1"), [b"site1"]),
    ((GET, "site1"), [b"site1"]),
    ((CAPTCHA_EXISTS, "site1"), [b"site1"]),
    ((DELETE_CAPTCHA, "site1"), [b"site1"]),
    ((RENAME_CAPTCHA, "old", "new"), [b"old", b"new"]),
    ((ADD_CHALLENGE, "site1", chal(50, 30, "c")), [b"site1"]),
    ((GET_CHALLENGE, "site1", "c"), [b"site1"]),
    ((DELETE_CHALLENGE, "site1", "c"), [b"site1"]),
    ((VISIT_AT, ckey("site1"), 1700000000000), [ckey("site1")]),
    ((CHALLENGE_SET, chkey("site1", "c"), 50, 30), [chkey("site1", "c")]),
    ((CAPTCHA_SET, ckey("site1"), 30, 1, 50, 50, 1700000000000, 0), [ckey("site1")]),
]


@pytest.mark.parametrize("args,keys", GETKEYS_CASES, ids=[c[0][0] for c in GETKEYS_CASES])
def test_command_getkeys(server, args, keys):
    raw = server.client(raw=True)
    assert raw.execute_command("COMMAND", "GETKEYS", *args) == keys


# ------------------------------------------------------------- ADD_CAPTCHA
def test_add_captcha_ok_and_keys(server, r):
    assert raw_command(server, ADD_CAPTCHA, "site", CFG) == b"+OK\r\n"
    assert all_keys(r) == [ckey("site")]
    assert r.type(ckey("site")) == CAPTCHA_TYPE
    assert r.pttl(ckey("site")) == -1, "a registered captcha must not expire"
    assert r.execute_command(GET, "site") == 0
    assert r.execute_command(CAPTCHA_EXISTS, "site") == 0


def test_add_captcha_already_exists(server, r):
    assert r.execute_command(ADD_CAPTCHA, "site", CFG) == b"OK"
    r.execute_command(ADD_VISITOR, "site")
    other = cfg([(1, 7)], duration=99)
    assert raw_command(server, ADD_CAPTCHA, "site", other) == b"-ERR captcha already exists\r\n"
    # redis-py strips the "ERR " code
    assert error_of(r, ADD_CAPTCHA, "site", other) == "captcha already exists"
    # the original is unchanged: same config, same count
    assert r.execute_command(GET, "site") == 1
    assert r.execute_command(ADD_VISITOR, "site") == visitor_reply(30, 50)


def test_add_captcha_unknown_fields_ignored_and_levels_sorted(r):
    c = (b'{"extra":{"a":[1,2,{"b":null}]},"levels":[{"visitor_threshold":500,'
         b'"difficulty_factor":500,"x":"y"},{"difficulty_factor":50,"visitor_threshold":50}],'
         b'"duration":30,"zzz":true}')
    assert r.execute_command(ADD_CAPTCHA, "s", c) == b"OK"
    p = r.pipeline(transaction=False)
    for _ in range(501):
        p.execute_command(ADD_VISITOR, "s")
    out = p.execute()
    assert out[0] == visitor_reply(30, 50)
    assert out[499] == visitor_reply(30, 50)
    assert out[500] == visitor_reply(30, 500)


# ------------------------------------------------------------- ADD_VISITOR / GET
CONFIG_MAX_BYTES = 16 * 1024  # docs/captcha.md "at most 16 KiB"; src/core/captcha.h CAPTCHA_MAX_CONFIG_BYTES


def _config_of_size(levels, size, pad_with):
    """A valid ADD_CAPTCHA config of exactly `size` bytes, padded by an unknown
    field ("pad") or by trailing whitespace."""
    base = cfg(levels, duration=30)
    if pad_with == "field":
        head = base[:-1] + b',"pad":"'
        out = head + b"x" * (size - len(head) - 2) + b'"}'
    else:
        out = base + b" " * (size - len(base))
    assert len(out) == size
    return out


@pytest.mark.parametrize("pad_with", ["field", "whitespace"])
def test_add_captcha_config_size_boundary(server, r, pad_with):
    """A config of exactly 16 KiB is accepted (and works), one byte more is
    refused with an error and writes nothing."""
    levels = [(i * 10, i + 1) for i in range(128)]
    at_max = _config_of_size(levels, CONFIG_MAX_BYTES, pad_with)
    over = _config_of_size(levels, CONFIG_MAX_BYTES + 1, pad_with)
    assert r.execute_command(ADD_CAPTCHA, "max", at_max) == b"OK"
    assert r.execute_command(ADD_VISITOR, "max") == visitor_reply(30, 1)
    assert r.execute_command(GET, "max") == 1
    wire = raw_command(server, ADD_CAPTCHA, "over", over)
    assert wire == b"-ERR invalid config: the JSON is larger than 16384 bytes\r\n", wire
    assert r.execute_command(CAPTCHA_EXISTS, "over") == 1
    assert all_keys(r) == [ckey("max")]


def test_two_hundred_levels_and_a_u64_duration(r):
    """As the original: no cap on levels but the JSON size; a duration beyond
    u32 seconds is kept as 4294967295 s (what milliseconds can count)."""
    levels = [(i * 10, i + 1) for i in range(200)]
    assert r.execute_command(ADD_CAPTCHA, "many", cfg(levels, duration=30)) == b"OK"
    for _ in range(15):
        r.execute_command(ADD_VISITOR, "many")
    assert r.execute_command(ADD_VISITOR, "many") == visitor_reply(30, 2)  # 16 > 10: the second level
    assert r.execute_command(ADD_CAPTCHA, "long", cfg([(1, 5)], duration=2 ** 40)) == b"OK"
    assert r.execute_command(ADD_VISITOR, "long") == visitor_reply(4294967295, 5)
    r.execute_command("DEBUG", "RELOAD")
    assert r.execute_command(GET, "many") == 16 and r.execute_command(GET, "long") == 1


def test_add_visitor_reply_and_count(server, r):
    r.execute_command(ADD_CAPTCHA, "site", CFG)
    body = b'{"duration":30,"difficulty_factor":50}'
    assert raw_command(server, ADD_VISITOR, "site") == b"$%d\r\n%s\r\n" % (len(body), body)
    assert r.execute_command(ADD_VISITOR, "site") == body
    assert raw_command(server, GET, "site") == b":2\r\n"
    assert r.execute_command(GET, "site") == 2


@pytest.mark.parametrize("cmd", [ADD_VISITOR, GET, DELETE_CAPTCHA])
def test_captcha_not_found_bare_error(server, r, cmd):
    assert raw_command(server, cmd, "nope") == b"-Captcha not found\r\n"
    assert error_of(r, cmd, "nope") == CAPTCHA_NOT_FOUND
    assert r.dbsize() == 0, "a failed %s must not create a key" % cmd


# ------------------------------------------------------------- CAPTCHA_EXISTS
def test_captcha_exists_inverted(server, r):
    assert raw_command(server, CAPTCHA_EXISTS, "site") == b":1\r\n"
    r.execute_command(ADD_CAPTCHA, "site", CFG)
    assert raw_command(server, CAPTCHA_EXISTS, "site") == b":0\r\n"
    assert r.execute_command(CAPTCHA_EXISTS, "site") == 0
    assert r.execute_command(CAPTCHA_EXISTS, "other") == 1
    r.execute_command(DELETE_CAPTCHA, "site")
    assert r.execute_command(CAPTCHA_EXISTS, "site") == 1
    assert r.dbsize() == 0


# ------------------------------------------------------------- DELETE_CAPTCHA
def test_delete_captcha(server, r):
    r.execute_command(ADD_CAPTCHA, "site", CFG)
    r.execute_command(ADD_CAPTCHA, "keep", CFG)
    r.execute_command(ADD_VISITOR, "site")
    assert raw_command(server, DELETE_CAPTCHA, "site") == b"+OK\r\n"
    assert r.exists(ckey("site")) == 0
    assert r.execute_command(CAPTCHA_EXISTS, "site") == 1
    assert error_of(r, GET, "site") == CAPTCHA_NOT_FOUND
    assert error_of(r, ADD_VISITOR, "site") == CAPTCHA_NOT_FOUND
    assert error_of(r, DELETE_CAPTCHA, "site") == CAPTCHA_NOT_FOUND
    assert r.execute_command(CAPTCHA_EXISTS, "keep") == 0
    # it can be registered again, from scratch
    r.execute_command(ADD_CAPTCHA, "site", cfg([(1, 3)], duration=5))
    assert r.execute_command(GET, "site") == 0
    assert r.execute_command(ADD_VISITOR, "site") == visitor_reply(5, 3)


# ------------------------------------------------------------- RENAME_CAPTCHA
def test_rename_moves_config_and_count(server, r):
    r.execute_command(ADD_CAPTCHA, "old", cfg([(2, 10), (4, 20)], duration=40))
    for _ in range(3):
        r.execute_command(ADD_VISITOR, "old")
    assert raw_command(server, RENAME_CAPTCHA, "old", "new") == b"+OK\r\n"
    assert r.execute_command(CAPTCHA_EXISTS, "old") == 1
    assert r.execute_command(CAPTCHA_EXISTS, "new") == 0
    assert all_keys(r) == [ckey("new")]
    assert r.type(ckey("new")) == CAPTCHA_TYPE
    assert r.execute_command(GET, "new") == 3
    # 4th visit: threshold 2 < 4, threshold 4 is not below 4 -> 10; 5th -> 20
    assert r.execute_command(ADD_VISITOR, "new") == visitor_reply(40, 10)
    assert r.execute_command(ADD_VISITOR, "new") == visitor_reply(40, 20)
    assert error_of(r, GET, "old") == CAPTCHA_NOT_FOUND


def test_rename_keeps_decay_schedule(r):
    """The renamed captcha's visits leave when they would have without the
    rename. Two visits are stamped 20 s ago (duration 30 s: they leave 10 s from
    now, + at most one 117 ms slot); VISIT_AT on the new key then reads the count
    at explicit later times: kept schedule -> the old visits are gone 30.2 s
    after their stamp; restamped at the rename -> they would count until 30 s
    after the rename (20 s later)."""
    r.execute_command(ADD_CAPTCHA, "old", cfg([(5, 5)], duration=30))
    t_old = now_ms() - 20000
    assert r.execute_command(VISIT_AT, ckey("old"), t_old) == 1
    assert r.execute_command(VISIT_AT, ckey("old"), t_old) == 2
    r.execute_command(RENAME_CAPTCHA, "old", "new")
    assert r.execute_command(GET, "new") == 2
    # 29 s after the stamp: both still count, plus this one
    assert r.execute_command(VISIT_AT, ckey("new"), t_old + 29000) == 3
    # 30.2 s after the stamp: the two old ones are gone (restamped: 4)
    assert r.execute_command(VISIT_AT, ckey("new"), t_old + 30200) == 2


def test_rename_missing_old_is_ok(server, r):
    assert raw_command(server, RENAME_CAPTCHA, "ghost", "new") == b"+OK\r\n"
    assert r.dbsize() == 0
    assert r.execute_command(CAPTCHA_EXISTS, "new") == 1


def test_rename_target_exists(server, r):
    r.execute_command(ADD_CAPTCHA, "a", cfg([(5, 5)], duration=30))
    r.execute_command(ADD_CAPTCHA, "b", cfg([(7, 7)], duration=31))
    r.execute_command(ADD_VISITOR, "a")
    da, db_ = r.dump(ckey("a")), r.dump(ckey("b"))
    assert raw_command(server, RENAME_CAPTCHA, "a", "b") == \
        b"-ERR target captcha already exists\r\n"
    assert error_of(r, RENAME_CAPTCHA, "a", "b") == "target captcha already exists"
    assert r.dump(ckey("a")) == da and r.dump(ckey("b")) == db_
    assert r.execute_command(GET, "a") == 1
    assert r.execute_command(GET, "b") == 0


# ------------------------------------------------------------- challenges
def test_add_get_challenge_one_shot(server, r):
    assert raw_command(server, ADD_CHALLENGE, "site", chal(500, 30, "abc")) == b"+OK\r\n"
    k = chkey("site", "abc")
    assert all_keys(r) == [k]
    assert r.type(k) == CHALLENGE_TYPE
    pttl = r.pttl(k)
    assert 0 < pttl <= 30000 + PTTL_SLACK_MS
    body = b'{"difficulty_factor":500,"duration":30}'
    assert raw_command(server, GET_CHALLENGE, "site", "abc") == b"$%d\r\n%s\r\n" % (len(body), body)
    assert r.exists(k) == 0
    assert raw_command(server, GET_CHALLENGE, "site", "abc") == b"-Challenge not found\r\n"
    assert error_of(r, GET_CHALLENGE, "site", "abc") == CHALLENGE_NOT_FOUND
    assert r.dbsize() == 0


def test_add_challenge_already_exists(server, r):
    r.execute_command(ADD_CHALLENGE, "site", chal(5, 30, "abc"))
    assert raw_command(server, ADD_CHALLENGE, "site", chal(9, 60, "abc")) == \
        b"-Challenge already exists\r\n"
    assert error_of(r, ADD_CHALLENGE, "site", chal(9, 60, "abc")) == CHALLENGE_EXISTS
    # the first one is kept
    assert r.execute_command(GET_CHALLENGE, "site", "abc") == challenge_reply(5, 30)


def test_challenges_are_per_captcha_and_per_string(r):
    r.execute_command(ADD_CHALLENGE, "s1", chal(1, 30, "c"))
    r.execute_command(ADD_CHALLENGE, "s2", chal(2, 30, "c"))
    r.execute_command(ADD_CHALLENGE, "s1", chal(3, 30, "d"))
    assert all_keys(r) == sorted([chkey("s1", "c"), chkey("s2", "c"), chkey("s1", "d")])
    assert r.execute_command(GET_CHALLENGE, "s2", "c") == challenge_reply(2, 30)
    assert r.execute_command(GET_CHALLENGE, "s1", "c") == challenge_reply(1, 30)
    assert r.execute_command(GET_CHALLENGE, "s1", "d") == challenge_reply(3, 30)


def test_add_challenge_without_captcha(r):
    assert r.execute_command(CAPTCHA_EXISTS, "nocap") == 1
    assert r.execute_command(ADD_CHALLENGE, "nocap", chal(7, 30, "x")) == b"OK"
    assert r.execute_command(CAPTCHA_EXISTS, "nocap") == 1, "must not create a captcha"
    assert r.execute_command(GET_CHALLENGE, "nocap", "x") == challenge_reply(7, 30)


def test_challenge_with_odd_string(r):
    s = "with space:colon{brace}\u00e9\u6f22"
    r.execute_command(ADD_CHALLENGE, "site", chal(3, 30, s))
    assert r.exists(chkey("site", s.encode())) == 1
    assert r.execute_command(GET_CHALLENGE, "site", s.encode()) == challenge_reply(3, 30)


def test_delete_challenge(server, r):
    r.execute_command(ADD_CHALLENGE, "site", chal(5, 30, "abc"))
    assert raw_command(server, DELETE_CHALLENGE, "site", "abc") == b"+OK\r\n"
    assert r.dbsize() == 0
    assert raw_command(server, DELETE_CHALLENGE, "site", "abc") == b"-Challenge not found\r\n"
    assert error_of(r, DELETE_CHALLENGE, "site", "abc") == CHALLENGE_NOT_FOUND
    assert error_of(r, GET_CHALLENGE, "site", "abc") == CHALLENGE_NOT_FOUND


def test_challenge_expires_after_duration(r):
    r.execute_command(ADD_CHALLENGE, "site", chal(5, 1, "abc"))
    t1 = time.time()
    pttl = r.pttl(chkey("site", "abc"))
    assert 0 < pttl <= 1000 + PTTL_SLACK_MS, pttl
    time.sleep(max(0, t1 + 1.5 - time.time()))
    assert error_of(r, GET_CHALLENGE, "site", "abc") == CHALLENGE_NOT_FOUND
    assert r.exists(chkey("site", "abc")) == 0
    # and it can be added again afterwards
    assert r.execute_command(ADD_CHALLENGE, "site", chal(6, 30, "abc")) == b"OK"


def test_challenge_expired_can_be_readded_without_exists_error(r):
    r.execute_command(ADD_CHALLENGE, "site", chal(5, 1, "abc"))
    time.sleep(1.2)
    # logically expired (possibly not yet evicted by the active cycle)
    assert r.execute_command(ADD_CHALLENGE, "site", chal(6, 30, "abc")) == b"OK"
    assert r.execute_command(GET_CHALLENGE, "site", "abc") == challenge_reply(6, 30)


# ------------------------------------------------------------- client keys
def test_client_owned_keys_untouched(r):
    r.set("mcaptcha:token:site:tok", "v1", ex=100)
    r.set("mcap:other", "v2")
    r.hset("somehash", "f", "v3")
    r.execute_command(ADD_CAPTCHA, "site", CFG)
    for _ in range(10):
        r.execute_command(ADD_VISITOR, "site")
    r.execute_command(ADD_CHALLENGE, "site", chal(50, 30, "tok"))
    r.execute_command(GET_CHALLENGE, "site", "tok")
    r.execute_command(ADD_CHALLENGE, "site", chal(50, 30, "tok2"))
    r.execute_command(DELETE_CHALLENGE, "site", "tok2")
    r.execute_command(RENAME_CAPTCHA, "site", "site2")
    r.execute_command(DELETE_CAPTCHA, "site2")
    r.execute_command(CAPTCHA_EXISTS, "site")
    assert r.get("mcaptcha:token:site:tok") == b"v1"
    assert 0 < r.ttl("mcaptcha:token:site:tok") <= 100
    assert r.get("mcap:other") == b"v2"
    assert r.hget("somehash", "f") == b"v3"
    assert all_keys(r) == sorted([b"mcaptcha:token:site:tok", b"mcap:other", b"somehash"])


def test_no_auxiliary_keys(r):
    """Only the documented keys exist: one per captcha, one per pending challenge."""
    for i in range(5):
        r.execute_command(ADD_CAPTCHA, "s%d" % i, cfg([(5, 5)], duration=1 + i))
        for _ in range(3):
            r.execute_command(ADD_VISITOR, "s%d" % i)
    r.execute_command(ADD_CHALLENGE, "s0", chal(5, 30, "c"))
    expected = sorted([ckey("s%d" % i) for i in range(5)] + [chkey("s0", "c")])
    assert all_keys(r) == expected
    assert r.execute_command(VISIT_AT, ckey("s1"), now_ms()) == 4
    assert all_keys(r) == expected

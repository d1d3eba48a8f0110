# SPDX-License-Identifier: BSD-3-Clause
"""COMMAND DOCS names every argument right on every server.

The module is built against Redis 7.0's redismodule.h, whose argument struct
has no display_text; Redis 7.2+ and Valkey read that field anyway, stepping by
the size the module declares. The module registers its arguments in the 7.2
layout, so on newer servers each argument's display text is its own name
(never its neighbour's), and on 7.0 the same tables still read right. Names
carry their units ([WAIT timeout-ms], [PERMITS n], [AT unix-ms], leak-rate-s)."""

import pytest

SHAPES = {
    # "limit": one of <rate period-ms> (or <limit window-ms>) and POLICY policy-name
    "RL.GCRA": [("key", None), ("limit", None), ("capacity", "BURST"), ("n", "COST"),
                ("timeout-ms", "WAIT"), ("unix-ms", "AT")],
    "RL.WINDOW": [("key", None), ("limit", None), ("n", "COST"), ("timeout-ms", "WAIT"),
                  ("unix-ms", "AT")],
    "RL.POLICY_SET": [("name", None), ("definition", None)],
    "LOCK.ACQUIRE": [("key", None), ("owner", None), ("lease-ms", None), ("n", "PERMITS"), ("k", "TAKE"), ("read", "READ"),
                     ("write", "WRITE"), ("reentrant", "REENTRANT"),
                     ("session", "SESSION"), ("delay-ms", "LOCKDELAY"), ("timeout-ms", "WAIT"),
                     ("acks-block", None)],
    "RL.CONCURRENCY": [("key", None), ("holder", None), ("lease-ms", None), ("limit", None), ("timeout-ms", "WAIT")],
    "MCAPTCHA_CACHE.COUNT": [("counter-name", None), ("leak-rate-s", None)],
    "CL.THROTTLE": [("key", None), ("max_burst", None), ("count_per_period", None), ("period-s", None),
                    ("quantity", None)],
}


def _raw(r, *args):
    conn = r.connection_pool.get_connection("_")
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def _pairs(flat):
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def _args(r, name):
    docs = _raw(r, "COMMAND", "DOCS", name)
    assert docs, name
    return [_pairs(a) for a in _pairs(docs[1])["arguments"]]


def _walk(args):
    for a in args:
        yield a
        if "arguments" in a:
            yield from _walk(_pairs(x) for x in a["arguments"])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_argument_names_tokens_and_display_texts(r, name):
    args = _args(r, name)
    got = [(a["name"].decode(), a["token"].decode() if "token" in a else None) for a in args]
    assert got == SHAPES[name]
    for a in args:
        if "display_text" in a:  # 7.2+ and Valkey: the argument's own name, never its neighbour's
            assert a["display_text"] == a["name"], (name, a)


def test_every_command_every_argument(r):
    names = [n.decode() for n in _raw(r, "COMMAND", "LIST", "FILTERBY", "MODULE", "mcaptcha_cache")]
    assert len(names) >= 20
    shown = 0
    for name in names:
        docs = _raw(r, "COMMAND", "DOCS", name)
        doc = _pairs(docs[1])
        for a in _walk(_pairs(x) for x in doc.get("arguments", [])):
            assert a["name"] and a["type"], (name, a)
            if "display_text" in a:
                shown += 1
                assert a["display_text"] == a["name"], (name, a)
    version = r.info("server").get("redis_version", "0")
    major_minor = tuple(int(x) for x in str(version).split(".")[:2])
    if major_minor >= (7, 2):
        assert shown > 0, "a 7.2+ server shows display texts"

# SPDX-License-Identifier: BSD-3-Clause
"""RL.MULTI's one-slot rule holds standalone too: keys of one call whose hash
slots differ get the error Redis Cluster gives (CROSSSLOT), and nothing is
written, so code that works on one server works unchanged in Cluster. Keys in
one slot (a shared hash tag, or plain keys that happen to share it) work."""

from binascii import crc_hqx

import pytest

from servers import raw_command

CROSSSLOT = b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"


def slot(key):
    """Hash slot: CRC16-XMODEM of the hash tag (first '{' .. next '}', when not
    empty) or of the whole key, modulo 16384 (Redis Cluster specification)."""
    k = key.encode()
    o = k.find(b"{")
    if o >= 0:
        c = k.find(b"}", o + 1)
        if c > o + 1:
            k = k[o + 1:c]
    return crc_hqx(k, 0) % 16384


def multi(cost, *limits):
    """RL.MULTI args for limits [(key, type, limit, period), ...]."""
    args = ["RL.MULTI", cost, len(limits)]
    for lim in limits:
        args += list(lim)
    return args


def test_different_slots_are_refused_and_write_nothing(server, r):
    assert slot("a") != slot("b")
    assert raw_command(server, *multi(1, ("a", "GCRA", 10, 1000), ("b", "WINDOW", 10, 1000))) == CROSSSLOT
    assert r.dbsize() == 0
    # with the keys existing: neither changes
    assert r.execute_command("RL.GCRA", "a", 10, 60000)[0] == 1
    assert r.execute_command("RL.WINDOW", "b", 10, 60000)[0] == 1
    before = {k: (r.dump(k), r.execute_command("PEXPIRETIME", k)) for k in ("a", "b")}
    assert raw_command(server, *multi(1, ("a", "GCRA", 10, 60000), ("b", "WINDOW", 10, 60000))) == CROSSSLOT
    assert {k: (r.dump(k), r.execute_command("PEXPIRETIME", k)) for k in ("a", "b")} == before
    assert r.dbsize() == 2


def test_every_key_is_checked(server, r):
    """Fifteen keys in one slot and the sixteenth elsewhere: refused, nothing written."""
    limits = [("{u}%d" % i, "GCRA" if i % 2 else "WINDOW", 10, 1000) for i in range(15)]
    limits.append(("other", "WINDOW", 10, 1000))
    assert slot("other") != slot("{u}0")
    assert raw_command(server, *multi(1, *limits)) == CROSSSLOT
    assert r.dbsize() == 0
    # a cost of 0 (a pure check) is refused the same way
    assert raw_command(server, *multi(0, *limits)) == CROSSSLOT


def test_slot_checked_before_the_limits_are_read(server, r):
    """As in Cluster, where the server refuses before the command runs: the slot
    error comes first, whatever the rest of the arguments say."""
    assert raw_command(server, *multi(1, ("a", "TOKEN", 0, 0), ("b", "GCRA", 10, 1000))) == CROSSSLOT
    r.set("b", "plain")
    assert raw_command(server, *multi(1, ("a", "GCRA", 10, 1000), ("b", "GCRA", 10, 1000))) == CROSSSLOT


def test_one_slot_works(r):
    # a shared hash tag
    assert r.execute_command(*multi(1, ("{u42}:s", "GCRA", 10, 1000), ("{u42}:m", "WINDOW", 100, 60000))) \
        == [1, 0, -1, 9]
    assert r.exists("{u42}:s", "{u42}:m") == 2
    # two plain keys that happen to share a slot
    base = slot("k0")
    other = next("k%d" % i for i in range(1, 200000) if slot("k%d" % i) == base)
    assert r.execute_command(*multi(1, ("k0", "GCRA", 10, 1000), (other, "WINDOW", 10, 1000)))[0] == 1
    # an empty hash tag is no tag: the whole key is hashed
    if slot("{}x") != slot("{}y"):
        with pytest.raises(Exception) as e:
            r.execute_command(*multi(1, ("{}x", "GCRA", 10, 1000), ("{}y", "GCRA", 10, 1000)))
        assert str(e.value).startswith("CROSSSLOT")


def test_refused_index_is_1_based_and_0_when_allowed(r):
    """docs/ratelimit.md: refused_index is the 1-based position of the first limit that
    refused, 0 when allowed."""
    ok = r.execute_command(*multi(1, ("{i}a", "GCRA", 2, 60000), ("{i}b", "WINDOW", 1, 60000)))
    assert ok[:2] == [1, 0]
    again = r.execute_command(*multi(1, ("{i}a", "GCRA", 2, 60000), ("{i}b", "WINDOW", 1, 60000)))
    assert again[:2] == [0, 2]


def test_inside_multi_exec_and_scripts(server, r):
    """The same error inside a transaction and from a script, nothing written."""
    p = r.pipeline(transaction=True)
    p.execute_command(*multi(1, ("a", "GCRA", 10, 1000), ("b", "GCRA", 10, 1000)))
    p.set("after", 1)
    res = p.execute(raise_on_error=False)
    assert str(res[0]).startswith("CROSSSLOT") and res[1] is True
    assert not r.exists("a", "b")
    script = "return redis.pcall('RL.MULTI', 1, 2, KEYS[1], 'GCRA', 10, 1000, KEYS[2], 'GCRA', 10, 1000)"
    rep = raw_command(server, "EVAL", script, 2, "{s}a", "{s}b")
    assert rep.startswith(b"*4\r\n")
    # keys in different slots declared to EVAL: Redis runs it standalone, the module refuses
    with pytest.raises(Exception) as e:
        r.eval(script, 2, "a", "b")
    assert "CROSSSLOT" in str(e.value)
    assert not r.exists("a", "b")

# SPDX-License-Identifier: BSD-3-Clause
"""Families never mix: a key made by one family answers WRONGTYPE to every other
family's commands, and is left exactly as it was (DUMP and expiry equal before
and after), for every pair of families.

The families and the key each makes:
  captcha       MCAPTCHA_CACHE.ADD_CAPTCHA name  -> mcap:captcha::{name}
  challenge     MCAPTCHA_CACHE.ADD_CHALLENGE     -> mcap:CHALLENGE:{name}:<challenge>
  gcra          RL.GCRA / CL.THROTTLE            -> a GCRA key
  window        RL.WINDOW                        -> a sliding-window key (MCAPTCHA_CACHE.COUNT's
                                                    counters are such keys, the key being the name)
  lock          LOCK.ACQUIRE                     -> a lock
  concurrency   RL.CONCURRENCY                   -> a concurrency limit
  string        SET                              -> a plain string

The captcha commands take a captcha *name* and open the key derived from it (see
mcap.py), so to aim them at another family's key that key is made at the derived
name (mcap:captcha::{v}, or mcap:CHALLENGE:{v}:c for the challenge commands). The
internal commands (VISIT_AT, CAPTCHA_SET, CHALLENGE_SET, RL.GCRA_SET,
RL.WINDOW_HIT, RL.WINDOW_SET, LOCK.STATE) take the real key and are tried too.

Commands shared by two families are not "another family's" there, as documented:
RL.REFUND works on GCRA and window keys; LOCK.INSPECT (read-only) shows locks and
concurrency limits; LOCK.STATE (replication) carries both, EPHEMERAL marking a
concurrency limit. A captcha key and a challenge key can never meet a public
command of the other family (their key prefixes differ); the internal commands
cover that pair."""

import pytest
import redis

from mcap import (ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, CAPTCHA_EXISTS, CAPTCHA_SET, CHALLENGE_SET,
                  DELETE_CAPTCHA, DELETE_CHALLENGE, GET, GET_CHALLENGE, RENAME_CAPTCHA, VISIT_AT, cfg, chal,
                  chkey, ckey, now_ms)

NAME, CH = "v", "c"
LONG = 3600 * 1000


# ---- making each family's key at `key` (captcha and challenge: only at their own form)

def make(r, family, key):
    if family == "captcha":
        assert key == ckey(NAME)
        assert r.execute_command(ADD_CAPTCHA, NAME, cfg([(5, 50)], duration=600)) == b"OK"
        assert r.execute_command(ADD_VISITOR, NAME)
    elif family == "challenge":
        assert key == chkey(NAME, CH)
        assert r.execute_command(ADD_CHALLENGE, NAME, chal(50, 600, CH)) == b"OK"
    elif family == "gcra":
        assert r.execute_command("RL.GCRA", key, 10, LONG, "COST", 3)[0] == 1
    elif family == "window":
        assert r.execute_command("RL.WINDOW", key, 10, LONG, "COST", 3)[0] == 1
    elif family == "lock":
        assert r.execute_command("LOCK.ACQUIRE", key, "owner", LONG, "PERMITS", 2)[0] == 1
    elif family == "concurrency":
        assert r.execute_command("RL.CONCURRENCY", key, "holder", LONG, 2)[0] == 1
    elif family == "string":
        assert r.set(key, "plain")
    else:
        raise AssertionError(family)


FAMILIES = ["captcha", "challenge", "gcra", "window", "lock", "concurrency", "string"]

# ---- each family's commands: (family, how it addresses a key, label, args(key) -> argv)
# addressing: "name" (a captcha name: the key is mcap:captcha::{name}), "challenge"
# (name + challenge: mcap:CHALLENGE:{name}:<challenge>), "key" (the key itself).
NOW = now_ms()


def _captcha_state(key):
    return [CAPTCHA_SET, key, 30, 1, 5, 50, NOW, 0]


COMMANDS = [
    ("captcha", "name", "ADD_CAPTCHA", lambda k: [ADD_CAPTCHA, NAME, cfg([(5, 50)])]),
    ("captcha", "name", "ADD_VISITOR", lambda k: [ADD_VISITOR, NAME]),
    ("captcha", "name", "GET", lambda k: [GET, NAME]),
    ("captcha", "name", "CAPTCHA_EXISTS", lambda k: [CAPTCHA_EXISTS, NAME]),
    ("captcha", "name", "DELETE_CAPTCHA", lambda k: [DELETE_CAPTCHA, NAME]),
    ("captcha", "name", "RENAME_CAPTCHA from", lambda k: [RENAME_CAPTCHA, NAME, "elsewhere"]),
    ("captcha", "name", "RENAME_CAPTCHA onto", lambda k: [RENAME_CAPTCHA, "src", NAME]),
    ("captcha", "key", "VISIT_AT", lambda k: [VISIT_AT, k, NOW]),
    ("captcha", "key", "CAPTCHA_SET", _captcha_state),
    ("challenge", "challenge", "ADD_CHALLENGE", lambda k: [ADD_CHALLENGE, NAME, chal(5, 30, CH)]),
    ("challenge", "challenge", "GET_CHALLENGE", lambda k: [GET_CHALLENGE, NAME, CH]),
    ("challenge", "challenge", "DELETE_CHALLENGE", lambda k: [DELETE_CHALLENGE, NAME, CH]),
    ("challenge", "key", "CHALLENGE_SET", lambda k: [CHALLENGE_SET, k, 5, 30]),
    ("challenge", "key", "CHALLENGE_SET PXAT", lambda k: [CHALLENGE_SET, k, 5, 30, "PXAT", NOW + LONG]),
    ("gcra", "key", "CL.THROTTLE", lambda k: ["CL.THROTTLE", k, 5, 10, 60]),
    ("gcra", "key", "CL.THROTTLE 0", lambda k: ["CL.THROTTLE", k, 5, 10, 60, 0]),
    ("gcra", "key", "RL.GCRA", lambda k: ["RL.GCRA", k, 10, 1000]),
    ("gcra", "key", "RL.GCRA WAIT", lambda k: ["RL.GCRA", k, 10, 1000, "WAIT", 50]),
    ("gcra", "key", "RL.GCRA_PEEK", lambda k: ["RL.GCRA_PEEK", k, 10, 1000]),
    ("gcra", "key", "RL.MULTI GCRA", lambda k: ["RL.MULTI", 1, 1, k, "GCRA", 10, 1000]),
    ("gcra", "key", "RL.GCRA_SET", lambda k: ["RL.GCRA_SET", k, (NOW + 5000) * 1000, 1000000, 10]),
    ("gcra", "key", "RL.REFUND", lambda k: ["RL.REFUND", k, 1]),
    ("window", "key", "RL.WINDOW", lambda k: ["RL.WINDOW", k, 10, 1000]),
    ("window", "key", "RL.WINDOW WAIT", lambda k: ["RL.WINDOW", k, 10, 1000, "WAIT", 50]),
    ("window", "key", "RL.WINDOW_PEEK", lambda k: ["RL.WINDOW_PEEK", k, 10, 1000]),
    ("window", "key", "RL.MULTI WINDOW", lambda k: ["RL.MULTI", 1, 1, k, "WINDOW", 10, 1000]),
    ("window", "key", "RL.WINDOW_HIT", lambda k: ["RL.WINDOW_HIT", k, 1000, 10, NOW, 1, 0]),
    ("window", "key", "RL.WINDOW_SET", lambda k: ["RL.WINDOW_SET", k, 1000, 10, NOW, 0]),
    ("window", "key", "RL.REFUND", lambda k: ["RL.REFUND", k, 1]),
    ("window", "key", "MCAPTCHA_CACHE.COUNT", lambda k: ["MCAPTCHA_CACHE.COUNT", k, 1]),
    ("lock", "key", "LOCK.ACQUIRE", lambda k: ["LOCK.ACQUIRE", k, "o2", 10000]),
    ("lock", "key", "LOCK.ACQUIRE PERMITS WAIT", lambda k: ["LOCK.ACQUIRE", k, "o2", 10000, "PERMITS", 2,
                                                            "WAIT", 50]),
    ("lock", "key", "LOCK.RELEASE", lambda k: ["LOCK.RELEASE", k, "holder"]),
    ("lock", "key", "LOCK.EXTEND", lambda k: ["LOCK.EXTEND", k, "holder", 10000]),
    ("lock", "key", "LOCK.INSPECT", lambda k: ["LOCK.INSPECT", k]),
    ("lock", "key", "LOCK.STATE", lambda k: ["LOCK.STATE", k, 1, 5, 0]),
    ("concurrency", "key", "RL.CONCURRENCY", lambda k: ["RL.CONCURRENCY", k, "h2", 10000, 2]),
    ("concurrency", "key", "RL.CONCURRENCY WAIT", lambda k: ["RL.CONCURRENCY", k, "h2", 10000, 1, "WAIT", 50]),
    ("concurrency", "key", "RL.CONCURRENCY_RELEASE", lambda k: ["RL.CONCURRENCY_RELEASE", k, "owner"]),
    ("concurrency", "key", "LOCK.INSPECT", lambda k: ["LOCK.INSPECT", k]),
    ("concurrency", "key", "LOCK.STATE EPHEMERAL", lambda k: ["LOCK.STATE", k, 1, 5, 0, "EPHEMERAL"]),
    ("string", "key", "GET", lambda k: ["GET", k]),
    ("string", "key", "APPEND", lambda k: ["APPEND", k, "x"]),
    ("string", "key", "INCR", lambda k: ["INCR", k]),
    ("string", "key", "GETRANGE", lambda k: ["GETRANGE", k, 0, -1]),
]

# Commands that belong to more than one family (module docstring).
SHARED = {
    "RL.REFUND": {"gcra", "window"},
    "LOCK.INSPECT": {"lock", "concurrency"},
    "LOCK.STATE": {"lock", "concurrency"},
}


def _families_of(argv0, family):
    return SHARED.get(str(argv0).upper(), {family})


def _cases():
    out = []
    for victim in FAMILIES:
        for family, addressing, label, argv in COMMANDS:
            if victim in _families_of(argv(b"k")[0], family):
                continue
            if victim == "captcha":
                if addressing == "challenge":
                    continue  # cannot reach a captcha key (module docstring)
                key = ckey(NAME)
            elif victim == "challenge":
                if addressing == "name":
                    continue  # cannot reach a challenge key
                key = chkey(NAME, CH)
            else:
                key = {"name": ckey(NAME), "challenge": chkey(NAME, CH), "key": b"fam:victim"}[addressing]
            out.append(pytest.param(victim, key, argv, id="%s key <- %s %s" % (victim, family, label)))
    return out


def _state(r, key):
    return r.dump(key), r.execute_command("PEXPIRETIME", key)


@pytest.mark.parametrize("victim,key,argv", _cases())
def test_other_families_get_wrongtype_and_change_nothing(r, victim, key, argv):
    make(r, victim, key)
    assert r.execute_command(CAPTCHA_EXISTS, "src") == 1
    assert r.execute_command(ADD_CAPTCHA, "src", cfg([(5, 50)])) == b"OK"  # RENAME_CAPTCHA onto's source
    src = _state(r, ckey("src"))
    before = _state(r, key)
    keys = set(r.keys("*"))
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*argv(key))
    assert str(e.value).startswith("WRONGTYPE Operation against a key holding the wrong kind of value"), \
        "%r on a %s key: %s" % (argv(key), victim, e.value)
    assert _state(r, key) == before, "%r changed the %s key" % (argv(key), victim)
    assert _state(r, ckey("src")) == src
    assert set(r.keys("*")) == keys, "%r created or removed keys" % (argv(key),)


def test_every_family_pair_is_covered():
    """Each family's key meets at least one command of every other family."""
    met = {(c.values[0], fam) for c in _cases() for fam in FAMILIES
           if c.id.split(" <- ")[1].startswith(fam + " ")}
    for victim in FAMILIES:
        for attacker in FAMILIES:
            if victim != attacker:
                assert (victim, attacker) in met, (victim, attacker)

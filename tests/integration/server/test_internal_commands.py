# SPDX-License-Identifier: BSD-3-Clause
"""The internal commands (LOCK.STATE, RL.GCRA_SET, RL.WINDOW_HIT, RL.WINDOW_SET,
MCAPTCHA_CACHE.VISIT_AT, MCAPTCHA_CACHE.CAPTCHA_SET, MCAPTCHA_CACHE.CHALLENGE_SET)
write any state they are given. Without the load option ``INTERNAL-COMMANDS yes``
they run only from the replication stream and AOF loading:

- a client's call -- direct, inside MULTI/EXEC, from a Lua script -- gets an error
  naming the command and the option, and changes nothing;
- a replica without the option still applies what its primary replicates (the
  module's own replication, and the MULTI/EXEC Redis wraps it in);
- a server without the option still replays them from its AOF (incremental file
  and a rewritten base without RDB preamble) on restart;
- unknown load options, or a bad value, make the module refuse to load.

Every server here is started WITHOUT the option (``module_args=()``); the shared
fixtures load the module with it (conftest.py). Exact error replies are read as
raw RESP (servers.RawConnection). Every state made here lasts an hour or more, so
DEBUG DIGEST cannot change by an expiry during a comparison.
"""

import pytest
import redis

from mcap import (ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, CAPTCHA_SET, CHALLENGE_SET, VISIT_AT,
                  cfg, chal, chkey, ckey, digest_value, now_ms)
from servers import RawConnection, ServerStartError, raw_command, wait_replicas_synced

HOUR_MS = 3_600_000
NO_OPTION = ()


def refusal(name):
    return (b"-ERR %s is internal (replication and AOF only); load the module with "
            b"INTERNAL-COMMANDS yes to call it\r\n" % name.encode())


def db_digest(c):
    return c.execute_command("DEBUG", "DIGEST")


def make_state(c):
    """Public commands whose replication / AOF use every internal command:
    LOCK.ACQUIRE -> LOCK.STATE, RL.GCRA -> RL.GCRA_SET, RL.WINDOW -> RL.WINDOW_HIT,
    RL.REFUND on a window -> RL.WINDOW_SET, ADD_CAPTCHA -> CAPTCHA_SET,
    ADD_VISITOR -> VISIT_AT, ADD_CHALLENGE -> CHALLENGE_SET."""
    assert c.execute_command("LOCK.ACQUIRE", "lk", "owner", HOUR_MS)[0] == 1
    assert c.execute_command("RL.GCRA", "gc", 5, HOUR_MS)[0] == 1
    assert c.execute_command("RL.WINDOW", "wn", 10, HOUR_MS, "COST", 3)[0] == 1
    assert c.execute_command("RL.WINDOW", "wr", 10, HOUR_MS, "COST", 3)[0] == 1
    assert c.execute_command("RL.REFUND", "wr", 1) == 1
    assert c.execute_command(ADD_CAPTCHA, "site", cfg([(1, 5), (100, 50)], duration=3600)) == b"OK"
    c.execute_command(ADD_VISITOR, "site")
    c.execute_command(ADD_VISITOR, "site")
    assert c.execute_command(ADD_CHALLENGE, "site", chal(5, 3600, "ch")) == b"OK"
    return ["lk", "gc", "wn", "wr", ckey("site"), chkey("site", "ch")]


def forged_calls(now):
    """One valid call of each internal command (accepted with the option), each
    aimed at a key that make_state wrote, or at a new key."""
    return [
        ("LOCK.STATE", "lk", 1, 10**15, 1, "thief", now + HOUR_MS, 1, 10**15),
        ("RL.GCRA_SET", "gc", (now - 1000) * 1000, 1000, 5),
        ("RL.WINDOW_HIT", "wn", HOUR_MS, 10, now, 5, 0),
        ("RL.WINDOW_SET", "wr", HOUR_MS, 10, now, 0),
        (VISIT_AT, ckey("site"), now),
        (CAPTCHA_SET, ckey("other"), 60, 1, 1, 3, now, 0),
        (CHALLENGE_SET, chkey("site", "forged"), 1, 60),
    ]


def assert_unchanged(c, before, keys):
    assert db_digest(c) == before, "a refused internal command changed the data set"
    assert c.exists(ckey("other"), chkey("site", "forged")) == 0
    assert c.execute_command("LOCK.INSPECT", "lk")[3][0][0] == b"owner"
    assert sorted(c.keys()) == sorted(k.encode() if isinstance(k, str) else k for k in keys)


# ------------------------------------------------------------ refused calls
def test_direct_calls_refused_without_option(servers):
    s = servers.new(module_args=NO_OPTION)
    c = s.client()
    keys = make_state(c)
    before = db_digest(c)
    for call in forged_calls(now_ms()):
        assert raw_command(s, *call) == refusal(call[0]), call
        # the name in the error is the command's, whatever case the client used
        assert raw_command(s, call[0].lower(), *call[1:]) == refusal(call[0]), call
    # refused before the arguments are read: a malformed call gets the same answer
    assert raw_command(s, "LOCK.STATE", "lk", "x", "y", "z") == refusal("LOCK.STATE")
    assert_unchanged(c, before, keys)
    # the public commands still work, and the lock is still the owner's
    assert c.execute_command("LOCK.ACQUIRE", "lk", "thief", 1000)[0] == 0
    assert c.execute_command("LOCK.RELEASE", "lk", "owner") == 0


def test_multi_exec_and_scripts_refused_without_option(servers):
    s = servers.new(module_args=NO_OPTION)
    c = s.client()
    keys = make_state(c)
    before = db_digest(c)
    calls = forged_calls(now_ms())
    with RawConnection(s.host, s.port) as conn:
        assert conn.command("MULTI") == b"+OK\r\n"
        for call in calls:
            assert conn.command(*call) == b"+QUEUED\r\n"
        reply = conn.command("EXEC")
    assert reply == b"*%d\r\n" % len(calls) + b"".join(refusal(call[0]) for call in calls)
    for call in calls:
        script = "return redis.call(%s)" % ", ".join("ARGV[%d]" % (i + 1) for i in range(len(call)))
        with pytest.raises(redis.ResponseError) as ei:
            c.execute_command("EVAL", script, 0, *call)
        assert "%s is internal" % call[0] in str(ei.value), (call, ei.value)
        pscript = "return redis.pcall(%s)" % ", ".join("ARGV[%d]" % (i + 1) for i in range(len(call)))
        assert raw_command(s, "EVAL", pscript, 0, *call) == refusal(call[0]), call
    # and from a function
    c.execute_command("FUNCTION", "LOAD", "#!lua name=forge\n"
                      "redis.register_function('forge', function(keys, args) "
                      "return redis.pcall(unpack(args)) end)")
    for call in calls:
        assert raw_command(s, "FCALL", "forge", 0, *call) == refusal(call[0]), call
    assert_unchanged(c, before, keys)


# ------------------------------------------ replication and AOF still apply them
def test_replica_without_option_applies_replicated_state(servers):
    primary = servers.new(name="primary", module_args=NO_OPTION)
    replica = servers.replica_of(primary, name="replica", module_args=NO_OPTION)
    pc, rc = primary.client(), replica.client()
    keys = make_state(pc)
    # a client's MULTI/EXEC on the primary: replicated as MULTI/EXEC of internal commands
    p = pc.pipeline(transaction=True)
    p.execute_command("LOCK.ACQUIRE", "lk2", "o", HOUR_MS)
    p.execute_command("RL.GCRA", "gc2", 5, HOUR_MS)
    p.execute_command(ADD_VISITOR, "site")
    p.execute_command("RL.WINDOW", "wn", 10, HOUR_MS)
    res = p.execute()
    assert res[0][0] == 1 and res[1][0] == 1 and res[3][0] == 1, res
    # and a script on the primary (its effects are replicated the same way)
    pc.execute_command("EVAL", "return redis.call('LOCK.ACQUIRE', KEYS[1], 'o', ARGV[1])", 1, "lk3",
                       HOUR_MS)
    keys += ["lk2", "gc2", "lk3"]
    wait_replicas_synced(primary, [replica])
    assert sorted(rc.keys()) == sorted(pc.keys())
    for k in keys:
        assert rc.exists(k), k
        assert digest_value(rc, k) == digest_value(pc, k), k
    assert db_digest(rc) == db_digest(pc)
    # the replica refuses its own clients all the same (READONLY aside: a write
    # command on a read-only replica is refused before the module sees it)
    assert raw_command(replica, "LOCK.STATE", "lk", 1, 5, 0).startswith(b"-")
    assert rc.execute_command("LOCK.INSPECT", "lk")[3][0][0] == b"owner"


@pytest.mark.parametrize("preamble", [False, True], ids=["commands-base", "rdb-preamble"])
def test_aof_restart_without_option_replays_internal_commands(aof_server, preamble):
    s = aof_server(preamble=preamble, module_args=NO_OPTION)
    c = s.client()
    keys = make_state(c)
    # the base file gets the state (LOCK.STATE, *_SET... without preamble; RDB
    # with); what follows goes to the incremental file as internal commands
    assert c.execute_command("BGREWRITEAOF")
    s.wait_aof_rewrite_done()
    assert c.execute_command("LOCK.ACQUIRE", "lk2", "o", HOUR_MS)[0] == 1
    assert c.execute_command("RL.WINDOW", "wn", 10, HOUR_MS)[0] == 1
    assert c.execute_command("RL.REFUND", "wr", 1) == 1
    c.execute_command(ADD_VISITOR, "site")
    # a MULTI/EXEC: the AOF holds it as MULTI, internal commands, EXEC
    p = c.pipeline(transaction=True)
    p.execute_command("LOCK.ACQUIRE", "lk3", "o", HOUR_MS)
    p.execute_command(ADD_VISITOR, "site")
    p.execute_command("RL.GCRA", "gc", 5, HOUR_MS)
    assert p.execute()[0][0] == 1
    keys += ["lk2", "lk3"]
    want = {k: digest_value(c, k) for k in keys}
    want_all = db_digest(c)
    s.restart()
    c = s.client()
    got = {k: digest_value(c, k) for k in keys}
    assert got == want
    assert db_digest(c) == want_all


# ------------------------------------------------------------- load options
def test_load_options(servers):
    for args, needle in [(("BOGUS", "yes"), "unknown load option 'BOGUS'"),
                         (("INTERNAL-COMMANDS", "maybe"), "INTERNAL-COMMANDS needs the value yes or no"),
                         (("INTERNAL-COMMANDS",), "INTERNAL-COMMANDS needs the value yes or no")]:
        s = servers.new(start=False, module_args=args)
        with pytest.raises(ServerStartError):
            s.start()
        assert needle in open(s.logfile, errors="replace").read(), args
    # explicit "no" is the default; "yes" (any case) opens them to clients
    s = servers.new(module_args=("internal-commands", "no"))
    assert raw_command(s, "LOCK.STATE", "k", 1, 5, 0) == refusal("LOCK.STATE")
    s = servers.new(module_args=("INTERNAL-COMMANDS", "YES"))
    assert raw_command(s, "LOCK.STATE", "k", 1, 5, 0) == b"+OK\r\n"
    assert s.client().execute_command("LOCK.INSPECT", "k")[1] == 5

# SPDX-License-Identifier: BSD-3-Clause
"""Stored limit policies (RL.POLICY_SET / _GET / _DEL / _LIST, and POLICY name
in RL.GCRA, RL.GCRA_PEEK, RL.WINDOW, RL.WINDOW_PEEK).

- the commands: definitions round-trip, names are binary-safe (1..256 bytes),
  bad input is refused with a clear error and changes nothing;
- `POLICY name` is the explicit call with the policy's numbers: same replies,
  same stored state (DEBUG DIGEST-VALUE) and same absolute expiry (PEXPIRETIME,
  with AT in the future, so nothing depends on when each call ran);
- a policy of the other kind, an unknown one, or BURST beside POLICY: an error,
  nothing written;
- node-wide, not keys: FLUSHALL keeps them; DEBUG RELOAD, a restart from the RDB,
  a restart from the AOF (RDB preamble plus commands) and a replica's full sync
  end with exactly the saved / primary's set (a load replaces, never merges);
  SET and DEL reach a replica by the stream; a read-only replica refuses SET;
- RL.GCRA ... POLICY replicates its resulting state, never the policy: a replica
  whose own policy of that name differs still ends with the primary's state;
- an AOF without the RDB preamble cannot keep them: SET is refused under
  appendonly yes + aof-use-rdb-preamble no, and a rewrite started that way logs
  a warning;
- the RDB aux loader refuses a corrupt table (bad kind, out-of-range field,
  missing policy) and the server does not start on it.

Every limiter here uses periods of minutes or AT an hour ahead, so nothing
decays while states are compared.
"""

import os
import time

import pytest
import redis

from servers import ServerStartError, wait_replicas_synced, wait_until

MIN = 60_000
HOUR = 3_600_000


def now_ms():
    return int(time.time() * 1000)


def clear_policies(r):
    for name in r.execute_command("RL.POLICY_LIST"):
        assert r.execute_command("RL.POLICY_DEL", name) == 1
    assert r.execute_command("RL.POLICY_LIST") == []


def policies(r):
    """{name: definition} of every policy on the node."""
    return {n: r.execute_command("RL.POLICY_GET", n) for n in r.execute_command("RL.POLICY_LIST")}


def err(r, *args):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


# ------------------------------------------------------------------ commands
def test_set_get_list_del(r):
    clear_policies(r)
    assert r.execute_command("RL.POLICY_SET", "api", "GCRA", 100, MIN, "BURST", 20) == b"OK"
    assert r.execute_command("RL.POLICY_SET", "login", "window", 5, MIN) == b"OK"
    assert r.execute_command("RL.POLICY_SET", "plain", "gcra", 3, 1000) == b"OK"
    binary = b"\x00\xffpol\r\n"
    assert r.execute_command("RL.POLICY_SET", binary, "WINDOW", 1, 1) == b"OK"
    longest = b"n" * 256
    assert r.execute_command("RL.POLICY_SET", longest, "GCRA", 1, 1) == b"OK"
    assert r.execute_command("RL.POLICY_GET", "api") == [b"GCRA", 100, MIN, b"BURST", 20]
    assert r.execute_command("RL.POLICY_GET", "login") == [b"WINDOW", 5, MIN]
    assert r.execute_command("RL.POLICY_GET", "plain") == [b"GCRA", 3, 1000]
    assert r.execute_command("RL.POLICY_GET", binary) == [b"WINDOW", 1, 1]
    assert r.execute_command("RL.POLICY_GET", "nope") is None
    assert r.execute_command("RL.POLICY_LIST") == sorted([b"api", b"login", b"plain", binary, longest])
    assert r.info("mcaptcha_cache_ratelimit")["mcaptcha_cache_rl_policies"] == 5
    # GET's reply is SET's arguments: a definition copies by round trip
    assert r.execute_command("RL.POLICY_SET", "copy", *r.execute_command("RL.POLICY_GET", "api")) == b"OK"
    assert r.execute_command("RL.POLICY_GET", "copy") == [b"GCRA", 100, MIN, b"BURST", 20]
    # replacing: the new definition, whole (BURST not kept)
    assert r.execute_command("RL.POLICY_SET", "copy", "GCRA", 7, 700) == b"OK"
    assert r.execute_command("RL.POLICY_GET", "copy") == [b"GCRA", 7, 700]
    assert r.execute_command("RL.POLICY_SET", "copy", "WINDOW", 9, 900) == b"OK"
    assert r.execute_command("RL.POLICY_GET", "copy") == [b"WINDOW", 9, 900]
    assert r.execute_command("RL.POLICY_DEL", "copy") == 1
    assert r.execute_command("RL.POLICY_DEL", "copy") == 0
    assert r.execute_command("RL.POLICY_GET", "copy") is None
    assert r.execute_command("RL.POLICY_DEL", binary) == 1
    assert binary not in r.execute_command("RL.POLICY_LIST")


BAD_SETS = [
    (("", "GCRA", 1, 1), "policy name must be 1 to 256 bytes"),
    (("n" * 257, "GCRA", 1, 1), "policy name must be 1 to 256 bytes"),
    (("p", "TOKEN", 1, 1), "policy type must be GCRA or WINDOW"),
    (("p", "GCRA", 0, 1000), "rate must be an integer from 1 to 1099511627776"),
    (("p", "GCRA", 2**40 + 1, 1000), "rate must be an integer"),
    (("p", "GCRA", 1, 0), "period (milliseconds) must be an integer"),
    (("p", "GCRA", 1, "1.5"), "period (milliseconds) must be an integer"),
    (("p", "GCRA", 1, 1000, "BURST", 0), "BURST must be an integer from 1"),
    (("p", "GCRA", 1, 1000, "BURST"), "BURST needs a value (capacity)"),
    (("p", "GCRA", 1, 1000, "COST", 1), "unknown option 'COST' for RL.POLICY_SET; expected BURST capacity"),
    (("p", "GCRA", 1, 2**50 // 1000, "BURST", 2**40 - 1), "burst * period / rate is too large"),
    (("p", "WINDOW", 0, 1000), "limit must be an integer from 1 to 4294967295"),
    (("p", "WINDOW", 2**32, 1000), "limit must be an integer"),
    (("p", "WINDOW", 1, 0), "window (milliseconds) must be an integer"),
    (("p", "WINDOW", 1, 2**42 + 1), "window (milliseconds) must be an integer"),
    (("p", "WINDOW", 5, 1000, "BURST", 3), "unknown option 'BURST' for RL.POLICY_SET"),
    (("p", "GCRA", 1), "wrong number of arguments"),
]


@pytest.mark.parametrize("args,needle", BAD_SETS, ids=[str(i) for i in range(len(BAD_SETS))])
def test_bad_set_is_refused_and_changes_nothing(r, args, needle):
    clear_policies(r)
    assert r.execute_command("RL.POLICY_SET", "p", "GCRA", 4, 4000) == b"OK"
    assert needle in err(r, "RL.POLICY_SET", *args)
    assert policies(r) == {b"p": [b"GCRA", 4, 4000]}


def test_other_commands_bad_input(r):
    assert "wrong number of arguments" in err(r, "RL.POLICY_GET")
    assert "wrong number of arguments" in err(r, "RL.POLICY_DEL", "a", "b")
    assert "wrong number of arguments" in err(r, "RL.POLICY_LIST", "x")


# ------------------------------------------------- POLICY name in the limiters
def _same_calls(r, explicit, policy, calls, kind):
    """Run each call twice, explicitly on key e and by POLICY on key p, with AT
    an hour ahead (no clock in the result); replies, state and expiry match."""
    at = now_ms() + HOUR
    for i, (cost, step) in enumerate(calls):
        at += step
        a = r.execute_command(kind, "e", *explicit, "COST", cost, "AT", at)
        b = r.execute_command(kind, "p", "POLICY", policy, "COST", cost, "AT", at)
        assert a == b, (i, a, b)
        pa = r.execute_command(kind + "_PEEK", "e", *explicit[:2], *explicit[2:], "COST", 1)
        pb = r.execute_command(kind + "_PEEK", "p", "POLICY", policy, "COST", 1)
        assert pa[:2] == pb[:2], (i, pa, pb)
    assert r.exists("e") == 1
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "e") == r.execute_command("DEBUG", "DIGEST-VALUE", "p")
    assert r.execute_command("PEXPIRETIME", "e") == r.execute_command("PEXPIRETIME", "p")


CALLS = [(1, 0), (3, 0), (2, 10), (5, 0), (1, 400), (0, 0), (4, 1500), (9, 0), (1, 30_000)]


@pytest.mark.parametrize("explicit", [(3, 1000, "BURST", 5), (3, 1000), (10, 60_000, "BURST", 1)])
def test_gcra_policy_is_the_explicit_call(r, explicit):
    r.execute_command("RL.POLICY_SET", "g", "GCRA", *explicit)
    _same_calls(r, explicit, "g", CALLS, "RL.GCRA")


@pytest.mark.parametrize("explicit", [(5, 1000), (1, 60_000), (100, 2000)])
def test_window_policy_is_the_explicit_call(r, explicit):
    r.execute_command("RL.POLICY_SET", "w", "WINDOW", *explicit)
    _same_calls(r, explicit, "w", CALLS, "RL.WINDOW")


def test_changing_a_policy_changes_the_next_call(r):
    r.execute_command("RL.POLICY_SET", "chg", "GCRA", 1, MIN)
    assert r.execute_command("RL.GCRA", "k", "POLICY", "chg")[0] == 1
    assert r.execute_command("RL.GCRA", "k", "POLICY", "chg")[0] == 0
    r.execute_command("RL.POLICY_SET", "chg", "GCRA", 1, MIN, "BURST", 10)
    got = r.execute_command("RL.GCRA", "k", "POLICY", "chg")
    assert got[0] == 1 and got[1] >= 7  # capacity 10 now (the key's TAT carries over)
    r.execute_command("RL.POLICY_SET", "wchg", "WINDOW", 1, MIN)
    assert r.execute_command("RL.WINDOW", "w", "POLICY", "wchg")[0] == 1
    assert r.execute_command("RL.WINDOW", "w", "POLICY", "wchg")[0] == 0
    r.execute_command("RL.POLICY_SET", "wchg", "WINDOW", 3, MIN)
    assert r.execute_command("RL.WINDOW", "w", "POLICY", "wchg")[:2] == [1, 1]


def test_wrong_kind_unknown_and_burst_write_nothing(r):
    r.execute_command("RL.POLICY_SET", "gp", "GCRA", 5, MIN)
    r.execute_command("RL.POLICY_SET", "wp", "WINDOW", 5, MIN)
    cases = [
        (("RL.WINDOW", "k", "POLICY", "gp"), "policy 'gp' is a GCRA policy; RL.WINDOW takes a WINDOW policy"),
        (("RL.WINDOW_PEEK", "k", "POLICY", "gp"), "is a GCRA policy; RL.WINDOW_PEEK takes a WINDOW policy"),
        (("RL.GCRA", "k", "POLICY", "wp"), "policy 'wp' is a WINDOW policy; RL.GCRA takes a GCRA policy"),
        (("RL.GCRA_PEEK", "k", "POLICY", "wp"), "is a WINDOW policy; RL.GCRA_PEEK takes a GCRA policy"),
        (("RL.GCRA", "k", "POLICY", "missing"), "no such policy 'missing'"),
        (("RL.WINDOW", "k", "POLICY", b"\x01bad'"), "no such policy '?bad?'"),
        (("RL.GCRA", "k", "POLICY", "gp", "BURST", 3), "unknown option 'BURST' for RL.GCRA"),
        (("RL.GCRA_PEEK", "k", "POLICY", "gp", "BURST", 3), "unknown option 'BURST' for RL.GCRA_PEEK"),
        (("RL.WINDOW", "k", "POLICY", "wp", "COST"), "COST needs a value"),
        (("RL.GCRA", "k", "POLICY"), "wrong number of arguments"),
    ]
    for args, needle in cases:
        assert needle in err(r, *args), args
    assert r.exists("k") == 0
    # a deleted policy: refused from then on; the key keeps its state
    assert r.execute_command("RL.GCRA", "k", "POLICY", "gp")[0] == 1
    d = r.execute_command("DEBUG", "DIGEST-VALUE", "k")
    assert r.execute_command("RL.POLICY_DEL", "gp") == 1
    assert "no such policy 'gp'" in err(r, "RL.GCRA", "k", "POLICY", "gp")
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "k") == d


def test_flushall_keeps_policies(r):
    clear_policies(r)
    r.execute_command("RL.POLICY_SET", "keep", "GCRA", 5, MIN)
    r.execute_command("RL.GCRA", "k", "POLICY", "keep")
    r.flushall()
    assert r.dbsize() == 0
    assert policies(r) == {b"keep": [b"GCRA", 5, MIN]}


# --------------------------------------------------------------- persistence
def test_debug_reload_replaces_the_table(r):
    clear_policies(r)
    r.execute_command("RL.POLICY_SET", "a", "GCRA", 5, MIN, "BURST", 9)
    r.execute_command("RL.POLICY_SET", b"b\x00", "WINDOW", 7, MIN)
    r.execute_command("DEBUG", "RELOAD")
    saved = {b"a": [b"GCRA", 5, MIN, b"BURST", 9], b"b\x00": [b"WINDOW", 7, MIN]}
    assert policies(r) == saved
    # the file has a and b; memory gets c and loses a: loading it again
    # without saving gives exactly the file's set (c gone, a back)
    r.execute_command("RL.POLICY_SET", "c", "WINDOW", 1, MIN)
    r.execute_command("RL.POLICY_DEL", "a")
    r.execute_command("DEBUG", "RELOAD", "NOSAVE")
    assert policies(r) == saved
    clear_policies(r)
    r.execute_command("DEBUG", "RELOAD")
    assert policies(r) == {}


def test_restart_from_rdb(servers):
    s = servers.new()
    c = s.client()
    c.execute_command("RL.POLICY_SET", "api", "GCRA", 100, MIN, "BURST", 20)
    c.execute_command("RL.POLICY_SET", b"\xff" * 256, "WINDOW", 5, 1000)
    want = policies(c)
    s.save_now()
    s.restart()
    c = s.client()
    assert policies(c) == want
    assert c.execute_command("RL.GCRA", "k", "POLICY", "api")[:2] == [1, 19]


@pytest.mark.parametrize("kill", [False, True])
def test_restart_from_aof_with_preamble(aof_server, kill):
    s = aof_server(preamble=True)
    c = s.client()
    c.execute_command("RL.POLICY_SET", "old", "GCRA", 1, MIN)
    c.execute_command("RL.POLICY_SET", "base", "GCRA", 3, MIN, "BURST", 4)
    c.execute_command("BGREWRITEAOF")
    s.wait_aof_rewrite_done()  # the base (RDB preamble) holds old and base
    c.execute_command("RL.POLICY_DEL", "old")  # then commands in the incremental file
    c.execute_command("RL.POLICY_SET", "incr", "WINDOW", 2, MIN)
    c.execute_command("RL.POLICY_SET", "base", "GCRA", 3, MIN, "BURST", 5)
    want = {b"base": [b"GCRA", 3, MIN, b"BURST", 5], b"incr": [b"WINDOW", 2, MIN]}
    assert policies(c) == want
    s.restart(kill=kill)
    assert policies(s.client()) == want


def test_aof_without_preamble_refuses_set(aof_server):
    s = aof_server(preamble=False)
    c = s.client()
    msg = err(c, "RL.POLICY_SET", "p", "GCRA", 1, 1000)
    assert "aof-use-rdb-preamble no" in msg and "set aof-use-rdb-preamble yes first" in msg
    assert policies(c) == {}
    c.config_set("aof-use-rdb-preamble", "yes")
    assert c.execute_command("RL.POLICY_SET", "p", "GCRA", 1, 1000) == b"OK"


def test_rewrite_without_preamble_logs_a_warning(aof_server):
    s = aof_server(preamble=True)
    c = s.client()
    c.execute_command("RL.POLICY_SET", "p1", "GCRA", 1, 1000)
    c.execute_command("RL.POLICY_SET", "p2", "GCRA", 1, 1000)
    c.config_set("aof-use-rdb-preamble", "no")
    c.execute_command("BGREWRITEAOF")
    s.wait_aof_rewrite_done()
    wait_until(lambda: "drops the 2 stored rate-limit policies" in open(s.logfile, errors="replace").read(),
               "the warning of a rewrite without preamble")
    # the documented limit: a restart from that AOF has none
    s.restart()
    assert policies(s.client()) == {}


def test_unreadable_preamble_setting_is_logged(servers):
    # With CONFIG renamed (a common hardening), the module cannot read
    # aof-use-rdb-preamble: SET is kept working (the default is yes) but each SET, and a
    # rewrite while policies exist, logs that the setting could not be checked.
    s = servers.new(appendonly=True, aof_preamble=False, config={"rename-command": ["CONFIG", "CONFIG-7f3a"]})
    c = s.client()
    assert c.execute_command("RL.POLICY_SET", "p", "GCRA", 1, 1000) == b"OK"
    wait_until(lambda: "RL.POLICY_SET could not read aof-use-rdb-preamble" in open(s.logfile, errors="replace").read(),
               "the warning of an unreadable preamble setting")
    c.execute_command("BGREWRITEAOF")
    wait_until(lambda: "if it is no, this AOF rewrite drops the 1 stored" in open(s.logfile, errors="replace").read(),
               "the rewrite's warning")


# --------------------------------------------------------------- replication
def test_replica_full_sync_and_stream(servers):
    primary = servers.new(name="primary")
    p = primary.client()
    p.execute_command("RL.POLICY_SET", "a", "GCRA", 5, MIN)
    p.execute_command("RL.POLICY_SET", "b", "WINDOW", 5, MIN)
    replica = servers.new(name="replica")
    rc = replica.client()
    rc.execute_command("RL.POLICY_SET", "stale", "GCRA", 1, 1)  # its own, before the sync
    rc.execute_command("RL.POLICY_SET", "a", "GCRA", 99, 99)
    rc.execute_command("REPLICAOF", primary.host, primary.port)
    wait_replicas_synced(primary, [replica])
    assert policies(rc) == policies(p) == {b"a": [b"GCRA", 5, MIN], b"b": [b"WINDOW", 5, MIN]}
    # the stream: SET, replace, DEL
    p.execute_command("RL.POLICY_SET", "c", "GCRA", 2, MIN, "BURST", 3)
    p.execute_command("RL.POLICY_SET", "b", "WINDOW", 6, MIN)
    assert p.execute_command("RL.POLICY_DEL", "a") == 1
    assert p.execute_command("RL.POLICY_DEL", "a") == 0
    wait_replicas_synced(primary, [replica])
    assert policies(rc) == policies(p) == {b"b": [b"WINDOW", 6, MIN], b"c": [b"GCRA", 2, MIN, b"BURST", 3]}
    # a read-only replica refuses writes, reads and peeks by policy work
    assert "read only replica" in err(rc, "RL.POLICY_SET", "x", "GCRA", 1, 1)
    assert "read only replica" in err(rc, "RL.POLICY_DEL", "b")
    assert p.execute_command("RL.WINDOW", "w", "POLICY", "b", "COST", 2)[:2] == [1, 4]
    wait_replicas_synced(primary, [replica])
    assert rc.execute_command("RL.WINDOW_PEEK", "w", "POLICY", "b")[:2] == [1, 3]


def test_replicated_state_does_not_depend_on_the_replica_policy(servers):
    primary = servers.new(name="primary", appendonly=True, aof_preamble=True)
    primary.wait_aof_rewrite_done()
    p = primary.client()
    p.execute_command("RL.POLICY_SET", "g", "GCRA", 10, MIN, "BURST", 4)
    p.execute_command("RL.POLICY_SET", "w", "WINDOW", 10, MIN)
    replica = servers.replica_of(primary, name="replica", config={"replica-read-only": "no"})
    rc = replica.client()
    # the replica's own, different definitions (not replicated back)
    rc.execute_command("RL.POLICY_SET", "g", "GCRA", 1, 1000)
    rc.execute_command("RL.POLICY_SET", "w", "WINDOW", 1, 1000)
    for cost in (1, 2, 1):
        assert p.execute_command("RL.GCRA", "kg", "POLICY", "g", "COST", cost)[0] == 1
        assert p.execute_command("RL.WINDOW", "kw", "POLICY", "w", "COST", cost)[0] == 1
    wait_replicas_synced(primary, [replica])
    for k in ("kg", "kw"):
        assert rc.execute_command("DEBUG", "DIGEST-VALUE", k) == p.execute_command("DEBUG", "DIGEST-VALUE", k)
        assert rc.execute_command("PEXPIRETIME", k) == p.execute_command("PEXPIRETIME", k)
    # the AOF carries the definitions and the resulting states, not the POLICY calls
    aof = b"".join(open(os.path.join(primary.aof_dir(), f), "rb").read()
                   for f in os.listdir(primary.aof_dir()) if ".incr." in f)
    assert b"RL.POLICY_SET" in aof and b"RL.GCRA_SET" in aof and b"RL.WINDOW_HIT" in aof
    assert b"$6\r\nPOLICY\r\n" not in aof


# ------------------------------------------------------ corrupt RDB aux data
@pytest.mark.parametrize("patch,needle", [
    ((b"pppppppp\x02\x02\x02\x05", b"pppppppp\x02\x03\x02\x05"), "field policy kind = 3, not in [1, 2]"),
    ((b"pppppppp\x02\x02\x02\x05", b"pppppppp\x02\x02\x02\x00"), "policy 'pppppppp' (WINDOW 0 60000 burst 0) is out of range"),
    ((b"\x02\x01\x05\x08pppppppp", b"\x02\x02\x05\x08pppppppp"), "truncated at field policy name"),
    ((b"\x05\x08pppppppp", b"\x05\x00pppppppp"), "policy name of 0 bytes"),
], ids=["kind", "range", "count", "name"])
def test_corrupt_policy_table_fails_the_load(servers, patch, needle):
    s = servers.new(config={"rdbchecksum": "no"})  # checksum 0: the patched file is read, not refused
    c = s.client()
    c.execute_command("RL.POLICY_SET", "pppppppp", "WINDOW", 5, MIN)
    c.set("plain", "x")
    s.save_now()
    s.stop()
    path = os.path.join(s.dir, "dump.rdb")
    data = open(path, "rb").read()
    assert data.count(patch[0]) == 1
    open(path, "wb").write(data.replace(patch[0], patch[1]))
    with pytest.raises(ServerStartError):
        s.start()
    log = open(s.logfile, errors="replace").read()
    assert needle in log, log[-3000:]
    assert "corrupt or truncated policy table (mcap-plcy)" in log
    # the unpatched file loads
    open(path, "wb").write(data)
    s.start()
    assert policies(s.client()) == {b"pppppppp": [b"WINDOW", 5, MIN]}

# SPDX-License-Identifier: BSD-3-Clause
"""SESSION binds a holder to the caller's connection; inside a script
(EVAL/EVALSHA/FCALL) the caller is the server's script client, which never
disconnects, so a session there would never end. It is refused with a clear
error and nothing is written; from MULTI/EXEC the real connection is used and
the hold ends when that connection closes."""

import pytest
import redis

from mcap import wait_for

ACQ = "return redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], 60000, 'SESSION')"
LIB = ("#!lua name=sesslib\n"
       "redis.register_function('acq', function(keys, args) "
       "return redis.call('LOCK.ACQUIRE', keys[1], args[1], 60000, 'SESSION') end)")


def _refused(call):
    with pytest.raises(redis.ResponseError) as e:
        call()
    assert "SESSION is not allowed in scripts" in str(e.value)


def test_eval_refuses_session_and_writes_nothing(r):
    _refused(lambda: r.eval(ACQ, 1, "ss:eval", "o"))
    assert r.exists("ss:eval") == 0
    sha = r.script_load(ACQ)
    _refused(lambda: r.evalsha(sha, 1, "ss:eval", "o"))
    assert r.exists("ss:eval") == 0


def test_fcall_refuses_session(r):
    r.function_load(LIB, replace=True)
    _refused(lambda: r.fcall("acq", 1, "ss:fcall", "o"))
    assert r.exists("ss:fcall") == 0


def test_scripts_may_still_acquire_without_session(r):
    got = r.eval("return redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], 60000)", 1, "ss:plain", "o")
    assert got[0] == 1
    assert r.execute_command("LOCK.RELEASE", "ss:plain", "o") == 0


def test_multi_exec_session_ends_with_the_connection(server):
    c = server.client()
    p = c.pipeline(transaction=True)
    p.execute_command("LOCK.ACQUIRE", "ss:multi", "o", 60000, "SESSION")
    assert p.execute()[0][0] == 1
    r = server.client()
    assert r.execute_command("LOCK.ACQUIRE", "ss:multi", "other", 60000)[0] == 0
    c.connection_pool.disconnect()
    wait_for(lambda: r.execute_command("LOCK.ACQUIRE", "ss:multi", "other", 60000)[0] == 1, what="the session to end")

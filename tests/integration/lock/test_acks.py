# SPDX-License-Identifier: BSD-3-Clause
"""LOCK.ACQUIRE ... ACKS numreplicas timeout-ms: a grant answered only once that
many replicas have acknowledged it.

- Granted and acknowledged: the usual reply, and the replica has the holder.
- Not acknowledged in time (too few replicas, or one asleep): NOREPLICAS, and
  the grant is taken back on the primary and the replicas -- nobody holds it,
  the next caller gets it, its fencing token stays used.
- A client that disconnects while waiting never learns of its grant: taken back.
- A reentry that is not acknowledged is counted once less, not released.
- Refused where the client cannot block (MULTI, scripts) and with WAIT; bad values.
- Taking back waits while writes are paused; an acknowledged grant whose lease
  ended meanwhile is not reported as held; a grant whose key moved is not
  reported as released.
"""

import os
import signal
import socket
import threading

import pytest
import redis

from servers import resp_encode, wait_until


def _call_in_thread(c, *args):
    """Send a command that blocks from a thread; returns (thread, out): out["r"] is
    its reply, or its error reply, once the thread ends."""
    out = {}

    def call():
        try:
            out["r"] = c.execute_command(*args)
        except redis.ResponseError as e:
            out["r"] = e

    t = threading.Thread(target=call)
    t.start()
    return t, out


def _holders(c, key):
    v = c.execute_command("LOCK.INSPECT", key)
    return [] if v is None else [(h[0], h[2], h[3]) for h in v[3]]


def test_a_grant_is_answered_once_the_replica_has_it(replica_pair):
    primary, replica = replica_pair
    p, r = primary.client(), replica.client()
    got = p.execute_command("LOCK.ACQUIRE", "k", "a", 60000, "ACKS", 1, 10000)
    assert got[0] == 1 and 50000 < got[2] <= 60000  # the lease left when answered
    # acknowledged: the replica has applied the grant already, no waiting needed
    assert _holders(r, "k") == [(b"a", got[1], 1)]
    # a reentry waits for it as well
    assert p.execute_command("LOCK.ACQUIRE", "k", "a", 60000, "REENTRANT", "ACKS", 1, 10000)[:2] == [1, got[1]]
    assert _holders(r, "k") == [(b"a", got[1], 2)]


def test_too_few_replicas_take_the_grant_back(replica_pair, sync):
    primary, replica = replica_pair
    p, r = primary.client(), replica.client()
    with pytest.raises(redis.ResponseError, match="NOREPLICAS .* of the 2 replicas .* released"):
        p.execute_command("LOCK.ACQUIRE", "k", "a", 60000, "ACKS", 2, 200)
    assert _holders(p, "k") == []
    last = p.execute_command("LOCK.INSPECT", "k")[1]
    sync(primary, replica)
    assert _holders(r, "k") == []
    nxt = p.execute_command("LOCK.ACQUIRE", "k", "b", 60000)
    assert nxt[0] == 1 and nxt[1] > last  # the taken-back grant's token stays used
    # a reentry that is not acknowledged is counted once less, not released
    with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
        p.execute_command("LOCK.ACQUIRE", "k", "b", 60000, "REENTRANT", "ACKS", 2, 100)
    assert _holders(p, "k") == [(b"b", nxt[1], 1)]


def test_a_stopped_replica_does_not_acknowledge(replica_pair):
    primary, replica = replica_pair
    p = primary.client()
    pid = int(replica.client().info("server")["process_id"])
    os.kill(pid, signal.SIGSTOP)   # frozen at once: it acknowledges nothing from now on
    try:
        with pytest.raises(redis.ResponseError, match="NOREPLICAS 0 of the 1"):
            p.execute_command("LOCK.ACQUIRE", "z", "a", 60000, "ACKS", 1, 300)
        assert _holders(p, "z") == []
    finally:
        os.kill(pid, signal.SIGCONT)
    # running again: the next grant is acknowledged
    assert p.execute_command("LOCK.ACQUIRE", "z", "b", 60000, "ACKS", 1, 10000)[0] == 1


def test_a_client_that_leaves_never_holds_its_grant(servers):
    primary = servers.new(name="primary")   # no replica: the wait cannot end acknowledged
    p = primary.client()
    s = socket.create_connection((primary.host, primary.port))
    s.sendall(resp_encode("LOCK.ACQUIRE", "gone", "a", 600000, "ACKS", 1, 600000))
    wait_until(lambda: _holders(p, "gone") != [], "the grant, waiting for acknowledgements")
    s.close()
    wait_until(lambda: _holders(p, "gone") == [], "the grant taken back after the disconnect")
    assert p.execute_command("LOCK.ACQUIRE", "gone", "b", 1000)[0] == 1


def test_client_unblock_ends_the_wait_and_takes_the_grant_back(servers):
    primary = servers.new(name="primary")
    p = primary.client()
    c = primary.client()
    cid = c.client_id()
    t, out = _call_in_thread(c, "LOCK.ACQUIRE", "u", "a", 600000, "ACKS", 1, 600000)
    wait_until(lambda: _holders(p, "u") != [], "the grant, waiting for acknowledgements")
    assert p.execute_command("CLIENT", "UNBLOCK", cid) == 1
    t.join(10)
    assert isinstance(out["r"], redis.ResponseError) and "NOREPLICAS" in str(out["r"])
    wait_until(lambda: _holders(p, "u") == [], "the grant taken back after CLIENT UNBLOCK")


@pytest.mark.parametrize("args,error", [
    (["ACKS"], "ACKS needs a value"),
    (["ACKS", 1], "ACKS needs a value"),
    (["ACKS", 0, 100], "ACKS numreplicas must be an integer from 1 to 1000"),
    (["ACKS", 1, 0], "ACKS timeout must be an integer from 1"),
    (["ACKS", 1, 100, "WAIT", 100], "ACKS does not go with WAIT"),
])
def test_bad_acks(r, args, error):
    with pytest.raises(redis.ResponseError, match=error):
        r.execute_command("LOCK.ACQUIRE", "b", "o", 1000, *args)
    assert not r.exists("b")


def test_acks_cannot_wait_in_multi_or_scripts(r):
    p = r.pipeline(transaction=True)
    p.execute_command("LOCK.ACQUIRE", "m", "o", 1000, "ACKS", 1, 100)
    res = p.execute(raise_on_error=False)
    assert isinstance(res[0], redis.ResponseError) and "ACKS cannot wait here" in str(res[0])
    with pytest.raises(redis.ResponseError, match="ACKS cannot wait here"):
        r.eval("return redis.call('LOCK.ACQUIRE', 'm', 'o', 1000, 'ACKS', 1, 100)", 0)
    assert not r.exists("m")


def test_a_server_that_becomes_a_replica_ends_the_wait_unconfirmed(servers):
    old = servers.new(name="old-primary")   # no replica: nothing will acknowledge
    new = servers.new(name="new-primary")
    c = old.client()
    t, out = _call_in_thread(c, "LOCK.ACQUIRE", "f", "a", 600000, "ACKS", 1, 600000)
    p = old.client()
    wait_until(lambda: _holders(p, "f") != [], "the grant, waiting for acknowledgements")
    p.execute_command("REPLICAOF", new.host, new.port)
    t.join(10)
    assert not t.is_alive()
    # Redis itself unblocks blocked clients when a primary turns replica (UNBLOCKED ...);
    # where it does not, the module ends the wait: never a grant the new primary may lack
    assert isinstance(out["r"], redis.ResponseError), out
    assert "UNBLOCKED" in str(out["r"]) or "became a replica" in str(out["r"]), out
    assert p.ping()


def test_taking_back_waits_while_writes_are_paused(replica_pair):
    primary, replica = replica_pair
    p = primary.client()
    c = primary.client()
    t, out = _call_in_thread(c, "LOCK.ACQUIRE", "pz", "a", 60000, "ACKS", 2, 300)
    wait_until(lambda: _holders(p, "pz") != [], "the grant, waiting for acknowledgements")
    p.execute_command("CLIENT", "PAUSE", 1500, "WRITE")
    t.join(15)
    assert not t.is_alive() and p.ping()
    assert isinstance(out["r"], redis.ResponseError) and "it was released" in str(out["r"]), out
    assert _holders(p, "pz") == []


def test_an_acknowledged_grant_whose_lease_ended_is_not_reported_held(replica_pair):
    primary, _ = replica_pair
    p = primary.client()
    # replicas acknowledge about once a second: a 20 ms lease has ended by then
    with pytest.raises(redis.ResponseError, match="no longer held at this key"):
        p.execute_command("LOCK.ACQUIRE", "short", "a", 20, "ACKS", 1, 10000)


def test_a_grant_whose_key_moved_is_not_reported_released(servers):
    primary = servers.new(name="primary")   # no replica: the wait runs out
    p = primary.client()
    c = primary.client()
    t, out = _call_in_thread(c, "LOCK.ACQUIRE", "mv", "a", 600000, "ACKS", 1, 500)
    wait_until(lambda: _holders(p, "mv") != [], "the grant, waiting for acknowledgements")
    p.execute_command("RENAME", "mv", "mv2")
    t.join(10)
    assert isinstance(out["r"], redis.ResponseError) and "nothing was released" in str(out["r"]), out
    assert [h[0] for h in _holders(p, "mv2")] == [b"a"]

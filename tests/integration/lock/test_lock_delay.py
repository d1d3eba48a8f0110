# SPDX-License-Identifier: BSD-3-Clause
"""Lock-delay (LOCK.ACQUIRE ... LOCKDELAY delay-ms), as Chubby and Consul have it.

When a grant made with LOCKDELAY d stops holding without a release -- its lease
ran out, or its SESSION connection closed -- its permit stays taken by nobody for
d ms more: LOCK.INSPECT shows it with count 0, nobody can take that permit (its
old owner neither; a semaphore's other permits and shared holds beside a reader's
lock-delay stay available), the old owner can no longer release or extend it, and a waiter is
served when the delay ends, by the lease timer, with no other command. A release
frees the permit at once. The delay replicates and persists (LOCK.STATE ... DELAY,
RDB encver 3), and goes with the key when the key is deleted.
"""

import threading

import pytest
import redis

from servers import raw_command, wait_until

NOT_OWNER = "the lock is not held by this owner"


def wire_error(server, *args):
    """The error line of a command that must fail (read off the wire)."""
    rep = raw_command(server, *args)
    assert rep.startswith(b"-"), "%r: expected an error reply, got %r" % (args, rep)
    return rep[1:].rstrip(b"\r\n").decode("utf-8", "replace")


def _holders(r, key):
    v = r.execute_command("LOCK.INSPECT", key)
    return [] if v is None else v[3]


def _delay_slot(r, key):
    """The lock-delay entry [owner, ms left, token, 0] of `key`, or None."""
    slots = [h for h in _holders(r, key) if h[3] == 0]
    return slots[0] if slots else None


def test_a_lease_that_ends_keeps_its_permit_for_the_delay(r, server):
    granted = r.execute_command("LOCK.ACQUIRE", "ld", "a", 100, "LOCKDELAY", 1500)
    assert granted[0] == 1
    slot = wait_until(lambda: _delay_slot(r, "ld"), "the lease ended into a lock-delay")
    owner, left, token, count = slot
    assert (owner, token, count) == (b"a", granted[1], 0)
    assert 0 < left <= 1500
    # nobody takes the permit while the delay runs, its old owner neither
    refused = r.execute_command("LOCK.ACQUIRE", "ld", "b", 1000)
    assert refused[0] == 0 and refused[1] == -1 and 0 < refused[2] <= 1500, refused
    assert r.execute_command("LOCK.ACQUIRE", "ld", "a", 1000, "REENTRANT")[0] == 0
    with pytest.raises(redis.ResponseError, match=NOT_OWNER):
        r.execute_command("LOCK.RELEASE", "ld", "a")
    with pytest.raises(redis.ResponseError, match=NOT_OWNER):
        r.execute_command("LOCK.EXTEND", "ld", "a", 1000)
    assert int(r.info("mcaptcha_cache_locks")["mcaptcha_cache_leases_expired_while_held"]) >= 1

    # a waiter is served when the delay ends, by the timer alone
    out = {}

    def waiter():
        out["reply"] = server.client().execute_command("LOCK.ACQUIRE", "ld", "w", 60000, "WAIT", 10000)
        out["slot_after"] = _delay_slot(r, "ld")

    t = threading.Thread(target=waiter)
    t.start()
    t.join(12)
    assert not t.is_alive()
    assert out["reply"][0] == 1 and out["reply"][1] > granted[1], out
    assert out["slot_after"] is None
    assert [h[0] for h in _holders(r, "ld")] == [b"w"]


def test_a_release_frees_the_permit_at_once(r):
    assert r.execute_command("LOCK.ACQUIRE", "rel", "a", 60000, "LOCKDELAY", 600000)[0] == 1
    assert r.execute_command("LOCK.RELEASE", "rel", "a") == 0
    assert r.execute_command("LOCK.ACQUIRE", "rel", "b", 60000)[0] == 1
    # reentrant: only the last release frees it, and at once
    assert r.execute_command("LOCK.ACQUIRE", "re", "a", 60000, "REENTRANT", "LOCKDELAY", 600000)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "re", "a", 60000, "REENTRANT")[0] == 1
    assert r.execute_command("LOCK.RELEASE", "re", "a") == 1
    assert r.execute_command("LOCK.RELEASE", "re", "a") == 0
    assert r.execute_command("LOCK.INSPECT", "re")[3] == []


def test_a_closed_session_starts_the_delay(r, server):
    c = server.client()
    assert c.execute_command("LOCK.ACQUIRE", "sess", "a", 600000, "SESSION", "LOCKDELAY", 300000)[0] == 1
    c.connection_pool.disconnect()
    owner, left, _, count = wait_until(lambda: _delay_slot(r, "sess"), "the session's end began a lock-delay")
    assert (owner, count) == (b"a", 0)
    assert 250000 < left <= 300000  # from the disconnect, not from the lease end (600 s away)
    assert r.execute_command("LOCK.ACQUIRE", "sess", "b", 1000)[0] == 0
    # a SESSION grant without LOCKDELAY frees its permit at once
    c = server.client()
    assert c.execute_command("LOCK.ACQUIRE", "sess2", "a", 600000, "SESSION")[0] == 1
    c.connection_pool.disconnect()
    wait_until(lambda: _holders(r, "sess2") == [], "the session's permit is free")
    # the delay goes with the key
    r.delete("sess")
    assert r.execute_command("LOCK.ACQUIRE", "sess", "b", 1000)[0] == 1


def test_a_semaphore_keeps_only_the_lapsed_permit(r):
    assert r.execute_command("LOCK.ACQUIRE", "sem", "a", 100, "PERMITS", 2, "LOCKDELAY", 600000)[0] == 1
    wait_until(lambda: _delay_slot(r, "sem"), "the lease ended into a lock-delay")
    assert r.execute_command("LOCK.ACQUIRE", "sem", "b", 60000, "PERMITS", 2)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "sem", "c", 60000, "PERMITS", 2)[0] == 0
    # the lapsed owner may take the free permit again, as a new grant
    assert r.execute_command("LOCK.RELEASE", "sem", "b") == 0
    again = r.execute_command("LOCK.ACQUIRE", "sem", "a", 60000, "PERMITS", 2)
    assert again[0] == 1
    hs = sorted(_holders(r, "sem"), key=lambda h: h[3])
    assert [(h[0], h[3]) for h in hs] == [(b"a", 0), (b"a", 1)]
    assert hs[1][2] == again[1] and hs[0][2] < again[1]
    assert r.execute_command("LOCK.RELEASE", "sem", "a") == 0  # the live hold, not the delay
    assert [h[3] for h in _holders(r, "sem")] == [0]


def _state(r, key):
    v = r.execute_command("LOCK.INSPECT", key)
    return v[0], v[1], sorted((h[0], h[2], h[3]) for h in v[3])


def _ended_leases(r):
    return int(r.info("mcaptcha_cache_locks")["mcaptcha_cache_leases_expired_while_held"])


def _two_locks_with_delays(r):
    """`held`: a lease with a delay still running; `lapsed`: a lock-delay slot, stored
    as such. (LOCK.INSPECT shows a lapsed lease as a lock-delay as soon as its lease
    ends; the stored value changes when the lease timer fires: INFO counts that.)"""
    ended = _ended_leases(r)
    assert r.execute_command("LOCK.ACQUIRE", "held", "a", 600000, "LOCKDELAY", 500000)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "lapsed", "b", 50, "PERMITS", 3, "LOCKDELAY", 600000)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "lapsed", "c", 600000, "PERMITS", 3)[0] == 1
    wait_until(lambda: _ended_leases(r) == ended + 1, "the lease timer turned b's lease into a lock-delay")
    assert _delay_slot(r, "lapsed")[0] == b"b"


def test_lock_delays_replicate(replica_pair, sync):
    primary, replica = replica_pair
    p, rr = primary.client(), replica.client()
    _two_locks_with_delays(p)
    sync(primary, replica)
    for key in ("held", "lapsed"):
        assert _state(rr, key) == _state(p, key)
        assert rr.execute_command("DEBUG", "DIGEST-VALUE", key) == p.execute_command("DEBUG", "DIGEST-VALUE", key)
    assert _delay_slot(rr, "lapsed")[0] == b"b"
    # the held lease's delay reached the replica: after a promotion it still applies
    replica.client().execute_command("REPLICAOF", "NO", "ONE")
    assert rr.execute_command("LOCK.EXTEND", "held", "a", 50) == 50
    wait_until(lambda: _delay_slot(rr, "held"), "the promoted replica began the held lock's delay")
    assert rr.execute_command("LOCK.ACQUIRE", "held", "z", 1000)[0] == 0


@pytest.mark.parametrize("how", ["debug-reload", "aof-preamble", "aof-commands"])
def test_lock_delays_persist(servers, aof_server, how):
    if how == "debug-reload":
        s = servers.new()
    else:
        s = aof_server(preamble=(how == "aof-preamble"))
    r = s.client()
    _two_locks_with_delays(r)
    before = {k: (_state(r, k), r.execute_command("DEBUG", "DIGEST-VALUE", k)) for k in ("held", "lapsed")}
    if how == "debug-reload":
        r.execute_command("DEBUG", "RELOAD")
    else:
        r.execute_command("BGREWRITEAOF")
        s.wait_aof_rewrite_done()
        s.restart()
        r = s.client()
    for k in ("held", "lapsed"):
        assert (_state(r, k), r.execute_command("DEBUG", "DIGEST-VALUE", k)) == before[k], k
    assert r.execute_command("LOCK.ACQUIRE", "lapsed", "d", 1000, "PERMITS", 3)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "lapsed", "e", 1000, "PERMITS", 3)[0] == 0


@pytest.mark.parametrize("args", [
    ("LOCK.ACQUIRE", "k", "o", 1000, "LOCKDELAY"),
    ("LOCK.ACQUIRE", "k", "o", 1000, "LOCKDELAY", -1),
    ("LOCK.ACQUIRE", "k", "o", 1000, "LOCKDELAY", 2 ** 40 + 1),
    ("LOCK.ACQUIRE", "k", "o", 1000, "LOCKDELAY", "1.5"),
    ("RL.CONCURRENCY", "k", "o", 1000, 2, "LOCKDELAY", 10),
    # LOCK.STATE: a delay needs a holder, once, 1 ms or more; a count-0 slot needs one;
    # a concurrency limit has none
    ("LOCK.STATE", "k", 1, 5, 0, "DELAY", 0, 10),
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 1, 5, "DELAY", 1, 10),
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 1, 5, "DELAY", 0, 0),
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 1, 5, "DELAY", 0, 10, "DELAY", 0, 10),
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 1, 5, "DELAY", 0),
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 0, 5),
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 1, 5, "DELAY", 0, 10, "EPHEMERAL"),
], ids=lambda a: " ".join(map(str, a)))
def test_bad_lock_delays_are_refused_and_write_nothing(r, server, args):
    assert r.execute_command("LOCK.ACQUIRE", "other", "x", 600000)[0] == 1
    digest = r.execute_command("DEBUG", "DIGEST")
    e = wire_error(server, *args)
    assert e.startswith("ERR "), e
    assert r.execute_command("DEBUG", "DIGEST") == digest
    assert not r.exists("k")

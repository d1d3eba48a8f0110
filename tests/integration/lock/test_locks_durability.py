# SPDX-License-Identifier: BSD-3-Clause
"""Durability of lock keys: SAVE + restart and DEBUG RELOAD (holders, absolute
leases, tokens), AOF (appendfsync always, no RDB preamble) after kill -9,
BGREWRITEAOF + restart, replicas after a mixed workload, DUMP/RESTORE and COPY,
RESTORE of mutated/truncated DUMP payloads, leases that end on time after a
restart or a promotion, the top of the token range, and LOCK.* in Redis Cluster.

DEBUG DIGEST-VALUE of a lock covers permits, last token and every holder's
owner, absolute lease end, count and token, so equal digests mean equal locks."""

import glob
import os
import random
import struct
import threading
import time

import pytest
import redis

from cluster import key_slot, names_in_slots, redis_cluster  # noqa: F401 (fixture)
from conftest import _register_manager
from mcap import digest_value
from servers import RawConnection, raw_command, wait_replicas_synced
from test_locks import (ACQ, EXT, INS, REL, STATE, acquire, holders, inspect, lock_stats,
                        now_us, wait_for)

from dumps import crc64, mutate_dump, repack  # noqa: F401

INT64_MAX = 2 ** 63 - 1


# ------------------------------------------------------------------ helpers
_session_conns = []


@pytest.fixture(autouse=True)
def _close_session_conns():
    yield
    while _session_conns:
        _session_conns.pop().close()


def populate_locks(c):
    """Locks of every shape with long leases (nothing ends during a test). Returns the keys.
    The SESSION holder's connection is not one the harness closes before a restart (its
    close would release the lock and, with AOF, log that)."""
    now = int(time.time() * 1000)
    assert acquire(c, "m:held", "alice", 60000)[0] == 1
    assert acquire(c, "m:free", "bob", 60000)[0] == 1
    assert c.execute_command(REL, "m:free", "bob") == 0
    assert acquire(c, "s:sem", "a", 30000, "PERMITS", 5)[0] == 1
    for _ in range(3):
        assert acquire(c, "s:sem", "b", 45000, "PERMITS", 5, "REENTRANT")[0] == 1
    assert acquire(c, "s:sem", "c", 50000, "PERMITS", 5)[0] == 1
    kw = c.connection_pool.connection_kwargs
    sc = RawConnection(kw["host"], kw["port"])
    _session_conns.append(sc)
    assert sc.command(ACQ, "m:session", "sess", 40000, "SESSION").startswith(b"*3\r\n:1\r\n")
    assert acquire(c, "m:binary", b"\x00\xff owner\r\n", 55000)[0] == 1
    assert acquire(c, "m:long-owner", "x" * 256, 35000)[0] == 1
    ahead = now_us(c) + 10 ** 12
    assert c.execute_command(STATE, "m:ahead", 2, ahead, 2, "p", now + 40000, 7, ahead - 5,
                             "q", now + 50000, 1, ahead) == b"OK"
    assert c.execute_command(EXT, "m:held", "alice", 58000) == 58000
    return ["m:held", "m:free", "s:sem", "m:session", "m:binary", "m:long-owner", "m:ahead"]


def _rdb_len(b, i):
    """An RDB length at b[i]: (value, next index, special string encoding or None)."""
    t = b[i] >> 6
    if t == 0:
        return b[i] & 0x3F, i + 1, None
    if t == 1:
        return ((b[i] & 0x3F) << 8) | b[i + 1], i + 2, None
    if b[i] == 0x80:
        return struct.unpack(">I", b[i + 1:i + 5])[0], i + 5, None
    if b[i] == 0x81:
        return struct.unpack(">Q", b[i + 1:i + 9])[0], i + 9, None
    return None, i + 1, b[i] & 0x3F


def stored_lease_ends(c, key):
    """The lease ends (Unix ms) of every holder in `key`'s stored value, ended
    leases the timer has not removed yet included (LOCK.INSPECT hides them),
    read from its DUMP payload (lock_type.c: permits, last_token, nholders, then
    per holder owner, expires_ms, count, token, and from encver 3 delay_ms,
    shared and weight; flags; from encver 4 the pool's adjustment). [] for a missing key."""
    payload = c.dump(key)
    if payload is None:
        return []
    b = payload[:-10]
    assert b[0] == 7, "RDB_TYPE_MODULE_2 expected"
    module_id, i, _ = _rdb_len(b, 1)  # module id + encver (its low 10 bits)
    per_holder = 7 if module_id & 1023 >= 3 else 4
    fields = []
    while True:
        op, i, _ = _rdb_len(b, i)
        if op == 0:  # EOF
            break
        if op == 2:  # unsigned
            v, i, _ = _rdb_len(b, i)
        elif op == 5:  # string (an owner): raw or integer-encoded
            n, i, enc = _rdb_len(b, i)
            if enc is None:
                v, i = b[i:i + n], i + n
            else:
                size = {0: 1, 1: 2, 2: 4}[enc]  # LZF (3) is not expected for these owners
                v, i = b[i:i + size], i + size
        else:
            raise ValueError("opcode %d in the DUMP of %r" % (op, key))
        fields.append(v)
    assert i == len(b)
    n = fields[2]
    assert len(fields) == 3 + per_holder * n + 1 + (module_id & 1023 >= 4), fields
    return [fields[3 + per_holder * h + 1] for h in range(n)]


def digests(c, keys):
    return {k: digest_value(c, k) for k in keys}


def shape(v):
    """LOCK.INSPECT without the lease times: (permits, last, waiters, [(owner, token, count)])."""
    if v is None:
        return None
    return (v[0], v[1], v[2], sorted((h[0], h[2], h[3]) for h in v[3]))


def leases(v):
    return {h[0]: h[1] for h in v[3]}


def lock_state_of(c, keys):
    """{key: (digest, shape, {owner: lease_ms_left})} and the time span it was read in."""
    t0 = time.time()
    out = {}
    for k in keys:
        v = inspect(c, k)
        out[k] = (digest_value(c, k), shape(v), leases(v))
    return out, t0, time.time()


def assert_same_locks(before, after, what):
    (b, b0, b1), (a, a0, a1) = before, after
    assert sorted(a) == sorted(b)
    for k in b:
        assert a[k][1] == b[k][1], "%s: %s INSPECT %r, before %r" % (what, k, a[k][1], b[k][1])
        assert a[k][0] == b[k][0], "%s: %s digest changed" % (what, k)
        # absolute leases: what is left shrank by the time that passed
        for owner, left in b[k][2].items():
            la = a[k][2][owner]
            lo = left - (a1 - b0) * 1000 - 2
            hi = left - (a0 - b1) * 1000 + 2
            assert lo <= la <= hi, "%s: %s %r lease left %d, expected %d..%d" % (
                what, k, owner, la, lo, hi)


def check_locks_enforced(c):
    assert acquire(c, "m:held", "mallory", 1000)[0] == 0
    v = inspect(c, "s:sem")
    assert v[0] == 5 and len(v[3]) >= 2
    for i in range(5 - len(v[3])):
        assert acquire(c, "s:sem", "extra%d" % i, 1000, "PERMITS", 5)[0] == 1
    assert acquire(c, "s:sem", "one-too-many", 1000, "PERMITS", 5)[0] == 0
    assert c.execute_command(REL, "s:sem", "b") == 2
    assert c.execute_command(REL, "m:held", "alice") == 0
    assert c.execute_command(REL, "m:ahead", "q") == 0  # a held semaphore keeps its size
    g = acquire(c, "m:ahead", "r", 1000, "PERMITS", 2)
    assert g[0] == 1 and g[1] == inspect(c, "m:ahead")[1]


# ------------------------------------------------------------------ RDB
def test_save_restart_keeps_locks(servers):
    s = servers.new()
    c = s.client()
    keys = populate_locks(c)
    before = lock_state_of(c, keys)
    assert c.save()
    # deliberate: time passes between the save and the load, so a loader that
    # restarted the leases (relative, not absolute) would give them back longer
    # than assert_same_locks allows (its bounds are read from the clock, not assumed)
    time.sleep(0.1)
    s.restart()
    c = s.client()
    assert_same_locks(before, lock_state_of(c, keys), "SAVE + restart")
    # a session holder's connection is not persisted: only its lease holds it now
    assert list(holders(c, "m:session")) == [b"sess"]
    check_locks_enforced(c)


def test_debug_reload_keeps_locks(server, r):
    keys = populate_locks(r)
    before = lock_state_of(r, keys)
    # deliberate: time passes before the save and load of DEBUG RELOAD (which take
    # a few ms), so leases given back relative to the grant or the save would come
    # out longer than assert_same_locks allows (its bounds are read from the clock)
    time.sleep(0.05)
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert_same_locks(before, lock_state_of(r, keys), "DEBUG RELOAD")
    check_locks_enforced(r)


# ------------------------------------------------------------------ AOF
def aof_text(s):
    data = b""
    for p in sorted(glob.glob(os.path.join(s.aof_dir(), "*"))):
        if p.endswith(".manifest"):
            continue
        with open(p, "rb") as f:
            data += f.read()
    return data


def test_aof_kill9_same_state(aof_server):
    s = aof_server(preamble=False)
    c = s.client()
    keys = populate_locks(c)
    # more history: releases, extensions, a lease that ends by itself, a DEL
    assert acquire(c, "m:short", "t", 100)[0] == 1
    assert acquire(c, "m:gone", "t", 60000)[0] == 1
    c.delete("m:gone")
    assert c.execute_command(EXT, "s:sem", "c", 44000) == 44000
    assert c.execute_command(REL, "s:sem", "a") == 0
    e0 = lock_stats(s)["leases_expired_while_held"]
    wait_for(lambda: lock_stats(s)["leases_expired_while_held"] > e0, 2.0, "m:short to end")
    keys.append("m:short")
    before = lock_state_of(c, keys)
    assert c.exists("m:gone") == 0
    text = aof_text(s)
    assert b"LOCK.STATE" in text
    # grants read the clock: they are logged as their resulting state; a release
    # depends on nothing else and is logged as called (its replay reads no clock)
    assert b"LOCK.ACQUIRE" not in text and b"LOCK.EXTEND" not in text, (
        "a clock-reading command was written to the AOF")
    assert b"LOCK.RELEASE" in text
    s.restart(kill=True)
    c = s.client()
    assert_same_locks(before, lock_state_of(c, keys), "AOF kill -9")
    assert c.exists("m:gone") == 0
    assert holders(c, "m:short") == {}
    check_locks_enforced(c)


@pytest.mark.parametrize("preamble", [False, True], ids=["no-preamble", "preamble"])
def test_bgrewriteaof_then_restart_same_digest(aof_server, preamble):
    s = aof_server(preamble=preamble)
    c = s.client()
    keys = populate_locks(c)
    c.bgrewriteaof()
    s.wait_aof_rewrite_done()
    # a change after the rewrite goes to the new incremental file
    assert c.execute_command(EXT, "s:sem", "a", 42000) == 42000
    before = lock_state_of(c, keys)
    whole = c.execute_command("DEBUG", "DIGEST")
    if not preamble:
        assert b"LOCK.STATE" in aof_text(s)
    s.restart()
    c = s.client()
    assert_same_locks(before, lock_state_of(c, keys), "BGREWRITEAOF + restart")
    assert c.execute_command("DEBUG", "DIGEST") == whole


# -------------------------------------------------------------- replication
def test_replica_digests_after_mixed_workload(servers):
    primary = servers.new(name="primary")
    replica = servers.replica_of(primary, name="replica")
    c = primary.client()
    rng = random.Random(4242)
    keys = ["w%d" % i for i in range(16)]
    permits = {k: 1 + (i % 4) for i, k in enumerate(keys)}
    owners = ["o%d" % i for i in range(6)]
    ops = []
    for _ in range(500):
        k = rng.choice(keys)
        o = rng.choice(owners)
        x = rng.random()
        if x < 0.45:
            lease = rng.choice([50, 80, 120, 20000, 30000])
            opts = ["PERMITS", permits[k]]
            if rng.random() < 0.3:
                opts.append("REENTRANT")
            ops.append((ACQ, k, o, lease, *opts))
        elif x < 0.75:
            ops.append((REL, k, o))
        elif x < 0.88:
            ops.append((EXT, k, o, rng.choice([60, 25000])))
        elif x < 0.93:
            ops.append(("DEL", k))
        elif x < 0.97:
            ops.append((INS, k))
        else:
            ops.append((ACQ, k, "", 100))  # an error
    results = []
    t_start = now_us(c) // 1000
    for i in range(0, len(ops), 50):
        p = c.pipeline(transaction=False)
        for op in ops[i:i + 50]:
            p.execute_command(*op)
        results += p.execute(raise_on_error=False)
        time.sleep(0.01)
    t_end = now_us(c) // 1000
    granted = sum(1 for op, res in zip(ops, results)
                  if op[0] == ACQ and isinstance(res, list) and res[0] == 1)
    assert granted > 50
    # every short lease (<= 120 ms, from an op before t_end) has ended, by the
    # timers: no stored value still holds one (LOCK.INSPECT would hide an ended
    # lease the timer has not removed yet). The long ones (>= 20 s, from after
    # t_start) all end later than t_end + 120.
    assert t_end - t_start < 20000 - 120, "the workload took %d ms" % (t_end - t_start)

    def short_leases_stored():
        return [(k, e) for k in keys for e in stored_lease_ends(c, k) if e <= t_end + 120]

    wait_for(lambda: not short_leases_stored(), 10, "the timers to end every short lease")
    wait_replicas_synced(primary, [replica])
    rc = replica.client()
    present = [k for k in keys if c.exists(k)]
    assert len(present) > 8
    assert sorted(rc.keys("w*")) == sorted(k.encode() for k in present)
    for k in present:
        assert digest_value(rc, k) == digest_value(c, k), k
        assert shape(inspect(rc, k)) == shape(inspect(c, k)), k
    assert rc.execute_command("DEBUG", "DIGEST") == c.execute_command("DEBUG", "DIGEST")
    # a replica attached now (full sync) has the same
    replica2 = servers.replica_of(primary, name="replica2")
    r2 = replica2.client()
    for k in present:
        assert digest_value(r2, k) == digest_value(c, k), k


# ---------------------------------------------------------- DUMP / COPY
def test_dump_restore_and_copy_roundtrip(servers, server, r):
    keys = populate_locks(r)
    other = servers.new(name="other").client()
    for k in keys:
        d = digest_value(r, k)
        payload = r.dump(k)
        assert crc64(payload[:-8]) == struct.unpack("<Q", payload[-8:])[0]
        assert r.restore(k + ":restored", 0, payload)
        assert digest_value(r, k + ":restored") == d, k
        assert shape(inspect(r, k + ":restored")) == shape(inspect(r, k))
        assert other.restore(k, 0, payload)
        assert digest_value(other, k) == d, k
        assert r.copy(k, k + ":copy")
        assert digest_value(r, k + ":copy") == d, k
        assert r.type(k + ":copy") == b"mcap-lock"
        # REPLACE over another lock
        assert r.restore(k + ":restored", 0, r.dump("m:held"), replace=True)
        assert digest_value(r, k + ":restored") == digest_value(r, "m:held")
    # the copy is its own lock: releasing the original leaves it held
    assert r.execute_command(REL, "m:held", "alice") == 0
    assert list(holders(r, "m:held:copy")) == [b"alice"]
    assert acquire(r, "m:held", "bob", 1000)[0] == 1
    assert acquire(r, "m:held:copy", "bob", 1000)[0] == 0
    # restored elsewhere, the holders are enforced there as well
    assert acquire(other, "s:sem", "z1", 1000, "PERMITS", 5)[0] == 1
    assert acquire(other, "s:sem", "z2", 1000, "PERMITS", 5)[0] == 1
    assert acquire(other, "s:sem", "z3", 1000, "PERMITS", 5)[0] == 0


LOCK_TRIES = 300


def test_restore_mutated_lock_payloads_server_survives(server, r):
    populate_locks(r)
    bases = [r.dump(k) for k in ("m:held", "m:free", "s:sem", "m:ahead", "m:binary")]
    for p in bases:
        assert r.restore("fz-ok", 0, repack(p[:-10], p[-10:-8]), replace=True)
    r.delete("fz-ok")
    rng = random.Random(99)
    accepted, rejected, truncated_accepted = [], 0, []
    for i in range(LOCK_TRIES):
        base = rng.choice(bases)
        kind, body, version = mutate_dump(rng, base)
        key = "fz%d" % i
        try:
            r.restore(key, 0, repack(bytes(body), version), replace=True)
        except redis.ResponseError:
            rejected += 1
            assert r.exists(key) == 0
        except redis.ConnectionError as e:
            server.check_alive()
            raise AssertionError("connection lost after payload #%d (%s): %r" % (i, kind, e))
        else:
            accepted.append(key)
            if kind == "truncate":
                truncated_accepted.append(bytes(body))
            # exercise the accepted value
            try:
                v = inspect(r, key)
                r.type(key)
                digest_value(r, key)
                r.memory_usage(key)
                r.dump(key)
                r.copy(key, "fz-copy", replace=True)
                owners = [h[0] for h in v[3]] if v else []
                for args in [(ACQ, key, "new", 60000), (ACQ, key, "new2", 60000, "PERMITS", 2),
                             (ACQ, key, owners[0] if owners else "x", 60000, "REENTRANT"),
                             (EXT, key, owners[0] if owners else "x", 60000),
                             (REL, key, owners[-1] if owners else "x"), (INS, key),
                             (ACQ, key, "w", 60000, "WAIT", 1)]:
                    try:
                        r.execute_command(*args)
                    except redis.ResponseError:
                        pass
            except redis.ConnectionError as e:
                server.check_alive()
                raise AssertionError("connection lost on payload #%d (%s): %r" % (i, kind, e))
        assert r.ping(), "server not answering after payload #%d" % i
    print("mutated lock payloads: %d rejected, %d accepted" % (rejected, len(accepted)))
    assert not truncated_accepted, "truncated payloads accepted: %r" % truncated_accepted[:3]
    assert rejected > LOCK_TRIES // 3
    # what was accepted saves and loads again (keys whose next lease end is far away)
    stable = []
    for k in r.scan_iter(count=1000):
        v = inspect(r, k) if r.type(k) == b"mcap-lock" else None
        if v is not None and all(h[1] > 20000 for h in v[3]):
            stable.append(k)
    before = {k: digest_value(r, k) for k in stable}
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert {k: digest_value(r, k) for k in stable} == before
    assert r.ping()


# ------------------------------------- leases end on time after load/promotion
def test_leases_end_on_time_after_restart(servers):
    """docs/locks.md: leases end on time by a module timer even if nobody touches the key."""
    s = servers.new()
    c = s.client()
    t0 = time.time()
    g = acquire(c, "L", "alice", 700)
    assert g[0] == 1
    assert c.save()
    s.restart()
    c = s.client()
    assert list(holders(c, "L")) == [b"alice"]
    held = digest_value(c, "L")
    e0 = lock_stats(s)["leases_expired_while_held"]
    # what the lock is once the lease has ended: no holder, the same last token
    c.execute_command(STATE, "expected", 1, g[1], 0)
    want = digest_value(c, "expected")
    # nothing touches "L": only the module's own timer can end the lease
    try:
        wait_for(lambda: lock_stats(s)["leases_expired_while_held"] == e0 + 1
                 and digest_value(c, "L") == want, timeout=10,
                 what="the loaded lease to end by itself")
    except AssertionError:
        raise AssertionError(
            "the lease loaded from the RDB ended %.1f s ago and nothing removed it "
            "(value unchanged: %s)" % (time.time() - t0 - 0.7, digest_value(c, "L") == held))
    # and not before its end
    assert time.time() >= t0 + 0.7 - 0.002


def test_promoted_replica_ends_leases_on_time(servers):
    """docs/locks.md: a promoted replica enforces the same leases (and leases end on time)."""
    primary = servers.new(name="primary")
    replica = servers.replica_of(primary, name="replica")
    pc, rc = primary.client(), replica.client()
    t0 = time.time()
    lease = 2000
    g = acquire(pc, "L", "alice", lease)
    wait_replicas_synced(primary, [replica])
    primary.kill()
    # the primary must not have ended the lease itself (and replicated that) before it
    # died: the lease is long enough for the sync and the kill on a loaded machine
    # (600 ms was not: it once ended first, and nothing was left for the replica to end)
    assert stored_lease_ends(rc, "L"), "the primary ended the lease before it was killed"
    # read before the promotion: a replica ends no lease itself, while a promoted one
    # may end this one at once (when the kill and promotion took longer than the lease)
    e0 = lock_stats(replica)["leases_expired_while_held"]
    assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    rc.execute_command(STATE, "expected", 1, g[1], 0)
    want = digest_value(rc, "expected")
    # nothing touches "L": the promoted replica's own timer must end the lease
    wait_for(lambda: lock_stats(replica)["leases_expired_while_held"] == e0 + 1
             and digest_value(rc, "L") == want, timeout=10,
             what="the promoted replica to end the lease on its own")
    assert time.time() >= t0 + lease / 1000 - 0.002
    assert holders(rc, "L") == {}


# ------------------------------------------------------- top of token range
LOCK_MAX_TOKEN = 2 ** 62


def test_last_token_at_int64_max(replica_pair):
    """Tokens stop at 2^62 (LOCK_MAX_TOKEN): a state beyond it is refused, a lock
    one below it grants exactly 2^62, and a lock whose last token is 2^62
    refuses to grant (an error, nothing written) rather than reuse one; primary
    and replica agree."""
    primary, replica = replica_pair
    c = primary.client()
    for bad in (INT64_MAX, LOCK_MAX_TOKEN + 1):
        with pytest.raises(redis.ResponseError):
            c.execute_command(STATE, "top", 1, bad, 0)
        assert not c.exists("top")
    # one below the top: the next grant is the top itself (the clock is far below)
    assert c.execute_command(STATE, "below", 1, LOCK_MAX_TOKEN - 1, 0) == b"OK"
    g = acquire(c, "below", "o", 60000)
    assert g[0] == 1 and g[1] == LOCK_MAX_TOKEN, g
    assert c.execute_command(REL, "below", "o") == 0
    # at the top: refused with an error, the lock unchanged
    assert c.execute_command(STATE, "top", 1, LOCK_MAX_TOKEN, 0) == b"OK"
    for key in ("top", "below"):
        d = digest_value(c, key)
        with pytest.raises(redis.ResponseError, match="exhausted"):
            acquire(c, key, "o2", 60000)
        assert digest_value(c, key) == d
        assert inspect(c, key)[1] == LOCK_MAX_TOKEN and inspect(c, key)[3] == []
    wait_replicas_synced(primary, [replica])
    rc = replica.client()
    for key in ("top", "below"):
        assert digest_value(rc, key) == digest_value(c, key), (
            key, inspect(c, key), inspect(rc, key))


def test_restored_last_token_beyond_int64(servers):
    """DUMP payloads carrying a last token (RDB load takes any uint64): beyond
    2^62 RESTORE refuses them and creates nothing; one below, the restored lock
    grants exactly 2^62 and then refuses; at 2^62 it refuses to grant. (A server
    of its own: the token floor is process-wide, so once 2^62 was issued or
    loaded no lock of the process grants again.)"""
    r = servers.new().client()
    r.execute_command(STATE, "tmpl", 1, 5, 0)
    d = r.dump("tmpl")
    # 0x07 (module value), 0x81 + the 8-byte module id, then (0x02 = unsigned, length)...
    head = d[:10]
    # encver 4: permits 1, last_token 5, nholders 0, flags 0, adjustment 0, then the EOF opcode
    assert d[10:21] == b"\x02\x01\x02\x05\x02\x00\x02\x00\x02\x00\x00", d.hex()

    def payload(token):
        body = (head + b"\x02\x01" + b"\x02\x81" + struct.pack(">Q", token)
                + b"\x02\x00\x02\x00\x02\x00\x00")
        return repack(body, d[-10:-8])

    # the builder is right: the template's own token gives the template back
    r.restore("same", 0, payload(5))
    assert digest_value(r, "same") == digest_value(r, "tmpl")
    for token in (2 ** 64 - 1, 2 ** 63, LOCK_MAX_TOKEN + 1):
        with pytest.raises(redis.ResponseError, match="Bad data format"):
            r.restore("huge", 0, payload(token))
        assert not r.exists("huge"), token
    r.restore("below", 0, payload(LOCK_MAX_TOKEN - 1))
    assert inspect(r, "below") == [1, LOCK_MAX_TOKEN - 1, 0, [], 0, 1]
    g = acquire(r, "below", "o", 60000)
    assert g[0] == 1 and g[1] == LOCK_MAX_TOKEN, g
    assert r.execute_command(REL, "below", "o") == 0
    with pytest.raises(redis.ResponseError, match="exhausted"):
        acquire(r, "below", "o", 1000)
    assert inspect(r, "below") == [1, LOCK_MAX_TOKEN, 0, [], 0, 1]
    r.restore("top", 0, payload(LOCK_MAX_TOKEN))
    assert inspect(r, "top") == [1, LOCK_MAX_TOKEN, 0, [], 0, 1]
    dtop = digest_value(r, "top")
    with pytest.raises(redis.ResponseError, match="exhausted"):
        acquire(r, "top", "o", 1000)
    assert digest_value(r, "top") == dtop
    assert r.ping()


# -------------------------------------------------------------- cluster
def test_cluster_lock_commands_route_by_key(cluster):
    slots = [7 + i * (16384 // 9) for i in range(9)]
    names = [v[0] for v in names_in_slots(slots, 1, prefix="lock").values()]
    cc = cluster.client
    owners_seen = set()
    for k in names:
        owner = cluster.owner_of(k)
        owners_seen.add(owner.port)
        g = cc.execute_command(ACQ, k, "alice", 30000)
        assert g[0] == 1, k
        assert cc.execute_command(ACQ, k, "bob", 30000)[0] == 0
        assert cc.execute_command(EXT, k, "alice", 40000) == 40000
        with pytest.raises(redis.ResponseError, match="not held by this owner"):
            cc.execute_command(REL, k, "bob")
        v = cc.execute_command(INS, k)
        assert v[0] == 1 and v[1] == g[1] and v[3][0][0] == "alice"
        assert cluster.conn(owner).exists(k) == 1
        for other in cluster.primaries():
            if other.port != owner.port:
                rep = raw_command(other, INS, k)
                assert rep.startswith(b"-MOVED %d " % key_slot(k)), rep
        assert cc.execute_command(REL, k, "alice") == 0
        g2 = cc.execute_command(ACQ, k, "carol", 30000, "PERMITS", 2, "REENTRANT")
        assert g2[0] == 1 and g2[1] > g[1]
    assert len(owners_seen) == 3, "the keys did not cover every primary"
    # WAIT through the cluster client: a waiter on its own connection gets the lock on release
    k = names[0]
    out = {}

    def waiter():
        c2 = cluster.new_client()
        try:
            out["rep"] = c2.execute_command(ACQ, k, "dave", 1000, "PERMITS", 2, "WAIT", 5000)
        except Exception as e:
            out["err"] = e
        finally:
            c2.close()

    # carol holds k with PERMITS 2: take the second permit, then wait for one
    assert cc.execute_command(ACQ, k, "erin", 30000, "PERMITS", 2)[0] == 1
    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    owner = cluster.owner_of(k)
    wait_for(lambda: cluster.conn(owner).execute_command(INS, k)[2] == 1, 5.0, "the waiter")
    assert cc.execute_command(REL, k, "erin") == 0
    assert cc.execute_command(REL, k, "carol") == 0
    t.join(10)
    assert not t.is_alive() and "err" not in out, out
    assert out["rep"][0] == 1
    # the replicas hold the same locks
    primaries, replica_of = cluster.topology()
    for p in primaries:
        cluster.wait_replicas_synced(p, replica_of.get(p.port, []))
    for k in names:
        owner = cluster.owner_of(k)
        d = cluster.conn(owner, decode_responses=False).execute_command("DEBUG", "DIGEST-VALUE",
                                                                        k)[0]
        for rep in cluster.replicas_of(owner):
            assert cluster.conn(rep, decode_responses=False).execute_command(
                "DEBUG", "DIGEST-VALUE", k)[0] == d, k


def test_cluster_semaphore_pool_routes_by_key(cluster):
    """LOCK.ADD_PERMITS / DRAIN_PERMITS / AVAILABLE_PERMITS route by their key; the
    adjustment reaches each primary's replica."""
    slots = [11 + i * (16384 // 5) for i in range(5)]
    names = [v[0] for v in names_in_slots(slots, 1, prefix="pool").values()]
    cc = cluster.client
    for k in names:
        assert cc.execute_command("LOCK.ADD_PERMITS", k, 2, "PERMITS", 3) == 5
        assert cc.execute_command(ACQ, k, "alice", 30000, "PERMITS", 3, "TAKE", 2)[0] == 1
        assert cc.execute_command("LOCK.AVAILABLE_PERMITS", k) == 3
        assert cc.execute_command("LOCK.DRAIN_PERMITS", k) == 3
        owner = cluster.owner_of(k)
        for rep in cluster.replicas_of(owner):
            cluster.wait_replicas_synced(owner, [rep])
            rc = cluster.conn(rep)
            assert rc.execute_command("DEBUG", "DIGEST-VALUE", k) == \
                cluster.conn(owner).execute_command("DEBUG", "DIGEST-VALUE", k)
            rc.execute_command("READONLY")  # a replica serves reads of its primary's slots
            assert rc.execute_command("LOCK.INSPECT", k)[4:] == [-1, 2]
            rc.execute_command("READWRITE")

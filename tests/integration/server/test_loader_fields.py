# SPDX-License-Identifier: BSD-3-Clause
"""Every loader refuses every invalid field, by name.

A DUMP of a real key is decoded into its module fields (the RDB module-value
encoding: opcode, then a length-encoded unsigned or a string), one field is set
to a value the command could never store, and the payload is re-packed with a
valid CRC. RESTORE must refuse it ("Bad data format"), leave no key, and the
server log must name the refused field. The same checks run on RDB load, as
both go through the type's rdb_load."""

import struct

import pytest
import redis

from dumps import repack

UINT, STRING, EOF = 2, 5, 0


def _read_len(b, i):
    t = b[i] >> 6
    if t == 0:
        return b[i] & 0x3F, i + 1
    if t == 1:
        return ((b[i] & 0x3F) << 8) | b[i + 1], i + 2
    if b[i] == 0x80:
        return struct.unpack(">I", b[i + 1:i + 5])[0], i + 5
    if b[i] == 0x81:
        return struct.unpack(">Q", b[i + 1:i + 9])[0], i + 9
    raise ValueError("special string encoding at %d" % i)


def _write_len(v):
    if v < 64:
        return bytes([v])
    if v < 16384:
        return bytes([0x40 | (v >> 8), v & 0xFF])
    if v < 2 ** 32:
        return b"\x80" + struct.pack(">I", v)
    return b"\x81" + struct.pack(">Q", v)


def decode(payload):
    """(header, [(opcode, value)...]) of a module value's DUMP payload."""
    body = payload[:-10]
    assert body[0] == 7, "RDB_TYPE_MODULE_2 expected"
    _, i = _read_len(body, 1)  # module id + encver
    header = body[:i]
    fields = []
    while True:
        op, i = _read_len(body, i)
        if op == EOF:
            break
        if op == UINT:  # a signed field too (RM_SaveSigned: its 64-bit two's complement)
            v, i = _read_len(body, i)
        elif op == STRING:
            n, i = _read_len(body, i)
            v, i = body[i:i + n], i + n
        else:
            raise ValueError("opcode %d" % op)
        fields.append((op, v))
    assert i == len(body)
    return header, fields, payload[-10:-8]


def encode(header, fields, version):
    out = bytearray(header)
    for op, v in fields:
        out += _write_len(op)
        out += _write_len(v) if op == UINT else _write_len(len(v)) + v
    out += _write_len(EOF)
    return repack(bytes(out), version)


def _refused(server, r, payload, field):
    mark = len(open(server.logfile, "rb").read())
    with pytest.raises(redis.ResponseError) as e:
        r.restore("bad", 0, payload)
    assert "Bad data format" in str(e.value)
    assert r.exists("bad") == 0
    log = open(server.logfile, "rb").read()[mark:].decode("utf-8", "replace")
    assert ("field %s " % field) in log or ("field %s\n" % field) in log, log


def _mutated(r, key, index, value):
    header, fields, version = decode(r.dump(key))
    op, _ = fields[index]
    assert op == UINT
    fields[index] = (UINT, value % 2 ** 64)
    return encode(header, fields, version)


def test_codec_round_trips(server):
    r = server.client()
    r.execute_command("RL.GCRA", "g", 10, 1000)
    p = r.dump("g")
    assert encode(*decode(p)) == p


# GCRA: tat_us, emission_us, limit
@pytest.mark.parametrize("index,value,field", [
    (0, 0, "tat"), (0, 2 ** 63, "tat"),
    (1, 0, "emission_interval"), (1, 2 ** 62, "emission_interval"),
    (2, 0, "limit"), (2, 2 ** 50, "limit"),
])
def test_gcra_loader_names_the_field(server, index, value, field):
    r = server.client()
    r.execute_command("RL.GCRA", "g", 10, 1000)
    _refused(server, r, _mutated(r, "g", index, value), field)


# window: window_ms, limit, then the bucket
@pytest.mark.parametrize("index,value,field", [
    (0, 0, "window"), (0, 2 ** 62, "window"),
    (1, 0, "limit"), (1, 2 ** 33, "limit"),
])
def test_window_loader_names_the_field(server, index, value, field):
    r = server.client()
    r.execute_command("RL.WINDOW", "w", 10, 1000)
    _refused(server, r, _mutated(r, "w", index, value), field)


# lock: permits, last_token, nholders, then each holder (owner, expires_ms, count, token, delay_ms,
# shared)
@pytest.mark.parametrize("index,value,field", [
    (0, 0, "permits"), (0, 2 ** 20, "permits"),
    (1, 2 ** 63, "last_token"),
    (2, 2 ** 20, "nholders"),
])
def test_lock_loader_names_the_field(server, index, value, field):
    r = server.client()
    assert r.execute_command("LOCK.ACQUIRE", "l", "owner", 60000, "PERMITS", 2)[0] == 1
    _refused(server, r, _mutated(r, "l", index, value), field)


# encver 3: each holder is (owner, expires_ms, count, token, delay_ms, shared, weight),
# then flags: a delay above 2^40 ms, a lock-delay slot (count 0) without a delay, and
# a concurrency limit (flags 1) with a delay are refused, naming delay_ms; shared
# above 1, or shared on a concurrency limit, naming shared; a weight of 0, above
# 1024, above the permits or above 1 on a concurrency limit, naming weight
@pytest.mark.parametrize("index,value,opts,field", [
    (7, 2 ** 40 + 1, ["LOCKDELAY", 500], "delay_ms"), (5, 0, [], "delay_ms"), (10, 1, ["LOCKDELAY", 500], "delay_ms"),
    (8, 2, ["READ"], "shared"), (10, 1, ["READ"], "shared"),
    (9, 0, [], "weight"), (9, 1025, [], "weight"), (9, 3, ["PERMITS", 2], "weight"), (10, 1, ["PERMITS", 2, "TAKE", 2], "weight"),
])
def test_lock_loader_names_the_encver3_fields(server, index, value, opts, field):
    r = server.client()
    assert r.execute_command("LOCK.ACQUIRE", "l", "owner", 60000, *opts)[0] == 1
    _refused(server, r, _mutated(r, "l", index, value), field)


# encver 4: after the flags, the pool's adjustment (signed): above 1024 or below -1024,
# or set on a concurrency limit (flags 1) or beside a reader, naming adjust
@pytest.mark.parametrize("index,value,opts,field", [
    (11, 1025, [], "adjust"), (11, -1025, [], "adjust"), (11, 2 ** 62, [], "adjust"),
    (11, 1, ["READ"], "adjust"),
])
def test_lock_loader_names_the_encver4_fields(server, index, value, opts, field):
    r = server.client()
    assert r.execute_command("LOCK.ACQUIRE", "l", "owner", 60000, *opts)[0] == 1
    _refused(server, r, _mutated(r, "l", index, value), field)


def test_lock_loader_refuses_an_adjusted_concurrency_limit(server):
    r = server.client()
    assert r.execute_command("LOCK.ACQUIRE", "l", "owner", 60000)[0] == 1
    header, fields, version = decode(r.dump("l"))
    assert fields[11] == (UINT, 0) and fields[10] == (UINT, 0)
    fields[10], fields[11] = (UINT, 1), (UINT, 1)
    _refused(server, r, encode(header, fields, version), "adjust")
    fields[11] = (UINT, (-3) % 2 ** 64)
    fields[10] = (UINT, 0)
    r.restore("ok", 0, encode(header, fields, version))  # -3 on a lock of 1: size 0, loads
    assert r.execute_command("LOCK.INSPECT", "ok")[4:] == [-3, 0]


# The leaky bucket's persisted form (captcha visits, window hits): last_ms, nslots, then
# (slot, count) pairs. A count is 32-bit in memory: 2^32 and above are refused, never
# truncated (2^32 + 3 would otherwise load as 3 visits); 2^32 - 1 itself loads.
@pytest.mark.parametrize("count,loads", [(2 ** 32 - 1, True), (2 ** 32, False), (2 ** 32 + 3, False), (2 ** 64 - 1, False)])
def test_bucket_slot_count_above_32_bits_is_refused(server, count, loads):
    r = server.client()
    r.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "a",
                      '{"visitor_threshold":0,"levels":[{"visitor_threshold":2,"difficulty_factor":10}],"duration":30}')
    for _ in range(3):
        r.execute_command("MCAPTCHA_CACHE.ADD_VISITOR", "a")
    header, fields, version = decode(r.dump("mcap:captcha::{a}"))
    assert fields[-3:][1:] == [(UINT, fields[-2][1]), (UINT, 3)] and fields[-3] == (UINT, 1), fields
    fields[-1] = (UINT, count)
    payload = encode(header, fields, version)
    if loads:
        assert r.restore("mcap:captcha::{b}", 0, payload)
        assert r.execute_command("MCAPTCHA_CACHE.GET", "b") == count
    else:
        with pytest.raises(redis.ResponseError) as e:
            r.restore("mcap:captcha::{b}", 0, payload)
        assert "Bad data format" in str(e.value)
        assert r.exists("mcap:captcha::{b}") == 0

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Regenerates the seed corpora under tests/fuzz/corpus/ (committed; run by hand)."""
import json, os, struct

HERE = os.path.dirname(os.path.abspath(__file__))

def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def lv(levels):
    return [{"visitor_threshold": t, "difficulty_factor": f} for t, f in levels]

# ---- captcha_config ----
cfg = lambda levels, dur, **kw: json.dumps(dict({"levels": lv(levels), "duration": dur}, **kw))
put("captcha_config", "valid_readme", cfg([(2, 100), (4, 1000), (6, 10000)], 10))
put("captcha_config", "valid_one_level", cfg([(50, 50)], 30))
put("captcha_config", "valid_unsorted_extra_fields", cfg([(500, 500), (50, 50)], 30, name="x"))
put("captcha_config", "valid_max_u32", cfg([(0, 1), (4294967295, 4294967295)], 4294967295))
put("captcha_config", "valid_128_levels", cfg([(i * 10, i + 1) for i in range(128)], 1))
put("captcha_config", "bad_129_levels", cfg([(i, 1) for i in range(129)], 1))
put("captcha_config", "bad_duplicate", cfg([(5, 1), (5, 2)], 30))
put("captcha_config", "bad_decreasing", cfg([(5, 10), (6, 2)], 30))
put("captcha_config", "bad_df_zero", cfg([(5, 0)], 30))
put("captcha_config", "bad_duration_zero", cfg([(5, 1)], 0))
put("captcha_config", "bad_u32_overflow", cfg([(4294967296, 1)], 30))
put("captcha_config", "bad_float", '{"levels":[{"visitor_threshold":1.5,"difficulty_factor":1}],"duration":30}')
put("captcha_config", "bad_negative", '{"levels":[{"visitor_threshold":-1,"difficulty_factor":1}],"duration":30}')
put("captcha_config", "bad_dup_key", '{"levels":[],"levels":[],"duration":30}')
put("captcha_config", "bad_not_object", '[1,2,3]')
put("captcha_config", "bad_truncated", '{"levels":[{"visitor_threshold":1,"difficulty_factor":')
put("captcha_config", "bad_nul", b'{"levels":[{"visitor_threshold":1,"difficulty_factor":1}],"duration":30\x00}')

# ---- challenge_json: ADD_CHALLENGE and the two legacy payloads ----
put("challenge_json", "challenge_valid", '{"difficulty":10000,"duration":10,"challenge":"n0nce"}')
put("challenge_json", "challenge_empty_string", '{"difficulty":0,"duration":1,"challenge":""}')
put("challenge_json", "challenge_512", json.dumps({"difficulty": 1, "duration": 1, "challenge": "a" * 512}))
put("challenge_json", "challenge_513", json.dumps({"difficulty": 1, "duration": 1, "challenge": "a" * 513}))
put("challenge_json", "challenge_unicode", '{"difficulty":5,"duration":5,"challenge":"\\u00e9\\ud83d\\ude00"}')
put("challenge_json", "challenge_nul_escape", '{"difficulty":5,"duration":5,"challenge":"a\\u0000b"}')
put("challenge_json", "challenge_duration_zero", '{"difficulty":5,"duration":0,"challenge":"x"}')
put("challenge_json", "challenge_not_string", '{"difficulty":5,"duration":5,"challenge":5}')
put("challenge_json", "legacy_captcha",
    json.dumps({"m": {"visitor_threshold": 3, "defense": {"levels": lv([(50, 50), (500, 500)]),
                "current_visitor_threshold": 0}, "duration": 30}}))
put("challenge_json", "legacy_captcha_zero_live",
    json.dumps({"m": {"visitor_threshold": 0, "defense": {"levels": lv([(1, 1)]),
                "current_visitor_threshold": 0}, "duration": 1}}))
put("challenge_json", "legacy_challenge", '{"duration":4294967295,"difficulty_factor":20}')
put("challenge_json", "legacy_challenge_zero", '{"duration":0,"difficulty_factor":0}')

# ---- bucket_ops: [mode][window u64][clock mode][start u64] ops... ----
def bucket(mode, window, cm, start, ops):
    return bytes([mode]) + struct.pack("<Q", window) + bytes([cm]) + struct.pack("<Q", start) + bytes(ops)
# ops: [op][time kind + operand][operands]
ADD, COUNT, REMOVE, NEXT, RESTORE, ARB, COPY, FREE = 0, 2, 3, 4, 5, 6, 7, 8
put("bucket_ops", "adds_and_counts", bucket(1, 29, 0, 0, [
    ADD, 0, 1, ADD, 1, 50, 3, ADD, 2, 10, 2, COUNT, 0, 5, 0, 5, 0, 200, 0,
    NEXT, 0, REMOVE, 1, 3, 2, RESTORE, 0, 1, COUNT, 2, 255, 0, 0, 0, 0, 0, 0]))
put("bucket_ops", "small_window_backwards", bucket(0, 99, 0, 0, [
    ADD, 1, 5, 1, ADD, 5, 100, 0, 3, ADD, 2, 1, 7, COUNT, 0, 1, 1, 1, 1, 1, 1,
    COPY, 0, 0, REMOVE, 0, 0x80] + [255] * 8 + [RESTORE, 0, 0]))
put("bucket_ops", "full_slot", bucket(1, 0, 0, 0, [
    ADD, 0, 0x80, 0xff, 0xff, 0xff, 0xff, ADD, 0, 1, ADD, 1, 1, 1, NEXT, 0]))
put("bucket_ops", "arbitrary_restore", bucket(1, 9, 1, 1700000000000, [
    ARB, 0, 0, 0x10, 5, 0, 0x01, 0x02, 0x13, 0x02, 0x01, 1, ADD, 0, 1, COUNT, 0, 0, 0, 0, 0, 0, 0, 0, 0]))
put("bucket_ops", "big_window", bucket(2, 4398046511103, 1, 281474976710000, [
    ADD, 0, 1, ADD, 4, 0, 0, 1, 0, 1, COUNT, 7] + [255] * 8 + [0, 0, 0, 0, 0, 0, FREE, 0, 0, ADD, 0, 2]))
put("bucket_ops", "bad_window", bucket(3, 0, 0, 0, []))

# ---- rdb_load: [type/encver][clock][stream] ----
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)
def sbuf(b):
    if isinstance(b, str):
        b = b.encode()
    return varint(len(b)) + b
def b0(which, encsel, key=False, wild=0):
    # which = b0 % 3 (+ 3 when b0 & 0x80: GCRA, window, lock), encsel = (b0 >> 2) % 4,
    # key = b0 & 0x40; search for a byte that matches
    for x in range(256):
        if x % 3 + (3 if x & 0x80 else 0) == which and (x >> 2) % 4 == encsel and bool(x & 0x40) == key \
                and (encsel != 3 or (x >> 4) == wild or wild == 0):
            return bytes([x])
    raise ValueError
last = 1700000000000
w = 30000 // 256
s_last = last // w
cap = varint(30) + varint(2) + varint(50) + varint(50) + varint(500) + varint(500) + varint(last) + varint(3) \
    + varint(s_last - 200) + varint(7) + varint(s_last - 3) + varint(1) + varint(s_last) + varint(4)
put("rdb_load", "captcha_v1", b0(0, 1) + b"\x00" + cap)
put("rdb_load", "captcha_v1_empty", b0(0, 1) + b"\x00" + varint(1) + varint(1) + varint(0) + varint(1) + varint(0) + varint(0))
put("rdb_load", "captcha_v1_truncated", b0(0, 1) + b"\x00" + cap[:-3])
put("rdb_load", "captcha_v1_slot_after_clock", b0(0, 1) + b"\x00" + varint(30) + varint(1) + varint(1) + varint(1)
    + varint(last) + varint(1) + varint(s_last + 1) + varint(1))
# a slot count of 2^32 + 4: refused, never truncated to 4 (issue #28)
put("rdb_load", "captcha_v1_count_over_32_bits", b0(0, 1) + b"\x00" + cap[:-1] + varint((1 << 32) + 4))
legacy_cap = json.dumps({"m": {"visitor_threshold": 3, "defense": {"levels": lv([(50, 50), (500, 500)]),
                         "current_visitor_threshold": 0}, "duration": 30}})
put("rdb_load", "captcha_v0_legacy_json", b0(0, 0) + b"\x05" + sbuf(legacy_cap))
put("rdb_load", "captcha_unknown_encver", b0(0, 2) + b"\x00" + cap)
put("rdb_load", "challenge_v1", b0(1, 1) + b"\x00" + varint(10000) + varint(10))
put("rdb_load", "challenge_v1_overflow", b0(1, 1) + b"\x00" + varint(1 << 32) + varint(10))
put("rdb_load", "challenge_v0_legacy_json", b0(1, 0) + b"\x00" + sbuf('{"duration":4294967295,"difficulty_factor":20}'))
put("rdb_load", "legacy_bucket_with_key", b0(2, 0, key=True) + b"\x03" + sbuf('{"decrement":{"site-a":3}}'))
put("rdb_load", "legacy_safety", b0(2, 0) + b"\x00" + sbuf("SAFETY"))
put("rdb_load", "legacy_wrong_encver", b0(2, 1) + b"\x00" + sbuf("SAFETY"))
# GCRA (3): tat_us, emission_us, limit
put("rdb_load", "gcra_v1", b0(3, 1) + b"\x00" + varint(last * 1000 + 250000) + varint(100000) + varint(11))
put("rdb_load", "gcra_v1_dvt_max", b0(3, 1) + b"\x00" + varint(1 << 60) + varint(1 << 20) + varint(1 << 40))
put("rdb_load", "gcra_v1_dvt_overflow", b0(3, 1) + b"\x00" + varint(1) + varint(1 << 50) + varint(1 << 11))
put("rdb_load", "gcra_unknown_encver", b0(3, 2) + b"\x00" + varint(last * 1000) + varint(1000) + varint(1))
# window (4): window_ms, limit, then the bucket (last_ms, nslots, slot/count pairs)
put("rdb_load", "window_v1", b0(4, 1) + b"\x00" + varint(30000) + varint(100) + varint(last) + varint(3)
    + varint(s_last - 200) + varint(7) + varint(s_last - 3) + varint(1) + varint(s_last) + varint(4))
put("rdb_load", "window_v1_empty", b0(4, 1) + b"\x00" + varint(1) + varint(4294967295) + varint(0) + varint(0))
put("rdb_load", "window_v1_limit_zero", b0(4, 1) + b"\x00" + varint(1000) + varint(0) + varint(0) + varint(0))
put("rdb_load", "window_unknown_encver", b0(4, 3) + b"\x00" + varint(1000) + varint(1) + varint(0) + varint(0))
# lock (5): permits, last_token, nholders, (owner, expires_ms, count, token)..., [flags]
hold = lambda o, e, c, t: sbuf(o) + varint(e) + varint(c) + varint(t)
put("rdb_load", "lock_v1", b0(5, 1, key=True) + b"\x03" + varint(1) + varint(42) + varint(1)
    + hold("owner-a", last + 30000, 1, 42))
put("rdb_load", "lock_v2_semaphore", b0(5, 2, key=True) + b"\x00" + varint(3) + varint(1 << 62) + varint(2)
    + hold("a", last, 2, 7) + hold("b" * 256, 1 << 48, 4294967295, 1 << 62) + varint(1))
put("rdb_load", "lock_v2_dup_owner", b0(5, 2) + b"\x00" + varint(2) + varint(9) + varint(2)
    + hold("x", last, 1, 3) + hold("x", last, 1, 4) + varint(0))
put("rdb_load", "lock_v2_ephemeral_empty", b0(5, 2) + b"\x01" + varint(1024) + varint(0) + varint(0) + varint(1))
put("rdb_load", "lock_unknown_encver", b0(5, 0) + b"\x00" + varint(1) + varint(0) + varint(0) + varint(0))
# encver 3 (b0 & 0x10 with the wild selector): each holder + delay_ms, shared; count 0 is a
# lock-delay slot, shared 1 a read hold of a read-write lock
hold3 = lambda o, e, c, t, d, sh=0, w=1: hold(o, e, c, t) + varint(d) + varint(sh) + varint(w)
put("rdb_load", "lock_v3_delay_slot", b0(5, 3, key=True, wild=13) + b"\x00" + varint(2) + varint(50) + varint(2)
    + hold3("a", last + 900, 0, 40, 500) + hold3("a", last + 5000, 1, 50, 0) + varint(0))
put("rdb_load", "lock_v3_slot_without_delay", b0(5, 3, wild=9) + b"\x00" + varint(1) + varint(50) + varint(1)
    + hold3("a", last + 900, 0, 40, 0) + varint(0))
put("rdb_load", "lock_v3_readers", b0(5, 3, wild=9) + b"\x00" + varint(1) + varint(50) + varint(3)
    + hold3("r1", last + 900, 2, 40, 0, 1) + hold3("r2", last + 900, 1, 41, 0, 1) + hold3("r0", last, 0, 39, 9, 1)
    + varint(0))
put("rdb_load", "lock_v3_reader_beside_writer", b0(5, 3, wild=9) + b"\x00" + varint(1) + varint(50) + varint(2)
    + hold3("r1", last + 900, 1, 40, 0, 1) + hold3("w", last + 900, 0, 41, 10, 0) + varint(0))
put("rdb_load", "lock_v3_weighted", b0(5, 3, wild=9) + b"\x00" + varint(5) + varint(50) + varint(2)
    + hold3("a", last + 900, 1, 40, 0, 0, 3) + hold3("b", last + 900, 0, 41, 100, 0, 2) + varint(0))
put("rdb_load", "lock_v3_weight_above_permits", b0(5, 3, wild=9) + b"\x00" + varint(2) + varint(50) + varint(1)
    + hold3("a", last + 900, 1, 40, 0, 0, 3) + varint(0))
put("rdb_load", "lock_v3_ephemeral_with_delay", b0(5, 3, wild=9) + b"\x00" + varint(1) + varint(50) + varint(1)
    + hold3("a", last + 900, 1, 40, 10) + varint(1))
# encver 4 (b0 & 0x10 and 0x20 with the wild selector): encver 3, then the pool's
# adjustment (a signed varint: zigzag in the stand-in IO)
zz = lambda v: varint((v << 1) ^ (v >> 63) if v >= 0 else ((-v) << 1) - 1)
put("rdb_load", "lock_v4_adjusted", b0(5, 3, key=True, wild=15) + b"\x00" + varint(3) + varint(50) + varint(1)
    + hold3("a", last + 900, 1, 40, 0, 0, 2) + varint(0) + zz(-2))
put("rdb_load", "lock_v4_adjust_out_of_range", b0(5, 3, wild=11) + b"\x00" + varint(3) + varint(50) + varint(0)
    + varint(0) + zz(1025))
put("rdb_load", "lock_v4_adjusted_ephemeral", b0(5, 3, wild=11) + b"\x00" + varint(3) + varint(50) + varint(0)
    + varint(1) + zz(1))

# ---- cmd_args: CAPTCHA_SET arguments after the key, space separated ----
put("cmd_args", "valid_empty", "30 2 50 50 500 500 0 0")
put("cmd_args", "valid_slots", "30 2 50 50 500 500 %d 3 %d 7 %d 1 %d 4" % (last, s_last - 200, s_last - 3, s_last))
put("cmd_args", "valid_unsorted_levels", "1 3 9 9 1 1 5 5 1000 1 100 2")
put("cmd_args", "bad_slot_order", "30 1 1 1 %d 2 %d 1 %d 1" % (last, s_last, s_last - 1))
put("cmd_args", "bad_span", "30 1 1 1 %d 2 %d 1 %d 1" % (last, s_last - 300, s_last))
put("cmd_args", "bad_count_zero", "30 1 1 1 %d 1 %d 0" % (last, s_last))
put("cmd_args", "bad_short", "30 2 50 50")
put("cmd_args", "bad_nslots_mismatch", "30 1 1 1 0 2 0 1")
put("cmd_args", "bad_leading_zero", "030 1 1 1 0 0")
put("cmd_args", "bad_negative", "30 1 -1 1 0 0")

# ---- policy_aux: byte 0 (b0 & 1: encver 1; b0 & 0x10: after the keys), then
# count, and per policy: name, kind (1 GCRA, 2 WINDOW), rate, period_ms, burst ----
def pol(name, kind, rate, period, burst=0):
    return sbuf(name) + varint(kind) + varint(rate) + varint(period) + varint(burst)
put("policy_aux", "empty", b"\x01" + varint(0))
put("policy_aux", "two", b"\x01" + varint(2) + pol("api", 1, 100, 60000, 20) + pol("login", 2, 5, 60000))
put("policy_aux", "edges", b"\x01" + varint(3) + pol("g", 1, 1 << 40, (1 << 50) // 1000) + pol("n" * 256, 2, 2**32 - 1, 1 << 42)
    + pol(b"\x00\xff", 1, 1, 1, (1 << 40) - 1))
put("policy_aux", "bad_duplicate", b"\x01" + varint(2) + pol("a", 1, 1, 1) + pol("a", 2, 1, 1))
put("policy_aux", "bad_window_burst", b"\x01" + varint(1) + pol("w", 2, 5, 1000, 3))
put("policy_aux", "bad_too_large", b"\x01" + varint(1) + pol("g", 1, 1, (1 << 50) // 1000, (1 << 40) - 1))
put("policy_aux", "bad_truncated", b"\x01" + varint(3) + pol("a", 1, 1, 1))
put("policy_aux", "bad_encver", b"\x04" + varint(0))
put("policy_aux", "bad_after_keys", b"\x11" + varint(0))

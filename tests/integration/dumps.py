# SPDX-License-Identifier: BSD-3-Clause
"""DUMP payload helpers shared by the durability tests: Redis' CRC-64 and
re-packing a (mutated) payload body so that RESTORE checks it for real."""

import struct


def _crc64_table():
    poly = 0x95AC9329AC4BC9B5  # 0xad93d23594c935a9 reflected
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc64_table()


def crc64(data, crc=0):
    """CRC-64/Jones as Redis computes it (reflected, init 0, no final xor)."""
    t = _CRC_TABLE
    for byte in data:
        crc = t[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def test_crc64_matches_redis():
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


def repack(body, version):
    """A DUMP payload: body, 2-byte RDB version, CRC-64 of both, little endian."""
    x = body + version
    return x + struct.pack("<Q", crc64(x))


MUTATIONS = ["truncate", "flip", "flip", "byte", "insert", "delete", "multi"]


def mutate_dump(rng, payload):
    """One random corruption of a DUMP payload's body, for RESTORE fuzzing.
    Returns (kind, body, version); re-pack with repack(bytes(body), version)."""
    body, version = bytearray(payload[:-10]), payload[-10:-8]
    kind = rng.choice(MUTATIONS)
    if kind == "truncate":
        body = body[:rng.randrange(0, len(body))]
    elif kind == "flip":
        pos = rng.randrange(len(body))
        body[pos] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        pos = rng.randrange(len(body))
        body[pos] = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x81, 0xC0, 0x40, rng.randrange(256)])
    elif kind == "insert":
        pos = rng.randrange(len(body) + 1)
        body[pos:pos] = bytes([rng.randrange(256)])
    elif kind == "delete":
        del body[rng.randrange(len(body))]
    else:
        for _ in range(rng.randint(2, 6)):
            body[rng.randrange(len(body))] = rng.randrange(256)
    return kind, body, version

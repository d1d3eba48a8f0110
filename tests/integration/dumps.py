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

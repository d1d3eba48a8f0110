# SPDX-License-Identifier: BSD-3-Clause
"""A small, independent reader of Redis RDB files, for tests only.

It reads what the mcaptcha tests put in an RDB: plain string values and module
values (RDB_TYPE_MODULE_2, whose fields are self-describing), with their expiry
times, so that a test can check an RDB file's exact contents -- which module
type name and encoding version (encver) each key was written with, and the
exact fields of each value -- without loading it into Redis. Any other value
type raises RdbError.

    entries = read_rdb("dump.rdb")          # {key bytes: Entry}
    e = entries[b"mcap:captcha::{x}"]
    e.kind == "module"; e.type_name == "mcaptmcap"; e.encver == 0
    e.fields == [("string", b'{"m":...}')]  # (kind, value) in save order
    e.expire_ms                              # absolute unix ms, or None
"""

import struct

# value types (rdb.h)
RDB_TYPE_STRING = 0
RDB_TYPE_MODULE_PRE_GA = 6
RDB_TYPE_MODULE_2 = 7
# opcodes
OP_FUNCTION2 = 245
OP_MODULE_AUX = 247
OP_IDLE = 248
OP_FREQ = 249
OP_AUX = 250
OP_RESIZEDB = 251
OP_EXPIRETIME_MS = 252
OP_EXPIRETIME = 253
OP_SELECTDB = 254
OP_EOF = 255
# module value field opcodes
MOD_EOF, MOD_SINT, MOD_UINT, MOD_FLOAT, MOD_DOUBLE, MOD_STRING = 0, 1, 2, 3, 4, 5

MODULE_TYPE_CHARSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


class RdbError(ValueError):
    pass


def module_type_id(name, encver):
    """The 64-bit id Redis stores for a module type name (9 chars) + encver."""
    if len(name) != 9:
        raise ValueError("module type names have 9 characters: %r" % name)
    mid = 0
    for ch in name:
        mid = (mid << 6) | MODULE_TYPE_CHARSET.index(ch)
    return (mid << 10) | encver


def decode_module_type_id(mid):
    encver = mid & 1023
    mid >>= 10
    chars = []
    for _ in range(9):
        chars.append(MODULE_TYPE_CHARSET[mid & 63])
        mid >>= 6
    return "".join(reversed(chars)), encver


def lzf_decompress(data, expected_len):
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            ln = ctrl + 1
            if i + ln > n:
                raise RdbError("LZF literal run past the end")
            out += data[i:i + ln]
            i += ln
        else:
            ln = ctrl >> 5
            ref = len(out) - ((ctrl & 0x1F) << 8) - 1
            if ln == 7:
                ln += data[i]
                i += 1
            ref -= data[i]
            i += 1
            ln += 2
            if ref < 0:
                raise RdbError("LZF back reference before the start")
            for _ in range(ln):
                out.append(out[ref])
                ref += 1
    if len(out) != expected_len:
        raise RdbError("LZF: got %d bytes, expected %d" % (len(out), expected_len))
    return bytes(out)


class Entry:
    def __init__(self, db, key, kind, value=None, type_name=None, encver=None, fields=None,
                 expire_ms=None):
        self.db = db
        self.key = key
        self.kind = kind            # "string" | "module"
        self.value = value          # bytes, for strings
        self.type_name = type_name  # for modules
        self.encver = encver
        self.fields = fields        # [(kind, value)], for modules
        self.expire_ms = expire_ms

    def __repr__(self):
        if self.kind == "string":
            return "<string %r=%r expire=%s>" % (self.key, self.value, self.expire_ms)
        return "<module %r %s/%d %r expire=%s>" % (self.key, self.type_name, self.encver,
                                                    self.fields, self.expire_ms)


class _Reader:
    def __init__(self, data):
        self.d = data
        self.i = 0

    def take(self, n):
        if self.i + n > len(self.d):
            raise RdbError("truncated RDB at offset %d (wanted %d bytes)" % (self.i, n))
        b = self.d[self.i:self.i + n]
        self.i += n
        return b

    def byte(self):
        return self.take(1)[0]

    def length(self):
        """(value, is_encoded)"""
        b0 = self.byte()
        t = b0 >> 6
        if t == 0:
            return b0 & 0x3F, False
        if t == 1:
            return ((b0 & 0x3F) << 8) | self.byte(), False
        if t == 3:
            return b0 & 0x3F, True
        if b0 == 0x80:
            return struct.unpack(">I", self.take(4))[0], False
        if b0 == 0x81:
            return struct.unpack(">Q", self.take(8))[0], False
        raise RdbError("bad length byte 0x%02x at offset %d" % (b0, self.i - 1))

    def plain_length(self):
        n, enc = self.length()
        if enc:
            raise RdbError("unexpected encoded length at offset %d" % self.i)
        return n

    def string(self):
        n, enc = self.length()
        if not enc:
            return self.take(n)
        if n == 0:
            return str(struct.unpack("<b", self.take(1))[0]).encode()
        if n == 1:
            return str(struct.unpack("<h", self.take(2))[0]).encode()
        if n == 2:
            return str(struct.unpack("<i", self.take(4))[0]).encode()
        if n == 3:
            clen = self.plain_length()
            ulen = self.plain_length()
            return lzf_decompress(self.take(clen), ulen)
        raise RdbError("unknown string encoding %d" % n)

    def module_fields(self):
        fields = []
        while True:
            op = self.plain_length()
            if op == MOD_EOF:
                return fields
            if op == MOD_SINT or op == MOD_UINT:
                fields.append(("sint" if op == MOD_SINT else "uint", self.plain_length()))
            elif op == MOD_FLOAT:
                fields.append(("float", struct.unpack("<f", self.take(4))[0]))
            elif op == MOD_DOUBLE:
                fields.append(("double", struct.unpack("<d", self.take(8))[0]))
            elif op == MOD_STRING:
                fields.append(("string", self.string()))
            else:
                raise RdbError("unknown module field opcode %d" % op)


def parse_rdb(data):
    """Parse RDB bytes. Returns (version, [Entry] in file order, aux dict)."""
    # "REDIS" + 4 version digits; Valkey 9 writes "VALKEY" + 3 digits.
    if data[:5] == b"REDIS":
        version, start = int(data[5:9]), 9
    elif data[:6] == b"VALKEY":
        version, start = int(data[6:9]), 9
    else:
        raise RdbError("not an RDB file (no REDIS or VALKEY magic)")
    r = _Reader(data)
    r.i = start
    entries, aux = [], {}
    db, expire = 0, None
    while True:
        op = r.byte()
        if op == OP_EOF:
            break
        if op == OP_AUX:
            k = r.string()
            aux[k] = r.string()
        elif op == OP_RESIZEDB:
            r.plain_length()
            r.plain_length()
        elif op == OP_SELECTDB:
            db = r.plain_length()
        elif op == OP_EXPIRETIME_MS:
            expire = struct.unpack("<q", r.take(8))[0]
        elif op == OP_EXPIRETIME:
            expire = struct.unpack("<i", r.take(4))[0] * 1000
        elif op == OP_IDLE:
            r.plain_length()
        elif op == OP_FREQ:
            r.byte()
        elif op == OP_MODULE_AUX:
            r.plain_length()  # module id
            r.plain_length()  # when opcode
            r.plain_length()  # when
            r.module_fields()
        elif op == OP_FUNCTION2:
            r.string()
        elif op == RDB_TYPE_STRING:
            key = r.string()
            entries.append(Entry(db, key, "string", value=r.string(), expire_ms=expire))
            expire = None
        elif op == RDB_TYPE_MODULE_2:
            key = r.string()
            name, encver = decode_module_type_id(r.plain_length())
            entries.append(Entry(db, key, "module", type_name=name, encver=encver,
                                 fields=r.module_fields(), expire_ms=expire))
            expire = None
        else:
            raise RdbError("value type / opcode %d at offset %d is not supported by this reader"
                           % (op, r.i - 1))
    if version >= 5:
        r.take(8)  # CRC64 (Redis itself checks it on load)
    if r.i != len(data):
        raise RdbError("%d bytes after the EOF opcode" % (len(data) - r.i))
    return version, entries, aux


def read_rdb(path):
    """{key: Entry} of the RDB file at path (db 0 only is expected; others raise)."""
    with open(path, "rb") as f:
        _, entries, _ = parse_rdb(f.read())
    out = {}
    for e in entries:
        if e.db != 0:
            raise RdbError("key %r in db %d: only db 0 is expected" % (e.key, e.db))
        if e.key in out:
            raise RdbError("key %r twice" % e.key)
        out[e.key] = e
    return out

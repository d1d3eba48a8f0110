"""The replication stream and the AOF that earlier builds wrote replay, byte for byte.

SPDX-License-Identifier: BSD-3-Clause

tests/fixtures/repl/ holds, per recorded build (make_fixtures.py), the command stream a
replica received and the AOF (no RDB preamble) of one workload over the three families,
and every key's DUMP, DEBUG DIGEST-VALUE and PEXPIRETIME afterwards. Replicas are upgraded
before their primary, so a newer build must accept every internal command an older one
sent or wrote (docs/operations.md). Both are replayed here, with the default module
arguments (internal commands closed to clients: only replication and AOF loading may run
them): the AOF loaded at startup, and the stream sent by a primary played by this test to
a real replica after a full sync of an empty RDB. The state must be exactly the recorded one:
the same digest and expiry for every key, and the same DUMP bytes for every key whose type
is still saved in the encoding the recorded build used (sliding windows, `mcap-wndw`, are
saved at encoding version 2 since 0.2.0: for them the digest stands for the DUMP).
"""

import glob
import json
import os
import shutil
import socket
import threading

import pytest

from servers import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "fixtures", "repl")
TAGS = sorted(os.path.basename(p)[len("state-"):-len(".json")]
              for p in glob.glob(os.path.join(FIXTURES, "state-*.json")))


def _want(tag):
    """The recorded state, DUMP payloads without their trailer (see _state)."""
    with open(os.path.join(FIXTURES, "state-%s.json" % tag)) as f:
        keys = json.load(f)["keys"]
    for v in keys.values():
        v["dump"] = v["dump"][:-20]
    return keys


# Types saved in a newer encoding than the recorded builds': their DUMP differs by design.
REENCODED = {b"mcap-wndw"}


def _assert_replayed(c, tag):
    got, want = _state(c), _want(tag)
    for k, v in got.items():
        if c.type(k) in REENCODED:
            v.pop("dump")
            want.get(k, {}).pop("dump", None)
    assert got == want


def _state(c):
    """Every key: its DUMP payload without the 10-byte trailer (the server's RDB version and
    a CRC64 over both, which differ between Redis and Valkey releases), its digest and its
    absolute expiry."""
    out = {}
    for k in sorted(c.keys("*")):
        out[k.decode()] = {
            "dump": c.dump(k)[:-10].hex(),
            "digest": c.execute_command("DEBUG", "DIGEST-VALUE", k)[0].decode(),
            "pexpiretime": c.execute_command("PEXPIRETIME", k),
        }
    return out


def test_fixtures_present():
    assert TAGS, "no golden fixtures under tests/fixtures/repl"
    for tag in TAGS:
        names = {k.split(":")[0] for k in _want(tag)}
        # every family's writes are in the recording
        assert {"mcap", "cell-1", "gcra-1", "wndw-1", "lock-1", "sem-1"} <= names | set(_want(tag))


@pytest.mark.parametrize("tag", TAGS)
def test_old_aof_loads_exactly(servers, tmp_path, tag):
    d = tmp_path / ("aof-" + tag)
    d.mkdir()
    shutil.copyfile(os.path.join(FIXTURES, "aof-%s.aof" % tag), str(d / "appendonly.aof"))
    s = servers.new(name="aof-" + tag, dir=str(d), module_args=(), appendonly=True, aof_preamble=False)
    c = s.client()
    _assert_replayed(c, tag)


class _OldPrimary:
    """A primary that answers a replica's handshake with a full sync of `rdb` and then
    sends `stream` (the recorded replication stream) as it is."""

    def __init__(self, rdb, stream):
        self.rdb, self.stream = rdb, stream
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.port = self.lsock.getsockname()[1]
        self.conn = None
        self.error = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            self.conn, _ = self.lsock.accept()
            f = self.conn.makefile("rb")
            while True:
                n = int(f.readline()[1:])
                args = []
                for _ in range(n):
                    ln = int(f.readline()[1:])
                    args.append(f.read(ln + 2)[:-2])
                cmd = args[0].upper()
                if cmd == b"PSYNC" or cmd == b"SYNC":
                    break
                self.conn.sendall(b"+PONG\r\n" if cmd == b"PING" else b"+OK\r\n")
            self.conn.sendall(b"+FULLRESYNC " + b"0" * 40 + b" 0\r\n")
            self.conn.sendall(b"$%d\r\n" % len(self.rdb) + self.rdb)
            self.conn.sendall(self.stream)
        except Exception as e:  # reported by the test
            self.error = e

    def close(self):
        if self.conn:
            self.conn.close()
        self.lsock.close()


@pytest.mark.parametrize("tag", TAGS)
def test_old_stream_replays_on_replica(servers, tag):
    # An empty RDB of this build (with its module aux data) for the full sync.
    empty = servers.new(name="empty-" + tag, module_args=())
    empty.client().save()
    with open(os.path.join(empty.dir, "dump.rdb"), "rb") as f:
        rdb = f.read()
    with open(os.path.join(FIXTURES, "stream-%s.resp" % tag), "rb") as f:
        stream = f.read()
    old = _OldPrimary(rdb, stream)
    try:
        r = servers.new(name="replica-" + tag, module_args=(), replicaof=("127.0.0.1", old.port))
        c = r.client()
        wait_until(lambda: old.error is not None or c.exists("fixture:end"), "the stream replayed", timeout=20)
        assert old.error is None
        _assert_replayed(c, tag)
    finally:
        old.close()


def test_new_primary_sends_short_names_and_replica_applies_them(servers):
    """ADD_VISITOR and ADD_CHALLENGE replicate MC.VISIT_AT and MC.CHALLENGE_SET (23 and 28
    bytes become 11 and 16); a replica of the same build ends with the primary's state,
    and clients are refused the short names as the long ones."""
    p = servers.new(name="short-primary", module_args=(), config={"repl-diskless-sync": "no"})
    r = servers.replica_of(p, module_args=())
    sock = socket.create_connection((p.host, p.port), timeout=10)
    sock.sendall(b"*1\r\n$4\r\nSYNC\r\n")
    c = p.client()
    c.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "s1",
                      '{"levels":[{"visitor_threshold":1,"difficulty_factor":5}],"duration":60}')
    for _ in range(3):
        c.execute_command("MCAPTCHA_CACHE.ADD_VISITOR", "s1")
    c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "s1",
                      '{"difficulty":5,"duration":600,"challenge":"ch-1"}')
    c.set("short:end", 1)
    got = b""
    while b"short:end" not in got:
        got += sock.recv(65536)
    sock.close()
    assert got.count(b"$11\r\nMC.VISIT_AT\r\n") == 3
    assert got.count(b"$16\r\nMC.CHALLENGE_SET\r\n") == 1
    assert b"MCAPTCHA_CACHE.VISIT_AT" not in got and b"MCAPTCHA_CACHE.CHALLENGE_SET" not in got
    rc = r.client()
    wait_until(lambda: rc.exists("short:end"), "the replica caught up")
    for k in c.keys("mcap:*"):
        assert rc.dump(k) == c.dump(k)
        assert rc.pexpiretime(k) == c.pexpiretime(k)
    for cmd, args in (("MC.VISIT_AT", ["mcap:captcha::{s1}", 1]),
                      ("MC.CHALLENGE_SET", ["mcap:CHALLENGE:{s1}:x", 5, 30])):
        with pytest.raises(Exception, match="internal"):
            c.execute_command(cmd, *args)
    assert c.execute_command("MCAPTCHA_CACHE.GET", "s1") == 3

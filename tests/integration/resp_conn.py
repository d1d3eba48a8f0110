# SPDX-License-Identifier: BSD-3-Clause
"""A plain RESP2 connection for the model-based tests: replies parsed exactly,
errors kept with their code (or none, for the protocol's bare errors) as
Err(text), bulk strings as bytes; and a command bracketed by the server's TIME."""

import socket
from collections import namedtuple

from servers import resp_encode

Err = namedtuple("Err", "msg")


class Conn:
    """One plain connection (to one db), replies parsed exactly: errors keep
    their code, as Err(text)."""

    def __init__(self, server, db=0):
        self.sock = socket.create_connection((server.host, server.port), timeout=20)
        self.f = self.sock.makefile("rb")
        if db:
            assert self.call("SELECT", db) == "OK"

    def close(self):
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass

    def _read(self):
        line = self.f.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed: %r" % line)
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return Err(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ValueError("unexpected reply %r" % line)

    def pipe(self, *cmds):
        self.sock.sendall(b"".join(resp_encode(*c) for c in cmds))
        return [self._read() for _ in cmds]

    def call(self, *args):
        return self.pipe(args)[0]

    def timed(self, *args):
        """(reply, t0_us, t1_us): the server's TIME just before and after, in microseconds."""
        t0, reply, t1 = self.pipe(("TIME",), args, ("TIME",))
        return reply, int(t0[0]) * 1_000_000 + int(t0[1]), int(t1[0]) * 1_000_000 + int(t1[1])


# --------------------------------------------------------------------- the model

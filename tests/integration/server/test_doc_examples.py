# SPDX-License-Identifier: BSD-3-Clause
"""Every documented example runs as written.

The example sessions of README.md and docs/*.md (the convention is in
docs/development.md, "Documented examples") are run file by file, in the order
shown, on a fresh server with the module loaded as a user would load it (no
options), on one connection per file. Each command must answer what the doc
shows under it, formatted as redis-cli prints it; a command shown without a
reply must not answer an error. The test fails when a documented example
errors or answers differently, and names the file, the line and both replies.

A session is a fenced code block whose lines start with the redis-cli prompt
`127.0.0.1:6379> `; the lines under a command, up to the next prompt, are its
reply. In a reply line `…` stands for any text; a reply line that is `…` alone
ends a reply shown only in part; a line `… <words> …` between two commands
(`… 10 seconds later …`) says time passes, and the next command is repeated
until it answers as shown.

The commands are sent over a raw socket and the RESP2 replies kept with their
types (a status `OK` and a bulk "OK" print differently), so the formatting is
redis-cli's own: cliFormatReplyTTY, and raw text for INFO."""

import glob
import os
import re
import socket
import time

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROMPT = re.compile(r"^127\.0\.0\.1:6379(?:\[\d+\])?(?:\(TX\))?> (.*)$")
ELLIPSIS = "\u2026"
PAUSE_LIMIT_S = 60.0


# ------------------------------------------------------------- the doc side
def split_args(line):
    """A command line split as redis-cli does (sdssplitargs): whitespace
    separates arguments; "..." takes the escapes \\n \\r \\t \\b \\a \\xHH and
    \\<char>; '...' takes \\'; a closing quote must end the argument."""
    args, i, n = [], 0, len(line)
    while True:
        while i < n and line[i].isspace():
            i += 1
        if i >= n:
            return args
        cur, inq, insq = [], False, False
        while True:
            if inq:
                if i >= n:
                    raise ValueError("unbalanced quotes: %r" % line)
                c = line[i]
                if c == "\\" and i + 3 < n and line[i + 1] == "x" and all(
                        h in "0123456789abcdefABCDEF" for h in line[i + 2:i + 4]):
                    cur.append(chr(int(line[i + 2:i + 4], 16)))
                    i += 3
                elif c == "\\" and i + 1 < n:
                    i += 1
                    cur.append({"n": "\n", "r": "\r", "t": "\t", "b": "\b", "a": "\a"}.get(line[i], line[i]))
                elif c == '"':
                    if i + 1 < n and not line[i + 1].isspace():
                        raise ValueError("closing quote must be followed by a space: %r" % line)
                    i += 1
                    break
                else:
                    cur.append(c)
            elif insq:
                if i >= n:
                    raise ValueError("unbalanced quotes: %r" % line)
                c = line[i]
                if c == "\\" and i + 1 < n and line[i + 1] == "'":
                    i += 1
                    cur.append("'")
                elif c == "'":
                    if i + 1 < n and not line[i + 1].isspace():
                        raise ValueError("closing quote must be followed by a space: %r" % line)
                    i += 1
                    break
                else:
                    cur.append(c)
            else:
                if i >= n or line[i].isspace():
                    break
                c = line[i]
                if c == '"':
                    inq = True
                elif c == "'":
                    insq = True
                else:
                    cur.append(c)
            i += 1
        args.append("".join(cur))


def is_pause(line):
    s = line.strip()
    return s.startswith(ELLIPSIS + " ") and len(s) > 2


def sessions(path):
    """The example steps of one doc, in order: dicts with the command's line
    number, its arguments, the expected reply lines and whether time passes
    before it."""
    steps, in_block, cur, pause = [], False, None, False
    lines = open(path, encoding="utf-8").read().split("\n")
    block_has_prompt = False
    for no, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            if in_block and cur:
                steps.append(cur)
            in_block, cur, pause, block_has_prompt = not in_block, None, False, False
            continue
        if not in_block:
            continue
        m = PROMPT.match(line)
        if m:
            if cur:
                steps.append(cur)
            block_has_prompt = True
            cur = {"line": no, "text": m.group(1), "args": split_args(m.group(1)), "reply": [], "pause": pause}
            pause = False
        elif not block_has_prompt:
            continue  # not a session: shell, config or code
        elif is_pause(line):
            if cur:
                steps.append(cur)
            cur, pause = None, True
        elif line.strip():
            assert cur is not None, "%s:%d: a reply line with no command above it" % (path, no)
            cur["reply"].append(line)
    return steps


def doc_files():
    files = [os.path.join(REPO_ROOT, "README.md")] + sorted(glob.glob(os.path.join(REPO_ROOT, "docs", "*.md")))
    return [f for f in files if sessions(f)]


# ---------------------------------------------------------- the server side
class RawConnection:
    """One RESP2 connection that keeps each reply's type."""

    def __init__(self, host, port, timeout=PAUSE_LIMIT_S):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._read()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return ("status", rest.decode())
        if kind == b"-":
            return ("error", rest.decode())
        if kind == b":":
            return ("int", int(rest))
        if kind == b"$":
            n = int(rest)
            return ("bulk", None if n < 0 else self._exact(n))
        if kind == b"*":
            n = int(rest)
            return ("array", None if n < 0 else [self._read() for _ in range(n)])
        raise ValueError("unexpected reply %r" % line)


def repr_bulk(data):
    """redis-cli's sdscatrepr: a quoted string with C escapes."""
    out = ['"']
    for b in data:
        c = chr(b)
        if c in '\\"':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c == "\a":
            out.append("\\a")
        elif c == "\b":
            out.append("\\b")
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append("\\x%02x" % b)
    out.append('"')
    return "".join(out)


def format_tty(reply, prefix=""):
    """redis-cli's cliFormatReplyTTY for RESP2 replies."""
    kind, v = reply
    if kind == "error":
        return "(error) %s\n" % v
    if kind == "status":
        return v + "\n"
    if kind == "int":
        return "(integer) %d\n" % v
    if kind == "bulk":
        return "(nil)\n" if v is None else repr_bulk(v) + "\n"
    if v is None:
        return "(nil)\n"
    if not v:
        return "(empty array)\n"
    width = len(str(len(v)))
    child_prefix = prefix + " " * (width + 2)
    out = []
    for i, el in enumerate(v):
        out.append("%s%*d) " % ("" if i == 0 else prefix, width, i + 1))
        out.append(format_tty(el, child_prefix))
    return "".join(out)


def format_reply(args, reply):
    """The reply as redis-cli prints it, as lines."""
    if args and args[0].upper() == "INFO" and reply[0] == "bulk" and reply[1] is not None:
        return reply[1].decode().replace("\r\n", "\n").rstrip("\n").split("\n")
    return format_tty(reply).rstrip("\n").split("\n")


def reply_matches(expected, actual):
    """Whether the printed reply `actual` is what the doc shows (`expected`)."""
    if not expected:
        return not actual[0].startswith("(error)")
    if expected[-1].strip() == ELLIPSIS:
        expected = expected[:-1]
        actual = actual[:len(expected)]
    if len(expected) != len(actual):
        return False
    for e, a in zip(expected, actual):
        pattern = ".*".join(re.escape(part) for part in e.split(ELLIPSIS))
        if not re.fullmatch(pattern, a, re.S):
            return False
    return True


# ---------------------------------------------------------------- the tests
def run_doc(server, path):
    conn = RawConnection(server.host, server.port)
    rel = os.path.relpath(path, REPO_ROOT)
    try:
        for step in sessions(path):
            deadline = time.monotonic() + (PAUSE_LIMIT_S if step["pause"] else 0)
            while True:
                actual = format_reply(step["args"], conn.call(*step["args"]))
                if reply_matches(step["reply"], actual) or time.monotonic() >= deadline:
                    break
                time.sleep(0.1)  # time passes in the doc: repeat until the state it shows
            assert reply_matches(step["reply"], actual), (
                "%s:%d: `%s` answered\n%s\nwhere the doc shows\n%s" % (
                    rel, step["line"], step["text"], "\n".join(actual),
                    "\n".join(step["reply"]) or "(any reply but an error)"))
    finally:
        conn.close()


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: os.path.relpath(p, REPO_ROOT))
def test_documented_examples_run_in_order(servers, path):
    run_doc(servers.new(module_args=()), path)


def test_the_docs_have_examples():
    """The convention is in use: the front door and each family's doc have sessions."""
    names = {os.path.relpath(p, REPO_ROOT) for p in doc_files()}
    for want in ("README.md", "docs/captcha.md", "docs/ratelimit.md", "docs/locks.md", "docs/commands.md"):
        assert want in names, want


def test_the_checker_fails_on_a_wrong_reply(servers, tmp_path):
    """A doc whose shown reply differs, or whose command errors, fails."""
    s = servers.new(module_args=())
    bad = tmp_path / "bad.md"
    bad.write_text("```\n127.0.0.1:6379> CL.THROTTLE k 15 30 60\n1) (integer) 1\n```\n")
    with pytest.raises(AssertionError, match="answered"):
        run_doc(s, str(bad))
    err = tmp_path / "err.md"
    err.write_text("```\n127.0.0.1:6379> RL.GCRA k 0 1000\n```\n")
    with pytest.raises(AssertionError, match="any reply but an error"):
        run_doc(s, str(err))


def test_format_matches_redis_cli():
    """Spot checks of the formatting against what redis-cli prints."""
    nested = ("array", [("int", 1), ("array", [("bulk", b"a\"b\n"), ("status", "OK")]), ("bulk", None)])
    assert format_tty(nested) == '1) (integer) 1\n2) 1) "a\\"b\\n"\n   2) OK\n3) (nil)\n'
    ten = ("array", [("int", i) for i in range(10)])
    assert format_tty(ten).split("\n")[0] == " 1) (integer) 0"
    assert format_tty(("array", [])) == "(empty array)\n"
    assert split_args("A 'b c' \"d\\x41\\n\" e") == ["A", "b c", "dA\n", "e"]
    assert reply_matches(["2) (integer) \u2026"], ["2) (integer) 17"])
    assert reply_matches(["1) x", "\u2026"], ["1) x", "2) y"])
    assert not reply_matches(["1) x"], ["1) x", "2) y"])

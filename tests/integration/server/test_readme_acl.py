# SPDX-License-Identifier: BSD-3-Clause
"""The ACL example of docs/operations.md ("ACLs"), executed as written: its `reader` and `writer`
lines must name exactly the module's read-only commands and all its public
commands (the running server's command table, internal commands excepted), and
the users they create must be able to run what they list and nothing else.

When a command is added, this test fails and prints the lines to paste."""

import os
import re

import pytest
import redis

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
INTERNAL = {"MCAPTCHA_CACHE.VISIT_AT", "MCAPTCHA_CACHE.CAPTCHA_SET", "MCAPTCHA_CACHE.CHALLENGE_SET",
            "RL.GCRA_SET", "RL.WINDOW_HIT", "RL.WINDOW_SET", "LOCK.STATE"}


DOC = os.path.join(REPO_ROOT, "docs", "operations.md")
# An ACL line as the doc shows it: a redis-cli session line (prompt, then the command).
LINE = r"^(?:127\.0\.0\.1:6379> )?(ACL SETUSER (\w+) .*)$"


def _readme_lines():
    text = open(DOC, encoding="utf-8").read()
    section = text[text.index("## ACLs"):]
    section = section[:section.index("\n## ", 1)]
    return {m.group(2): m.group(1) for m in re.finditer(LINE, section, re.M)}


def _raw(r, *args):
    """A reply as the server sent it (redis-py reshapes COMMAND replies)."""
    conn = r.connection_pool.get_connection("_")
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def _module_commands(r):
    names = [n.decode() for n in _raw(r, "COMMAND", "LIST", "FILTERBY", "MODULE", "mcaptcha_cache")]
    out = {}
    for n in names:
        info = _raw(r, "COMMAND", "INFO", n)[0]
        out[n.upper()] = (b"readonly" in info[2], abs(int(info[1])))
    return out


def _expected(cmds):
    public = sorted(n for n in cmds if n not in INTERNAL)
    reads = [n for n in public if cmds[n][0]]
    writes = [n for n in public if not cmds[n][0]]
    head = "ACL SETUSER %s on >secret ~* -@all "
    return {"reader": head % "reader" + " ".join("+" + n for n in reads),
            "writer": head % "writer" + " ".join("+" + n for n in reads + writes)}


def _granted(line):
    return {t[1:].upper() for t in line.split() if t.startswith("+")}


def test_readme_acl_lines_match_the_command_table(r):
    lines = _readme_lines()
    want = _expected(_module_commands(r))
    for user in ("reader", "writer"):
        assert user in lines, "docs/operations.md's ACL section has no %s line" % user
        assert _granted(lines[user]) == _granted(want[user]), (
            "docs/operations.md ACL %s line is out of date (make readme-acl); use:\n%s" % (user, want[user]))


def test_readme_acl_lines_work_as_written(server):
    r = server.client()
    for line in _readme_lines().values():
        assert r.execute_command(*line.split()) == b"OK"
    cmds = _module_commands(r)
    for user in ("reader", "writer"):
        c = redis.Redis(host=server.host, port=server.port, username=user, password="secret")
        for name, (readonly, arity) in cmds.items():
            allowed = name not in INTERNAL and (readonly or user == "writer")
            args = ["1"] * (arity - 1)
            if name == "RL.MULTI":
                args = ["1", "1", "k", "GCRA", "1", "1"]
            perm = r.execute_command("ACL", "DRYRUN", user, name, *args)
            assert (perm == b"OK") == allowed, (user, name, perm)
        with pytest.raises(redis.exceptions.NoPermissionError):
            c.set("plain", "x")  # -@all: nothing else
        c.close()

# SPDX-License-Identifier: BSD-3-Clause
"""Every module command carries the ACL categories its flags say (server/commands.c).

On Redis 7.2+ and Valkey (RedisModule_SetCommandACLCategories) each command is in
@write when it writes and @read when it does not, in @fast when it is flagged fast,
and, where the server lets a module add a category (Redis 7.4+, Valkey 8+), in
@mcaptcha. So `+@read` gives a user the module's reads and none of its writes, and
`+@mcaptcha` all of the module's commands and nothing else. Redis 7.0 gives module
commands no categories: skipped there (test_hardening.py grants commands by name).

(`ACL CAT <category>` is not used: Valkey 8.0 lists no module command in any
category, although its ACL rules apply them.)"""

import pytest

from resp_conn import Conn
from servers import RawConnection


def _version(r):
    info = r.info("server")
    return tuple(int(x) for x in str(info["redis_version"]).split(".")[:2])


@pytest.fixture
def cats_server(server):
    r = server.client(decode_responses=True)
    if _version(r) < (7, 2):
        pytest.skip("Redis 7.0 gives module commands no ACL categories (SetCommandACLCategories is 7.2+)")
    return server, r


def _module_commands(c):
    names = c.call("COMMAND", "LIST", "FILTERBY", "MODULE", "mcaptcha_cache")
    assert len(names) > 30, names
    return sorted(n.decode() for n in names)


def test_categories_follow_the_flags(cats_server):
    server, r = cats_server
    own = "mcaptcha" in r.execute_command("ACL", "CAT")
    c = Conn(server)
    problems = []
    for name in _module_commands(c):
        info = c.call("COMMAND", "INFO", name)[0]  # parsed as sent: flags and categories are status strings
        flags, cats = set(info[2]), set(info[6])
        want = {"@write" if "write" in flags else "@read"}
        if "fast" in flags:
            want.add("@fast")
        if own:
            want.add("@mcaptcha")
        if cats != want:
            problems.append("%s (flags %s): %s, expected %s" % (name, sorted(flags), sorted(cats), sorted(want)))
    c.close()
    assert not problems, "\n".join(problems)


def test_a_read_category_user_reads_and_cannot_write(cats_server):
    server, r = cats_server
    assert r.execute_command("ACL", "SETUSER", "catreader", "reset", "on", ">pw", "~*", "+@read") == "OK"
    assert r.execute_command("RL.GCRA", "cg", 10, 60000)[0] == 1
    assert r.execute_command("LOCK.ACQUIRE", "cl", "o", 60000)[0] == 1
    c = RawConnection(server.host, server.port)
    try:
        assert c.command("AUTH", "catreader", "pw") == b"+OK\r\n"
        for cmd in [("RL.GCRA_PEEK", "cg", 10, 60000), ("RL.WINDOW_PEEK", "cw", 10, 60000),
                    ("LOCK.INSPECT", "cl"), ("MCAPTCHA_CACHE.GET", "cc")]:
            assert not c.command(*cmd).startswith(b"-NOPERM"), cmd
        for cmd in [("RL.GCRA", "cg", 10, 60000), ("RL.REFUND", "cg", 1), ("RL.MULTI", 1, 1, "cg", "GCRA", 10, 60000),
                    ("LOCK.RELEASE", "cl", "o"), ("LOCK.EXTEND", "cl", "o", 1000), ("LOCK.ADD_PERMITS", "cl", 1),
                    ("MCAPTCHA_CACHE.ADD_VISITOR", "cc")]:
            assert c.command(*cmd).startswith(b"-NOPERM"), cmd
    finally:
        c.close()
        r.execute_command("ACL", "DELUSER", "catreader")
    assert r.execute_command("RL.GCRA_PEEK", "cg", 10, 60000, "COST", 0)[1] == 9  # nothing taken by the reader


def test_the_module_category_holds_the_module_and_nothing_else(cats_server):
    server, r = cats_server
    if "mcaptcha" not in r.execute_command("ACL", "CAT"):
        pytest.skip("this server lets no module add an ACL category (RedisModule_AddACLCategory)")
    assert r.execute_command("ACL", "SETUSER", "catmod", "reset", "on", ">pw", "~*", "+@mcaptcha") == "OK"
    c = RawConnection(server.host, server.port)
    try:
        assert c.command("AUTH", "catmod", "pw") == b"+OK\r\n"
        assert c.command("LOCK.ACQUIRE", "cm", "o", 60000).startswith(b"*3\r\n:1\r\n")
        assert c.command("RL.GCRA", "cm2", 10, 60000).startswith(b"*4\r\n:1\r\n")
        for cmd in [("SET", "x", 1), ("GET", "x"), ("DEL", "cm")]:
            assert c.command(*cmd).startswith(b"-NOPERM"), cmd
    finally:
        c.close()
        r.execute_command("ACL", "DELUSER", "catmod")

# SPDX-License-Identifier: BSD-3-Clause
"""libmcaptcha looks only at the FIRST entry of MODULE LIST to decide whether
the cache module is loaded. With another module loaded the server's order is
its own; the opt-in MODULE-LIST-FIRST option (load argument, or the config
mcaptcha_cache.module-list-first) makes MODULE LIST answer with mcaptcha_cache
first, in the client's protocol, and changes nothing else."""

import os
import subprocess

import pytest

from servers import RawConnection, RedisServer

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OTHER_SO = os.path.join(REPO_ROOT, "build", "testmodules", "other_module.so")
OTHER_B_SO = os.path.join(REPO_ROOT, "build", "testmodules", "other_module_b.so")


@pytest.fixture(scope="module")
def other_so():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    p = subprocess.run(["make", "--no-print-directory", "-C", os.path.join(REPO_ROOT, "tests", "modules")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and os.path.isfile(OTHER_SO) and os.path.isfile(OTHER_B_SO), p.stdout + p.stderr
    return OTHER_SO


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    """Every name MODULE LIST shows with both modules loaded: ours, the other
    one, and the server's own built-ins (Valkey 9 lists `lua`), read from a
    server started with no module."""
    bare = RedisServer(dir=str(tmp_path_factory.mktemp("bare")))
    bare.start()
    try:
        builtins = _names(bare.client().execute_command("MODULE", "LIST"))
    finally:
        bare.stop()
    return sorted([b"mcaptcha_cache", b"othermod"] + builtins)


def _names(reply):
    out = []
    for entry in reply:
        if isinstance(entry, dict):
            out.append(entry[b"name"])
        else:
            out.append(entry[entry.index(b"name") + 1])
    return out


def _server(tmp_path, module_path, other_so, first):
    args = ["MODULE-LIST-FIRST", "yes"] if first else []
    # the other module is loaded first, ours second
    return RedisServer(dir=str(tmp_path), module=other_so,
                       config={"loadmodule": [module_path] + args})


def test_first_on_every_start(tmp_path, module_path, other_so, expected):
    s = _server(tmp_path, module_path, other_so, True)
    try:
        for _ in range(20):
            s.start()
            r = s.client()
            names = _names(r.execute_command("MODULE", "LIST"))
            assert names[0] == b"mcaptcha_cache" and sorted(names) == expected
            assert _names(r.execute_command("module", "list"))[0] == b"mcaptcha_cache"
            assert r.execute_command("OTHERMOD.PING") == b"PONG"
            s.stop()
    finally:
        if s.running():
            s.stop()


def test_resp3_and_config_toggle(tmp_path, module_path, other_so, expected):
    s = _server(tmp_path, module_path, other_so, False)
    s.start()
    try:
        r = s.client()
        assert r.execute_command("CONFIG", "GET", "mcaptcha_cache.module-list-first") == [
            b"mcaptcha_cache.module-list-first", b"no"]
        plain = _names(r.execute_command("MODULE", "LIST"))
        assert sorted(plain) == expected
        assert r.execute_command("CONFIG", "SET", "mcaptcha_cache.module-list-first", "yes") == b"OK"
        assert _names(r.execute_command("MODULE", "LIST"))[0] == b"mcaptcha_cache"
        with RawConnection(s.host, s.port) as c:  # RESP3: an array of maps, ours first
            c.command("HELLO", "3")
            rep = c.command("MODULE", "LIST")
            assert rep.startswith(b"*%d\r\n%%" % len(expected)), rep
            assert rep.index(b"mcaptcha_cache") < rep.index(b"othermod"), rep
        assert r.execute_command("CONFIG", "SET", "mcaptcha_cache.module-list-first", "no") == b"OK"
        assert sorted(_names(r.execute_command("MODULE", "LIST"))) == expected
        assert r.execute_command("MODULE", "LIST") == r.execute_command("MODULE", "LIST")
    finally:
        s.stop()


def _entry_name(entry):
    return entry[b"name"] if isinstance(entry, dict) else entry[entry.index(b"name") + 1]


def test_first_keeps_the_others_in_the_servers_order(tmp_path, module_path, other_so):
    """With two other modules, the reply is exactly the server's own (every field of every
    entry) with mcaptcha_cache moved to the front: the others keep the server's order."""
    s = RedisServer(dir=str(tmp_path), module=module_path, config={"enable-module-command": "yes"})
    s.start()
    try:
        r = s.client()
        assert r.execute_command("MODULE", "LOAD", other_so) == b"OK"
        assert r.execute_command("MODULE", "LOAD", OTHER_B_SO) == b"OK"
        own = r.execute_command("MODULE", "LIST")
        names = [_entry_name(e) for e in own]
        assert {b"mcaptcha_cache", b"othermod", b"othermodb"} <= set(names)
        assert r.execute_command("CONFIG", "SET", "mcaptcha_cache.module-list-first", "yes") == b"OK"
        first = r.execute_command("MODULE", "LIST")
        ours = [e for e in own if _entry_name(e) == b"mcaptcha_cache"]
        assert first == ours + [e for e in own if _entry_name(e) != b"mcaptcha_cache"]
        with RawConnection(s.host, s.port) as c:  # RESP3: the same order of names
            c.command("HELLO", "3")
            rep = c.command("MODULE", "LIST")
            pos = [rep.index(b"$%d\r\n%s\r\n" % (len(n), n)) for n in [_entry_name(e) for e in first]]
            assert pos == sorted(pos), rep
    finally:
        s.stop()


def test_bad_option_value_refuses_to_load(tmp_path, module_path):
    s = RedisServer(dir=str(tmp_path), module=module_path, module_args=["MODULE-LIST-FIRST", "maybe"])
    with pytest.raises(Exception):
        s.start()
    assert "MODULE-LIST-FIRST needs the value yes or no" in open(s.logfile).read()

# SPDX-License-Identifier: BSD-3-Clause
"""The module configs (server/config.h): `CONFIG GET mcaptcha_cache.*` lists each
with its default; `CONFIG SET` changes behaviour at once and refuses bad values
with the server's own message (changing nothing); the same names work as
`loadmodule` arguments (any case: INTERNAL-COMMANDS yes as before) and as
redis.conf lines, a redis.conf line winning over a load argument; a bad load
argument makes the module refuse to load, with a log line naming the range.
internal-commands is a protected config: CONFIG SET changes it only where the
server runs with enable-protected-configs yes (or local)."""

import json
import time

import pytest
import redis

from servers import ConfigFileServer, ServerStartError, raw_command, wait_until

DEFAULTS = {
    "max-captcha-config-bytes": "16384",
    "max-challenge-json-bytes": "4096",
    "max-challenge-string-bytes": "512",
    "fencing-margin-ms": "10000",
    "internal-commands": "no",
    "module-list-first": "no",
    "lock-follow-renames": "no",
}
PREFIX = "mcaptcha_cache."


def configs(c):
    """CONFIG GET mcaptcha_cache.* as {name without prefix: value}."""
    got = c.execute_command("CONFIG", "GET", PREFIX + "*")
    if isinstance(got, list):  # RESP2: a flat list
        got = dict(zip(got[0::2], got[1::2]))
    return {k.decode()[len(PREFIX):]: v.decode() for k, v in got.items()}


def config_set(c, name, value):
    return c.execute_command("CONFIG", "SET", PREFIX + name, value)


def captcha_cfg(nlevels=3, pad=0):
    levels = [{"visitor_threshold": i * 10, "difficulty_factor": i + 1} for i in range(nlevels)]
    return json.dumps({"levels": levels, "duration": 30}) + " " * pad


def challenge(s, difficulty=5):
    return json.dumps({"difficulty": difficulty, "duration": 30, "challenge": s})


def now_us(c):
    s, us = c.time()
    return s * 1_000_000 + us


def refusal(name):
    return (b"-ERR %s is internal (replication and AOF only); load the module with "
            b"INTERNAL-COMMANDS yes to call it\r\n" % name.encode())


# ------------------------------------------------------------------ defaults
def test_config_get_lists_every_config_with_its_default(servers):
    s = servers.new(module_args=())
    assert configs(s.client()) == DEFAULTS
    # one at a time too, and CONFIG GET of a pattern
    c = s.client()
    assert c.execute_command("CONFIG", "GET", PREFIX + "fencing-margin-ms") == [
        b"mcaptcha_cache.fencing-margin-ms", b"10000"]
    assert len(c.execute_command("CONFIG", "GET", PREFIX + "max-*")) == 2 * 3


# ------------------------------------------------------------ CONFIG SET acts
def test_max_captcha_config_bytes(servers):
    s = servers.new(module_args=())
    c = s.client()
    body = captcha_cfg(3)
    assert len(body) < 200
    assert c.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "a", body) == b"OK"
    assert config_set(c, "max-captcha-config-bytes", len(body) - 1) == b"OK"
    assert configs(c)["max-captcha-config-bytes"] == str(len(body) - 1)
    wire = raw_command(s, "MCAPTCHA_CACHE.ADD_CAPTCHA", "b", body)
    assert wire == b"-ERR invalid config: the JSON is larger than %d bytes\r\n" % (len(body) - 1), wire
    assert c.dbsize() == 1  # nothing written
    # exactly at the limit: accepted
    assert config_set(c, "max-captcha-config-bytes", len(body)) == b"OK"
    assert c.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "b", body) == b"OK"
    # larger than the default: refused by default, accepted once raised
    big = captcha_cfg(3, pad=20000)
    assert config_set(c, "max-captcha-config-bytes", 16384) == b"OK"
    with pytest.raises(redis.ResponseError, match="larger than 16384 bytes"):
        c.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "big", big)
    assert config_set(c, "max-captcha-config-bytes", 1 << 20) == b"OK"
    assert c.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "big", big) == b"OK"
    # captchas accepted before a lower limit still work (the limit is on input only)
    assert config_set(c, "max-captcha-config-bytes", 64) == b"OK"
    assert c.execute_command("MCAPTCHA_CACHE.ADD_VISITOR", "big") is not None
    assert c.execute_command("MCAPTCHA_CACHE.GET", "big") == 1


def test_challenge_limits(servers):
    s = servers.new(module_args=())
    c = s.client()
    assert c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "site", challenge("abcdef")) == b"OK"
    assert config_set(c, "max-challenge-string-bytes", 5) == b"OK"
    with pytest.raises(redis.ResponseError, match="the challenge string is longer than 5 bytes"):
        c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "site", challenge("ghijkl"))
    assert c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "site", challenge("ghijk")) == b"OK"
    # the challenge taken before the change is still served
    assert c.execute_command("MCAPTCHA_CACHE.GET_CHALLENGE", "site", "abcdef") is not None
    long_json = challenge("x" * 100)
    assert config_set(c, "max-challenge-string-bytes", 1000) == b"OK"
    assert config_set(c, "max-challenge-json-bytes", len(long_json) - 1) == b"OK"
    with pytest.raises(redis.ResponseError, match="the JSON is larger than %d bytes" % (len(long_json) - 1)):
        c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "site", long_json)
    assert config_set(c, "max-challenge-json-bytes", len(long_json)) == b"OK"
    assert c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "site", long_json) == b"OK"
    # beyond the defaults: a 600-byte challenge string
    assert config_set(c, "max-challenge-json-bytes", 4096) == b"OK"
    assert config_set(c, "max-challenge-string-bytes", 512) == b"OK"
    with pytest.raises(redis.ResponseError, match="longer than 512 bytes"):
        c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "site", challenge("y" * 600))
    assert config_set(c, "max-challenge-string-bytes", 600) == b"OK"
    assert c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "site", challenge("y" * 600)) == b"OK"


def test_internal_commands_toggle(servers):
    s = servers.new(module_args=(), config={"enable-protected-configs": "yes"})
    c = s.client()
    assert raw_command(s, "LOCK.STATE", "k", 1, 5, 0) == refusal("LOCK.STATE")
    assert config_set(c, "internal-commands", "yes") == b"OK"
    assert configs(c)["internal-commands"] == "yes"
    assert raw_command(s, "LOCK.STATE", "k", 1, 5, 0) == b"+OK\r\n"
    assert c.execute_command("LOCK.INSPECT", "k")[1] == 5
    assert config_set(c, "internal-commands", "no") == b"OK"
    assert raw_command(s, "LOCK.STATE", "k", 1, 6, 0) == refusal("LOCK.STATE")
    assert c.execute_command("LOCK.INSPECT", "k")[1] == 5


def test_internal_commands_is_protected(servers):
    """Without enable-protected-configs, CONFIG SET cannot open the internal
    commands (a load argument or redis.conf can)."""
    s = servers.new(module_args=())
    c = s.client()
    with pytest.raises(redis.ResponseError, match="protected"):
        config_set(c, "internal-commands", "yes")
    assert configs(c)["internal-commands"] == "no"
    assert raw_command(s, "LOCK.STATE", "k", 1, 5, 0) == refusal("LOCK.STATE")


def test_fencing_margin_set_and_read_back(servers):
    s = servers.new(module_args=())
    c = s.client()
    assert config_set(c, "fencing-margin-ms", 0) == b"OK"
    assert configs(c)["fencing-margin-ms"] == "0"
    assert config_set(c, "fencing-margin-ms", 86400000) == b"OK"
    assert configs(c)["fencing-margin-ms"] == "86400000"
    # tokens keep growing whatever the margin
    t1 = c.execute_command("LOCK.ACQUIRE", "f", "a", 1000)[1]
    assert c.execute_command("LOCK.RELEASE", "f", "a") == 0
    assert config_set(c, "fencing-margin-ms", 0) == b"OK"
    assert c.execute_command("LOCK.ACQUIRE", "f", "a", 1000)[1] > t1


@pytest.mark.parametrize("name,value,needle", [
    ("max-captcha-config-bytes", "63", "between 64 and 16777216"),
    ("max-captcha-config-bytes", "16777217", "between 64 and 16777216"),
    ("max-captcha-config-bytes", "lots", "integer"),
    ("max-challenge-json-bytes", "63", "between 64 and 1048576"),
    ("max-challenge-string-bytes", "0", "between 1 and 1048576"),
    ("max-challenge-string-bytes", "-5", "between 1 and 1048576"),
    ("fencing-margin-ms", "-1", "between 0 and 86400000"),
    ("fencing-margin-ms", "86400001", "between 0 and 86400000"),
    ("fencing-margin-ms", "1.5", "integer"),
    ("module-list-first", "maybe", "yes"),
    ("lock-follow-renames", "on", "yes"),
])
def test_invalid_values_refused(servers, name, value, needle):
    s = servers.new(module_args=(), config={"enable-protected-configs": "yes"})
    c = s.client()
    with pytest.raises(redis.ResponseError) as e:
        config_set(c, name, value)
    assert "mcaptcha_cache." + name in str(e.value) and needle in str(e.value), str(e.value)
    assert configs(c) == DEFAULTS
    with pytest.raises(redis.ResponseError):
        config_set(c, "no-such-config", 1)


# ------------------------------------------------------------ load arguments
def test_load_arguments(servers):
    t_before = time.time()   # before the module loads (its start computes the token floor)
    s = servers.new(module_args=("max-captcha-config-bytes", "128", "MAX-CHALLENGE-STRING-BYTES", "4",
                                 "fencing-margin-ms", "3600000", "Internal-Commands", "yes",
                                 "max-challenge-json-bytes", "100"))
    c = s.client()
    want = dict(DEFAULTS, **{"max-captcha-config-bytes": "128", "max-challenge-string-bytes": "4",
                             "fencing-margin-ms": "3600000", "internal-commands": "yes",
                             "max-challenge-json-bytes": "100"})
    assert configs(c) == want
    with pytest.raises(redis.ResponseError, match="larger than 128 bytes"):
        c.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "a", captcha_cfg(3, pad=100))
    with pytest.raises(redis.ResponseError, match="longer than 4 bytes"):
        c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "a", challenge("abcde"))
    assert raw_command(s, "LOCK.STATE", "k", 1, 5, 0) == b"+OK\r\n"
    # the start's token floor is an hour beyond the clock (the default: 10 s)
    tok = c.execute_command("LOCK.ACQUIRE", "fresh", "o", 1000)[1]
    assert tok >= int(t_before * 1e6) - 2_000_000 + 3_600_000_000, tok - now_us(c)
    assert tok <= now_us(c) + 3_600_000_000 + 2_000_000


@pytest.mark.parametrize("args,needle", [
    (("max-captcha-config-bytes", "10"),
     "load option MAX-CAPTCHA-CONFIG-BYTES needs an integer from 64 to 16777216 (bytes)"),
    (("fencing-margin-ms", "soon"), "load option FENCING-MARGIN-MS needs an integer from 0 to 86400000"),
    (("max-challenge-json-bytes",), "load option MAX-CHALLENGE-JSON-BYTES needs an integer"),
    (("module-list-first", "1"), "MODULE-LIST-FIRST needs the value yes or no"),
    (("lock-follow-renames", "true"), "LOCK-FOLLOW-RENAMES needs the value yes or no"),
    (("mcaptcha_cache.fencing-margin-ms", "5"), "unknown load option 'mcaptcha_cache.fencing-margin-ms'"),
])
def test_bad_load_arguments_refuse_to_load(servers, args, needle):
    s = servers.new(start=False, module_args=args)
    with pytest.raises(ServerStartError):
        s.start()
    assert needle in open(s.logfile, errors="replace").read(), args


# Each numeric config's range ends as load arguments: min and max load (and read back),
# min - 1 and max + 1 refuse to load with the range in the log.
RANGES = [("max-captcha-config-bytes", 64, 16777216), ("max-challenge-json-bytes", 64, 1048576),
          ("max-challenge-string-bytes", 1, 1048576), ("fencing-margin-ms", 0, 86400000)]


@pytest.mark.parametrize("name,lo,hi", RANGES, ids=[r[0] for r in RANGES])
def test_load_argument_range_ends(servers, name, lo, hi):
    for v in (lo, hi):
        s = servers.new(module_args=(name, v))
        assert s.client().config_get("mcaptcha_cache." + name) == {"mcaptcha_cache." + name: str(v)}
        s.stop()
    for v in (lo - 1, hi + 1):
        s = servers.new(start=False, module_args=(name, v))
        with pytest.raises(ServerStartError):
            s.start()
        assert "needs an integer from %d to %d" % (lo, hi) in open(s.logfile, errors="replace").read(), (name, v)


# --------------------------------------------------------------- redis.conf
@pytest.fixture
def conf_server(tmp_path, module_path):
    made = []

    def make(lines):
        conf = tmp_path / "redis.conf"
        conf.write_text("\n".join(lines) + "\n")
        s = ConfigFileServer(str(conf), dir=str(tmp_path / "data"))
        made.append(s)
        return s

    yield make
    for s in made:
        if s.running():
            s.stop()


def test_config_file_lines(conf_server, module_path):
    # the file's line wins over the load argument
    s = conf_server(["loadmodule %s MAX-CHALLENGE-STRING-BYTES 7 fencing-margin-ms 1" % module_path,
                     "mcaptcha_cache.max-challenge-string-bytes 3",
                     "mcaptcha_cache.module-list-first yes",
                     "mcaptcha_cache.internal-commands yes",
                     "mcaptcha_cache.lock-follow-renames yes"])
    s.start()
    c = s.client()
    assert configs(c) == dict(DEFAULTS, **{"max-challenge-string-bytes": "3", "fencing-margin-ms": "1",
                                           "module-list-first": "yes", "internal-commands": "yes",
                                           "lock-follow-renames": "yes"})
    # lock-follow-renames is on from the start: a renamed held lock is placed at once
    assert c.execute_command("LOCK.ACQUIRE", "held", "o", 60000)[0] == 1
    c.execute_command("RENAME", "held", "held:new")
    locks = lambda: c.info("mcaptcha_cache_locks")  # noqa: E731
    wait_until(lambda: locks()["mcaptcha_cache_lease_renames_followed"] == 1, "the rename followed")
    assert locks()["mcaptcha_cache_leases_moved_pending"] == 0
    with pytest.raises(redis.ResponseError, match="longer than 3 bytes"):
        c.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "a", challenge("abcd"))
    assert raw_command(s, "LOCK.STATE", "k", 1, 5, 0) == b"+OK\r\n"
    names = c.execute_command("MODULE", "LIST")
    first = names[0]
    assert (first[b"name"] if isinstance(first, dict) else first[first.index(b"name") + 1]) == b"mcaptcha_cache"


def test_bad_config_file_value_refuses_to_start(conf_server, module_path):
    s = conf_server(["loadmodule %s" % module_path, "mcaptcha_cache.fencing-margin-ms 99999999999"])
    with pytest.raises(ServerStartError):
        s.start()
    log = open(s.logfile, errors="replace").read()
    assert "mcaptcha_cache.fencing-margin-ms" in log, log[-2000:]


def test_config_rewrite_and_restart_keep_a_set_margin(conf_server, module_path):
    """CONFIG SET, CONFIG REWRITE, restart: the new fencing margin is the start's
    token floor (an hour beyond the clock instead of 10 s)."""
    s = conf_server(["loadmodule %s" % module_path])
    s.start()
    c = s.client()
    first = c.execute_command("LOCK.ACQUIRE", "a", "o", 1000)[1]
    assert first <= now_us(c) + 10_000_000 + 2_000_000
    assert config_set(c, "fencing-margin-ms", 3600000) == b"OK"
    assert config_set(c, "max-captcha-config-bytes", 1000) == b"OK"
    assert c.execute_command("CONFIG", "REWRITE") == b"OK"
    text = open(s.conf).read()
    assert "mcaptcha_cache.fencing-margin-ms 3600000" in text, text
    t_before = now_us(c)
    s.restart()
    c = s.client()
    assert configs(c)["fencing-margin-ms"] == "3600000"
    assert configs(c)["max-captcha-config-bytes"] == "1000"
    tok = c.execute_command("LOCK.ACQUIRE", "b", "o", 1000)[1]
    assert tok >= t_before + 3_600_000_000, (tok - t_before) / 1e6

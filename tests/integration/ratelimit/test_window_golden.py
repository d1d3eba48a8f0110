# SPDX-License-Identifier: BSD-3-Clause
"""Windows saved by the last build that wrote mcap-wndw encver 1 load unchanged.

tests/fixtures/rdb/windows-encver1.rdb was written by commit 1aa506f (see
tests/fixtures/rdb/make_fixtures.py, WINDOWS_ENCVER1): slots of window/256 and
hits in 2100. The current module must load the same state (the digests and
expiry times that build reported are written out here), answer on it with its
old slot width until the window empties, save it at encver 2 and load it back,
and replay the old internal-command forms (RL.WINDOW_HIT ... 0, RL.WINDOW_SET
without SLOTMS) as the old build did."""

import os
import shutil
import sys

import pytest
import redis

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))
FIXTURE = os.path.join(TESTS, "fixtures", "rdb", "windows-encver1.rdb")
sys.path.insert(0, os.path.join(TESTS, "legacy"))

from rdb_reader import read_rdb  # noqa: E402

Y2100 = 4102444800000
HOUR = 3600000
# what commit 1aa506f answered on this file (DEBUG DIGEST-VALUE, PEXPIRETIME)
WANT = {
    "goldw:hour": (b"b95bfc333e546badade861331711d301de5bb71d", 4102448414484),
    "goldw:sec": (b"3015a963265ebd37a4b6333609e0223aa5b588dd", 4102444801501),
    "goldw:hit": (b"82f5426bda5f93373dfc55c6c7161ce397e27375", 4102444862196),
}


def test_encver1_windows_load_and_stay(servers, tmp_path):
    disk = read_rdb(FIXTURE)
    assert {(e.type_name, e.encver) for e in disk.values()} == {("mcap-wndw", 1)}
    d = tmp_path / "golden-windows"
    d.mkdir()
    shutil.copyfile(FIXTURE, str(d / "dump.rdb"))
    s = servers.new(name="golden-windows", dir=str(d))
    c = s.client()
    got = {k: (c.execute_command("DEBUG", "DIGEST-VALUE", k)[0], c.pexpiretime(k)) for k in WANT}
    assert got == WANT
    # the answers of the old build (same slots of 14,062 ms)
    assert c.execute_command("RL.WINDOW_PEEK", "goldw:hour", 10, HOUR, "COST", 0, "AT", Y2100 + 1000) == \
        [1, 4, -1, 3613484]
    assert c.execute_command("RL.WINDOW_PEEK", "goldw:hour", 10, HOUR, "COST", 0,
                             "AT", Y2100 + HOUR - 60000 + 14062) == [1, 6, -1, 60422]
    # saved at encver 2 and loaded back: the same values
    c.execute_command("SAVE")
    s.stop()
    assert {(e.type_name, e.encver) for e in read_rdb(str(d / "dump.rdb")).values()} == {("mcap-wndw", 2)}
    s.start()
    c = s.client()
    assert {k: (c.execute_command("DEBUG", "DIGEST-VALUE", k)[0], c.pexpiretime(k)) for k in WANT} == WANT
    # a hit while old hits still count keeps the old width (its digest shows no width)...
    c.execute_command("RL.WINDOW", "goldw:sec", 5, 1000, "AT", Y2100 + 600)
    st = c.execute_command("RL.WINDOW_PEEK", "goldw:sec", 5, 1000, "COST", 0, "AT", Y2100 + 600)
    assert st[1] == 1
    # ...and once the window is empty the next hit starts it over with the fine width
    assert c.execute_command("RL.WINDOW", "goldw:hour", 10, HOUR, "AT", Y2100 + 2 * HOUR)[:2] == [1, 9]
    got = c.execute_command("RL.WINDOW", "goldw:hour", 10, HOUR, "COST", 0, "AT", Y2100 + 3 * HOUR)
    assert got[:2] == [1, 9] and got[3] <= 1000, got   # gone within 1 s of its hour (not 14 s)


def test_old_internal_command_forms_replay(servers):
    s = servers.new(module_args=("INTERNAL-COMMANDS", "yes"))
    c = s.client()
    # RL.WINDOW_HIT ... 0: a window of window/256 slots, as a released primary meant
    assert c.execute_command("RL.WINDOW_HIT", "a", HOUR, 5, Y2100, 1, 0) == 1
    got = c.execute_command("RL.WINDOW_PEEK", "a", 5, HOUR, "COST", 0, "AT", Y2100)
    assert got[3] == (Y2100 // 14062 + 1) * 14062 + HOUR - Y2100
    # RL.WINDOW_SET without SLOTMS: the same
    c.execute_command("RL.WINDOW_SET", "b", HOUR, 5, Y2100, 1, Y2100 // 14062, 2)
    assert c.execute_command("DEBUG", "DIGEST-VALUE", "b") != c.execute_command("DEBUG", "DIGEST-VALUE", "a")
    assert c.execute_command("RL.WINDOW_PEEK", "b", 5, HOUR, "COST", 0, "AT", Y2100)[1:] == [3, -1, got[3]]
    # the new forms: width 1, SLOTMS
    assert c.execute_command("RL.WINDOW_HIT", "n", HOUR, 5, Y2100, 1, 1) == 1
    assert c.execute_command("RL.WINDOW_PEEK", "n", 5, HOUR, "COST", 0, "AT", Y2100)[3] == \
        (Y2100 // 1000 + 1) * 1000 + HOUR - Y2100
    c.execute_command("RL.WINDOW_SET", "m", HOUR, 5, Y2100, 1, Y2100 // 1000, 1, "SLOTMS", 1000)
    assert c.execute_command("DEBUG", "DIGEST-VALUE", "m") == c.execute_command("DEBUG", "DIGEST-VALUE", "n")
    for bad in (["SLOTMS", 999], ["SLOTMS", 0], ["SLOTMS"]):
        try:
            c.execute_command("RL.WINDOW_SET", "x", HOUR, 5, Y2100, 1, Y2100 // 1000, 1, *bad)
            raise AssertionError("accepted %r" % (bad,))
        except Exception as e:
            assert "invalid window state" in str(e) or "wrong number" in str(e), e
    assert c.exists("x") == 0


@pytest.mark.parametrize("count,loads", [(2 ** 32 - 1, True), (2 ** 32, False), (2 ** 64 - 1, False)])
@pytest.mark.parametrize("width", ["slot", "bad-width"])
def test_encver2_loader_checks(servers, count, loads, width):
    """An encver 2 window's slot count is 32-bit (2^32 and above refused, never
    truncated) and its slot width must be one this module makes for the window."""
    sys.path.insert(0, os.path.join(TESTS, "integration", "server"))
    from test_loader_fields import decode, encode, UINT  # noqa: E402
    s = servers.new()
    c = s.client()
    c.execute_command("RL.WINDOW", "w", 5, HOUR, "COST", 3, "AT", Y2100)
    header, fields, version = decode(c.dump("w"))
    # window, limit, slot_ms, last_ms, n, slot, count
    assert [v for _, v in fields[:5]] == [HOUR, 5, 1000, Y2100, 1] and fields[6] == (UINT, 3), fields
    fields[6] = (UINT, count)
    if width == "bad-width":
        fields[2], loads = (UINT, 999), False
    payload = encode(header, fields, version)
    if loads:
        assert c.restore("w2", 0, payload)
        assert c.execute_command("RL.WINDOW_PEEK", "w2", 5, HOUR, "COST", 0, "AT", Y2100)[1] == 0
    else:
        with pytest.raises(redis.ResponseError, match="Bad data format"):
            c.restore("w2", 0, payload)
        assert c.exists("w2") == 0

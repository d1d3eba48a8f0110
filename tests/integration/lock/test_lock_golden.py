"""Locks saved by the last release that wrote mcap-lock encver 2 load unchanged.

tests/fixtures/rdb/locks-encver2.rdb was written by a released build (commit
8ca1de3; see tests/fixtures/rdb/make_fixtures.py): a reentrant mutex, a
semaphore with two holders, a free lock and a concurrency limit, leases ending
in 2100. The current module must start on it, hold exactly that, keep it through
a save in its own encver, and go on granting with larger tokens."""

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))
FIXTURE = os.path.join(TESTS, "fixtures", "rdb", "locks-encver2.rdb")
sys.path.insert(0, os.path.join(TESTS, "legacy"))

from rdb_reader import read_rdb  # noqa: E402


def _view(c, key):
    v = c.execute_command("LOCK.INSPECT", key)
    return v[0], v[1], v[2], sorted((h[0], h[2], h[3]) for h in v[3])


WANT = {
    "gold:held": (1, 100, 0, [(b"owner-1", 100, 2)]),
    "gold:sem": (3, 200, 0, [(b"a", 150, 1), (b"b", 200, 1)]),
    "gold:free": (1, 300, 0, []),
    "gold:conc": (4, 400, 0, [(b"h", 400, 1)]),
}


def test_encver2_locks_load_and_stay(servers, tmp_path):
    disk = read_rdb(FIXTURE)
    assert {(e.type_name, e.encver) for e in disk.values()} == {("mcap-lock", 2)}
    d = tmp_path / "golden-locks"
    d.mkdir()
    shutil.copyfile(FIXTURE, str(d / "dump.rdb"))
    s = servers.new(name="golden-locks", dir=str(d))
    c = s.client()
    assert {k: _view(c, k) for k in WANT} == WANT
    digests = {k: c.execute_command("DEBUG", "DIGEST-VALUE", k) for k in WANT}
    # the holders are what they were: the owners' releases and the concurrency slot work
    assert c.execute_command("LOCK.ACQUIRE", "gold:held", "x", 1000)[0] == 0
    assert c.execute_command("LOCK.ACQUIRE", "gold:sem", "x", 1000, "PERMITS", 3)[1] > 200
    assert c.execute_command("LOCK.RELEASE", "gold:sem", "x") == 0
    assert c.execute_command("DEBUG", "DIGEST-VALUE", "gold:sem") != digests["gold:sem"]  # its last token grew
    digests["gold:sem"] = c.execute_command("DEBUG", "DIGEST-VALUE", "gold:sem")
    # saved in the current encver and loaded again: the same values
    c.execute_command("DEBUG", "RELOAD")
    assert {k: c.execute_command("DEBUG", "DIGEST-VALUE", k) for k in WANT} == digests
    assert c.execute_command("LOCK.RELEASE", "gold:held", "owner-1") == 1
    assert c.execute_command("LOCK.RELEASE", "gold:held", "owner-1") == 0
    assert c.execute_command("RL.CONCURRENCY_RELEASE", "gold:conc", "h") == 1
    assert not c.exists("gold:conc")  # a concurrency limit nobody holds is deleted
    got = c.execute_command("LOCK.ACQUIRE", "gold:held", "y", 1000)
    assert got[0] == 1 and got[1] > 100

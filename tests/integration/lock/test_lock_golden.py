# SPDX-License-Identifier: BSD-3-Clause
"""Locks saved by the last builds that wrote mcap-lock encver 2 and 3 load unchanged.

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


# tests/fixtures/rdb/locks-encver3.rdb: written by the last build writing encver 3
# (commit c291820, before the semaphore pool's adjustment; make_fixtures.py)
FIXTURE3 = os.path.join(TESTS, "fixtures", "rdb", "locks-encver3.rdb")


def _full(c, key):
    def pairs(flat):
        it = iter(flat)
        return {k.decode(): v for k, v in zip(it, it)}
    v = pairs(c.execute_command("LOCK.INSPECT", key, "FULL"))
    hs = sorted((h["owner"], h["mode"], h["weight"], h["state"], h["token"], h["count"], h["lock_delay_ms"])
                for h in map(pairs, v["holders"]))
    return v["permits"], v["adjustment"], v["size"], v["last_token"], v["kind"], hs


WANT3 = {
    "gold3:delay": (2, 0, 2, 500, b"semaphore", [(b"gone", b"permit", 1, b"lock-delay", 450, 0, 60000),
                                                 (b"kept", b"permit", 1, b"held", 500, 1, 9000)]),
    "gold3:readers": (1, 0, 1, 600, b"lock", [(b"r1", b"read", 1, b"held", 550, 1, 0),
                                              (b"r2", b"read", 1, b"held", 600, 2, 0)]),
    "gold3:weighted": (5, 0, 5, 700, b"semaphore", [(b"big", b"permit", 3, b"held", 650, 1, 0),
                                                    (b"small", b"permit", 1, b"held", 700, 1, 0)]),
    "gold3:free": (4, 0, 4, 800, b"semaphore", []),
}


def test_encver3_locks_load_and_stay(servers, tmp_path):
    disk = read_rdb(FIXTURE3)
    assert {(e.type_name, e.encver) for e in disk.values()} == {("mcap-lock", 3)}
    d = tmp_path / "golden-locks3"
    d.mkdir()
    shutil.copyfile(FIXTURE3, str(d / "dump.rdb"))
    s = servers.new(name="golden-locks3", dir=str(d))
    c = s.client()
    assert {k: _full(c, k) for k in WANT3} == WANT3
    digests = {k: c.execute_command("DEBUG", "DIGEST-VALUE", k) for k in WANT3}
    c.execute_command("DEBUG", "RELOAD")  # saved in encver 4 (adjustment 0) and loaded again
    assert {k: _full(c, k) for k in WANT3} == WANT3
    assert {k: c.execute_command("DEBUG", "DIGEST-VALUE", k) for k in WANT3} == digests
    assert c.execute_command("LOCK.AVAILABLE_PERMITS", "gold3:weighted") == 1
    assert c.execute_command("LOCK.ACQUIRE", "gold3:readers", "r3", 1000, "READ")[0] == 1
    assert c.execute_command("LOCK.ACQUIRE", "gold3:delay", "x", 1000, "PERMITS", 2)[0] == 0  # both taken

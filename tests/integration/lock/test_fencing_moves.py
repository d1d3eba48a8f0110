# SPDX-License-Identifier: BSD-3-Clause
"""The fencing floor learns the tokens of locks that arrive without a command.

A lock DUMPed on a node whose clock runs ahead (here: its last token is 5 s
past this node's clock, within the fencing margin) and brought here by RESTORE,
MIGRATE or COPY must raise this node's token floor: after the key is deleted, a
new grant's token still exceeds the arrived one. A restart would hide a missing
floor update (a start puts the floor at the clock + the margin), so every check
runs on a node that has been serving, never restarted, and that started with a
fencing margin of 0 (so its start floor is its start time, as a node's is once the
margin has passed) and then took the default margin back by CONFIG SET.
SPDX-License-Identifier: BSD-3-Clause"""

AHEAD_US = 5_000_000  # below the default fencing margin (10 s): learnt, not capped


def now_us(c):
    s, us = c.time()
    return s * 1_000_000 + us


def grant(c, key, owner="o"):
    g = c.execute_command("LOCK.ACQUIRE", key, owner, 60000)
    assert g[0] == 1, g
    return g[1]


def ahead_lock(c, key):
    """A held lock on `c` whose last token is 5 s past the clock: what a node whose
    clock runs 5 s ahead would have issued."""
    t = now_us(c) + AHEAD_US
    assert c.execute_command("LOCK.STATE", key, 1, t, 0) == b"OK"
    return t


def serving(servers):
    """Two nodes: `ahead` (the source) and `here`, which has served grants already."""
    ahead = servers.new(name="ahead")
    here = servers.new(name="here", module_args=("INTERNAL-COMMANDS", "yes", "fencing-margin-ms", 0))
    hc = here.client()
    assert hc.config_set("mcaptcha_cache.fencing-margin-ms", 10000)
    for i in range(3):
        grant(hc, "warm%d" % i)
    return ahead, ahead.client(), here, hc


def test_restore_raises_the_floor(servers):
    _, ac, _, hc = serving(servers)
    t = ahead_lock(ac, "k")
    assert hc.restore("k", 0, ac.dump("k"))
    assert hc.execute_command("LOCK.INSPECT", "k")[1] == t
    assert hc.delete("k") == 1
    assert grant(hc, "k") > t
    assert grant(hc, "other") > t, "the floor is process-wide"


def test_migrate_raises_the_floor(servers):
    _, ac, here, hc = serving(servers)
    t = ahead_lock(ac, "m")
    assert ac.migrate(here.host, here.port, "m", 0, 5000) == b"OK"
    assert hc.delete("m") == 1
    assert grant(hc, "m") > t


def test_copy_of_a_restored_lock_keeps_the_floor(servers):
    _, ac, here, hc = serving(servers)
    t = ahead_lock(ac, "c")
    assert hc.restore("c", 0, ac.dump("c"))
    assert hc.copy("c", "c2", destination_db=1)
    assert hc.delete("c") == 1
    h1 = here.client(db=1)
    assert h1.execute_command("LOCK.INSPECT", "c2")[1] == t
    assert h1.delete("c2") == 1
    assert grant(h1, "c2") > t

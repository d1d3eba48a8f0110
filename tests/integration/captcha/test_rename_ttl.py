# SPDX-License-Identifier: BSD-3-Clause
"""MCAPTCHA_CACHE.RENAME_CAPTCHA moves the captcha's TTL with it, as RENAME does --
and RENAME is what replicas and the AOF get. After PEXPIRE on a captcha key and a
rename, the primary, its replica and the primary restarted from its AOF agree on
whether the renamed key has a TTL (PTTL > 0) or none (-1); exact milliseconds are
never compared. The old name is gone everywhere."""

import pytest

from mcap import ADD_CAPTCHA, RENAME_CAPTCHA, cfg, ckey
from servers import wait_replicas_synced

HOUR_MS = 3_600_000


def ttl_state(c, key):
    """'ttl' (a TTL is set), 'none' (no TTL) or 'missing'."""
    t = c.pttl(key)
    return "missing" if t == -2 else "none" if t == -1 else "ttl" if t > 0 else t


@pytest.mark.parametrize("preamble", [False, True], ids=["commands-base", "rdb-preamble"])
def test_rename_keeps_ttl_on_primary_replica_and_aof(servers, aof_server, preamble):
    primary = aof_server(preamble=preamble, name="primary")
    replica = servers.replica_of(primary, name="replica")
    pc, rc = primary.client(), replica.client()
    for name in ("with-ttl", "no-ttl"):
        assert pc.execute_command(ADD_CAPTCHA, name, cfg([(1, 5)], duration=3600)) == b"OK"
    assert pc.pexpire(ckey("with-ttl"), HOUR_MS)
    assert pc.execute_command(RENAME_CAPTCHA, "with-ttl", "moved-ttl") == b"OK"
    assert pc.execute_command(RENAME_CAPTCHA, "no-ttl", "moved-none") == b"OK"
    want = {ckey("moved-ttl"): "ttl", ckey("moved-none"): "none",
            ckey("with-ttl"): "missing", ckey("no-ttl"): "missing"}
    assert {k: ttl_state(pc, k) for k in want} == want, "primary"
    wait_replicas_synced(primary, [replica])
    assert {k: ttl_state(rc, k) for k in want} == want, "replica"
    # a rewrite in between, then one more rename into the incremental file
    assert pc.execute_command("BGREWRITEAOF")
    primary.wait_aof_rewrite_done()
    assert pc.execute_command(RENAME_CAPTCHA, "moved-ttl", "again") == b"OK"
    want[ckey("moved-ttl")] = "missing"
    want[ckey("again")] = "ttl"
    assert {k: ttl_state(pc, k) for k in want} == want, "primary, second rename"
    wait_replicas_synced(primary, [replica])
    assert {k: ttl_state(rc, k) for k in want} == want, "replica, second rename"
    primary.restart()
    pc = primary.client()
    assert {k: ttl_state(pc, k) for k in want} == want, "after an AOF restart"

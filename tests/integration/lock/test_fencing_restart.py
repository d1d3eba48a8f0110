# SPDX-License-Identifier: BSD-3-Clause
"""Fencing tokens strictly increase across promotion, restart and load.

A replica promoted to primary issues tokens beyond its clock plus a margin
(grants its old primary never replicated may have used tokens up to that
primary's clock). That margin lived in memory only: promoted, SAVE, kill -9,
restarted within the margin, the node fell back to its clock and handed out a
token it had already handed out (a deleted key keeps no last token). Every
start now begins beyond clock + margin too, whatever was persisted: RDB, AOF
with or without the RDB preamble."""

import pytest

from servers import wait_replicas_synced


def grant(c, key, owner="o", lease=60000):
    g = c.execute_command("LOCK.ACQUIRE", key, owner, lease)
    assert g[0] == 1, g
    return g[1]


def release(c, key, owner="o"):
    assert c.execute_command("LOCK.RELEASE", key, owner) == 0


@pytest.mark.parametrize("persist", ["rdb", "aof-preamble", "aof-plain"])
def test_promoted_saved_killed_restarted(servers, persist):
    primary = servers.new(name="primary")
    replica = servers.replica_of(primary, name="replica")
    pc, rc = primary.client(), replica.client()
    issued = [grant(pc, "a")]
    release(pc, "a")
    wait_replicas_synced(primary, [replica])
    primary.kill()
    assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    for key in ("a", "b", "c"):                 # tokens beyond the promoted node's clock + margin
        issued.append(grant(rc, key))
        release(rc, key)
        assert rc.delete(key) == 1              # deleted: no last token kept anywhere
    assert rc.dbsize() == 0
    if persist == "rdb":
        assert rc.execute_command("SAVE")
    else:
        rc.config_set("aof-use-rdb-preamble", "yes" if persist == "aof-preamble" else "no")
        rc.config_set("appendonly", "yes")
        replica.wait_aof_rewrite_done()
        issued.append(grant(rc, "d"))           # something in the incremental AOF as well
        release(rc, "d")
        rc.delete("d")
        rc.config_set("appendfsync", "always")
    # SIGKILL, then start again on the same dir, as the primary it had become
    replica.restart(kill=True, replicaof=None, appendonly=persist != "rdb", aof_preamble=persist == "aof-preamble")
    c = replica.client()
    for key in ("a", "b", "c", "e"):
        t = grant(c, key)
        assert t > max(issued), (key, t, max(issued))
        issued.append(t)
        release(c, key)
    assert issued == sorted(issued) and len(set(issued)) == len(issued)


def test_debug_reload_keeps_tokens_growing(server):
    c = server.client()
    before = grant(c, "r")
    release(c, "r")
    c.delete("r")
    c.execute_command("DEBUG", "RELOAD")
    assert grant(c, "r") > before

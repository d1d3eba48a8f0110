# SPDX-License-Identifier: BSD-3-Clause
"""Blocked clients when their key's hash slot moves (Redis Cluster).

A client blocked on LOCK.ACQUIRE ... WAIT (or RL.WINDOW ... WAIT) on a node
that then loses the key's slot must not be served there -- that would write a
lock into a slot the node no longer owns. It gets TRYAGAIN (a cluster client
retries on the new owner), the old node holds no stray key, and the lock on the
new owner is intact."""

import threading
import time

import pytest
import redis

from cluster import names_in_slots, redis_cluster  # noqa: F401 (fixture)
from conftest import _register_manager


def _raw_blocked(node, *cmd, box):
    """Send cmd on a plain (non-cluster) connection and keep the reply or error."""
    c = redis.Redis(host=node.host, port=node.port, socket_timeout=20)
    try:
        box["reply"] = c.execute_command(*cmd)
    except redis.ResponseError as e:
        box["error"] = str(e)
    finally:
        c.close()


@pytest.mark.parametrize("kind", ["lock", "window"])
def test_waiter_gets_tryagain_when_its_slot_moves(cluster, kind):
    src, dst = cluster.primaries()[0], cluster.primaries()[1]
    slot = cluster.slots_of(src)[10]
    key = names_in_slots([slot], 1, prefix="w-")[slot][0]
    sc = cluster.conn(src)
    if kind == "lock":
        g = sc.execute_command("LOCK.ACQUIRE", key, "holder", 800)
        assert g[0] == 1
        cmd = ("LOCK.ACQUIRE", key, "waiter", 1000, "WAIT", 10000)
    else:
        assert sc.execute_command("RL.WINDOW", key, 1, 800)[0] == 1
        hit_hi = int(time.time() * 1000) + 1
        # no TTL, so that the state (not its expiry) is what moves and is checked
        assert sc.persist(key)
        digest_before = sc.execute_command("DEBUG", "DIGEST-VALUE", key)
        cmd = ("RL.WINDOW", key, 1, 800, "WAIT", 10000)
    box = {}
    t = threading.Thread(target=_raw_blocked, args=(src,) + cmd, kwargs={"box": box})
    t.start()
    # wait until the waiter is blocked on src (flag 'b' in CLIENT LIST)
    deadline = time.time() + 10
    while not any("b" in c["flags"] and c["cmd"].lower() == cmd[0].lower()
                  for c in sc.client_list()):
        assert t.is_alive(), "the waiter was answered instead of blocking: %r" % box
        assert time.time() < deadline, "the waiter never blocked: %r" % box
        time.sleep(0.005)
    cluster.migrate_slot_by_hand(slot, src, dst)
    t.join(15)
    assert not t.is_alive()
    # Served after the holder's lease / the window's hit ended, on a node that no
    # longer owns the slot: TRYAGAIN, not a grant written into a lost slot.
    assert "error" in box and box["error"].startswith("TRYAGAIN"), box
    assert sc.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    # The key moved with its state, and the new owner serves it.
    dc = cluster.conn(dst)
    if kind == "lock":
        # the new owner's timer ends the moved lease; the last token moved too
        deadline = time.time() + 10
        while dc.execute_command("LOCK.INSPECT", key)[3]:
            assert time.time() < deadline, dc.execute_command("LOCK.INSPECT", key)
            time.sleep(0.005)
        assert dc.execute_command("LOCK.INSPECT", key)[:3] == [1, g[1], 0]
        g2 = dc.execute_command("LOCK.ACQUIRE", key, "after", 1000)
        assert g2[0] == 1 and g2[1] > g[1], (g, g2)
    else:
        # the window moved unchanged: its hit fills it within 800 ms of it
        # (refused, nothing written) and has left it after (+ one 4 ms slot)
        assert dc.execute_command("DEBUG", "DIGEST-VALUE", key) == digest_before
        got = dc.execute_command("RL.WINDOW", key, 1, 800, "AT", hit_hi + 400)
        assert got[0] == 0 and got[1] == 0 and 0 < got[2] <= 400 + 800 // 256 + 2, got
        assert dc.execute_command("DEBUG", "DIGEST-VALUE", key) == digest_before
        got = dc.execute_command("RL.WINDOW", key, 1, 800, "AT", hit_hi + 800 + 800 // 256 + 2)
        assert got[:3] == [1, 0, -1], got
    cluster.wait_stable()


def test_replica_reads_of_a_missing_captcha_say_not_found(cluster):
    """A READONLY replica serves its primary's slots: a missing captcha there is
    'Captcha not found', not an endless TRYAGAIN."""
    primary = cluster.primaries()[0]
    replica = cluster.replicas_of(primary)[0]
    slot = cluster.slots_of(primary)[5]
    name = names_in_slots([slot], 1, prefix="ro-")[slot][0]
    rc = redis.Redis(host=replica.host, port=replica.port)
    rc.execute_command("READONLY")
    with pytest.raises(redis.ResponseError) as e:
        rc.execute_command("MCAPTCHA_CACHE.GET", name)
    assert str(e.value) == "Captcha not found"
    assert rc.execute_command("MCAPTCHA_CACHE.CAPTCHA_EXISTS", name) == 1
    rc.close()

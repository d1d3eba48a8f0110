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
        assert sc.execute_command("LOCK.ACQUIRE", key, "holder", 800)[0] == 1
        cmd = ("LOCK.ACQUIRE", key, "waiter", 1000, "WAIT", 10000)
    else:
        assert sc.execute_command("RL.WINDOW", key, 1, 800)[0] == 1
        cmd = ("RL.WINDOW", key, 1, 800, "WAIT", 10000)
    box = {}
    t = threading.Thread(target=_raw_blocked, args=(src,) + cmd, kwargs={"box": box})
    t.start()
    time.sleep(0.2)
    assert t.is_alive(), "the waiter should be blocked: %r" % box
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
        assert dc.execute_command("LOCK.ACQUIRE", key, "after", 1000)[0] == 1
    else:
        assert dc.execute_command("RL.WINDOW", key, 1, 800)[0] in (0, 1)
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

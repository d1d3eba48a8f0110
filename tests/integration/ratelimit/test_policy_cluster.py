# SPDX-License-Identifier: BSD-3-Clause
"""Stored policies in Redis Cluster (#25 item 8): a policy set or deleted on
any primary is in force on every node -- replicas, a node that joins later
(CLUSTER MEET), a node that was down while it changed, a replica promoted
later -- and a slot that moves keeps rate limiting with its policy.

Agreement is read from INFO (mcaptcha_cache_ratelimit): rl_policy_digest and
rl_policy_entries are equal on every node once the cluster bus carried the
table (docs/policies-cluster.md). The tests wait for that state, never for a
time. One 3x2 cluster (cluster.py) is shared by the file's tests, in order;
the last one adds a seventh node."""

import os
import random
import struct
import subprocess
import time

import pytest

from cluster import names_in_slots, redis_cluster  # noqa: F401 (fixture)

SECTION = "mcaptcha_cache_ratelimit"
MIN = 60000
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LATE = []  # the node test_node_added_later_gets_the_table adds


def build_busfake():
    """make -C tests/busfake; the path of build/busfake/busfake.so."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    p = subprocess.run(["make", "--no-print-directory", "-C", os.path.join(REPO, "tests", "busfake")], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    path = os.path.join(REPO, "build", "busfake", "busfake.so")
    assert p.returncode == 0 and os.path.isfile(path), p.stdout.decode("utf-8", "replace")
    return path


@pytest.fixture(scope="module")
def cluster(redis_cluster):  # noqa: F811
    return redis_cluster


def table_of(cluster, node):
    i = cluster.conn(node).info(SECTION)
    return (i["mcaptcha_cache_rl_policy_digest"], i["mcaptcha_cache_rl_policy_entries"],
            i["mcaptcha_cache_rl_policies"])


def wait_agreed(cluster, nodes=None, want=None, timeout=30.0):
    """Wait until every running node (or `nodes`) reports the same table, and
    want(conn) holds on each; returns the common (digest, entries, policies)."""
    deadline = time.time() + timeout
    while True:
        cluster.check_alive()
        live = [n for n in (nodes or cluster.nodes) if n.running()]
        seen = {n.port: table_of(cluster, n) for n in live}
        if len(set(seen.values())) == 1 and (want is None or all(want(cluster.conn(n)) for n in live)):
            return next(iter(seen.values()))
        if time.time() > deadline:
            raise AssertionError("policy tables differ after %.0fs: %r\n%s" % (timeout, seen, cluster.describe()))
        time.sleep(0.05)


def wait_for(cond, what, timeout=30.0):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError(what)
        time.sleep(0.05)


def put_calls(cluster, node):
    """RL.POLICY_PUT calls `node` executed (a replica: from its primary's stream)."""
    stats = {k.lower(): v for k, v in cluster.conn(node).info("commandstats").items()}
    return stats.get("cmdstat_rl.policy_put", {}).get("calls", 0)


def get(conn, name):
    return conn.execute_command("RL.POLICY_GET", name)


def test_set_on_one_primary_reaches_every_node(cluster):
    p0, p1 = cluster.primaries()[:2]
    before = table_of(cluster, p0)
    cluster.conn(p0).execute_command("RL.POLICY_SET", "api", "GCRA", 10, 1000, "BURST", 5)
    digest, entries, live = wait_agreed(cluster, want=lambda c: get(c, "api") is not None)
    assert digest != before[0]
    for n in cluster.nodes:
        assert get(cluster.conn(n), "api") == ["GCRA", 10, 1000, "BURST", 5]
    # the other primaries replicate the version they took from the bus (RL.POLICY_PUT)
    # to their replicas, so that their AOF and a promoted replica have it
    for p in cluster.primaries():
        if p.port != p0.port:
            for r in cluster.replicas_of(p):
                wait_for(lambda: put_calls(cluster, r) >= 1, "replica %d of %d: no RL.POLICY_PUT" % (r.port, p.port))
    # a change on another primary wins everywhere (it saw the first version)
    cluster.conn(p1).execute_command("RL.POLICY_SET", "api", "GCRA", 20, 1000)
    wait_agreed(cluster, want=lambda c: get(c, "api") == ["GCRA", 20, 1000])
    # a deletion on a third node too, and stays deleted (its tombstone is a version)
    p2 = cluster.primaries()[2]
    cluster.conn(p2).execute_command("RL.POLICY_SET", "gone", "WINDOW", 3, MIN)
    wait_agreed(cluster, want=lambda c: get(c, "gone") is not None)
    assert cluster.conn(p0).execute_command("RL.POLICY_DEL", "gone") == 1
    _, entries, live = wait_agreed(cluster, want=lambda c: get(c, "gone") is None)
    for n in cluster.nodes:
        c = cluster.conn(n)
        assert "gone" not in c.execute_command("RL.POLICY_LIST")
        assert "api" in c.execute_command("RL.POLICY_LIST")
    assert entries == live + 1  # the tombstone


def test_concurrent_sets_converge_on_one_version(cluster):
    a, b, c = cluster.primaries()
    defs = {a.port: ["WINDOW", 1, MIN], b.port: ["WINDOW", 2, MIN], c.port: ["WINDOW", 3, MIN]}
    for n in (a, b, c):
        cluster.conn(n).execute_command("RL.POLICY_SET", "race", *defs[n.port])
    wait_agreed(cluster)
    got = {tuple(get(cluster.conn(n), "race")) for n in cluster.nodes}
    assert len(got) == 1 and list(got.pop()) in defs.values()


def test_primary_paused_for_writes_takes_the_version_after_the_pause(cluster):
    paused, setter = cluster.primaries()[:2]
    pc = cluster.conn(paused)
    deferred = pc.info(SECTION)["mcaptcha_cache_rl_policy_sync_deferred"]
    pc.execute_command("CLIENT", "PAUSE", 30000, "WRITE")
    try:
        cluster.conn(setter).execute_command("RL.POLICY_SET", "paused", "WINDOW", 4, MIN)
        # it may not replicate while paused: it leaves the version for later
        wait_for(lambda: pc.info(SECTION)["mcaptcha_cache_rl_policy_sync_deferred"] > deferred,
                 "the paused primary did not defer the version")
        assert get(pc, "paused") is None
    finally:
        pc.execute_command("CLIENT", "UNPAUSE")
    wait_agreed(cluster, want=lambda c: get(c, "paused") == ["WINDOW", 4, MIN])


def test_slot_migrated_keeps_rate_limiting_with_its_policy(cluster):
    src, dst = cluster.primaries()[:2]
    cluster.conn(src).execute_command("RL.POLICY_SET", "mig", "GCRA", 1, 600000)
    wait_agreed(cluster, want=lambda c: get(c, "mig") is not None)
    slot = sorted(cluster.slots_of(src))[0]
    key = names_in_slots([slot], 1, prefix="mig")[slot][0]
    sc = cluster.conn(src)
    assert sc.execute_command("RL.GCRA", key, "POLICY", "mig")[0] == 1
    assert sc.execute_command("RL.GCRA", key, "POLICY", "mig")[0] == 0  # the one unit is spent
    assert cluster.migrate_slot_by_hand(slot, src, dst) == 1
    cluster.wait_stable()
    dc = cluster.conn(dst)
    # the state moved with the key and the policy is known there: still limited
    assert dc.execute_command("RL.GCRA", key, "POLICY", "mig")[0] == 0
    other = names_in_slots([slot], 2, prefix="mig")[slot][1]
    assert dc.execute_command("RL.GCRA", other, "POLICY", "mig")[0] == 1


def test_node_down_while_a_policy_changes_catches_up(cluster):
    p = cluster.primaries()[0]
    r = cluster.replicas_of(p)[0]
    other = cluster.primaries()[1]
    cluster.conn(other).execute_command("RL.POLICY_SET", "down", "WINDOW", 5, MIN)
    cluster.conn(other).execute_command("RL.POLICY_SET", "dropped", "WINDOW", 5, MIN)
    wait_agreed(cluster, want=lambda c: get(c, "dropped") is not None)
    cluster.conn(r).execute_command("SAVE")  # it comes back with the old versions on disk
    r.kill()
    cluster.conn(other).execute_command("RL.POLICY_SET", "down", "WINDOW", 6, MIN)
    cluster.conn(other).execute_command("RL.POLICY_DEL", "dropped")
    cluster.conn(cluster.primaries()[2]).execute_command("RL.POLICY_SET", "while", "GCRA", 7, 1000)
    wait_agreed(cluster, want=lambda c: get(c, "while") is not None)
    r.start()
    cluster.wait_stable()
    wait_agreed(cluster, want=lambda c: get(c, "while") is not None)
    rc = cluster.conn(r)
    assert get(rc, "down") == ["WINDOW", 6, MIN]  # the stale version on its disk did not win
    assert get(rc, "dropped") is None
    for n in cluster.nodes:
        assert get(cluster.conn(n), "down") == ["WINDOW", 6, MIN]


def test_replica_promoted_later_has_the_policies(cluster):
    setter, learner = cluster.primaries()[:2]
    cluster.conn(setter).execute_command("RL.POLICY_SET", "promo", "GCRA", 2, 600000)
    wait_agreed(cluster, want=lambda c: get(c, "promo") is not None)
    replica = cluster.replicas_of(learner)[0]
    cluster.failover(replica)
    wait_agreed(cluster)
    rc = cluster.conn(replica)
    assert rc.execute_command("ROLE")[0] == "master"
    assert get(rc, "promo") == ["GCRA", 2, 600000]
    slot = sorted(cluster.slots_of(replica))[0]
    key = names_in_slots([slot], 1, prefix="promo")[slot][0]
    assert [rc.execute_command("RL.GCRA", key, "POLICY", "promo")[0] for _ in range(3)] == [1, 1, 0]
    # and it writes new versions to everyone
    rc.execute_command("RL.POLICY_SET", "promo", "GCRA", 3, 600000)
    wait_agreed(cluster, want=lambda c: get(c, "promo") == ["GCRA", 3, 600000])


def test_node_added_later_gets_the_table(cluster):
    """Last but one: the cluster keeps a seventh, slotless node afterwards, which also
    loads the test-only tests/busfake module (for the next test)."""
    expected = wait_agreed(cluster)
    assert expected[2] >= 3
    first = cluster.nodes[0]
    config = {"cluster-enabled": "yes", "cluster-config-file": "nodes.conf",
              "cluster-node-timeout": str(cluster.node_timeout_ms)}
    config["loadmodule"] = build_busfake()
    new = cluster.mgr.new(name="node-late", config=config, save="", appendonly=False, port_offsets=(10000,))
    LATE.append(new)
    assert table_of(cluster, new)[1] == 0
    cluster.conn(first).execute_command("CLUSTER", "MEET", new.host, new.port)
    everyone = cluster.nodes + [new]
    _, entries, live = wait_agreed(cluster, nodes=everyone, timeout=60.0)
    nc = cluster.conn(new)
    for name in cluster.conn(first).execute_command("RL.POLICY_LIST"):
        assert get(nc, name) == get(cluster.conn(first), name)
    assert nc.info(SECTION)["mcaptcha_cache_rl_policy_sync_applied"] >= entries
    # a policy set on the new node (a primary without slots) reaches the others
    nc.execute_command("RL.POLICY_SET", "from-new", "WINDOW", 9, MIN)
    wait_agreed(cluster, nodes=everyone, want=lambda c: get(c, "from-new") == ["WINDOW", 9, MIN])


def wire(name, stamp=1, node=b"f" * 40, deleted=0, kind=1, rate=5, period=1000, burst=0):
    """One entry in the bus form (core/policy_entry.h)."""
    return struct.pack("<H", len(name)) + name + struct.pack("<Q", stamp) + node + bytes([deleted, kind]) \
        + struct.pack("<QQQ", rate, period, burst)


def entries(*ws, n=None):
    return b"\x01" + struct.pack("<H", len(ws) if n is None else n) + b"".join(ws)


def test_malformed_bus_messages_are_dropped_whole(cluster):
    """Messages sent under the module's id by tests/busfake from the seventh node:
    every malformed one is dropped whole and counted on every other node, none
    crashes a node, and a well-formed one still merges everywhere."""
    assert LATE, "needs test_node_added_later_gets_the_table"
    late = LATE[0]
    others = [n for n in cluster.nodes if n.running()]
    everyone = others + [late]
    wait_for(lambda: all(any(v["port"] == late.port and v["link"] == "connected" for v in cluster.cluster_nodes(n))
                         for n in others), "every node linked to the seventh")
    lc = cluster.conn(late)
    good = wire(b"fake-ok", stamp=2 ** 40)
    bad = [
        (1, b""), (1, b"\x01" + b"\x00" * 15), (1, b"\x02" + b"\x00" * 16), (1, b"\x01" + b"\x00" * 17),
        (2, b""), (2, b"\x01\x00"), (2, b"\x02\x00\x00"), (2, entries(n=5)),
        (2, entries(good, wire(b"half")[:-1])),                 # a good entry, then a truncated one
        (2, entries(good, n=2)),                                 # fewer entries than counted
        (2, entries(good) + b"\x00"),                             # a byte after the last entry
        (2, entries(wire(b"half", kind=3))),                     # kind 3
        (2, entries(wire(b"half", rate=0))),                     # out of range
        (2, entries(wire(b"half", kind=2, burst=4))),            # a window with a burst
        (2, entries(wire(b"half", deleted=1))),                  # a tombstone with a definition
        (2, entries(wire(b"half", deleted=2, kind=0, rate=0, period=0))),
        (2, entries(wire(b"half", node=b"f" * 39 + b" "))),      # a node id byte that is not printable
        (2, entries(wire(b""))),                                 # an empty name
        (2, entries(wire(b"n" * 257))),                          # a name of 257 bytes
        (2, entries(good) + b"\xff" * (1 << 20)),  # 1 MiB of trailing junk
    ]
    rng = random.Random(25)
    for _ in range(200):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(15, 400)))
        # type 1: not the 17 bytes of a digest; type 2: counts 65535 entries, never all there
        bad.append((rng.choice((1, 2)), b"\x01\xff\xff" + body))

    def rejected_now(n):
        return cluster.conn(n).info(SECTION)["mcaptcha_cache_rl_policy_sync_rejected"]

    # The cluster bus drops what a link holds when the link is re-established (a loaded
    # machine can time a link out): a round counts when a node took every message of it,
    # so the batch is sent again, at most three times, until every node has had such a round.
    pending = {n.port for n in others}
    for attempt in range(3):
        before = {n.port: rejected_now(n) for n in others}
        for typ, payload in bad:
            assert lc.execute_command("BUSFAKE.SEND", typ, payload) == "OK"
        marker = b"fake-ok-%d" % attempt
        lc.execute_command("BUSFAKE.SEND", 2, entries(wire(marker, stamp=2 ** 40)))
        wait_agreed(cluster, nodes=everyone, want=lambda c: get(c, marker.decode()) == ["GCRA", 5, 1000])
        cluster.check_alive()
        for n in others:
            if n.port not in pending:
                continue
            try:
                wait_for(lambda: rejected_now(n) - before[n.port] >= len(bad), "", timeout=10.0)
            except AssertionError:
                continue  # a link dropped part of this round
            pending.discard(n.port)
        if not pending:
            break
    assert not pending, "nodes %s did not count the %d rejected messages of any round" % (sorted(pending), len(bad))
    for n in others:
        c = cluster.conn(n)
        assert get(c, "half") is None
        assert c.ping()

# SPDX-License-Identifier: BSD-3-Clause
"""mcaptcha-cache in Redis Cluster: routing, brace names, RENAME_CAPTCHA and
CROSSSLOT, resharding under traffic, replica failover.

One 3-primary/3-replica cluster (cluster.py) is shared by the tests of this
file and flushed before each test; every node is killed at the end.

What was found about routing with redis-py 4.3.4 (checked by
test_command_info_drives_client_routing): every MCAPTCHA_CACHE.* command is
listed by COMMAND with first/last/step key positions (1,1,1) -- RENAME_CAPTCHA
(1,2,1) -- so RedisCluster.execute_command() takes argument 1 (the captcha
name) as the key and routes on its slot by itself; no target_nodes are needed.
For RENAME_CAPTCHA with names in two slots the client refuses on its own
(RedisClusterException "... all keys must map to the same key slot") before
sending; the server's CROSSSLOT is checked by sending to the node directly.
redis-py strips the "ERR " code from error messages, so wire-exact errors are
read with servers.raw_command on the owning node.
"""

import json
import logging
import threading
import time

import pytest
import redis
from redis.exceptions import RedisClusterException

from cluster import (captcha_key, challenge_key, key_slot, name_slot_agrees,
                     names_in_slots, redis_cluster)  # noqa: F401 (fixture)
from conftest import _register_manager
from mcap import (ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, CAPTCHA_EXISTS, CAPTCHA_NOT_FOUND,
                  CHALLENGE_NOT_FOUND, DELETE_CAPTCHA, DELETE_CHALLENGE, GET, GET_CHALLENGE,
                  PUBLIC_COMMANDS, RENAME_CAPTCHA, cfg, chal)
from servers import raw_command


# -------------------------------------------------------------------- helpers
def difficulty(levels, count):
    """The documented rule: the factor of the highest level whose threshold is
    strictly below `count`, else the lowest level's."""
    levels = sorted(levels)
    best = levels[0][1]
    for t, f in levels:
        if t < count:
            best = f
    return best


def visitor(duration, difficulty_factor):
    return {"duration": duration, "difficulty_factor": difficulty_factor}


def challenge_reply(difficulty_factor, duration):
    return {"difficulty_factor": difficulty_factor, "duration": duration}


def node_keys(cluster, node):
    """Every key held by `node` (SCAN is not redirected, unlike EXISTS)."""
    return set(cluster.conn(node).scan_iter(count=1000))


def digest(cluster, node, key):
    return cluster.conn(node).execute_command("DEBUG", "DIGEST-VALUE", key)[0]


def spread_slots(n):
    """n slots spread evenly over 0..16383 (hence over every primary)."""
    return [7 + i * (16384 // n) for i in range(n)]


def first_tag_length_that_agrees(limit=9000):
    """The shortest L <= limit such that a name "{" + T + "}..." with len(T) == L
    has a derived key ("mcap:captcha::{{T}...}", hash tag "{T") in the slot of
    the name (hash tag "T"). CRC16 is linear, so the answer depends on L only,
    not on the bytes of T; it is 8597 (no shorter tag agrees)."""
    for n in range(1, limit + 1):
        name = "{" + "t" * n + "}"
        if name_slot_agrees(name):
            return n
    return None


def is_deferral(e):
    """A TRYAGAIN the client gave up retrying: the command did nothing."""
    return (isinstance(e, redis.exceptions.TryAgainError)
            or (isinstance(e, redis.exceptions.ClusterError) and "TTL exhausted" in str(e)))


class Traffic(threading.Thread):
    """Background load through its own RedisCluster client: ADD_VISITOR on
    `visit_names` and GET on `read_names` (whose counts must stay as given),
    round robin, until stop(). Anything the client raises is recorded, except
    a TRYAGAIN that outlasted redis-py's own retries (TryAgainError, or
    ClusterError "TTL exhausted"): while a slot is open the module answers
    TRYAGAIN for captchas it does not hold yet, and such a call changed nothing
    (counted in `deferred`, and not in `visits`)."""

    def __init__(self, cluster, visit_names, read_names, duration):
        super().__init__(daemon=True)
        self.client = cluster.new_client()
        self.visit_names = list(visit_names)
        self.read_names = dict(read_names)
        self.duration = duration
        self.visits = {n: 0 for n in self.visit_names}
        self.ops = 0
        self.deferred = 0
        self.errors = []
        self.phase = "start"         # set by the test; errors are tagged with it
        self._halt = threading.Event()

    def run(self):
        reads = list(self.read_names)
        i = 0
        while not self._halt.is_set():
            n = self.visit_names[i % len(self.visit_names)]
            try:
                rep = json.loads(self.client.execute_command(ADD_VISITOR, n))
                if rep["duration"] != self.duration:
                    self.errors.append("[%s] ADD_VISITOR %s: unexpected reply %r"
                                       % (self.phase, n, rep))
                self.visits[n] += 1
            except Exception as e:
                if is_deferral(e):
                    self.deferred += 1
                else:
                    self.errors.append("[%s] ADD_VISITOR %s: %s: %s"
                                       % (self.phase, n, type(e).__name__, e))
            if reads:
                r = reads[i % len(reads)]
                try:
                    got = self.client.execute_command(GET, r)
                    if got != self.read_names[r]:
                        self.errors.append("[%s] GET %s: %r, expected %r"
                                           % (self.phase, r, got, self.read_names[r]))
                except Exception as e:
                    if is_deferral(e):
                        self.deferred += 1
                    else:
                        self.errors.append("[%s] GET %s: %s: %s"
                                           % (self.phase, r, type(e).__name__, e))
            self.ops += 1
            i += 1

    def wait_ops(self, n, timeout=10.0):
        target = self.ops + n
        deadline = time.time() + timeout
        while self.ops < target and time.time() < deadline and self.is_alive():
            time.sleep(0.01)
        assert self.ops >= target, "background traffic stalled at %d ops" % self.ops

    def stop(self):
        self._halt.set()
        self.join(30)
        self.client.close()


def make_captchas(c, names, duration_base=600, visits=lambda k: k % 5 + 1, challenges=2):
    """Create captchas (distinct config each) with live counts and challenges,
    via the cluster client. Returns {name: (levels, duration, count, [(ch, diff, dur)])}."""
    out = {}
    for k, n in enumerate(names):
        levels = [(2, 10 + k), (4, 100 + k)]
        dur = duration_base + k
        assert c.execute_command(ADD_CAPTCHA, n, cfg(levels, dur)) == "OK"
        count = visits(k)
        for v in range(1, count + 1):
            assert json.loads(c.execute_command(ADD_VISITOR, n)) == \
                visitor(dur, difficulty(levels, v))
        chs = []
        for j in range(challenges):
            ch = "ch%d-%d" % (j, k)
            assert c.execute_command(ADD_CHALLENGE, n, chal(1000 + k, 600, ch)) == "OK"
            chs.append((ch, 1000 + k, 600))
        out[n] = (levels, dur, count, chs)
    return out


def keys_of(state):
    ks = []
    for n, (_, _, _, chs) in state.items():
        ks.append(captcha_key(n))
        ks += [challenge_key(n, ch) for ch, _, _ in chs]
    return ks


# ------------------------------------------------------------------- routing
def test_command_info_drives_client_routing(cluster):
    """COMMAND declares argument 1 (the name) as the key; redis-py therefore
    computes the slot of the name, which equals CLUSTER KEYSLOT of the name and
    of the derived keys."""
    r = cluster.conn(cluster.nodes[0])
    raw = cluster.nodes[0].client(decode_responses=True, raw=True)   # replies unparsed
    for cmd in PUBLIC_COMMANDS:
        info = raw.execute_command("COMMAND", "INFO", cmd)[0]
        assert info[0].upper() == cmd
        first, last, step = info[3], info[4], info[5]
        want = (1, 2, 1) if cmd == RENAME_CAPTCHA else (1, 1, 1)
        assert (first, last, step) == want, (cmd, info[:6])
    c = cluster.client
    name = "routing-site"
    s = key_slot(name)
    assert r.execute_command("CLUSTER", "KEYSLOT", name) == s
    assert r.execute_command("CLUSTER", "KEYSLOT", captcha_key(name)) == s
    assert r.execute_command("CLUSTER", "KEYSLOT", challenge_key(name, "x{y}z")) == s
    args = {ADD_CAPTCHA: [name, "{}"], ADD_CHALLENGE: [name, "{}"], GET_CHALLENGE: [name, "c"],
            DELETE_CHALLENGE: [name, "c"], RENAME_CAPTCHA: [name, name]}
    for cmd in PUBLIC_COMMANDS:
        assert c.determine_slot(cmd, *args.get(cmd, [name])) == s, cmd
    # our key_slot (used to pick names) agrees with the server's
    for n in ["a}b", "{x}y", "}x", "{}", "{}x", "", "ab{c", "{x", "{user1}a", "plain",
              "a162599}b", "x" * 300]:
        for k in (n, captcha_key(n), challenge_key(n, "q")):
            assert key_slot(k) == r.execute_command("CLUSTER", "KEYSLOT", k), k


def test_all_commands_route_through_cluster_client(cluster):
    """All nine commands, through RedisCluster, for 48 names on every primary;
    every key lands on the primary that owns the slot of the name."""
    c = cluster.client
    primaries = cluster.primaries()
    assert len(primaries) == 3
    by_slot = names_in_slots(spread_slots(24), 2, prefix="site-")
    names = [n for s in sorted(by_slot) for n in by_slot[s]]   # pairs share a slot
    owners = {n: cluster.owner_of(n) for n in names}
    per_primary = {p.port: sum(1 for n in names if owners[n].port == p.port) for p in primaries}
    assert all(v >= 12 for v in per_primary.values()), per_primary

    state = make_captchas(c, names, challenges=2)
    for n in names:
        assert c.execute_command(CAPTCHA_EXISTS, n) == 0
        assert c.execute_command(GET, n) == state[n][2]

    # every key is on the owner of the name's slot, and nowhere else
    want_keys = {p.port: 0 for p in primaries}
    for n in names:
        o = owners[n]
        want_keys[o.port] += 3
        for k in [captcha_key(n)] + [challenge_key(n, ch) for ch, _, _ in state[n][3]]:
            assert cluster.conn(o).exists(k) == 1, (n, k)
    assert {p.port: cluster.conn(p).dbsize() for p in primaries} == want_keys

    # challenges: one-shot GET_CHALLENGE, DELETE_CHALLENGE
    for n in names:
        (ch0, d0, t0), (ch1, _, _) = state[n][3]
        assert json.loads(c.execute_command(GET_CHALLENGE, n, ch0)) == challenge_reply(d0, t0)
        with pytest.raises(redis.ResponseError, match="^%s$" % CHALLENGE_NOT_FOUND):
            c.execute_command(GET_CHALLENGE, n, ch0)
        assert c.execute_command(DELETE_CHALLENGE, n, ch1) == "OK"
        with pytest.raises(redis.ResponseError, match="^%s$" % CHALLENGE_NOT_FOUND):
            c.execute_command(DELETE_CHALLENGE, n, ch1)

    # RENAME_CAPTCHA within a slot: the first name of each pair onto the second
    for s in sorted(by_slot):
        a, b_ = by_slot[s]
        with pytest.raises(redis.ResponseError, match="target captcha already exists"):
            c.execute_command(RENAME_CAPTCHA, a, b_)
        assert c.execute_command(DELETE_CAPTCHA, b_) == "OK"
        assert c.execute_command(RENAME_CAPTCHA, a, b_) == "OK"
        assert c.execute_command(CAPTCHA_EXISTS, a) == 1
        assert c.execute_command(GET, b_) == state[a][2]
        levels, dur, count, _ = state[a]
        assert json.loads(c.execute_command(ADD_VISITOR, b_)) == \
            visitor(dur, difficulty(levels, count + 1))
        assert cluster.conn(owners[b_]).exists(captcha_key(b_)) == 1

    for s in sorted(by_slot):
        a, b_ = by_slot[s]
        assert c.execute_command(DELETE_CAPTCHA, b_) == "OK"
        assert c.execute_command(CAPTCHA_EXISTS, b_) == 1
        for cmd in (GET, ADD_VISITOR, DELETE_CAPTCHA):
            with pytest.raises(redis.ResponseError, match="^%s$" % CAPTCHA_NOT_FOUND):
                c.execute_command(cmd, b_)
    cluster.wait_stable()
    assert all(v == 0 for v in cluster.dbsizes().values()), cluster.dbsizes()


def test_wrong_node_answers_moved_for_every_command(cluster):
    """Sent straight to a primary that does not own the name's slot, each of
    the nine commands is redirected (MOVED <slot of the name> <owner>) before
    the module runs: nothing is written on the wrong node."""
    name = "moved-site"
    s = key_slot(name)
    owner = cluster.owner_of(name)
    other = [p for p in cluster.primaries() if p.port != owner.port][0]
    args = {ADD_CAPTCHA: [cfg([(1, 1)], 600)], ADD_CHALLENGE: [chal(1, 600, "c")],
            GET_CHALLENGE: ["c"], DELETE_CHALLENGE: ["c"], RENAME_CAPTCHA: [name]}
    for cmd in PUBLIC_COMMANDS:
        reply = raw_command(other, cmd, name, *args.get(cmd, []))
        assert reply == b"-MOVED %d 127.0.0.1:%d\r\n" % (s, owner.port), (cmd, reply)
    assert cluster.conn(other).dbsize() == 0
    # and on the owner the same commands work
    assert raw_command(owner, ADD_CAPTCHA, name, cfg([(1, 1)], 600)) == b"+OK\r\n"
    assert raw_command(owner, GET, name) == b":0\r\n"


# --------------------------------------------------------------- brace names
REFUSED_NAMES = ["a}b", "{x}y", "}x", "{}", "{}x", "{user1}a", ""]


def test_brace_names_in_another_slot_are_refused(cluster):
    """A name whose derived key hashes elsewhere than the name is refused by
    every command with an ERR ... hash slot error, and nothing is written."""
    c = cluster.client
    for n in REFUSED_NAMES:
        assert key_slot(captcha_key(n)) != key_slot(n), n  # precondition
    # some data beforehand, so that "unchanged" is not just "empty"; `good` is in
    # the slot of "a}b" (for the RENAME onto a refused name below)
    good = names_in_slots([key_slot("a}b")], 1, prefix="good-")[key_slot("a}b")][0]
    make_captchas(c, [good, "other-1", "other-2", "other-3"], challenges=1)
    cluster.wait_stable()
    before = cluster.dbsizes()
    assert sum(before.values()) == 2 * 8
    for n in REFUSED_NAMES:
        owner = cluster.owner_of(n)
        calls = [(ADD_CAPTCHA, n, cfg([(1, 5)], 600)), (ADD_VISITOR, n), (GET, n),
                 (CAPTCHA_EXISTS, n), (DELETE_CAPTCHA, n), (RENAME_CAPTCHA, n, n),
                 (ADD_CHALLENGE, n, chal(5, 600, "c1")), (GET_CHALLENGE, n, "c1"),
                 (DELETE_CHALLENGE, n, "c1")]
        for call in calls:
            # through the cluster client (routes to the slot of the name) ...
            with pytest.raises(redis.ResponseError) as ei:
                c.execute_command(*call)
            assert "hash slot" in str(ei.value), (call, str(ei.value))
            # ... and on the wire, at the owner: a coded ERR error
            raw = raw_command(owner, *call)
            assert raw.startswith(b"-ERR ") and b"hash slot" in raw, (call, raw)
    # RENAME_CAPTCHA onto a refused name (same slot as `good`) is refused too
    d0 = digest(cluster, cluster.owner_of(good), captcha_key(good))
    with pytest.raises(redis.ResponseError, match="hash slot"):
        c.execute_command(RENAME_CAPTCHA, good, "a}b")
    assert digest(cluster, cluster.owner_of(good), captcha_key(good)) == d0
    cluster.wait_stable()
    assert cluster.dbsizes() == before
    for p in cluster.primaries():
        for k in cluster.conn(p).scan_iter(count=1000):
            assert "good-" in k or "other-" in k, k


def test_brace_names_whose_slots_agree_work(cluster):
    """Names with braces whose derived key stays in the name's slot behave like
    any other name: '{' without '}' always agrees; 'a<N>}b' agrees for some N;
    '{T}...' agrees when len(T) == 8597, and for no shorter T."""
    L = first_tag_length_that_agrees()
    assert L == 8597
    tag_name = "{" + "q" * L + "}site"     # other bytes, same length: agrees too
    n_close = next("a%d}b" % i for i in range(10 ** 6) if name_slot_agrees("a%d}b" % i))
    names = ["ab{c", "{x", "x{y{z", n_close, tag_name]
    c = cluster.client
    r = cluster.conn(cluster.nodes[0])
    for n in names:
        assert name_slot_agrees(n), n
        assert r.execute_command("CLUSTER", "KEYSLOT", captcha_key(n)) == \
            r.execute_command("CLUSTER", "KEYSLOT", n), n
    state = make_captchas(c, names, challenges=1)
    for n in names:
        levels, dur, count, [(ch, d, t)] = state[n]
        assert c.execute_command(GET, n) == count
        assert c.execute_command(CAPTCHA_EXISTS, n) == 0
        owner = cluster.owner_of(n)
        assert cluster.conn(owner).exists(captcha_key(n), challenge_key(n, ch)) == 2, n[:40]
        assert cluster.conn(owner, decode_responses=False).type(captcha_key(n)) == b"mcaptmcap"
        assert json.loads(c.execute_command(GET_CHALLENGE, n, ch)) == challenge_reply(d, t)
        with pytest.raises(redis.ResponseError, match="^%s$" % CHALLENGE_NOT_FOUND):
            c.execute_command(GET_CHALLENGE, n, ch)
        assert c.execute_command(DELETE_CAPTCHA, n) == "OK"
        assert c.execute_command(CAPTCHA_EXISTS, n) == 1
    cluster.wait_stable()
    assert all(v == 0 for v in cluster.dbsizes().values())


# ------------------------------------------------------------ RENAME_CAPTCHA
def test_rename_across_slots_is_crossslot(cluster):
    c = cluster.client
    a, b_ = "rename-src", "rename-dst"
    c_same_node = None
    assert key_slot(a) != key_slot(b_)
    # a name in another slot of the same primary as `a`
    owner = cluster.owner_of(a)
    for i in range(10000):
        n = "same-node-%d" % i
        if key_slot(n) != key_slot(a) and cluster.owner_of(n).port == owner.port:
            c_same_node = n
            break
    assert c_same_node
    state = make_captchas(c, [a], challenges=0)
    d0 = digest(cluster, owner, captcha_key(a))
    for target in (b_, c_same_node):
        # redis-py refuses a two-slot command by itself, before sending it
        with pytest.raises(RedisClusterException, match="same key slot"):
            c.execute_command(RENAME_CAPTCHA, a, target)
        # the server: CROSSSLOT (also when both slots are on the same node)
        raw = raw_command(owner, RENAME_CAPTCHA, a, target)
        assert raw.startswith(b"-CROSSSLOT "), (target, raw)
        assert c.execute_command(CAPTCHA_EXISTS, target) == 1
    assert c.execute_command(GET, a) == state[a][2]
    assert digest(cluster, owner, captcha_key(a)) == d0
    cluster.wait_stable()
    assert sum(cluster.conn(p).dbsize() for p in cluster.primaries()) == 1


def test_rename_within_one_slot(cluster):
    c = cluster.client
    # 1. two plain names that hash to the same slot
    s = key_slot("rename-plain")
    a, b_ = names_in_slots([s], 2, prefix="rn-")[s]
    # 2. names sharing a hash tag: with an ordinary tag the derived keys leave
    #    the slot ('{user1}a' -> key tag '{user1'), so both are refused ...
    for n in ("{user1}a", "{user1}b"):
        assert not name_slot_agrees(n)
    with pytest.raises(redis.ResponseError, match="hash slot"):
        c.execute_command(RENAME_CAPTCHA, "{user1}a", "{user1}b")
    # ... but with a tag of 8597 bytes the keys stay in the tag's slot
    T = "{" + "r" * 8597 + "}"
    ta, tb = T + "a", T + "b"
    assert name_slot_agrees(ta) and name_slot_agrees(tb) and key_slot(ta) == key_slot(tb)
    state = make_captchas(c, [a, ta], challenges=0)
    for old, new in ((a, b_), (ta, tb)):
        owner = cluster.owner_of(old)
        d0 = digest(cluster, owner, captcha_key(old))
        assert c.execute_command(RENAME_CAPTCHA, old, new) == "OK"
        assert c.execute_command(CAPTCHA_EXISTS, old) == 1
        assert c.execute_command(CAPTCHA_EXISTS, new) == 0
        levels, dur, count, _ = state[old]
        assert c.execute_command(GET, new) == count
        assert digest(cluster, owner, captcha_key(new)) == d0
        assert captcha_key(old).decode() not in node_keys(cluster, owner)
        assert json.loads(c.execute_command(ADD_VISITOR, new)) == \
            visitor(dur, difficulty(levels, count + 1))
        # renaming a missing captcha: OK, and nothing changes
        assert c.execute_command(RENAME_CAPTCHA, old, new) == "OK"
        assert c.execute_command(GET, new) == count + 1


# ---------------------------------------------------------------- resharding
def test_reshard_with_traffic(cluster):
    """Move 4 slots holding captchas (live counts, 600+ s) and challenges from
    one primary to another -- one slot by hand (SETSLOT IMPORTING/MIGRATING,
    MIGRATE, SETSLOT NODE) and three with `redis-cli --cluster reshard` -- while
    a background client keeps adding visitors to other captchas of those slots
    and reading the moved ones. Nothing may change, and the traffic may see no
    error (MOVED/ASK/TRYAGAIN are retried inside redis-py)."""
    c = cluster.client
    primaries = cluster.primaries()
    src, dst = primaries[1], primaries[2]
    src_slots = cluster.slots_of(src)
    cli_slots = src_slots[:3]          # redis-cli reshard moves src's lowest slots
    hand_slot = src_slots[-1]
    moved_slots = cli_slots + [hand_slot]
    checked = names_in_slots(moved_slots, 3, prefix="chk-")
    bg = names_in_slots(moved_slots, 1, prefix="bg-")
    checked_names = [n for s in moved_slots for n in checked[s]]
    bg_names = [n for s in moved_slots for n in bg[s]]
    elsewhere = names_in_slots([src_slots[len(src_slots) // 2], 100, 16000], 1, prefix="bgx-")
    bg_names += [v[0] for v in elsewhere.values()]

    state = make_captchas(c, checked_names, challenges=2)
    for n in bg_names:
        assert c.execute_command(ADD_CAPTCHA, n, cfg([(1, 1)], 900)) == "OK"
    cluster.wait_stable()
    keys = keys_of(state)
    before = {k: digest(cluster, src, k) for k in keys}
    assert {k.decode() for k in keys} <= node_keys(cluster, src)

    def hold_open(stage):
        # keep the hand-moved slot open (MIGRATING/IMPORTING) for a moment, before
        # and after its keys moved, so that the traffic certainly runs into it
        traffic.phase = "slot %d %s by hand" % (hand_slot, stage)
        traffic.wait_ops(20)

    traffic = Traffic(cluster, bg_names, {n: state[n][2] for n in checked_names}, 900)
    traffic.start()
    try:
        traffic.wait_ops(50)
        cluster.migrate_slot_by_hand(hand_slot, src, dst, between=hold_open)
        traffic.phase = "between the two migrations"
        traffic.wait_ops(20)
        traffic.phase = "redis-cli --cluster reshard of slots %s" % cli_slots
        out = cluster.reshard(src, dst, len(cli_slots))
        traffic.phase = "after the reshard"
        traffic.wait_ops(50)
    finally:
        traffic.stop()
    cluster.wait_stable()

    # the slots moved
    dst_slots = set(cluster.slots_of(dst))
    assert set(moved_slots) <= dst_slots, (moved_slots, out)
    assert not set(moved_slots) & set(cluster.slots_of(src))
    # every key is on dst, unchanged (same DEBUG DIGEST-VALUE), and gone from src
    src_keys, dst_keys = node_keys(cluster, src), node_keys(cluster, dst)
    for k in keys:
        assert k.decode() not in src_keys, k
        assert k.decode() in dst_keys, k
        assert digest(cluster, dst, k) == before[k], k
    # counts, configs and challenges through the cluster client
    for n in checked_names:
        levels, dur, count, chs = state[n]
        assert c.execute_command(GET, n) == count, n
        assert json.loads(c.execute_command(ADD_VISITOR, n)) == \
            visitor(dur, difficulty(levels, count + 1)), n
        assert c.execute_command(GET, n) == count + 1, n
        for ch, d, t in chs:
            assert json.loads(c.execute_command(GET_CHALLENGE, n, ch)) == challenge_reply(d, t)
            with pytest.raises(redis.ResponseError, match="^%s$" % CHALLENGE_NOT_FOUND):
                c.execute_command(GET_CHALLENGE, n, ch)
    # every visit the background traffic got a reply for was counted once
    assert traffic.ops > 0
    for n in bg_names:
        assert c.execute_command(GET, n) == traffic.visits[n], n
    # ... and it saw no error (redirects are retried inside redis-py)
    if traffic.errors:
        phases = {}
        for e in traffic.errors:
            ph = e[1:e.index("]")]
            phases[ph] = phases.get(ph, 0) + 1
        pytest.fail("the data survived the move, but %d of %d background operations failed "
                    "while slots were migrating (errors per phase: %s); first errors:\n%s"
                    % (len(traffic.errors), 2 * traffic.ops, phases,
                       "\n".join(traffic.errors[:10])), pytrace=False)


def test_commands_while_slot_is_migrating(cluster):
    """Deterministic version of the window a reshard opens: the slot is MIGRATING
    on the source and IMPORTING on the target, and the captcha and its
    challenges have not been MIGRATEd yet. No command may give a wrong answer
    or create a second copy on the target: each answers correctly or TRYAGAIN.

    The commands declare argument 1, the *name*, as their key (the protocol's
    clients route on it), and no Redis key of that name exists, so a MIGRATING
    source always answers ASK (cluster.c getNodeByQuery counts the name as a
    missing key). The importing target, which does not own the slot yet and
    lacks the derived key, answers TRYAGAIN; once the keys and the slot have
    moved, everything works on the target with the state unchanged."""
    c = cluster.client
    primaries = cluster.primaries()
    src, dst = primaries[0], primaries[1]
    slot = cluster.slots_of(src)[100]
    name = names_in_slots([slot], 1, prefix="mig-")[slot][0]
    state = make_captchas(c, [name], challenges=3)
    levels, dur, count, [(ch0, d0, t0), (ch1, _, _), (ch2, d2, t2)] = state[name]
    keys = {k.decode() for k in keys_of(state)}
    wrong = []
    stray = []
    answered, deferred = [], []

    def expect(call, want):
        try:
            got = c.execute_command(*call)
            if call[0] in (ADD_VISITOR, GET_CHALLENGE):
                got = json.loads(got)
        except redis.ResponseError as e:
            got = "error: %s" % e
        except redis.exceptions.ClusterError as e:
            got = "error: %s" % e
        if got == want:
            answered.append(call[0])
        elif isinstance(got, str) and (got.startswith("error: TTL exhausted") or "TRYAGAIN" in got
                                       or "hash slot is being migrated" in got):
            deferred.append(call[0])
        else:
            shown = " ".join(x if isinstance(x, str) else "<json>" for x in call[1:])
            wrong.append("%s %s: got %r, expected %r" % (call[0], shown, got, want))

    def during(stage):
        if stage != "open":
            return
        assert keys <= node_keys(cluster, src)          # nothing moved yet
        expect((GET, name), count)
        expect((CAPTCHA_EXISTS, name), 0)
        expect((ADD_VISITOR, name), visitor(dur, difficulty(levels, count + 1)))
        expect((GET_CHALLENGE, name, ch0), challenge_reply(d0, t0))
        expect((DELETE_CHALLENGE, name, ch1), "OK")
        expect((ADD_CAPTCHA, name, cfg([(1, 1)], 60)), "error: captcha already exists")
        expect((ADD_CHALLENGE, name, chal(1, 60, ch2)), "error: %s" % "Challenge already exists")
        # keys a misrouted command created on the target would make MIGRATE fail
        # with BUSYKEY and leave the slot open: note them and remove them
        for k in cluster.conn(dst).execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            stray.append(k)
            pipe = cluster.conn(dst).pipeline(transaction=False)
            pipe.execute_command("ASKING")
            pipe.execute_command("DEL", k)
            pipe.execute()

    cluster.migrate_slot_by_hand(slot, src, dst, between=during)
    cluster.wait_stable()
    assert not wrong and not stray, (
        "while slot %d was migrating (captcha %r still on the source):\n%s%s"
        % (slot, name, "\n".join(wrong),
           "\nkeys created on the importing node instead: %s" % stray if stray else ""))
    assert len(answered) + len(deferred) == 7
    # after the move, the state is what the answered commands made of it: a
    # deferred command (TRYAGAIN) changed nothing, and now gets its real answer
    # from the new owner (so the test cannot pass on TRYAGAIN alone)
    now_count = count + (ADD_VISITOR in answered)
    assert c.execute_command(GET, name) == now_count
    after = []
    for cmd in deferred:
        if cmd == GET:
            call, want = (GET, name), now_count
        elif cmd == CAPTCHA_EXISTS:
            call, want = (CAPTCHA_EXISTS, name), 0
        elif cmd == ADD_VISITOR:
            call, want = (ADD_VISITOR, name), visitor(dur, difficulty(levels, now_count + 1))
            now_count += 1
        elif cmd == GET_CHALLENGE:
            call, want = (GET_CHALLENGE, name, ch0), challenge_reply(d0, t0)
        elif cmd == DELETE_CHALLENGE:
            call, want = (DELETE_CHALLENGE, name, ch1), "OK"
        elif cmd == ADD_CAPTCHA:
            call, want = (ADD_CAPTCHA, name, cfg([(1, 1)], 60)), "error: captcha already exists"
        else:
            call, want = (ADD_CHALLENGE, name, chal(1, 60, ch2)), \
                "error: Challenge already exists"
        try:
            got = c.execute_command(*call)
            if cmd in (ADD_VISITOR, GET_CHALLENGE):
                got = json.loads(got)
        except redis.ResponseError as e:
            got = "error: %s" % e
        assert got == want, "%s after the migration: got %r, expected %r" % (cmd, got, want)
        after.append(cmd)
    assert sorted(answered + after) == sorted(
        [GET, CAPTCHA_EXISTS, ADD_VISITOR, GET_CHALLENGE, DELETE_CHALLENGE, ADD_CAPTCHA,
         ADD_CHALLENGE]), (answered, after)
    # every command has now run once: one visit more, ch0 and ch1 gone, ch2 kept
    assert c.execute_command(GET, name) == count + 1
    for ch in (ch0, ch1):
        with pytest.raises(redis.ResponseError, match="^%s$" % CHALLENGE_NOT_FOUND):
            c.execute_command(GET_CHALLENGE, name, ch)
    assert json.loads(c.execute_command(GET_CHALLENGE, name, ch2)) == challenge_reply(d2, t2)


# ------------------------------------------------------------------ failover
def test_replica_failover_keeps_counts(cluster):
    c = cluster.client
    primary = cluster.primaries()[0]
    replica = cluster.replicas_of(primary)[0]
    pslots = cluster.slots_of(primary)
    slots = [pslots[0], pslots[len(pslots) // 2], pslots[-1]]
    by_slot = names_in_slots(slots, 4, prefix="fo-")
    names = [n for s in slots for n in by_slot[s]]
    state = make_captchas(c, names, challenges=1)
    keys = keys_of(state)
    cluster.wait_stable()
    before = {k: digest(cluster, primary, k) for k in keys}
    assert {k: digest(cluster, replica, k) for k in keys} == before
    counts = {n: c.execute_command(GET, n) for n in names}
    assert counts == {n: state[n][2] for n in names}

    cluster.failover(replica)

    assert cluster.conn(replica).execute_command("ROLE")[0] == "master"
    role = cluster.conn(primary).execute_command("ROLE")
    assert role[0] == "slave" and int(role[2]) == replica.port, role
    assert set(cluster.slots_of(replica)) == set(pslots)
    assert {k: digest(cluster, replica, k) for k in keys} == before
    assert {n: c.execute_command(GET, n) for n in names} == counts
    for n in names:
        levels, dur, count, [(ch, d, t)] = state[n]
        assert json.loads(c.execute_command(ADD_VISITOR, n)) == \
            visitor(dur, difficulty(levels, count + 1))
        assert json.loads(c.execute_command(GET_CHALLENGE, n, ch)) == challenge_reply(d, t)
        with pytest.raises(redis.ResponseError, match="^%s$" % CHALLENGE_NOT_FOUND):
            c.execute_command(GET_CHALLENGE, n, ch)
        assert c.execute_command(GET, n) == count + 1
    # the old primary now follows the new one
    cluster.wait_stable()
    for n in names:
        k = captcha_key(n)
        assert digest(cluster, primary, k) == digest(cluster, replica, k)
        assert challenge_key(n, state[n][3][0][0]).decode() not in node_keys(cluster, primary)

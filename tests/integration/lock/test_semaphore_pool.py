# SPDX-License-Identifier: BSD-3-Clause
"""A semaphore pool's size: LOCK.ADD_PERMITS, LOCK.DRAIN_PERMITS, LOCK.AVAILABLE_PERMITS.

Acquirers keep passing the base size (PERMITS n); the lock keeps a signed
adjustment a, and the pool's size is n + a (clamped to 0..1024). ADD changes a
(a size outside 0..1024 is refused, nothing changed), DRAIN takes every permit
free now out of the pool, AVAILABLE answers the permits free now. Lowering the
size below the permits taken takes nothing from holders. ADD serves waiters,
first come first served. The adjustment persists (mcap-lock encver 4),
replicates (LOCK.STATE ... ADJUST a), digests, copies and shows in LOCK.INSPECT.
"""

import threading

import pytest
import redis

from servers import raw_command, wait_until

ACQ, ADD, DRAIN, AVAIL = "LOCK.ACQUIRE", "LOCK.ADD_PERMITS", "LOCK.DRAIN_PERMITS", "LOCK.AVAILABLE_PERMITS"


def _pairs(flat):
    it = iter(flat)
    return {k.decode(): v for k, v in zip(it, it)}


def _full(r, key):
    return _pairs(r.execute_command("LOCK.INSPECT", key, "FULL"))


def _pool(r, key):
    """(permits, adjustment, size, available, sorted holders) of LOCK.INSPECT FULL."""
    v = _full(r, key)
    hs = sorted((_pairs(h)["owner"], _pairs(h)["weight"]) for h in v["holders"])
    return v["permits"], v["adjustment"], v["size"], v["available"], hs


def _waiters(r, key):
    return r.execute_command("LOCK.INSPECT", key)[2]


class Waiter:
    """LOCK.ACQUIRE ... PERMITS n [TAKE k] WAIT on a connection of its own, queued when built."""

    def __init__(self, server, r, key, owner, n, take=1):
        self.c = server.client()
        self.reply = None
        q = _waiters(r, key)
        self.t = threading.Thread(target=self._run, args=(key, owner, n, take), daemon=True)
        self.t.start()
        wait_until(lambda: _waiters(r, key) == q + 1, owner + " queued")

    def _run(self, key, owner, n, take):
        self.reply = self.c.execute_command(ACQ, key, owner, 60000, "PERMITS", n, "TAKE", take, "WAIT", 20000)

    def join(self):
        self.t.join(20)
        assert not self.t.is_alive()
        return self.reply


def test_add_drain_available(r):
    assert r.execute_command(AVAIL, "p") is None  # unknown base size
    assert r.execute_command(AVAIL, "p", "PERMITS", 3) == 3
    assert r.execute_command(ACQ, "p", "a", 60000, "PERMITS", 3, "TAKE", 2)[0] == 1
    assert r.execute_command(AVAIL, "p") == 1
    assert r.execute_command(ADD, "p", 2, "PERMITS", 3) == 5
    assert r.execute_command(AVAIL, "p", "PERMITS", 3) == 3
    assert _pool(r, "p") == (3, 2, 5, 3, [(b"a", 2)])
    assert r.execute_command(DRAIN, "p") == 3  # every free permit, out of the pool
    assert _pool(r, "p") == (3, -1, 2, 0, [(b"a", 2)])
    assert r.execute_command(ACQ, "p", "b", 60000, "PERMITS", 3)[0] == 0
    assert r.execute_command(DRAIN, "p") == 0
    # the holder's permits return to the pool when released
    assert r.execute_command("LOCK.RELEASE", "p", "a") == 0
    assert r.execute_command(AVAIL, "p") == 2
    assert r.execute_command(ACQ, "p", "b", 60000, "PERMITS", 3)[0] == 1
    # the plain view ends with the adjustment and the size
    assert r.execute_command("LOCK.INSPECT", "p")[4:] == [-1, 2]
    assert _full(r, "p")["kind"] == b"semaphore"


def test_a_missing_key_needs_its_base_size(r):
    with pytest.raises(redis.ResponseError, match="no such semaphore: pass PERMITS n"):
        r.execute_command(ADD, "m", 1)
    with pytest.raises(redis.ResponseError, match="no such semaphore: pass PERMITS n"):
        r.execute_command(DRAIN, "m")
    assert not r.exists("m")
    assert r.execute_command(ADD, "m", 0, "PERMITS", 4) == 4
    assert not r.exists("m")  # no adjustment: nothing to keep
    assert r.execute_command(DRAIN, "m", "PERMITS", 4) == 4
    assert _pool(r, "m") == (4, -4, 0, 0, [])
    assert r.execute_command(ACQ, "m", "a", 60000, "PERMITS", 4)[0] == 0
    assert r.execute_command(ADD, "m", 1) == 1
    assert r.execute_command(ACQ, "m", "a", 60000, "PERMITS", 4)[0] == 1


def test_an_unheld_adjusted_pool_stays_and_keeps_its_adjustment(r):
    assert r.execute_command(ADD, "k", 3, "PERMITS", 2) == 5
    assert r.execute_command(ACQ, "k", "a", 60000, "PERMITS", 2)[0] == 1
    assert r.execute_command("LOCK.RELEASE", "k", "a") == 0
    assert r.exists("k") and r.execute_command(AVAIL, "k") == 5
    # held: another base size is refused, as for acquirers; unheld: it becomes the base
    assert r.execute_command(ACQ, "k", "a", 60000, "PERMITS", 2)[0] == 1
    with pytest.raises(redis.ResponseError, match=r"PERMITS differs from the semaphore's size \(2\)"):
        r.execute_command(ADD, "k", 1, "PERMITS", 3)
    with pytest.raises(redis.ResponseError, match=r"PERMITS differs from the semaphore's size \(2\)"):
        r.execute_command(AVAIL, "k", "PERMITS", 3)
    assert r.execute_command("LOCK.RELEASE", "k", "a") == 0
    assert r.execute_command(AVAIL, "k", "PERMITS", 4) == 7
    assert r.execute_command(ADD, "k", -1, "PERMITS", 4) == 6
    assert _pool(r, "k")[:3] == (4, 2, 6)


def test_lowering_below_the_taken_takes_nothing_from_holders(r):
    for o in ("a", "b", "c"):
        assert r.execute_command(ACQ, "low", o, 60000, "PERMITS", 4)[0] == 1
    assert r.execute_command(ADD, "low", -3) == 1
    assert _pool(r, "low") == (4, -3, 1, 0, [(b"a", 1), (b"b", 1), (b"c", 1)])
    assert r.execute_command(ACQ, "low", "d", 60000, "PERMITS", 4)[0] == 0
    assert r.execute_command("LOCK.RELEASE", "low", "a") == 0
    assert r.execute_command("LOCK.RELEASE", "low", "b") == 0
    assert r.execute_command(ACQ, "low", "d", 60000, "PERMITS", 4)[0] == 0  # taken 1, size 1
    assert r.execute_command("LOCK.RELEASE", "low", "c") == 0
    assert r.execute_command(ACQ, "low", "d", 60000, "PERMITS", 4)[0] == 1


def test_the_size_stays_in_range(r):
    assert r.execute_command(ACQ, "rg", "a", 60000, "PERMITS", 2)[0] == 1
    with pytest.raises(redis.ResponseError, match=r"size would be -1 \(2 -3\): it must stay from 0 to 1024"):
        r.execute_command(ADD, "rg", -3)
    with pytest.raises(redis.ResponseError, match="size would be 1025"):
        r.execute_command(ADD, "rg", 1023)
    assert _pool(r, "rg")[:3] == (2, 0, 2)
    assert r.execute_command(ADD, "rg", 1022) == 1024


def test_lock_delays_count_as_taken(r, server):
    assert r.execute_command(ACQ, "ld", "a", 100, "PERMITS", 2, "LOCKDELAY", 60000)[0] == 1
    wait_until(lambda: _full(r, "ld")["holders"] and _pairs(_full(r, "ld")["holders"][0])["state"] == b"lock-delay",
               "a's lease ended into its lock-delay")
    assert r.execute_command(AVAIL, "ld") == 1
    assert r.execute_command(DRAIN, "ld") == 1
    assert _pool(r, "ld") == (2, -1, 1, 0, [(b"a", 1)])


def test_add_serves_the_waiters_first_come_first_served(r, server):
    assert r.execute_command(ACQ, "w", "a", 60000, "PERMITS", 2, "TAKE", 2)[0] == 1
    big = Waiter(server, r, "w", "big", 2, 2)
    small = Waiter(server, r, "w", "small", 2, 1)
    assert r.execute_command(ADD, "w", 1) == 3  # one free: the head wants 2, and is not overtaken
    assert _waiters(r, "w") == 2 and big.reply is None and small.reply is None
    assert r.execute_command(AVAIL, "w") == 1
    assert r.execute_command(ACQ, "w", "new", 60000, "PERMITS", 2)[0] == 0  # behind the queue
    assert r.execute_command(ADD, "w", 2) == 5
    assert big.join()[0] == 1
    assert small.join()[0] == 1
    assert _pool(r, "w") == (2, 3, 5, 0, [(b"a", 2), (b"big", 2), (b"small", 1)])


def test_drain_leaves_waiters_waiting(r, server):
    assert r.execute_command(ACQ, "dw", "a", 60000, "PERMITS", 2, "TAKE", 2)[0] == 1
    w = Waiter(server, r, "dw", "w", 2)
    assert r.execute_command(DRAIN, "dw") == 0
    assert r.execute_command("LOCK.RELEASE", "dw", "a") == 0
    assert w.join()[0] == 1
    assert r.execute_command(DRAIN, "dw") == 1
    assert r.execute_command(AVAIL, "dw") == 0


def _state(c, key):
    return _pool(c, key), c.execute_command("LOCK.INSPECT", key)[4:]


def test_the_adjustment_replicates_and_persists(replica_pair, sync, servers):
    primary, replica = replica_pair
    p = primary.client()
    assert p.execute_command(ACQ, "s", "a", 600000, "PERMITS", 3)[0] == 1
    assert p.execute_command(ADD, "s", 4) == 7
    assert p.execute_command(ADD, "free", 2, "PERMITS", 1) == 3  # unheld, kept for its adjustment
    assert p.execute_command(DRAIN, "d", "PERMITS", 5) == 5
    sync(primary, replica)
    rr = replica.client()
    for k in ("s", "free", "d"):
        assert _state(rr, k) == _state(p, k)
        assert rr.execute_command("DEBUG", "DIGEST-VALUE", k) == p.execute_command("DEBUG", "DIGEST-VALUE", k)
    assert _state(p, "s") == ((3, 4, 7, 6, [(b"a", 1)]), [4, 7])
    assert rr.execute_command(AVAIL, "s") == 6  # read-only: runs on the replica
    before = {k: _state(p, k) for k in ("s", "free", "d")}
    p.execute_command("DEBUG", "RELOAD")
    assert {k: _state(p, k) for k in before} == before
    # restart from the RDB
    primary.save_now()  # once no replication child runs (SAVE refuses to run beside one)
    primary.restart()
    p = primary.client()
    assert {k: _state(p, k) for k in before} == before


@pytest.mark.parametrize("preamble", [False, True])
def test_the_adjustment_survives_an_aof_restart(aof_server, preamble):
    s = aof_server(preamble=preamble)
    c = s.client()
    assert c.execute_command(ACQ, "s", "a", 600000, "PERMITS", 3, "TAKE", 2)[0] == 1
    assert c.execute_command(ADD, "s", -2) == 1
    assert c.execute_command(DRAIN, "e", "PERMITS", 2) == 2
    want = {k: _state(c, k) for k in ("s", "e")}
    s.restart()  # replays the commands (LOCK.STATE ... ADJUST a)
    c = s.client()
    assert {k: _state(c, k) for k in want} == want
    c.execute_command("BGREWRITEAOF")
    s.wait_aof_rewrite_done()
    s.restart()
    c = s.client()
    assert {k: _state(c, k) for k in want} == want


def test_digest_memory_and_copy(r):
    assert r.execute_command(ACQ, "x", "a", 600000, "PERMITS", 3)[0] == 1
    assert r.copy("x", "y")
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "x") == r.execute_command("DEBUG", "DIGEST-VALUE", "y")
    mem = r.memory_usage("x")
    assert r.execute_command(ADD, "x", 1) == 4
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "x") != r.execute_command("DEBUG", "DIGEST-VALUE", "y")
    assert r.memory_usage("x") == mem  # the adjustment lives in the value's header
    r.delete("z")
    assert r.copy("x", "z")
    assert _pool(r, "z") == _pool(r, "x") == (3, 1, 4, 3, [(b"a", 1)])
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "x") == r.execute_command("DEBUG", "DIGEST-VALUE", "z")


def test_lock_state_adjust(r, server):
    assert r.execute_command("LOCK.STATE", "st", 2, 0, 0, "ADJUST", -2) == b"OK"
    assert _pool(r, "st") == (2, -2, 0, 0, [])
    assert r.execute_command("LOCK.STATE", "st", 2, 0, 0, "ADJUST", 1024) == b"OK"
    assert r.execute_command("LOCK.INSPECT", "st")[4:] == [1024, 1024]


@pytest.mark.parametrize("args", [
    ("LOCK.STATE", "k", 2, 0, 0, "ADJUST", 1025),
    ("LOCK.STATE", "k", 2, 0, 0, "ADJUST", -1025),
    ("LOCK.STATE", "k", 2, 0, 0, "ADJUST", "x"),
    ("LOCK.STATE", "k", 2, 0, 0, "ADJUST"),
    ("LOCK.STATE", "k", 2, 0, 0, "ADJUST", 1, "ADJUST", 1),
    ("LOCK.STATE", "k", 2, 0, 0, "ADJUST", 1, "EPHEMERAL"),
    ("LOCK.STATE", "k", 1, 5, 1, "o", 1, 1, 5, "SHARED", 0, "ADJUST", 1),
], ids=lambda a: " ".join(map(str, a)))
def test_bad_states_are_refused(r, server, args):
    digest = r.execute_command("DEBUG", "DIGEST")
    rep = raw_command(server, *args)
    assert rep.startswith(b"-ERR invalid lock state"), rep
    assert r.execute_command("DEBUG", "DIGEST") == digest


def test_bad_input_writes_nothing(r, server):
    assert r.execute_command(ACQ, "b", "a", 60000, "PERMITS", 2)[0] == 1
    r.set("str", "v")
    assert r.execute_command("RL.CONCURRENCY", "cc", "h", 60000, 2)[0] == 1
    assert r.execute_command(ACQ, "rw", "r", 60000, "READ")[0] == 1
    digest = r.execute_command("DEBUG", "DIGEST")
    cases = [
        ((ADD, "b", "x"), "delta must be an integer from -1024 to 1024"),
        ((ADD, "b", 1025), "delta must be an integer from -1024 to 1024"),
        ((ADD, "b", "1.5"), "delta must be an integer"),
        ((ADD, "b", 1, "PERMITS"), "PERMITS needs a value"),
        ((ADD, "b", 1, "PERMITS", 0), "PERMITS must be an integer from 1 to 1024"),
        ((ADD, "b", 1, "PERMITS", 2, "PERMITS", 2), "unknown option 'PERMITS' for LOCK.ADD_PERMITS"),
        ((DRAIN, "b", "FOO"), "unknown option 'FOO' for LOCK.DRAIN_PERMITS; expected PERMITS n"),
        ((AVAIL, "b", "PERMITS", 2000), "PERMITS must be an integer from 1 to 1024"),
        ((ADD, "b", -3), "size would be -1"),
        ((ADD, "cc", 1), "concurrency limit"),
        ((DRAIN, "cc"), "concurrency limit"),
        ((AVAIL, "cc"), "concurrency limit"),
        ((ADD, "rw", 1), "read-write lock used with READ"),
        ((DRAIN, "rw"), "read-write lock used with READ"),
    ]
    for args, err in cases:
        with pytest.raises(redis.ResponseError, match=err):
            r.execute_command(*args)
    for cmd in ((ADD, "str", 1), (DRAIN, "str"), (AVAIL, "str")):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r.execute_command(*cmd)
    for cmd in ((ADD,), (ADD, "b"), (DRAIN,), (AVAIL,)):
        with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
            r.execute_command(*cmd)
    assert r.execute_command("DEBUG", "DIGEST") == digest


def test_read_is_refused_on_an_adjusted_pool(r):
    assert r.execute_command(ADD, "rp", 1, "PERMITS", 1) == 2
    with pytest.raises(redis.ResponseError, match="READ is for a read-write lock"):
        r.execute_command(ACQ, "rp", "r", 60000, "READ")
    assert r.execute_command(ACQ, "rp", "w", 60000, "WRITE")[0] == 1
    assert r.execute_command(ACQ, "rp", "v", 60000)[0] == 1
    assert _pool(r, "rp") == (1, 1, 2, 0, [(b"v", 1), (b"w", 1)])


@pytest.mark.parametrize("change", ["add-0", "drain-nothing"])
def test_a_change_that_only_normalises_the_adjustment_replicates(replica_pair, sync, change):
    # An unheld pool takes the next acquirer's PERMITS as its base and keeps its adjustment,
    # so base 1024 + adjustment 1023 is clamped to a size of 1024. A later ADD 0 (or a DRAIN
    # that finds nothing free) rewrites the adjustment to 0 in the primary's value: that is a
    # change, and the replica and the AOF must get it (digests equal).
    primary, replica = replica_pair
    p = primary.client()
    assert p.execute_command(ADD, "p", 1023, "PERMITS", 1) == 1024
    take = ["TAKE", 1024] if change == "drain-nothing" else []
    assert p.execute_command(ACQ, "p", "o1", 600000, "PERMITS", 1024, *take)[0] == 1
    if change == "add-0":
        assert p.execute_command("LOCK.RELEASE", "p", "o1") == 0
        assert p.execute_command("LOCK.INSPECT", "p")[4:] == [1023, 1024]
        assert p.execute_command(ADD, "p", 0) == 1024
    else:
        assert p.execute_command(DRAIN, "p") == 0
    sync(primary, replica)
    rr = replica.client()
    assert rr.execute_command("LOCK.INSPECT", "p")[4:] == p.execute_command("LOCK.INSPECT", "p")[4:]
    assert rr.execute_command("DEBUG", "DIGEST-VALUE", "p") == p.execute_command("DEBUG", "DIGEST-VALUE", "p")


@pytest.mark.parametrize("how", ["acquire", "acquire_all", "lock-delay"])
def test_a_held_lock_of_one_permit_gets_no_second_permit(r, how):
    # A held lock of one permit is exclusive: ADD_PERMITS would let another owner in beside
    # its holder (or into its lock-delay). Refused, nothing written; once it is free, allowed.
    if how == "acquire":
        assert r.execute_command(ACQ, "{k}a", "o", 600000)[0] == 1
    elif how == "acquire_all":
        assert r.execute_command("LOCK.ACQUIRE_ALL", 2, "{k}a", "{k}b", "o", 600000)[0] == 1
    else:
        assert r.execute_command(ACQ, "{k}a", "o", 100, "SESSION", "LOCKDELAY", 600000)[0] == 1
        r.connection_pool.disconnect()  # the session ends: a lock-delay keeps the permit
        wait_until(lambda: r.execute_command("LOCK.INSPECT", "{k}a")[3][0][3] == 0, "the lock-delay")
    before = r.execute_command("DEBUG", "DIGEST-VALUE", "{k}a")
    with pytest.raises(redis.ResponseError, match="lock of one permit, held"):
        r.execute_command(ADD, "{k}a", 1)
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "{k}a") == before
    assert r.execute_command(ACQ, "{k}a", "x", 600000)[0] == 0
    # lowering it is no risk to exclusivity
    assert r.execute_command(ADD, "{k}a", -1) == 0
    if how != "lock-delay":
        assert r.execute_command("LOCK.RELEASE", "{k}a", "o") == 0
        assert r.execute_command(ADD, "{k}a", 2) == 2


# A refused LOCK.ADD_PERMITS on an unheld pool that passes another base size (PERMITS n)
# leaves the pool exactly as it was ("nothing changed"): pool_open takes n as the base
# before the size is checked, and pool_abort must put the old base back. (Its other way
# in, a held lock of one permit, never has a new base: a held key refuses another n.)
# Base 3 + adjustment 2: a 5-permit pool, kept unheld for its adjustment. too-many is
# refused only with the new base (4 + 2 + 1019 = 1025; 5 + 1019 would fit); too-few and
# max-base (1024 + 2 clamped to 1024, + 1024) with either.
@pytest.mark.parametrize("delta,base,err", [
    (1019, 4, r"size would be 1025 \(6 \+1019\): it must stay from 0 to 1024; nothing changed"),
    (-7, 4, r"size would be -1 \(6 -7\): it must stay from 0 to 1024; nothing changed"),
    (1024, 1024, r"size would be 2048 \(1024 \+1024\): it must stay from 0 to 1024; nothing changed"),
], ids=["too-many", "too-few", "max-base"])
def test_a_refused_add_on_an_unheld_pool_changes_nothing(replica_pair, sync, delta, base, err):
    primary, replica = replica_pair
    p, rr = primary.client(), replica.client()
    assert p.execute_command(ADD, "k", 2, "PERMITS", 3) == 5
    assert p.execute_command("LOCK.INSPECT", "k")[4:] == [2, 5] and not _full(p, "k")["holders"]
    sync(primary, replica)

    def snap(c):
        return (_full(c, "k"), c.execute_command("DEBUG", "DIGEST-VALUE", "k"), c.dump("k"),
                c.execute_command(AVAIL, "k"))

    before = snap(p)
    assert before[0]["permits"] == 3 and before[0]["size"] == 5 and before[3] == 5
    assert snap(rr) == before
    with pytest.raises(redis.ResponseError, match=err):
        p.execute_command(ADD, "k", delta, "PERMITS", base)
    assert snap(p) == before
    # nothing was written: the replica still agrees (and a reload keeps the old base)
    sync(primary, replica)
    assert snap(rr) == before
    p.execute_command("DEBUG", "RELOAD")
    assert snap(p) == before
    # the next acquirer (PERMITS 3, as the pool's acquirers pass it) sees the 5 permits
    assert p.execute_command(ACQ, "k", "a", 60000, "PERMITS", 3, "TAKE", 3)[0] == 1
    assert p.execute_command(ACQ, "k", "b", 60000, "PERMITS", 3, "TAKE", 2)[0] == 1
    assert p.execute_command(ACQ, "k", "c", 60000, "PERMITS", 3)[0] == 0
    assert _pool(p, "k") == (3, 2, 5, 0, [(b"a", 3), (b"b", 2)])
    sync(primary, replica)
    assert rr.execute_command("DEBUG", "DIGEST-VALUE", "k") == p.execute_command("DEBUG", "DIGEST-VALUE", "k")

# SPDX-License-Identifier: BSD-3-Clause
"""RL.CONCURRENCY: a concurrency limit with leases (at most N holders at once,
each slot freed by release or when its lease ends), on the lock machinery.

Reply: [allowed, remaining, retry_after_ms, reset_after_ms]; the key is deleted
once nobody holds it, so idle limits cost no memory."""

import select
import threading
import time

import pytest
import redis

from servers import RawConnection, resp_encode, wait_until

ACQ = "RL.CONCURRENCY"
REL = "RL.CONCURRENCY_RELEASE"


def test_at_most_n_holders_and_release_frees_a_slot(r):
    assert r.execute_command(ACQ, "c", "a", 10000, 2) == [1, 1, -1, 10000]
    assert r.execute_command(ACQ, "c", "b", 10000, 2)[:3] == [1, 0, -1]
    refused = r.execute_command(ACQ, "c", "x", 10000, 2)
    assert refused[0] == 0 and refused[1] == 0
    assert 9000 < refused[2] <= 10000          # until the earliest lease ends
    assert r.execute_command(REL, "c", "a") == 1
    assert r.execute_command(REL, "c", "a") == 0  # held nothing any more
    assert r.execute_command(ACQ, "c", "x", 10000, 2)[0] == 1
    assert r.type("c") == b"mcap-lock"


def test_key_is_deleted_once_nobody_holds_it(r):
    r.execute_command(ACQ, "e", "a", 10000, 3)
    r.execute_command(ACQ, "e", "b", 10000, 3)
    r.execute_command(REL, "e", "a")
    assert r.exists("e") == 1
    r.execute_command(REL, "e", "b")
    assert r.exists("e") == 0


def wait_for(pred, timeout=10.0, what="condition"):
    return wait_until(pred, what, timeout)


def client_ids(r):
    return {int(c["id"]) for c in r.client_list()}


def waiters(r, key):
    """The waiters count of LOCK.INSPECT (the concurrency limit is a lock key)."""
    insp = r.execute_command("LOCK.INSPECT", key)
    return 0 if insp is None else insp[2]


def test_a_crashed_holder_cannot_keep_its_slot(server, r):
    # The holder's connection dies without releasing: its slot is not freed by
    # the disconnect, but its lease ends by itself, with no further command,
    # and then the idle limit's key is gone.
    expired0 = r.info("mcaptcha_cache_locks")["mcaptcha_cache_leases_expired_while_held"]
    holder = server.client()
    hid = holder.client_id()
    t0 = time.time()
    assert holder.execute_command(ACQ, "crash", "h", 1000, 1)[0] == 1
    assert r.execute_command(ACQ, "crash", "other", 1000, 1)[0] == 0
    holder.connection_pool.disconnect()  # the holder "crashes"
    wait_for(lambda: hid not in client_ids(r), what="the holder's connection to close")
    insp = r.execute_command("LOCK.INSPECT", "crash")
    if insp is not None:  # (None only if the lease already ended: a slow machine)
        assert [h[0] for h in insp[3]] == [b"h"], insp
    wait_for(lambda: r.exists("crash") == 0, what="the lease to end")
    # not before the lease's end: it was the lease, not a command, that freed it
    assert time.time() >= t0 + 1.0 - 0.002
    assert r.info("mcaptcha_cache_locks")["mcaptcha_cache_leases_expired_while_held"] \
        >= expired0 + 1
    assert r.execute_command(ACQ, "crash", "other", 1000, 1)[0] == 1


def test_waiter_gets_the_slot_when_a_lease_ends(server, r):
    """The waiter is served when the holder's lease ends, with no release: never
    while the server still shows that lease running, and once it has ended."""
    wc = RawConnection(server.host, server.port, timeout=20)
    try:
        assert r.execute_command(ACQ, "w", "a", 300, 1)[0] == 1
        wc.sock.sendall(resp_encode(ACQ, "w", "b", 1000, 1, "WAIT", 10000))
        wait_for(lambda: waiters(r, "w") == 1, what="the waiter to queue")
        seen_running = 0
        while True:
            # the reply is looked for before the server is asked: a reply that had
            # come while LOCK.INSPECT then shows a's lease running was too early
            answered = bool(select.select([wc.sock], [], [], 0)[0])
            insp = r.execute_command("LOCK.INSPECT", "w")
            owners = [] if insp is None else [h[0] for h in insp[3]]
            if b"a" not in owners:
                break
            seen_running += 1
            assert not answered, "the waiter was answered while a's lease still ran: %r" % (insp,)
            assert owners == [b"a"] and insp[2] == 1, insp
            time.sleep(0.005)
        assert seen_running >= 1
        # a's lease has ended (as the server shows it): the waiter is served
        wc.sock.settimeout(20)
        got = wc.read_reply()
        assert got.startswith(b"*4\r\n:1\r\n"), got
        insp = r.execute_command("LOCK.INSPECT", "w")
        assert [h[0] for h in insp[3]] == [b"b"] and insp[2] == 0, insp
    finally:
        wc.close()


def test_waiters_served_in_arrival_order(server, r):
    r.execute_command(ACQ, "q", "holder", 10000, 1)
    order = []
    lock = threading.Lock()

    def wait(name):
        c = server.client()
        rep = c.execute_command(ACQ, "q", name, 10000, 1, "WAIT", 20000)
        with lock:
            order.append((name, rep[0]))
        # the next waiter gets the slot only after this one has recorded its turn
        if rep[0] == 1:
            c.execute_command(REL, "q", name)

    threads = []
    for i in range(4):
        t = threading.Thread(target=wait, args=("w%d" % i,))
        t.start()
        threads.append(t)
        # the next one arrives only once this one is in the queue
        wait_for(lambda: waiters(r, "q") == i + 1, what="waiter w%d to queue" % i)
    r.execute_command(REL, "q", "holder")
    for t in threads:
        t.join(10)
    assert order == [("w%d" % i, 1) for i in range(4)]


def test_info_counts_allowed_and_refused(r):
    before = r.info("mcaptcha_cache_ratelimit")
    r.execute_command(ACQ, "i", "a", 1000, 1)
    r.execute_command(ACQ, "i", "b", 1000, 1)
    after = r.info("mcaptcha_cache_ratelimit")
    key = "mcaptcha_cache_rl_concurrency_%s"
    assert after[key % "allowed"] == before.get(key % "allowed", 0) + 1
    assert after[key % "refused"] == before.get(key % "refused", 0) + 1


def test_replica_has_the_same_state(replica_pair, sync):
    primary, replica = replica_pair
    c = primary.client()
    for i in range(30):
        c.execute_command(ACQ, "rep%d" % (i % 3), "h%d" % i, 60000, 5)
        if i % 4 == 0:
            c.execute_command(REL, "rep%d" % (i % 3), "h%d" % i)
    sync(primary, replica)
    rc = replica.client()
    for k in ("rep0", "rep1", "rep2"):
        assert c.execute_command("DEBUG", "DIGEST-VALUE", k) == rc.execute_command("DEBUG", "DIGEST-VALUE", k)


@pytest.mark.parametrize("args", [
    (), ("k",), ("k", "h"), ("k", "h", 100),
    ("k", "h", 0, 1), ("k", "h", -1, 1), ("k", "h", "x", 1), ("k", "h", 2 ** 63, 1),
    ("k", "h", 100, 0), ("k", "h", 100, 1025), ("k", "h", 100, "x"),
    ("k", "", 100, 1), ("k", "h" * 257, 100, 1),
    ("k", "h", 100, 1, "WAIT"), ("k", "h", 100, 1, "NOPE", 5), ("k", "h", 100, 1, "WAIT", -1),
])
def test_bad_input(r, args):
    r.set("plain", "v")
    n = r.dbsize()
    with pytest.raises(redis.ResponseError):
        r.execute_command(ACQ, *args)
    assert r.dbsize() == n and r.exists("k") == 0
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command(ACQ, "plain", "h", 100, 1)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command(REL, "plain", "h")
    assert r.ping()

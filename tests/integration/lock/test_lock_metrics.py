# SPDX-License-Identifier: BSD-3-Clause
"""INFO mcaptcha_cache_locks: lock wait and hold times (p50/p99/max in ms, from
a fixed histogram of sqrt(2)-wide buckets, core/histogram.h) and the waiter
queue lengths move with traffic.

- wait: from a waiter's block to its grant, for waiters that were granted (a
  WAIT that runs out is not a sample);
- hold: from a grant made on this node to its release, its lease end (timed
  to the lease end) or its SESSION's disconnect;
- waiters: clients waiting now, over every lock key; max_queue_length: the
  longest queue on one key now.

Ordering comes from the server (a waiter is queued when LOCK.INSPECT says so,
a lease ended when the key shows no holder); the sleeps only make a wait or a
hold last at least so long."""

import threading
import time

from mcap import wait_for

SECTION = "mcaptcha_cache_locks"
FIELDS = ["grants", "waits", "timeouts", "leases_expired_while_held", "waiters", "max_queue_length", "lease_timers",
          "leases_moved_pending", "lease_keys_scanned", "lease_renames_followed", "leases_paused", "lease_pause_wakeups", "session_entries",
          "wait_samples", "wait_ms_p50", "wait_ms_p99", "wait_ms_max",
          "hold_samples", "hold_ms_p50", "hold_ms_p99", "hold_ms_max"]


def stats(server):
    """INFO mcaptcha_cache_locks as {field without prefix: int}."""
    out = {}
    for k, v in server.info(SECTION).items():
        k = k.decode() if isinstance(k, bytes) else k
        if k.startswith("mcaptcha_cache_"):
            out[k[len("mcaptcha_cache_"):]] = int(v)
    return out


def queued(c, key):
    v = c.execute_command("LOCK.INSPECT", key)
    return 0 if v is None else v[2]


def holders(c, key):
    v = c.execute_command("LOCK.INSPECT", key)
    return 0 if v is None else len(v[3])


class Waiter(threading.Thread):
    def __init__(self, server, key, owner, wait_ms, *opts):
        super().__init__(daemon=True)
        self.c = server.client(socket_timeout=wait_ms / 1000.0 + 10)
        self.key, self.owner, self.wait_ms, self.opts = key, owner, wait_ms, opts
        self.reply = None
        self.start()

    def run(self):
        self.reply = self.c.execute_command("LOCK.ACQUIRE", self.key, self.owner, 60000, *self.opts,
                                            "WAIT", self.wait_ms)


def test_fields_exist_and_start_at_zero(servers):
    s = servers.new()
    st = stats(s)
    assert sorted(st) == sorted(FIELDS), st
    assert all(st[f] == 0 for f in FIELDS), st


def test_wait_time_and_queue_lengths(servers):
    s = servers.new()
    c = s.client()
    wait_ms = 300
    assert c.execute_command("LOCK.ACQUIRE", "A", "holder", 60000)[0] == 1
    assert c.execute_command("LOCK.ACQUIRE", "B", "holder", 60000, "PERMITS", 2)[0] == 1
    assert c.execute_command("LOCK.ACQUIRE", "B", "holder2", 60000, "PERMITS", 2)[0] == 1
    a = [Waiter(s, "A", "w%d" % i, 20000) for i in range(1)]
    wait_for(lambda: queued(c, "A") == 1, what="the first waiter on A queued")
    t_queued = time.time()  # the first waiter blocked before this
    for i in range(1, 3):   # one at a time: the queue's order is the order of arrival
        a.append(Waiter(s, "A", "w%d" % i, 20000))
        wait_for(lambda: queued(c, "A") == i + 1, what="waiter w%d on A queued" % i)
    b = Waiter(s, "B", "wb", 20000, "PERMITS", 2)
    wait_for(lambda: queued(c, "A") == 3 and queued(c, "B") == 1, what="3 waiters on A, 1 on B")
    st = stats(s)
    assert st["waiters"] == 4 and st["max_queue_length"] == 3, st
    assert st["wait_samples"] == 0
    # the first waiter on A waits at least wait_ms (server-side: block to grant)
    time.sleep(max(0.0, t_queued + wait_ms / 1000.0 - time.time()))
    assert c.execute_command("LOCK.RELEASE", "A", "holder") == 0
    a[0].join(10)
    assert a[0].reply[0] == 1, a[0].reply
    st = stats(s)
    assert st["wait_samples"] == 1, st
    assert st["wait_ms_max"] >= wait_ms and st["wait_ms_p99"] >= wait_ms and st["wait_ms_p50"] >= wait_ms, st
    assert st["waiters"] == 3 and st["max_queue_length"] == 2, st
    # the others are served one by one: the queues shrink, the samples grow
    assert c.execute_command("LOCK.RELEASE", "A", "w0") == 0
    a[1].join(10)
    assert c.execute_command("LOCK.RELEASE", "A", "w1") == 0
    a[2].join(10)
    assert c.execute_command("LOCK.RELEASE", "B", "holder") == 0
    b.join(10)
    assert all(w.reply[0] == 1 for w in a + [b])
    st = stats(s)
    assert st["wait_samples"] == 4 and st["waiters"] == 0 and st["max_queue_length"] == 0, st
    assert st["wait_ms_max"] >= wait_ms, st


def test_a_wait_that_runs_out_is_not_a_sample(servers):
    s = servers.new()
    c = s.client()
    assert c.execute_command("LOCK.ACQUIRE", "T", "holder", 60000)[0] == 1
    w = Waiter(s, "T", "late", 50)
    w.join(10)
    assert w.reply[0] == 0
    st = stats(s)
    assert st["timeouts"] == 1 and st["wait_samples"] == 0 and st["wait_ms_max"] == 0, st


def test_hold_time_on_release(servers):
    s = servers.new()
    c = s.client()
    hold_ms = 250
    # twenty short holds, then one long: p50 stays short, max (and p99 of 21: the
    # 21st value) shows the long one
    for i in range(20):
        assert c.execute_command("LOCK.ACQUIRE", "H", "quick", 60000)[0] == 1
        assert c.execute_command("LOCK.RELEASE", "H", "quick") == 0
    assert c.execute_command("LOCK.ACQUIRE", "H", "slow", 60000)[0] == 1
    time.sleep(hold_ms / 1000.0)  # granted before the reply, released after this
    assert c.execute_command("LOCK.RELEASE", "H", "slow") == 0
    st = stats(s)
    assert st["hold_samples"] == 21, st
    assert st["hold_ms_max"] >= hold_ms and st["hold_ms_p99"] >= hold_ms, st
    assert st["hold_ms_p50"] < hold_ms / 2, st
    # a reentrant hold is one sample, ended by the last release
    assert c.execute_command("LOCK.ACQUIRE", "R", "o", 60000, "REENTRANT")[0] == 1
    assert c.execute_command("LOCK.ACQUIRE", "R", "o", 60000, "REENTRANT")[0] == 1
    assert c.execute_command("LOCK.RELEASE", "R", "o") == 1
    assert stats(s)["hold_samples"] == 21
    assert c.execute_command("LOCK.RELEASE", "R", "o") == 0
    assert stats(s)["hold_samples"] == 22


def test_hold_time_to_the_lease_end(servers):
    s = servers.new()
    c = s.client()
    lease = 150
    assert c.execute_command("LOCK.ACQUIRE", "E", "o", lease)[0] == 1
    assert c.execute_command("RL.CONCURRENCY", "C", "h", lease, 2)[0] == 1
    wait_for(lambda: holders(c, "E") == 0 and c.exists("C") == 0, what="the leases to end")
    wait_for(lambda: stats(s)["leases_expired_while_held"] == 2, what="both ends counted")
    st = stats(s)
    # timed from the grant to the lease end: exactly the lease
    assert st["hold_samples"] == 2 and st["hold_ms_max"] == lease and st["hold_ms_p50"] == lease, st


def test_hold_time_to_a_session_disconnect(servers):
    s = servers.new()
    c = s.client()
    hold_ms = 200
    owner = s.client()
    assert owner.execute_command("LOCK.ACQUIRE", "S", "o", 60000, "SESSION")[0] == 1
    time.sleep(hold_ms / 1000.0)
    owner.connection_pool.disconnect()
    wait_for(lambda: holders(c, "S") == 0, what="the session's release")
    st = stats(s)
    assert st["hold_samples"] == 1 and st["hold_ms_max"] >= hold_ms, st


def test_replicated_holders_are_not_timed(servers):
    """A holder written by LOCK.STATE (replication, AOF, a migration) has no
    grant time here: its release is not a hold sample."""
    s = servers.new()
    c = s.client()
    assert c.execute_command("LOCK.STATE", "X", 1, 10, 1, "o", int(time.time() * 1000) + 60000, 1, 10) == b"OK"
    assert c.execute_command("LOCK.RELEASE", "X", "o") == 0
    st = stats(s)
    assert st["hold_samples"] == 0 and st["hold_ms_max"] == 0, st

# SPDX-License-Identifier: BSD-3-Clause
"""Scale of a wait queue, for `make bench`: the server CPU of one lock hand-off (release, the
head waiter's grant, and the released client queueing again at the tail) with 10 clients
waiting on the key against 10,000. Each waiter is its own connection, blocked in
LOCK.ACQUIRE ... WAIT; the queue keeps its length through the run. Used by bench.py.
"""
import collections
import statistics

import bench as B

KEY = "wq"
LEASE = 600000
HANDOFFS = 3000


def _round(n):
    srv = B.Server(modules=[B.MODULE], extra=["--maxclients", str(n + 100)])
    conns = []
    try:
        holder = B.Conn(srv.port)
        assert holder("LOCK.ACQUIRE", KEY, "h", LEASE)[0] == 1
        queue = collections.deque()
        for i in range(n):
            c = B.Conn(srv.port)
            c.owner = "w%d" % i
            c.send("LOCK.ACQUIRE", KEY, c.owner, LEASE, "WAIT", 3600000)
            conns.append(c)
            queue.append(c)
            if i % 500 == 499 or i == n - 1:
                while srv.c("LOCK.INSPECT", KEY)[2] < i + 1:   # every waiter so far is queued
                    B.time.sleep(0.001)
        holder.owner = "h"
        cur = holder
        handoffs = max(200, int(HANDOFFS * min(B.SCALE * 10, 1)))
        cpu0 = srv.cpu_seconds()
        for _ in range(handoffs):
            cur.send("LOCK.RELEASE", KEY, cur.owner)
            if cur.read() != 0:
                raise SystemExit("bench: a release in the wait-queue run failed")
            nxt = queue.popleft()
            granted = nxt.read()
            if not isinstance(granted, list) or granted[0] != 1:
                raise SystemExit("bench: the head waiter was not granted: %r" % (granted,))
            if cur is not holder:   # the released waiter queues again at the tail
                cur.send("LOCK.ACQUIRE", KEY, cur.owner, LEASE, "WAIT", 3600000)
                queue.append(cur)
            cur = nxt
        cpu = srv.cpu_seconds() - cpu0
        left = srv.c("LOCK.INSPECT", KEY)[2]
        if left < n - 1:
            raise SystemExit("bench: the queue shrank to %d of %d" % (left, n))
        return 1e6 * cpu / handoffs
    finally:
        for c in conns:
            c.close()
        srv.stop()


def section_waiters(small=10, big=10000):
    a, b = [], []
    for rnd in range(2):
        for n, dest in ((small, a), (big, b)) if rnd % 2 == 0 else ((big, b), (small, a)):
            B.log("  wait queue of %d, round %d/2" % (n, rnd + 1))
            dest.append(_round(n))
    return {"small": small, "big": big, "small_cpu_us": statistics.median(a), "big_cpu_us": statistics.median(b),
            "cpu_ratio": statistics.median(y / x for x, y in zip(a, b))}

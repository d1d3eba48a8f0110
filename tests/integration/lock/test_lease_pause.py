# SPDX-License-Identifier: BSD-3-Clause
"""Ended leases wait in one place while writes are paused (issue #25 item 4).

With 20,000 leases ending during CLIENT PAUSE WRITE (what FAILOVER does) over
200,000 other keys, the server does not spin: the leases join one list, one
poll timer waits for the pause to lift (INFO lease_pause_wakeups: one a 10 ms),
the CPU the server uses meanwhile stays low, and when the pause lifts each
lease is ended once, in order."""

from servers import wait_until

SECTION = "mcaptcha_cache_locks"
N = 20000


def _f(r, name):
    return int(r.info(SECTION)["mcaptcha_cache_" + name])


def _cpu(r):
    c = r.info("cpu")
    return float(c["used_cpu_sys"]) + float(c["used_cpu_user"])


def test_ended_leases_wait_for_a_pause_without_spinning(server):
    r = server.client()
    r.flushall()
    r.execute_command("DEBUG", "POPULATE", 200000)
    expired0 = _f(r, "leases_expired_while_held")
    p = r.pipeline(transaction=False)
    for i in range(N):
        p.execute_command("LOCK.ACQUIRE", "p:%d" % i, "o", 2000)
    assert all(rep[0] == 1 for rep in p.execute())
    r.execute_command("CLIENT", "PAUSE", 120000, "WRITE")
    try:
        # every lease ends during the pause and waits (any that ended before the
        # pause began, on a slow machine, was handled then)
        wait_until(lambda: _f(r, "leases_paused") + _f(r, "leases_expired_while_held") - expired0 == N,
                   "every ended lease waits", timeout=60)
        before = _f(r, "leases_expired_while_held") - expired0
        assert _f(r, "leases_paused") > N // 2
        wake0, cpu0 = _f(r, "lease_pause_wakeups"), _cpu(r)
        # one more second of pause: the work done meanwhile is a poll each 10 ms
        wait_until(lambda: _f(r, "lease_pause_wakeups") >= wake0 + 100, "a second of polls")
        wakeups = _f(r, "lease_pause_wakeups") - wake0
        cpu = _cpu(r) - cpu0
        assert wakeups < 400, wakeups
        # before the fix: 20,000 timers re-armed every 10 ms (~0.9 s of CPU a second)
        assert cpu < 0.35, cpu
        assert _f(r, "leases_paused") == N - before
        assert _f(r, "leases_expired_while_held") == expired0 + before
    finally:
        r.execute_command("CLIENT", "UNPAUSE")
    wait_until(lambda: _f(r, "leases_expired_while_held") == expired0 + N, "every lease ends once", timeout=60)
    assert _f(r, "leases_paused") == 0
    wait_until(lambda: _f(r, "lease_timers") == 0, "every entry goes")
    assert _f(r, "leases_expired_while_held") == expired0 + N
    assert all(h == [] for h in (r.execute_command("LOCK.INSPECT", "p:%d" % i)[3] for i in range(0, N, 997)))


def test_waiters_wait_for_a_pause_without_spinning(server):
    """1,000 keys with a waiter each, whose holders' leases end while writes
    are paused: the queues wait on one list (no 10 ms retry per queue), then
    every waiter is granted once writes resume."""
    from servers import RawConnection, resp_encode
    r = server.client()
    r.flushall()
    n = 1000
    expired0 = _f(r, "leases_expired_while_held")
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("LOCK.ACQUIRE", "w:%d" % i, "h", 2000)
    assert all(rep[0] == 1 for rep in p.execute())
    waiters = []
    try:
        for i in range(n):
            c = RawConnection(server.host, server.port, timeout=60)
            c.sock.sendall(resp_encode("LOCK.ACQUIRE", "w:%d" % i, "w", 60000, "WAIT", 120000))
            waiters.append(c)
        wait_until(lambda: _f(r, "waiters") == n, "every waiter queued")
        r.execute_command("CLIENT", "PAUSE", 120000, "WRITE")
        try:
            wait_until(lambda: _f(r, "leases_paused") + _f(r, "leases_expired_while_held") - expired0 == n,
                       "every holder's lease ended", timeout=60)
            wake0, cpu0 = _f(r, "lease_pause_wakeups"), _cpu(r)
            wait_until(lambda: _f(r, "lease_pause_wakeups") >= wake0 + 100, "a second of polls")
            cpu = _cpu(r) - cpu0
            # before the fix: every queue whose head could be served retried every 10 ms
            assert cpu < 0.3, cpu
            assert _f(r, "waiters") == n
        finally:
            r.execute_command("CLIENT", "UNPAUSE")
        for c in waiters:
            rep = c.read_reply()
            assert rep.startswith(b"*3\r\n:1\r\n"), rep   # granted
        assert _f(r, "waiters") == 0
    finally:
        for c in waiters:
            c.close()

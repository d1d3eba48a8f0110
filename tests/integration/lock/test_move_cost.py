# SPDX-License-Identifier: BSD-3-Clause
"""Moving held locks costs what moving unheld ones does (issue #25 items 3, 5).

RENAME, MOVE, COPY and SWAPDB of held locks never read the keyspace, on the
primary nor on a replica: with 200,000 other keys INFO's lease_keys_scanned
stays 0 while the leases still end where their keys went. A renamed lock is
placed again when a command next opens it by its new name; with the config
lock-follow-renames on, at once, at the destination its RENAME recorded
(src/lock/renames.h: lease_renames_followed counts them), whether the RENAME
came from a client, a transaction or a script, and only a transaction that
queued more than RENAME_HINTS renames falls back to one scan for all of them.
With it off, a renamed lock nobody opens before it must be written is found
by one scan for all such locks. A transaction that renames then deletes many
held locks does linear work."""

import socket

from servers import resp_encode, wait_replicas_synced, wait_until

RENAME_HINTS = 1024  # src/lock/renames.h
FOLLOW = "mcaptcha_cache.lock-follow-renames"


class _Following:
    """CONFIG SET lock-follow-renames yes on these clients for a block (a
    shared server gets its default back)."""

    def __init__(self, *clients):
        self.clients = clients

    def __enter__(self):
        for c in self.clients:
            assert c.config_set(FOLLOW, "yes")

    def __exit__(self, *exc):
        for c in self.clients:
            c.config_set(FOLLOW, "no")

KEYS = 200000
SECTION = "mcaptcha_cache_locks"


def _f(r, name):
    return int(r.info(SECTION)["mcaptcha_cache_" + name])


def _settled(r):
    return _f(r, "leases_moved_pending") == 0


def test_moves_of_held_locks_scan_nothing_on_primary_and_replica(servers):
    primary = servers.new(name="primary")
    p = primary.client()
    p.execute_command("DEBUG", "POPULATE", KEYS)  # not replicated: the full sync carries it
    replica = servers.replica_of(primary, name="replica")
    rr = replica.client()
    with _Following(p, rr):
        _moves_scan_nothing(primary, replica, p, rr)


def _moves_scan_nothing(primary, replica, p, rr):
    assert rr.dbsize() == KEYS
    expired0 = _f(p, "leases_expired_while_held")
    for k in ["rn", "mv", "cp", "sw"]:
        assert p.execute_command("LOCK.ACQUIRE", k, "o", 1500)[0] == 1
    wait_replicas_synced(primary, [replica], timeout=60)
    assert _f(rr, "lease_timers") == 4
    p.execute_command("RENAME", "rn", "rn2")
    assert p.execute_command("MOVE", "mv", 1) == 1
    assert p.execute_command("COPY", "cp", "cp2") == 1
    p.execute_command("SWAPDB", 0, 2)
    wait_replicas_synced(primary, [replica], timeout=60)
    # every moved lock is placed without a command opening it, the renamed one
    # at its RENAME's destination, on both nodes
    wait_until(lambda: _settled(p) and _settled(rr), "the moved locks are placed")
    assert _f(p, "lease_renames_followed") == 1
    assert _f(rr, "lease_renames_followed") == 1
    assert _f(p, "lease_keys_scanned") == 0
    assert _f(rr, "lease_keys_scanned") == 0
    p2, r2 = primary.client(db=2), replica.client(db=2)
    assert [h[0] for h in p2.execute_command("LOCK.INSPECT", "rn2")[3]] == [b"o"]
    assert [h[0] for h in r2.execute_command("LOCK.INSPECT", "rn2")[3]] == [b"o"]
    # every lease (the copy's too) ends where its key went, on time, by the primary
    wait_until(lambda: _f(p, "leases_expired_while_held") >= expired0 + 5, "the leases end", timeout=30)
    wait_replicas_synced(primary, [replica], timeout=60)
    for db, k in [(2, "rn2"), (1, "mv"), (2, "cp"), (2, "cp2"), (2, "sw")]:
        assert primary.client(db=db).execute_command("LOCK.INSPECT", k)[3] == [], (db, k)
        assert replica.client(db=db).execute_command("LOCK.INSPECT", k)[3] == [], (db, k)
    assert _f(p, "lease_keys_scanned") == 0
    assert _f(rr, "lease_keys_scanned") == 0
    assert p.execute_command("DEBUG", "DIGEST") == rr.execute_command("DEBUG", "DIGEST")


def _session_conn(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    f = sock.makefile("rb")
    return sock, f


def _raw(sock, f, *args):
    sock.sendall(resp_encode(*args))
    line = f.readline()
    assert not line.startswith(b"-"), line
    if line.startswith(b"*"):
        for _ in range(int(line[1:])):
            sub = f.readline()
            if sub.startswith(b"$"):
                f.readline()
            elif sub.startswith(b"*"):
                for _ in range(int(sub[1:])):
                    if f.readline().startswith(b"$"):
                        f.readline()
    elif line.startswith(b"$") and not line.startswith(b"$-1"):
        f.readline()
    return line


def test_renamed_locks_nobody_opened_end_without_reading_the_keyspace(server):
    """Held locks renamed by a client (RENAME, RENAMENX), inside MULTI (also
    twice in a row) and by scripts (one that renames more keys after it than
    the hints keep), then never opened by their new names:
    their leases end on time and their SESSION holds end when the connection
    closes, with 200,000 other keys and not one key read by a scan."""
    r = server.client()
    r.flushall()
    with _Following(r):
        _renamed_nobody_opened(server, r)


def _renamed_nobody_opened(server, r):
    r.execute_command("DEBUG", "POPULATE", 200000)
    before = _f(r, "leases_expired_while_held")
    followed = _f(r, "lease_renames_followed")
    # leases of 300 ms, renamed every way
    renamed = []
    for i in range(4):
        assert r.execute_command("LOCK.ACQUIRE", "q%d" % i, "o", 300)[0] == 1
    r.execute_command("RENAME", "q0", "q0:new")
    assert r.execute_command("RENAMENX", "q1", "q1:new") == 1
    t = r.pipeline(transaction=True)
    t.execute_command("RENAME", "q2", "q2:mid")
    t.execute_command("RENAME", "q2:mid", "q2:new")
    t.execute()
    r.eval("return redis.call('RENAME', KEYS[1], KEYS[2])", 2, "q3", "q3:new")
    renamed += ["q%d:new" % i for i in range(4)]
    # a script renames a held lock, then more other keys than the hints keep:
    # the lock's own RENAME was recorded when its value left the key
    assert r.execute_command("LOCK.ACQUIRE", "q4", "o", 300)[0] == 1
    r.eval("redis.call('RENAME', KEYS[1], KEYS[2]) "
           "for i = 0, tonumber(ARGV[1]) do redis.call('RENAME', 'key:' .. i, 'key:' .. i .. ':x') end",
           2, "q4", "q4:new", RENAME_HINTS + 10)
    renamed.append("q4:new")
    # SESSION holds with long leases, renamed, then the connection closes
    sock, f = _session_conn(server)
    for i in range(3):
        assert _raw(sock, f, "LOCK.ACQUIRE", "s%d" % i, "o", 600000, "SESSION").startswith(b"*")
    r.execute_command("RENAME", "s0", "s0:new")
    t = r.pipeline(transaction=True)
    t.execute_command("RENAME", "s1", "s1:new")
    t.execute_command("RENAME", "s2", "s2:new")
    t.execute()
    wait_until(lambda: _settled(r), "the renamed locks are placed")
    assert _f(r, "lease_renames_followed") - followed == 8
    f.close()
    sock.close()  # (the makefile's reference closed first: now the fd goes)
    wait_until(lambda: all(r.execute_command("LOCK.INSPECT", "s%d:new" % i)[3] == [] for i in range(3)),
               "the session holds end with their connection")
    wait_until(lambda: _f(r, "leases_expired_while_held") >= before + 5, "the renamed leases end")
    assert all(r.execute_command("LOCK.INSPECT", k)[3] == [] for k in renamed)
    assert _f(r, "lease_keys_scanned") == 0


def test_a_transaction_queueing_more_renames_than_hints_falls_back_to_one_scan(server):
    """A MULTI that queues more than RENAME_HINTS renames of held locks: the
    newest RENAME_HINTS are placed at once, the older ones by one scan shared
    by all of them when their leases end, on time."""
    r = server.client()
    r.flushall()
    with _Following(r):
        _more_renames_than_hints(r)


def _more_renames_than_hints(r):
    r.execute_command("DEBUG", "POPULATE", 1000)
    n = RENAME_HINTS + 50
    before = _f(r, "leases_expired_while_held")
    followed = _f(r, "lease_renames_followed")
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("LOCK.ACQUIRE", "b%d" % i, "o", 500)
    assert all(x[0] == 1 for x in p.execute())
    scanned = _f(r, "lease_keys_scanned")
    t = r.pipeline(transaction=True)
    for i in range(n):
        t.execute_command("RENAME", "b%d" % i, "b%d:new" % i)
    t.execute()
    wait_until(lambda: _f(r, "lease_renames_followed") - followed == RENAME_HINTS, "the newest renames followed")
    wait_until(lambda: _f(r, "leases_expired_while_held") >= before + n, "every renamed lease ends")
    assert all(r.execute_command("LOCK.INSPECT", "b%d:new" % i)[3] == [] for i in range(n))
    # one scan (the keyspace at most once, not once per lock)
    assert 0 < _f(r, "lease_keys_scanned") - scanned <= 1000 + n + 64


def test_with_the_config_off_a_renamed_lock_nobody_opened_is_found_by_one_scan(server):
    """lock-follow-renames off (the default: no command filter): a renamed lock
    whose lease must be written before anything opened it by its new name is
    found by one scan for every such lock at once, and ends on time; one
    opened by its new name first is placed without a scan."""
    r = server.client()
    r.flushall()
    assert r.config_get(FOLLOW) == {FOLLOW: "no"}
    r.execute_command("DEBUG", "POPULATE", 1000)
    before = _f(r, "leases_expired_while_held")
    followed = _f(r, "lease_renames_followed")
    assert r.execute_command("LOCK.ACQUIRE", "opened", "o", 300)[0] == 1
    r.execute_command("RENAME", "opened", "opened:new")
    assert [h[0] for h in r.execute_command("LOCK.INSPECT", "opened:new")[3]] == [b"o"]
    wait_until(lambda: _settled(r), "the opened lock is placed")
    scanned = _f(r, "lease_keys_scanned")
    for i in range(20):
        assert r.execute_command("LOCK.ACQUIRE", "q%d" % i, "o", 300)[0] == 1
        r.execute_command("RENAME", "q%d" % i, "q%d:new" % i)
    assert _f(r, "lease_keys_scanned") == scanned
    wait_until(lambda: _f(r, "leases_expired_while_held") >= before + 21, "the renamed leases end")
    assert all(r.execute_command("LOCK.INSPECT", "q%d:new" % i)[3] == [] for i in range(20))
    # one scan (at most the keyspace once, not once per lock), no rename followed
    assert 0 < _f(r, "lease_keys_scanned") - scanned <= 1021 + 64
    assert _f(r, "lease_renames_followed") == followed


def _exec_usec(r):
    return float(r.info("commandstats").get("cmdstat_exec", {"usec": 0})["usec"])


def _rename_then_delete(r, n, tag, lease):
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("LOCK.ACQUIRE", "%s:%d" % (tag, i), "o", lease)
    p.execute()
    if lease < 1000:  # unheld locks: every lease has ended and been handled
        wait_until(lambda: _f(r, "lease_timers") == 0, "the short leases end")
    before = _exec_usec(r)
    t = r.pipeline(transaction=True)
    for i in range(n):
        t.execute_command("RENAME", "%s:%d" % (tag, i), "%s:%d:r" % (tag, i))
    for i in range(n):
        t.execute_command("DEL", "%s:%d:r" % (tag, i))
    t.execute()
    return _exec_usec(r) - before


def test_renaming_then_deleting_many_held_locks_is_linear(server):
    """16,000 held locks renamed then deleted in one transaction cost the
    order of unheld ones (commandstats' EXEC time, the server's own account;
    before the fix: ~36 times, growing with the square of the count)."""
    r = server.client()
    r.flushall()
    unheld = _rename_then_delete(r, 16000, "u", 1)
    held = _rename_then_delete(r, 16000, "h", 600000)
    assert held < unheld * 6, (unheld, held)
    wait_until(lambda: _settled(r), "nothing left to place")
    assert _f(r, "lease_timers") == 0

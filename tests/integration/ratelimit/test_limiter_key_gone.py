# SPDX-License-Identifier: BSD-3-Clause
"""Limiter keys that leave or change under their waiters (#28 items 3 and 4).

- Deleting, unlinking, flushing, renaming away or overwriting a GCRA or window
  key that has clients waiting on it (RL.GCRA / RL.WINDOW ... WAIT) serves them
  at once, as DEL of a held lock does: the head waiter is re-evaluated on what
  is at the key now (nothing: it is admitted; a string: WRONGTYPE), long before
  the old state would have let it in. (mutant 30 drops the unlink hook's wake-up)
- MCAPTCHA_CACHE.COUNT on a key made by RL.WINDOW keeps the window's limit, and
  what it replicates leaves the replica's value identical to the primary's
  (DEBUG DIGEST-VALUE, PEXPIRETIME). (mutant 31 replicates the counter's own
  limit instead)"""

import threading

import pytest

from mcap import digest_value
from servers import wait_replicas_synced, wait_until

LONG = 600000  # the limiter refills in 10 minutes: only the key going can serve the waiter


def _blocked(r):
    return int(r.info("clients")["blocked_clients"])


@pytest.mark.parametrize("kind", ["RL.GCRA", "RL.WINDOW"])
@pytest.mark.parametrize("how", ["DEL", "UNLINK", "FLUSHALL", "RENAME", "SET", "RESTORE"])
def test_key_gone_serves_its_waiters(server, kind, how):
    r = server.client()
    assert r.execute_command(kind, "lk", 1, LONG)[0] == 1
    assert r.execute_command(kind, "lk", 1, LONG)[0] == 0
    out = {}

    def waiter():
        c = server.client()
        try:
            out["reply"] = c.execute_command(kind, "lk", 1, LONG, "WAIT", 30000)
        except Exception as e:  # noqa: BLE001 -- the reply under test may be an error
            out["reply"] = e

    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: _blocked(r) == 1, "the waiter is queued")
    if how == "SET":
        r.set("lk", "x")
    elif how == "RESTORE":
        # replaced by a value of the same type whose unit comes back within a second or so
        # (the waiter is re-evaluated on it, not left to the old state's 10 minutes)
        at = int(r.time()[0]) * 1000 - LONG + 500
        r.execute_command(kind, "other", 1, LONG, "AT", at)
        r.execute_command("RESTORE", "lk", 0, r.dump("other"), "REPLACE")
    elif how == "RENAME":
        r.execute_command("RENAME", "lk", "lk2")
    else:
        r.execute_command(how, *(["lk"] if how in ("DEL", "UNLINK") else []))
    t.join(20)  # well before the waiter's WAIT (30 s) and the limiter's refill (600 s)
    assert not t.is_alive(), "the waiter was not served after %s" % how
    if how == "SET":
        assert "WRONGTYPE" in str(out["reply"]), out
    else:
        assert out["reply"][0] == 1, out
        assert r.exists("lk") == 1
    assert _blocked(r) == 0


def test_count_on_a_window_key_replicates_the_same_value(replica_pair):
    primary, replica = replica_pair
    p, rep = primary.client(), replica.client()
    assert p.execute_command("RL.WINDOW", "w", 7, 60000)[0] == 1
    assert p.execute_command("RL.WINDOW", "w2", 7, 60000, "COST", 3)[0] == 1
    for _ in range(3):
        p.execute_command("MCAPTCHA_CACHE.COUNT", "w", 60)
    p.execute_command("MCAPTCHA_CACHE.COUNT", "w2", 60)
    p.execute_command("MCAPTCHA_CACHE.COUNT", "fresh", 60)
    # the window's limit is kept: 7 - 4 hits
    assert p.execute_command("RL.WINDOW_PEEK", "w", 7, 60000, "COST", 0)[1] == 3
    wait_replicas_synced(primary, [replica])
    for k in ("w", "w2", "fresh"):
        assert digest_value(rep, k) == digest_value(p, k), k
        assert rep.pexpiretime(k) == p.pexpiretime(k), k
    # and a later RL.WINDOW on the replica's copy answers as on the primary's
    assert rep.execute_command("RL.WINDOW_PEEK", "w", 7, 60000, "COST", 0)[1] == 3

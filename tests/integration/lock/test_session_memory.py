# SPDX-License-Identifier: BSD-3-Clause
"""SESSION bookkeeping follows the live grants: a grant whose lease ends
without a release (or whose key is deleted) does not leave its entry behind
for the life of the connection (about 100 bytes each before the fix)."""

import time

N = 3000


def _used(r):
    r.execute_command("MEMORY", "PURGE")
    return int(r.info("memory")["used_memory"])


def _churn(r, prefix, session):
    extra = ["SESSION"] if session else []
    for i in range(N):
        rep = r.execute_command("LOCK.ACQUIRE", "%s:%d" % (prefix, i), "owner", 1, *extra)
        assert rep[0] == 1
    # every lease has ended (1 ms) or ends now; the keys go
    keys = ["%s:%d" % (prefix, i) for i in range(N)]
    for i in range(0, N, 500):
        r.delete(*keys[i:i + 500])


def test_session_entries_do_not_accumulate(server):
    r = server.client()
    _churn(r, "warm", True)          # allocator and dict warm-up
    base = _used(r)
    _churn(r, "plain", False)
    plain = _used(r)
    _churn(r, "sess", True)
    sess = _used(r)
    # Without the fix the SESSION run keeps ~100 B per grant: ~300 KB here.
    assert sess - plain < N * 20, (base, plain, sess)
    # the connection still works with SESSION and releases on disconnect
    assert r.execute_command("LOCK.ACQUIRE", "held", "me", 60000, "SESSION")[0] == 1
    r.connection_pool.disconnect()
    r2 = server.client()
    deadline = time.time() + 10
    while r2.execute_command("LOCK.INSPECT", "held")[3] and time.time() < deadline:
        time.sleep(0.005)  # waiting for a state: the release timer runs
    assert r2.execute_command("LOCK.INSPECT", "held")[3] == []

# SPDX-License-Identifier: BSD-3-Clause
"""Wait queues are per key *and* database: the same key name in two databases has
two queues. A waiter on `k` in db 0 neither blocks a grant of `k` in db 1 nor is
served by a release there; each queue is served by its own key's release, in its
own database, with that database's value. Queues (and every per-key table) are
found by "<db>:<key>" ids, so db 1's key "0k" and db 10's key "k" must not meet
either.
SPDX-License-Identifier: BSD-3-Clause"""

import threading

import pytest

from servers import wait_until


def _waiters(c, key):
    v = c.execute_command("LOCK.INSPECT", key)
    return 0 if v is None else v[2]


def _wait_acquire(server, db, key, owner, out):
    c = server.client(db=db, socket_timeout=30)
    out.append(c.execute_command("LOCK.ACQUIRE", key, owner, 60000, "WAIT", 20000))


@pytest.mark.parametrize("db0,k0,db1,k1", [(0, "k", 1, "k"), (1, "0k", 10, "k")])
def test_same_key_name_in_two_databases_has_two_queues(server, db0, k0, db1, k1):
    c0, c1 = server.client(db=db0), server.client(db=db1)
    assert c0.execute_command("LOCK.ACQUIRE", k0, "a0", 60000)[0] == 1
    assert c1.execute_command("LOCK.ACQUIRE", k1, "a1", 60000)[0] == 1
    got0, got1 = [], []
    t0 = threading.Thread(target=_wait_acquire, args=(server, db0, k0, "w0", got0))
    t0.start()
    wait_until(lambda: _waiters(c0, k0) == 1, "w0 queued in db %d" % db0)
    assert _waiters(c1, k1) == 0, "the other db's key has no waiter"
    # the other db: a release there serves nobody from db0, and a newcomer is granted at once
    assert c1.execute_command("LOCK.RELEASE", k1, "a1") == 0
    assert c1.execute_command("LOCK.ACQUIRE", k1, "b1", 60000)[0] == 1
    assert t0.is_alive() and _waiters(c0, k0) == 1
    t1 = threading.Thread(target=_wait_acquire, args=(server, db1, k1, "w1", got1))
    t1.start()
    wait_until(lambda: _waiters(c1, k1) == 1, "w1 queued in db %d" % db1)
    # db0's release serves db0's waiter only
    assert c0.execute_command("LOCK.RELEASE", k0, "a0") == 0
    t0.join(20)
    assert got0 and got0[0][0] == 1
    assert [h[0] for h in c0.execute_command("LOCK.INSPECT", k0)[3]] == [b"w0"]
    assert t1.is_alive() and _waiters(c1, k1) == 1
    assert c1.execute_command("LOCK.RELEASE", k1, "b1") == 0
    t1.join(20)
    assert got1 and got1[0][0] == 1
    assert [h[0] for h in c1.execute_command("LOCK.INSPECT", k1)[3]] == [b"w1"]

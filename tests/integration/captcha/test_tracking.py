# SPDX-License-Identifier: BSD-3-Clause
"""CLIENT TRACKING and WATCH see captcha writes.

The captcha commands declare the captcha *name* as their key, but store the
state under derived keys (mcap:captcha::{name}, mcap:CHALLENGE:{name}:c). A
client that read `MCAPTCHA_CACHE.GET name` with tracking on must be told when a
write changes that captcha -- on the primary and, through the internal
commands that replicate the writes, on a replica; a WATCH on the name must
abort a transaction after such a write."""

import json

import pytest
import redis

from mcap import (ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, DELETE_CAPTCHA, DELETE_CHALLENGE, GET,
                  GET_CHALLENGE, RENAME_CAPTCHA)
from servers import RawConnection, wait_replicas_synced

CONFIG = json.dumps({"levels": [{"visitor_threshold": 10, "difficulty_factor": 5}], "duration": 30})
CHALLENGE = json.dumps({"difficulty": 5, "duration": 30, "challenge": "c1"})


def _invalidated(conn):
    """The next push on a RESP3 tracking connection, which must be an invalidation."""
    push = conn.read_reply()
    assert push.startswith(b">2\r\n") and b"invalidate" in push, push
    return push


def _tracking_resp3(server):
    conn = RawConnection(server.host, server.port)
    assert conn.command("HELLO", "3").startswith(b"%")
    assert conn.command("CLIENT", "TRACKING", "ON") == b"+OK\r\n"
    return conn


WRITES = {
    "add_visitor": lambda r: r.execute_command(ADD_VISITOR, "site"),
    "delete_captcha": lambda r: r.execute_command(DELETE_CAPTCHA, "site"),
    "rename_from": lambda r: r.execute_command(RENAME_CAPTCHA, "site", "site2"),
    "add_challenge": lambda r: r.execute_command(ADD_CHALLENGE, "site", CHALLENGE),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_resp3_tracking_hears_each_write(server, write):
    r = server.client()
    assert r.execute_command(ADD_CAPTCHA, "site", CONFIG) == b"OK"
    with _tracking_resp3(server) as conn:
        assert conn.command(GET, "site") == b":0\r\n"
        WRITES[write](r)
        assert b"site" in _invalidated(conn)


def test_challenge_take_is_heard(server):
    r = server.client()
    for take in (GET_CHALLENGE, DELETE_CHALLENGE):
        assert r.execute_command(ADD_CHALLENGE, "site", CHALLENGE) == b"OK"
        with _tracking_resp3(server) as conn:
            assert conn.command(GET, "site").startswith(b"-")  # no captcha: an error, still tracked
            r.execute_command(take, "site", "c1")
            assert b"site" in _invalidated(conn)


def test_rename_tells_the_new_name_too(server):
    r = server.client()
    assert r.execute_command(ADD_CAPTCHA, "old", CONFIG) == b"OK"
    with _tracking_resp3(server) as conn:
        conn.command("MCAPTCHA_CACHE.CAPTCHA_EXISTS", "new")
        r.execute_command(RENAME_CAPTCHA, "old", "new")
        assert b"new" in _invalidated(conn)


def test_redirect_tracking_resp2(server):
    r = server.client()
    assert r.execute_command(ADD_CAPTCHA, "site", CONFIG) == b"OK"
    with RawConnection(server.host, server.port) as sink:
        sink_id = int(sink.command("CLIENT", "ID")[1:-2])
        sink.command("SUBSCRIBE", "__redis__:invalidate")
        reader = server.client()
        reader.execute_command("CLIENT", "TRACKING", "ON", "REDIRECT", sink_id)
        assert reader.execute_command(GET, "site") == 0
        r.execute_command(ADD_VISITOR, "site")
        msg = sink.read_reply()
        assert b"__redis__:invalidate" in msg and b"site" in msg, msg
        reader.connection_pool.disconnect()


def test_replica_tracking_hears_replicated_visits(replica_pair):
    primary, replica = replica_pair
    p = primary.client()
    assert p.execute_command(ADD_CAPTCHA, "site", CONFIG) == b"OK"
    wait_replicas_synced(primary, [replica])
    with _tracking_resp3(replica) as conn:
        assert conn.command(GET, "site") == b":0\r\n"
        p.execute_command(ADD_VISITOR, "site")
        assert b"site" in _invalidated(conn)


def test_watch_on_the_name_aborts_after_a_visit(server):
    r = server.client()
    assert r.execute_command(ADD_CAPTCHA, "site", CONFIG) == b"OK"
    with r.pipeline(transaction=True) as pipe:
        pipe.watch("site")
        server.client().execute_command(ADD_VISITOR, "site")
        pipe.multi()
        pipe.execute_command(GET, "site")
        with pytest.raises(redis.WatchError):
            pipe.execute()

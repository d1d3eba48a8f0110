# SPDX-License-Identifier: BSD-3-Clause
"""Difficulty rule, the mCaptcha flow, decay timing, VISIT_AT, concurrency, WRONGTYPE."""

import threading
import time

import pytest
import redis

from mcap import (PTTL_SLACK_MS, ADD_CAPTCHA, ADD_CHALLENGE, ADD_VISITOR, CAPTCHA_EXISTS,
                  CAPTCHA_SET, CHALLENGE_NOT_FOUND, CHALLENGE_SET, DELETE_CAPTCHA,
                  DELETE_CHALLENGE, GET, GET_CHALLENGE, RENAME_CAPTCHA, VISIT_AT, all_keys, cfg,
                  chal, challenge_reply, chkey, ckey, error_of, now_ms, sleep_until,
                  visitor_reply)


# ------------------------------------------------------------- difficulty
def test_difficulty_two_levels_600_visitors(r):
    r.execute_command(ADD_CAPTCHA, "site", cfg([(50, 50), (500, 500)], duration=300))
    p = r.pipeline(transaction=False)
    for _ in range(600):
        p.execute_command(ADD_VISITOR, "site")
    out = p.execute()
    for i, reply in enumerate(out):
        count = i + 1
        want = visitor_reply(300, 50 if count <= 500 else 500)
        assert reply == want, "visit #%d: %r, expected %r" % (count, reply, want)
    assert r.execute_command(GET, "site") == 600


def test_difficulty_single_level(r):
    r.execute_command(ADD_CAPTCHA, "one", cfg([(10, 7)], duration=60))
    p = r.pipeline(transaction=False)
    for _ in range(20):
        p.execute_command(ADD_VISITOR, "one")
    assert p.execute() == [visitor_reply(60, 7)] * 20


def test_difficulty_threshold_zero(r):
    # threshold 0 is below every count >= 1, so level (0, 5) applies from the first visit
    r.execute_command(ADD_CAPTCHA, "z", cfg([(0, 5), (3, 9)], duration=60))
    out = [r.execute_command(ADD_VISITOR, "z") for _ in range(5)]
    assert out == [visitor_reply(60, 5)] * 3 + [visitor_reply(60, 9)] * 2


def test_mcaptcha_flow_three_levels(r):
    """README-like flow: register, visitors push the difficulty past each
    threshold, a challenge is stored and redeemed once, the count decays to 0,
    the captcha is deleted."""
    levels = [(10, 100), (20, 200), (30, 300)]
    assert r.execute_command(ADD_CAPTCHA, "flow", cfg(levels, duration=1)) == b"OK"
    assert r.execute_command(CAPTCHA_EXISTS, "flow") == 0
    p = r.pipeline(transaction=False)
    for _ in range(40):
        p.execute_command(ADD_VISITOR, "flow")
    out = p.execute()
    t_last = time.time()  # every visit was made before this
    for i, reply in enumerate(out):
        c = i + 1
        want = 100 if c <= 20 else 200 if c <= 30 else 300
        assert reply == visitor_reply(1, want), "visit #%d: %r" % (c, reply)
    assert r.execute_command(GET, "flow") == 40
    # the server hands out a proof-of-work challenge at the current difficulty
    assert r.execute_command(ADD_CHALLENGE, "flow", chal(300, 30, "pow-1")) == b"OK"
    assert r.execute_command(GET_CHALLENGE, "flow", "pow-1") == challenge_reply(300, 30)
    assert error_of(r, GET_CHALLENGE, "flow", "pow-1") == CHALLENGE_NOT_FOUND
    # decay: every visit leaves 1 s (+ a 3 ms slot) after it came
    sleep_until(t_last + 1.3)
    assert r.execute_command(GET, "flow") == 0
    assert r.execute_command(CAPTCHA_EXISTS, "flow") == 0, "the captcha itself must stay"
    assert r.execute_command(ADD_VISITOR, "flow") == visitor_reply(1, 100)
    assert r.execute_command(GET, "flow") == 1
    assert r.execute_command(DELETE_CAPTCHA, "flow") == b"OK"
    assert r.execute_command(CAPTCHA_EXISTS, "flow") == 1
    assert r.dbsize() == 0


def test_difficulty_goes_back_down_after_decay(r):
    r.execute_command(ADD_CAPTCHA, "d", cfg([(2, 1), (4, 2)], duration=1))
    out = [r.execute_command(ADD_VISITOR, "d") for _ in range(6)]
    t_last = time.time()
    assert out[-1] == visitor_reply(1, 2)
    sleep_until(t_last + 1.3)
    assert r.execute_command(ADD_VISITOR, "d") == visitor_reply(1, 1)


# ------------------------------------------------------------- decay timing
# The server and the tests read the same clock. "Still counts" checks are only
# conclusive when the reply came back before the visit could have left, so a
# scenario that was too slow to tell (a loaded machine) is run again.
def timing_attempts(scenario, attempts=3):
    for i in range(attempts):
        if scenario(i):
            return
    pytest.fail("the machine was too slow to check the timing in %d attempts" % attempts)


def test_visit_counts_for_duration_then_leaves(r):
    def scenario(i):
        name = "s%d" % i
        r.execute_command(ADD_CAPTCHA, name, cfg([(5, 5)], duration=1))
        t0 = time.time()  # the visit is made after this
        assert r.execute_command(ADD_VISITOR, name) == visitor_reply(1, 5)
        t1 = time.time()  # ... and before this
        sleep_until(t0 + 0.8)
        count = r.execute_command(GET, name)
        if time.time() >= t0 + 0.99:
            return False
        assert count == 1, "a visit must still count 0.8 s later"
        sleep_until(t1 + 1.3)
        assert r.execute_command(GET, name) == 0, \
            "a visit must be gone 1.3 s later (1 s duration + 1/256 s)"
        return True

    timing_attempts(scenario)


def test_each_visit_leaves_on_its_own_schedule(r):
    def scenario(i):
        name = "s%d" % i
        r.execute_command(ADD_CAPTCHA, name, cfg([(5, 5)], duration=1))
        r.execute_command(ADD_VISITOR, name)
        r.execute_command(ADD_VISITOR, name)
        t_first = time.time()
        sleep_until(t_first + 0.5)
        t1 = time.time()
        r.execute_command(ADD_VISITOR, name)
        t2 = time.time()
        count3 = r.execute_command(GET, name)
        sleep_until(t_first + 1.2)  # the first two are gone, the third one stays
        count1 = r.execute_command(GET, name)
        if time.time() >= t1 + 0.99:
            return False
        assert count3 == 3
        assert count1 == 1
        sleep_until(t2 + 1.3)
        assert r.execute_command(GET, name) == 0
        return True

    timing_attempts(scenario)


def test_get_does_not_extend_or_reset(r):
    def scenario(i):
        name = "s%d" % i
        r.execute_command(ADD_CAPTCHA, name, cfg([(5, 5)], duration=1))
        t0 = time.time()
        r.execute_command(ADD_VISITOR, name)
        t1 = time.time()
        counts = []
        while time.time() < t0 + 0.85:
            counts.append(r.execute_command(GET, name))
            time.sleep(0.05)
        if time.time() >= t0 + 0.99:
            return False
        assert counts and all(c == 1 for c in counts), counts
        sleep_until(t1 + 1.3)
        assert r.execute_command(GET, name) == 0
        return True

    timing_attempts(scenario)


def test_visit_at_past_visits_leave_early(r):
    r.execute_command(ADD_CAPTCHA, "s", cfg([(5, 5)], duration=30))
    k = ckey("s")
    t0 = time.time()
    base = int(t0 * 1000) - 29500
    for i in range(5):
        assert r.execute_command(VISIT_AT, k, base) == i + 1
    for i in range(3):
        r.execute_command(ADD_VISITOR, "s")
    # The stamped visits leave at base + 30 s, plus at most one slot (30 s / 256
    # = 117 ms), i.e. about t0 + 0.5 s, while the 3 real ones count for 30 s.
    # Each GET is checked against the time the server could have read, so the
    # test asserts the same on a slow machine: 8 only before they can have left,
    # 3 only once they may have, and 3 in the end.
    leave_lo, leave_hi = base + 30000, base + 30000 + 30000 // 256 + 1
    seen = []
    deadline = time.time() + 10
    while time.time() < deadline:
        a = now_ms() - 1
        count = r.execute_command(GET, "s")
        z = now_ms() + 1
        seen.append(count)
        assert count in (8, 3), (count, a - base, z - base)
        if count == 8:
            assert a <= leave_hi, "the stamped visits still count %d ms after they left" % (
                a - leave_hi)
        else:
            assert z >= leave_lo, "the stamped visits left %d ms early" % (leave_lo - z)
            break
        time.sleep(0.01)
    assert seen[-1] == 3, seen
    assert r.execute_command(GET, "s") == 3


def test_visit_at_already_expired_does_not_count(r):
    r.execute_command(ADD_CAPTCHA, "s", cfg([(5, 5)], duration=30))
    k = ckey("s")
    # stamped 31 s ago: past its 30 s duration already (the reply is the count
    # "as if the clock read at_ms", so it is not checked here)
    r.execute_command(VISIT_AT, k, now_ms() - 31000)
    assert r.execute_command(GET, "s") == 0
    r.execute_command(ADD_VISITOR, "s")
    assert r.execute_command(GET, "s") == 1


def test_visit_at_reply_is_count(r):
    r.execute_command(ADD_CAPTCHA, "s", cfg([(5, 5)], duration=30))
    k = ckey("s")
    now = now_ms()
    assert r.execute_command(VISIT_AT, k, now) == 1
    assert r.execute_command(VISIT_AT, k, now + 1) == 2
    assert r.execute_command(ADD_VISITOR, "s") == visitor_reply(30, 5)
    assert r.execute_command(GET, "s") == 3


def test_visit_at_missing_captcha_is_error(r):
    with pytest.raises(redis.ResponseError):
        r.execute_command(VISIT_AT, ckey("ghost"), now_ms())
    assert r.dbsize() == 0


def test_captcha_set_replaces_state(r):
    """CAPTCHA_SET round trip: the state it sets is what the commands then see."""
    k = ckey("s")
    now = now_ms()
    w = 30000 // 256  # slot width for a 30 s duration
    slot_now = now // w
    assert r.execute_command(CAPTCHA_SET, k, 30, 2, 5, 10, 8, 20, now, 2,
                             slot_now - 10, 4, slot_now, 3) == b"OK"
    assert r.type(k) == b"mcaptmcap"
    assert r.execute_command(GET, "s") == 7
    # 8th visit: threshold 5 < 8, threshold 8 is not -> 10; 9th -> 20
    assert r.execute_command(ADD_VISITOR, "s") == visitor_reply(30, 10)
    assert r.execute_command(ADD_VISITOR, "s") == visitor_reply(30, 20)
    # replaces an existing captcha entirely
    assert r.execute_command(CAPTCHA_SET, k, 60, 1, 1, 3, now, 0) == b"OK"
    assert r.execute_command(GET, "s") == 0
    assert r.execute_command(ADD_VISITOR, "s") == visitor_reply(60, 3)


def test_captcha_set_slots_in_the_past_decay(r):
    k = ckey("s")
    now = now_ms()
    w = 1000 // 256  # 3 ms slots for a 1 s duration
    t0 = time.time()
    old_slot = (now - 800) // w
    assert r.execute_command(CAPTCHA_SET, k, 1, 1, 5, 5, now, 2, old_slot, 2, now // w, 1) == b"OK"
    assert r.execute_command(GET, "s") == 3
    sleep_until(t0 + 0.5)  # the 800 ms old ones leave at ~ +0.2 s
    assert r.execute_command(GET, "s") == 1
    sleep_until(t0 + 1.3)
    assert r.execute_command(GET, "s") == 0


def test_challenge_set(r):
    k = chkey("s", "c")
    assert r.execute_command(CHALLENGE_SET, k, 42, 30) == b"OK"
    assert r.type(k) == b"mcaptchal"
    assert r.execute_command(GET_CHALLENGE, "s", "c") == challenge_reply(42, 30)
    pxat = now_ms() + 20000
    assert r.execute_command(CHALLENGE_SET, k, 43, 30, "PXAT", pxat) == b"OK"
    assert r.execute_command("PEXPIRETIME", k) == pxat
    assert r.execute_command(GET_CHALLENGE, "s", "c") == challenge_reply(43, 30)


def test_add_challenge_sets_absolute_expiry(r):
    before = now_ms()
    r.execute_command(ADD_CHALLENGE, "s", chal(5, 10, "c"))
    after = now_ms()
    at = r.execute_command("PEXPIRETIME", chkey("s", "c"))
    assert before + 10000 <= at <= after + 10000


# ------------------------------------------------------------- concurrency
def test_concurrent_add_visitor_no_lost_increments(server, r):
    r.execute_command(ADD_CAPTCHA, "hot", cfg([(50, 50), (500, 500)], duration=600))
    errors = []
    replies = []
    lock = threading.Lock()

    def worker():
        c = server.client()
        mine = []
        try:
            for _ in range(500):
                mine.append(c.execute_command(ADD_VISITOR, "hot"))
        except Exception as e:  # pragma: no cover
            errors.append(e)
        with lock:
            replies.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert r.execute_command(GET, "hot") == 4000
    # exactly 500 replies said 50 (counts 1..500), the rest 500
    assert replies.count(visitor_reply(600, 50)) == 500
    assert replies.count(visitor_reply(600, 500)) == 3500


# ------------------------------------------------------------- WRONGTYPE
def _assert_wrongtype(r, args):
    msg = error_of(r, *args)
    assert msg.startswith("WRONGTYPE"), "%r: %r" % (args, msg)


def test_wrongtype_at_captcha_key(r):
    k = ckey("x")
    r.set(k, "plain")
    r.rpush(ckey("lst"), "a", "b")
    r.execute_command(ADD_CAPTCHA, "good", cfg([(5, 5)], duration=30))
    good_dump = r.dump(ckey("good"))
    for args in [(ADD_CAPTCHA, "x", cfg([(5, 5)])),
                 (ADD_VISITOR, "x"),
                 (GET, "x"),
                 (CAPTCHA_EXISTS, "x"),
                 (DELETE_CAPTCHA, "x"),
                 (RENAME_CAPTCHA, "x", "y"),
                 (VISIT_AT, k, now_ms()),
                 (ADD_VISITOR, "lst"),
                 (GET, "lst"),
                 (CAPTCHA_EXISTS, "lst"),
                 (DELETE_CAPTCHA, "lst"),
                 (ADD_CAPTCHA, "lst", cfg([(5, 5)]))]:
        _assert_wrongtype(r, args)
        assert r.get(k) == b"plain"
        assert r.lrange(ckey("lst"), 0, -1) == [b"a", b"b"]
    assert r.exists(ckey("y")) == 0
    # rename onto a plain key: an error either way, nothing moves
    with pytest.raises(redis.ResponseError):
        r.execute_command(RENAME_CAPTCHA, "good", "x")
    assert r.get(k) == b"plain"
    assert r.dump(ckey("good")) == good_dump
    assert sorted(all_keys(r)) == sorted([k, ckey("lst"), ckey("good")])


def test_wrongtype_at_challenge_key(r):
    k = chkey("s", "c")
    r.set(k, "plain")
    for args in [(ADD_CHALLENGE, "s", chal(5, 30, "c")),
                 (GET_CHALLENGE, "s", "c"),
                 (DELETE_CHALLENGE, "s", "c")]:
        _assert_wrongtype(r, args)
        assert r.get(k) == b"plain"
        assert r.ttl(k) == -1
    assert r.dbsize() == 1


def test_module_keys_survive_plain_commands(r):
    """Core commands on module keys behave (no crash): TYPE, EXISTS, TTL,
    OBJECT, MEMORY USAGE, EXPIRE + PERSIST, RENAME, DEL."""
    r.execute_command(ADD_CAPTCHA, "s", cfg([(5, 5)], duration=30))
    r.execute_command(ADD_VISITOR, "s")
    r.execute_command(ADD_CHALLENGE, "s", chal(5, 30, "c"))
    k, ck = ckey("s"), chkey("s", "c")
    assert r.type(k) == b"mcaptmcap" and r.type(ck) == b"mcaptchal"
    assert r.exists(k) == 1 and r.exists(ck) == 1 and r.exists(k, ck, k) == 3
    # a captcha has no TTL; a challenge expires with its duration
    assert r.ttl(k) == -1 and r.pttl(k) == -1
    assert 0 < r.ttl(ck) <= 30 and 0 < r.pttl(ck) <= 30000 + PTTL_SLACK_MS
    assert r.memory_usage(k) > 0
    assert r.memory_usage(ck) > 0
    assert r.object("encoding", k) is not None
    assert r.execute_command(GET, "s") == 1
    # EXPIRE + PERSIST: the TTL is set and removed, the value untouched
    d = r.execute_command("DEBUG", "DIGEST-VALUE", k)
    assert r.expire(k, 100) is True
    assert 0 < r.ttl(k) <= 100
    assert r.persist(k) is True
    assert r.ttl(k) == -1
    assert r.expire(ck, 1000) is True and 30 < r.ttl(ck) <= 1000
    assert r.persist(ck) is True and r.ttl(ck) == -1
    assert r.execute_command("DEBUG", "DIGEST-VALUE", k) == d
    assert r.execute_command(GET, "s") == 1
    assert r.execute_command(GET_CHALLENGE, "s", "c") == challenge_reply(5, 30)
    r.execute_command(ADD_CHALLENGE, "s", chal(5, 30, "c"))
    with pytest.raises(redis.ResponseError):
        r.get(k)  # WRONGTYPE for string commands
    assert r.rename(k, ckey("t"))
    assert r.execute_command(GET, "t") == 1
    assert r.delete(ckey("t"), ck) == 2
    assert r.dbsize() == 0

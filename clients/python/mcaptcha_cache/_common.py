# SPDX-License-Identifier: BSD-3-Clause
"""What the sync and asyncio classes share: reply types, reply parsing, argument checks and
the WAIT budget (no I/O here)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Tuple, Union

# Largest WAIT the module accepts (ms): "ERR WAIT must be an integer from 0 to 1099511627776".
MAX_WAIT_MS = 1099511627776
# One round of an unbounded wait (wait_ms=None) when the client has no socket timeout.
UNBOUNDED_ROUND_MS = 3600 * 1000


@dataclass(frozen=True)
class Decision:
    """A rate limiter's answer, the module's ``[allowed, remaining, retry_after_ms,
    reset_after_ms]`` reply.

    - ``allowed``: whether the request was taken (``bool(decision)`` is the same).
    - ``remaining``: units still available right after this request.
    - ``retry_after_ms``: milliseconds until the same request could fit; ``-1`` when allowed,
      and when it can never fit (cost above the capacity).
    - ``reset_after_ms``: milliseconds until the limiter is full again (its key expires then).
    """

    allowed: bool
    remaining: int
    retry_after_ms: int
    reset_after_ms: int

    def __bool__(self) -> bool:
        return self.allowed

    @classmethod
    def from_reply(cls, reply: Any) -> "Decision":
        a, rem, retry, reset = (int(x) for x in reply[:4])
        return cls(bool(a), rem, retry, reset)


@dataclass(frozen=True)
class Holder:
    """One holder in ``LOCK.INSPECT``: ``owner`` (str), ``lease_ms`` left (ms), fencing
    ``token`` of its grant, ``count`` of (reentrant) acquisitions. ``count`` 0 is a
    lock-delay (``lock_delay``): that owner's hold ended without a release and its
    permit stays taken for ``lease_ms`` more, held by nobody."""

    owner: str
    lease_ms: int
    token: int
    count: int

    @property
    def lock_delay(self) -> bool:
        """True for a lock-delay entry (count 0): nobody holds it."""
        return self.count == 0


@dataclass(frozen=True)
class LockInfo:
    """``LOCK.INSPECT``: ``permits`` (1 for a mutex), ``last_token`` (the last fencing token
    granted), ``waiters`` (clients blocked in WAIT), ``holders`` (list of :class:`Holder`),
    ``adjustment`` (a semaphore pool's, :meth:`Semaphore.add_permits`) and ``size`` (the
    pool's size: permits + adjustment, clamped to 0..1024; None from a server without it)."""

    permits: int
    last_token: int
    waiters: int
    holders: List[Holder]
    adjustment: int = 0
    size: Optional[int] = None

    @classmethod
    def from_reply(cls, reply: Any) -> Optional["LockInfo"]:
        if reply is None:
            return None
        permits, last, waiters, holders = reply[0], reply[1], reply[2], reply[3]
        adjustment, size = (int(reply[4]), int(reply[5])) if len(reply) >= 6 else (0, None)
        return cls(int(permits), int(last), int(waiters),
                   [Holder(to_str(h[0]), int(h[1]), int(h[2]), int(h[3])) for h in holders], adjustment, size)


@dataclass(frozen=True)
class Challenge:
    """A challenge taken with ``get_challenge``: ``difficulty`` and ``duration_s`` (seconds)."""

    difficulty: int
    duration_s: int


def to_str(x: Any) -> str:
    if isinstance(x, bytes):
        return x.decode("utf-8", "surrogateescape")
    return str(x)


def check_ms(name: str, value: Any, minimum: int = 1, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s must be an int (milliseconds), not %r" % (name, value))
    if value < minimum:
        raise ValueError("%s must be at least %d ms, got %d" % (name, minimum, value))
    return value


def check_wait_ms(wait_ms: Any) -> Optional[int]:
    if wait_ms is None:
        return None
    if isinstance(wait_ms, bool) or not isinstance(wait_ms, int):
        raise TypeError("wait_ms must be an int (milliseconds) or None, not %r" % (wait_ms,))
    if wait_ms < 0:
        raise ValueError("wait_ms must be >= 0 (or None to wait indefinitely), got %d" % wait_ms)
    return wait_ms


def round_cap_ms(client: Any) -> Optional[int]:
    """Longest WAIT one round may ask for without the client's socket timeout firing first
    (the reply to a WAIT comes at its end). None when the client has no socket timeout."""
    try:
        kw = client.get_connection_kwargs()
    except AttributeError:
        pool = getattr(client, "connection_pool", None)
        kw = getattr(pool, "connection_kwargs", {}) if pool is not None else {}
    t = kw.get("socket_timeout") if kw else None
    if not t:
        return None
    ms = float(t) * 1000.0
    margin = max(100.0, ms * 0.2)
    return max(1, int(ms - margin))


class WaitBudget:
    """Splits a wait of ``wait_ms`` (None: no end) into server-side WAIT rounds, each short
    enough to be answered before the socket timeout. A round is one blocked command: the
    server queues it and answers when it is served or when the round ends; nothing polls."""

    def __init__(self, wait_ms: Optional[int], cap_ms: Optional[int]) -> None:
        self.wait_ms = wait_ms
        self.cap = cap_ms
        self.deadline: Optional[float] = None if wait_ms is None else time.monotonic() + wait_ms / 1000.0

    def next_round_ms(self) -> int:
        """The WAIT of the next round (0: answer at once)."""
        if self.deadline is None:
            left = UNBOUNDED_ROUND_MS
        else:
            left = int((self.deadline - time.monotonic()) * 1000.0)
            if left <= 0:
                return 0
        if self.cap is not None:
            left = min(left, self.cap)
        return max(0, min(left, MAX_WAIT_MS))

    def expired(self) -> bool:
        if self.wait_ms == 0:
            return True
        return self.deadline is not None and time.monotonic() >= self.deadline


def wait_args(ms: int) -> Tuple[Any, ...]:
    return ("WAIT", ms) if ms > 0 else ()


def parse_grant(reply: Any) -> Tuple[bool, int, int]:
    """LOCK.ACQUIRE reply -> (granted, token, ms)."""
    return bool(int(reply[0])), int(reply[1]), int(reply[2])


def captcha_config_json(levels: Iterable[Any], duration_s: int) -> str:
    """The ADD_CAPTCHA JSON from [(visitor_threshold, difficulty_factor), ...] (or dicts with
    those keys) and a duration in seconds."""
    if isinstance(duration_s, bool) or not isinstance(duration_s, int):
        raise TypeError("duration_s must be an int (seconds), not %r" % (duration_s,))
    out = []
    for lv in levels:
        if isinstance(lv, dict):
            t, d = lv["visitor_threshold"], lv["difficulty_factor"]
        else:
            t, d = lv
        out.append({"visitor_threshold": int(t), "difficulty_factor": int(d)})
    return json.dumps({"levels": out, "duration": duration_s}, separators=(",", ":"))


def challenge_json(challenge: Union[str, bytes], difficulty: int, duration_s: int) -> str:
    return json.dumps({"difficulty": int(difficulty), "duration": int(duration_s),
                       "challenge": to_str(challenge)}, separators=(",", ":"))


def parse_visit(reply: Any) -> Tuple[int, int]:
    """ADD_VISITOR reply -> (difficulty_factor, duration_s)."""
    d = json.loads(to_str(reply))
    return int(d["difficulty_factor"]), int(d["duration"])


def parse_challenge(reply: Any) -> Challenge:
    d = json.loads(to_str(reply))
    return Challenge(int(d["difficulty_factor"]), int(d["duration"]))


def default_renew_ms(lease_ms: int, renew_every_ms: Optional[int]) -> int:
    if renew_every_ms is None:
        return max(1, lease_ms // 3)
    check_ms("renew_every_ms", renew_every_ms)
    if renew_every_ms >= lease_ms:
        raise ValueError("renew_every_ms (%d) must be below lease_ms (%d)"
                         % (renew_every_ms, lease_ms))
    return renew_every_ms


def is_cluster(client: Any) -> bool:
    return hasattr(client, "nodes_manager")

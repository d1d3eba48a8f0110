# SPDX-License-Identifier: BSD-3-Clause
"""Typed exceptions, mapped from the module's error replies.

Every exception of this package derives from :class:`McaptchaCacheError`, itself a
``redis.exceptions.RedisError``, so ``except redis.RedisError`` still catches everything.
Exceptions made from a server error reply also derive from ``redis.exceptions.ResponseError``
and keep the server's message in ``.reply``.

Hierarchy::

    McaptchaCacheError (redis.RedisError)
    ├── ServerError (+ redis.ResponseError)     an error reply not mapped to anything narrower
    │   ├── InvalidArgument (+ ValueError)      range errors, unknown options, bad owner, cost too large
    │   ├── WrongType                           WRONGTYPE: the key holds another type
    │   └── CrossSlot                           CROSSSLOT: keys of one command in different slots
    ├── LockError (+ redis.exceptions.LockError)
    │   ├── LockNotOwned (+ redis.exceptions.LockNotOwnedError)  this owner does not hold the lock
    │   │   └── LockLost                        it did, and lost it (lease ended, key deleted, ...)
    │   ├── LockNotAcquired (+ TimeoutError)    ``with lock:`` could not get it within wait_ms
    │   └── PermitsMismatch (+ ServerError)     PERMITS differs from the held semaphore's size
    ├── RateLimitError
    │   ├── RateLimited                         refused by a limiter (``.decision``)
    │   └── ClusterPolicyError                  a policy helper failed on some primaries of a Cluster
    └── CaptchaError
        ├── CaptchaNotFound, CaptchaExists      (+ ServerError)
        ├── ChallengeNotFound, ChallengeExists  (+ ServerError)
        └── InvalidCaptchaConfig                (+ InvalidArgument) invalid JSON, config or challenge
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Type

import redis.exceptions

if TYPE_CHECKING:
    from ._common import Decision

__all__ = [
    "McaptchaCacheError", "ServerError", "InvalidArgument", "WrongType", "CrossSlot",
    "LockError", "LockNotOwned", "LockLost", "LockNotAcquired", "PermitsMismatch",
    "RateLimitError", "RateLimited", "ClusterPolicyError",
    "CaptchaError", "CaptchaNotFound", "CaptchaExists", "ChallengeNotFound", "ChallengeExists",
    "InvalidCaptchaConfig", "map_error",
]


class McaptchaCacheError(redis.exceptions.RedisError):
    """Base class of every exception raised by this package."""


class ServerError(McaptchaCacheError, redis.exceptions.ResponseError):
    """An error reply of the server. ``reply`` is its message (without redis-py's stripped
    ``ERR `` code)."""

    def __init__(self, message: str = "", reply: Optional[str] = None) -> None:
        super().__init__(message)
        self.reply = message if reply is None else reply


class InvalidArgument(ServerError, ValueError):
    """An argument the module refused: out of range, unknown option, option without its value,
    owner too long, cost that can never fit the rate."""


class WrongType(ServerError):
    """``WRONGTYPE``: the key holds a value of another type (e.g. a lock key used as a
    rate limit, or an ``RL.CONCURRENCY`` key used as a lock)."""


class CrossSlot(ServerError):
    """``CROSSSLOT``: keys of one command hash to different slots."""


# ------------------------------------------------------------------------ locks
class LockError(McaptchaCacheError, redis.exceptions.LockError):
    """Base class of the lock and semaphore errors; also a ``redis.exceptions.LockError``, so
    ``except redis.exceptions.LockError`` clauses written for redis-py's locks catch it."""


class LockNotOwned(LockError, redis.exceptions.LockNotOwnedError):
    """The lock (or permit) is not held by this owner: ``release()``/``extend()`` of a lock this
    instance never acquired, already released, or that the server says it does not hold."""

    def __init__(self, message: str = "", reply: Optional[str] = None) -> None:
        super().__init__(message)
        self.reply = reply


class LockLost(LockNotOwned):
    """A lock this instance held is no longer held: its lease ended, the key was deleted or
    overwritten, its session connection closed, or renewals failed until the lease ran out.
    Raised by ``release()`` and ``extend()`` (and so by leaving a ``with`` block whose body did
    not raise) once the loss is known; ``lock.lost`` is then True."""


class LockNotAcquired(LockError, TimeoutError):
    """``with lock:`` could not acquire within ``wait_ms``."""


class PermitsMismatch(LockError, ServerError):
    """``ERR PERMITS differs from the semaphore's size (n) while it is held``: a semaphore
    was acquired with another number of permits than the one its holders use."""


# -------------------------------------------------------------------- rate limits
class RateLimitError(McaptchaCacheError):
    """Base class of the rate-limit errors."""


class RateLimited(RateLimitError):
    """A limiter refused the call (raised by :func:`mcaptcha_cache.rate_limited`).

    ``decision`` is the refused :class:`~mcaptcha_cache.Decision`; ``retry_after_ms`` its
    retry hint (milliseconds; -1 when the cost can never fit); ``key`` the limiter's key."""

    def __init__(self, decision: "Decision", key: Any = None) -> None:
        self.decision = decision
        self.key = key
        self.retry_after_ms = decision.retry_after_ms
        if decision.retry_after_ms < 0:
            msg = "rate limited (%s): the cost can never fit" % (key,)
        else:
            msg = "rate limited (%s): retry after %d ms" % (key, decision.retry_after_ms)
        super().__init__(msg)


class ClusterPolicyError(RateLimitError):
    """A stored-policy helper (``set_gcra_policy``, ``get_policy``, ...) on a Redis Cluster,
    which applies it to every primary, did not get the same answer from all of them.

    ``failures``: ``{"host:port": exception}`` of the primaries where the command failed;
    ``results``: ``{"host:port": reply}`` of those where it succeeded (for ``get_policy``,
    primaries that disagree are all listed here and ``failures`` is empty)."""

    def __init__(self, message: str, failures: "Dict[str, BaseException]",
                 results: "Dict[str, Any]") -> None:
        super().__init__(message)
        self.failures = failures
        self.results = results


# ----------------------------------------------------------------------- captchas
class CaptchaError(McaptchaCacheError):
    """Base class of the captcha errors."""


class CaptchaNotFound(CaptchaError, ServerError):
    """``Captcha not found``: no captcha of that name."""


class CaptchaExists(CaptchaError, ServerError):
    """``ERR captcha already exists`` (ADD_CAPTCHA) or ``ERR target captcha already exists``
    (RENAME_CAPTCHA)."""


class ChallengeNotFound(CaptchaError, ServerError):
    """``Challenge not found``: no such challenge (never added, expired, or already taken)."""


class ChallengeExists(CaptchaError, ServerError):
    """``Challenge already exists``."""


class InvalidCaptchaConfig(CaptchaError, InvalidArgument):
    """``ERR invalid JSON: …``, ``ERR invalid config: …`` or ``ERR invalid challenge: …``:
    the message names the rule broken."""


# ------------------------------------------------------------------------ mapping
# (substring or prefix of the reply, class), first match wins. redis-py strips a leading
# "ERR " from the message; the bare mCaptcha errors have none.
_EXACT = {
    "Captcha not found": CaptchaNotFound,
    "Challenge not found": ChallengeNotFound,
    "Challenge already exists": ChallengeExists,
}
_PREFIXES = (
    ("WRONGTYPE", WrongType),
    ("CROSSSLOT", CrossSlot),
    ("the lock is not held by this owner", LockNotOwned),
    ("the locks are not all held by this owner", LockNotOwned),
    ("PERMITS differs", PermitsMismatch),
    ("captcha already exists", CaptchaExists),
    ("target captcha already exists", CaptchaExists),
    ("invalid JSON", InvalidCaptchaConfig),
    ("invalid config", InvalidCaptchaConfig),
    ("invalid challenge", InvalidCaptchaConfig),
    ("unknown option", InvalidArgument),
    ("owner must be", InvalidArgument),
    ("cost too large", InvalidArgument),
    ("no such policy", InvalidArgument),
    ("policy ", InvalidArgument),
)
_CONTAINS = (
    (" must be ", InvalidArgument),
    (" needs a value", InvalidArgument),
)


def map_error(exc: BaseException) -> BaseException:
    """The typed exception for a ``redis.exceptions.ResponseError`` from the module (returns
    ``exc`` itself when it is already one of ours or is not a ResponseError)."""
    if isinstance(exc, McaptchaCacheError) or not isinstance(exc, redis.exceptions.ResponseError):
        return exc
    msg = str(exc)
    if msg.startswith("ERR "):
        msg = msg[4:]
    cls: Optional[Type[Any]] = _EXACT.get(msg)
    if cls is None:
        for prefix, c in _PREFIXES:
            if msg.startswith(prefix):
                cls = c
                break
    if cls is None:
        for part, c in _CONTAINS:
            if part in msg:
                cls = c
                break
    if cls is None:
        cls = ServerError
    if cls is LockNotOwned:
        return LockNotOwned(msg, reply=msg)
    return cls(msg, reply=msg)

"""A drop-in for redis-py's ``redis.lock.Lock`` on the module's leased locks (sync).

SPDX-License-Identifier: BSD-3-Clause

Code written for redis-py's lock keeps its calls and its ``except`` clauses::

    from mcaptcha_cache.compat.redis_py import Lock
    with r.lock("orders:42", timeout=10, blocking_timeout=5, lock_class=Lock) as lock:
        write(order, fencing_token=lock.fencing_token)

but the wait happens on the server (``LOCK.ACQUIRE … WAIT``, first come first served; no
sleep-and-retry loop), and each grant carries a fencing token. The asyncio twin is
:mod:`mcaptcha_cache.compat.redis_py_asyncio`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from types import TracebackType
from typing import Any, Optional, Type, Union

import redis.exceptions

from ..errors import LockError, LockNotAcquired, LockNotOwned, WrongType, map_error
from ..lock import Lock as _ModuleLock

__all__ = ["Lock", "LockError", "LockNotOwnedError", "DEFAULT_LEASE_MS"]

Number = Union[int, float]
# The exceptions redis-py's code catches: ours subclass redis.exceptions.LockError and
# redis.exceptions.LockNotOwnedError.
LockNotOwnedError = LockNotOwned

# The lease of a lock taken without ``timeout`` (redis-py: held until release()): the watchdog
# renews it every third of it while the process lives, so a crashed holder frees it within it.
DEFAULT_LEASE_MS = 30_000

log = logging.getLogger("mcaptcha_cache")


class _Local(threading.local):
    """Per-thread token (redis-py's ``lock.local``); every thread starts with none."""

    token: Optional[bytes] = None
    held: Any = None


class _Shared:
    """``thread_local=False``: one token for every thread."""

    token: Optional[bytes] = None
    held: Any = None


def seconds_to_ms(name: str, value: Number, minimum: int = 0) -> int:
    """Seconds (int or float) to whole milliseconds, at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number of seconds, not %r" % (name, value))
    if value < 0:
        raise ValueError("%s must be >= 0 seconds, got %r" % (name, value))
    return max(minimum, int(round(value * 1000)))


def encode_token(token: Union[str, bytes, None]) -> bytes:
    """The owner token as bytes (redis-py keeps it encoded); a new UUID when None."""
    if token is None:
        return uuid.uuid4().hex.encode()
    if isinstance(token, bytes):
        return token
    if isinstance(token, str):
        return token.encode()
    raise TypeError("token must be str or bytes, not %r" % (token,))


class LockArgs:
    """The constructor, attributes and argument rules shared by the sync and asyncio drop-ins."""

    def __init__(self, redis: Any, name: Union[str, bytes], timeout: Optional[Number] = None,
                 sleep: Number = 0.1, blocking: bool = True,
                 blocking_timeout: Optional[Number] = None, thread_local: bool = True,
                 raise_on_release_error: bool = True) -> None:
        self.redis = redis
        self.name = name
        if timeout is not None:
            seconds_to_ms("timeout", timeout)
        self.timeout = timeout
        self.sleep = sleep
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.thread_local = bool(thread_local)
        self.raise_on_release_error = raise_on_release_error
        self.local: Union[_Local, _Shared] = _Local() if self.thread_local else _Shared()

    @property
    def lease_ms(self) -> int:
        """The lease each grant gets: ``timeout`` in ms, or :data:`DEFAULT_LEASE_MS` renewed."""
        return DEFAULT_LEASE_MS if self.timeout is None else seconds_to_ms("timeout", self.timeout, 1)

    @property
    def fencing_token(self) -> Optional[int]:
        """The fencing token of this thread's grant (a number that grows with every grant of
        the key: pass it to the storage you protect), or None when not held."""
        held = self.local.held
        return None if held is None else int(held.token)

    def _wait_ms(self, blocking: Optional[bool], blocking_timeout: Optional[Number]) -> Optional[int]:
        """How long an acquire waits: 0 (try once), N ms, or None (until granted)."""
        if blocking is None:
            blocking = self.blocking
        if blocking_timeout is None:
            blocking_timeout = self.blocking_timeout
        if not blocking:
            return 0
        return None if blocking_timeout is None else seconds_to_ms("blocking_timeout", blocking_timeout)

    def _module_lock_kw(self, token: bytes, wait_ms: Optional[int]) -> dict[str, Any]:
        return {"wait_ms": wait_ms, "auto_renew": self.timeout is None,
                "owner": token.decode("utf-8", "surrogateescape")}

    def _holder_lease_ms(self, reply: Any, token: bytes) -> Optional[int]:
        """From LOCK.INSPECT: the lease left of ``token``'s hold, or None when it holds none."""
        if reply is None:
            return None
        for h in reply[3]:
            owner = h[0] if isinstance(h[0], bytes) else str(h[0]).encode("utf-8", "surrogateescape")
            if owner == token and int(h[3]) > 0:
                return int(h[1])
        return None

    def _check_extend(self, verb: str) -> bytes:
        token = self.local.token
        if token is None:
            raise LockError("Cannot %s an unlocked lock" % verb)
        if self.timeout is None:
            raise LockError("Cannot %s a lock with no timeout" % verb)
        return token

    def __repr__(self) -> str:
        return "<%s %r timeout=%r token=%r>" % (type(self).__name__, self.name, self.timeout,
                                                 self.local.token)


class Lock(LockArgs):
    """A drop-in for ``redis.lock.Lock`` (redis-py's current documented API) held by the
    module's ``LOCK.*`` commands.

    ``Lock(redis, name, timeout=None, sleep=0.1, blocking=True, blocking_timeout=None,
    thread_local=True, raise_on_release_error=True)``; also ``r.lock(name, …, lock_class=Lock)``
    on a ``redis.Redis`` or ``redis.cluster.RedisCluster``. Seconds as ints or floats.

    As redis-py documents it:

    - ``acquire(sleep=None, blocking=None, blocking_timeout=None, token=None) -> bool``:
      blocking (default) waits up to ``blocking_timeout`` seconds (None: until granted);
      ``blocking=False`` answers at once; ``token`` is the owner value (str or bytes; default a
      new UUID), kept in ``lock.local.token`` (per thread unless ``thread_local=False``).
    - ``release()``: ``LockError`` ("Cannot release an unlocked lock") without a token,
      ``LockNotOwnedError`` when the server no longer has it for this token (the timeout ran
      out, or another client overwrote the key with another type).
    - ``extend(additional_time, replace_ttl=False)``: adds ``additional_time`` seconds to the
      time left (or sets it, ``replace_ttl=True``); ``reacquire()``: resets it to ``timeout``.
      Both raise ``LockError`` for a lock without timeout or not held, ``LockNotOwnedError``
      when it is no longer owned; both return True.
    - ``locked()``: whether anyone holds the key (a key of another type counts: it exists);
      ``owned()``: whether this token holds it.
    - ``with lock:`` acquires (``LockError`` "Unable to acquire lock within the time specified"
      when it cannot) and releases; with ``raise_on_release_error=False`` a failed release at
      the end of the block is logged (logger ``mcaptcha_cache``) instead of raised.

    Where it differs from redis-py's implementation (redis-py's documentation is followed):

    - Waiting is done by the server (``LOCK.ACQUIRE … WAIT``, first come first served): ``sleep``
      is accepted and used only while the key is held by something that is not a lock (another
      client wrote a string there), which redis-py would poll for.
    - ``timeout=None`` ("remains locked until release()"): the lock gets a lease of
      :data:`DEFAULT_LEASE_MS` that a background thread renews while the process lives, so a
      crashed holder frees it after at most that long instead of never.
    - ``TTL``/``PTTL`` of the key do not show the lease (it lives inside the value; the server
      may show -1): read ``LOCK.INSPECT``. ``extend()`` adds to the lease left that
      ``LOCK.INSPECT`` reports.
    - ``fencing_token``: the grant's fencing token (redis-py has none).
    - The exceptions are this package's ``LockError``/``LockNotOwned`` (``LockNotOwnedError``
      here), subclasses of ``redis.exceptions.LockError``/``LockNotOwnedError``.
    """

    # -------------------------------------------------------------- acquire
    def acquire(self, sleep: Optional[Number] = None, blocking: Optional[bool] = None,
                blocking_timeout: Optional[Number] = None,
                token: Union[str, bytes, None] = None) -> bool:
        """Acquire the lock; True once granted, False when ``blocking=False`` or
        ``blocking_timeout`` ran out (see the class docstring)."""
        pause = float(self.sleep if sleep is None else sleep)
        wait_ms = self._wait_ms(blocking, blocking_timeout)
        tok = encode_token(token)
        deadline = None if wait_ms is None else time.monotonic() + wait_ms / 1000.0
        while True:
            left = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            held = _ModuleLock(self.redis, self.name, self.lease_ms, **self._module_lock_kw(tok, left))
            try:
                ok = held.acquire()
            except WrongType:
                # another client wrote a non-lock value here: not acquired (redis-py polls)
                if wait_ms == 0 or (deadline is not None and time.monotonic() >= deadline):
                    return False
                time.sleep(pause)
                continue
            if ok:
                self.local.token, self.local.held = tok, held
            return ok

    def __enter__(self) -> "Lock":
        if self.acquire():
            return self
        raise LockNotAcquired("Unable to acquire lock within the time specified")

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        try:
            self.release()
        except LockError:
            if self.raise_on_release_error:
                raise
            log.warning("Lock was unlocked or no longer owned when exiting context manager.")

    # -------------------------------------------------------------- release
    def release(self) -> None:
        """Release the lock (``LOCK.RELEASE``): the longest waiter gets it at once."""
        token, held = self.local.token, self.local.held
        if token is None:
            raise LockError("Cannot release an unlocked lock")
        self.local.token = self.local.held = None
        try:
            held.release()
        except LockNotOwned as e:
            raise LockNotOwned("Cannot release a lock that's no longer owned") from e

    # --------------------------------------------------------------- extend
    def extend(self, additional_time: Number, replace_ttl: bool = False) -> bool:
        """Add ``additional_time`` seconds to the lease left (or make it the lease left, with
        ``replace_ttl=True``)."""
        token = self._check_extend("extend")
        ms = seconds_to_ms("additional_time", additional_time)
        if not replace_ttl:
            left = self._holder_lease_ms(self._inspect(), token)
            if left is None:
                raise LockNotOwned("Cannot extend a lock that's no longer owned")
            ms += left
        return self._extend_to(max(1, ms), "extend")

    def reacquire(self) -> bool:
        """Reset the lease left to ``timeout``."""
        self._check_extend("reacquire")
        return self._extend_to(self.lease_ms, "reacquire")

    def _extend_to(self, ms: int, verb: str) -> bool:
        try:
            self.local.held.extend(ms)
        except LockNotOwned as e:
            raise LockNotOwned("Cannot %s a lock that's no longer owned" % verb) from e
        return True

    # -------------------------------------------------------------- queries
    def _inspect(self) -> Any:
        """LOCK.INSPECT's reply; a key of another type answers ``"wrongtype"``."""
        try:
            return self.redis.execute_command("LOCK.INSPECT", self.name)
        except redis.exceptions.ResponseError as e:
            err = map_error(e)
            if isinstance(err, WrongType):
                return "wrongtype"
            raise err from e

    def locked(self) -> bool:
        """Whether the lock is held by anyone (a key of another type counts as locked)."""
        reply = self._inspect()
        if reply == "wrongtype":
            return True
        return reply is not None and any(int(h[3]) > 0 for h in reply[3])

    def owned(self) -> bool:
        """Whether this thread's token (``lock.local.token``) holds the lock on the server."""
        token = self.local.token
        if token is None:
            return False
        reply = self._inspect()
        return reply != "wrongtype" and self._holder_lease_ms(reply, token) is not None

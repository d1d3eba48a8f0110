# SPDX-License-Identifier: BSD-3-Clause
"""Leased locks and semaphores on ``LOCK.ACQUIRE`` / ``LOCK.RELEASE`` / ``LOCK.EXTEND`` /
``LOCK.INSPECT`` (sync; the asyncio classes are in :mod:`mcaptcha_cache.asyncio`).

All times are **milliseconds**.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from types import TracebackType
from typing import Any, Callable, Iterable, List, Optional, Type, Union, cast

import redis.exceptions
from redis.crc import key_slot

from ._common import (LockInfo, WaitBudget, check_ms, check_wait_ms, default_renew_ms, is_cluster,
                      parse_grant, round_cap_ms, to_str, wait_args)
from .errors import CrossSlot, LockError, LockLost, LockNotAcquired, LockNotOwned, WrongType, map_error

__all__ = ["Lock", "MultiLock", "ReadWriteLock", "Semaphore"]

log = logging.getLogger("mcaptcha_cache")

class _Unset:
    """The default of ``acquire(wait_ms=...)``: the instance's ``wait_ms``."""

    def __repr__(self) -> str:
        return "<the lock's wait_ms>"


_UNSET: Any = _Unset()

KeyT = Union[str, bytes]
# on_lost(lock): called once when a held lock is found lost (a coroutine function for asyncio)
OnLost = Callable[[Any], Any]


class _LockBase:
    """State, arguments and queries shared by the sync and asyncio locks."""

    def __init__(self, client: Any, name: KeyT, lease_ms: int, wait_ms: Optional[int] = None, session: bool = False, *,
                 auto_renew: bool = True, renew_every_ms: Optional[int] = None,
                 on_lost: Optional[OnLost] = None, owner: Optional[KeyT] = None,
                 lock_delay_ms: Optional[int] = None, _permits: Optional[int] = None,
                 _mode: Optional[str] = None, _take: int = 1) -> None:
        self.client = client
        self.name = name
        self.lease_ms = check_ms("lease_ms", lease_ms)
        self.lock_delay_ms = check_ms("lock_delay_ms", lock_delay_ms, minimum=0, allow_none=True)
        self.wait_ms = check_wait_ms(wait_ms)
        self.session = bool(session)
        self.auto_renew = bool(auto_renew)
        self.renew_every_ms: Optional[int] = (default_renew_ms(self.lease_ms, renew_every_ms) if auto_renew
                               else None)
        self.on_lost = on_lost
        self.owner = to_str(owner) if owner is not None else uuid.uuid4().hex
        self.token: Optional[int] = None
        self._permits = _permits  # None: a mutex (no PERMITS argument)
        self._mode = _mode        # None, "READ" or "WRITE" (a ReadWriteLock's holds)
        self._take = _take        # permits one acquisition takes (a Semaphore's take)
        self._held = False
        self._lost = False
        self._lost_reason: Optional[str] = None
        self._state = threading.Lock()
        self._stop: Any = None
        self._session_client: Any = None
        self._lease_deadline = 0.0

    # ------------------------------------------------------------------ state
    @property
    def held(self) -> bool:
        """True from a grant until ``release()``, or until the lock is found lost."""
        return self._held

    @property
    def lost(self) -> bool:
        """True once a lock this instance held was found lost (until the next acquire)."""
        return self._lost

    @property
    def lost_reason(self) -> Optional[str]:
        """Why the lock was found lost (str), or None."""
        return self._lost_reason

    def __repr__(self) -> str:
        return "<%s %r owner=%s held=%s lost=%s token=%s>" % (
            type(self).__name__, self.name, self.owner, self._held, self._lost, self.token)

    @property
    def permits(self) -> int:
        """The semaphore's size (1 for a lock)."""
        return 1 if self._permits is None else self._permits

    # --------------------------------------------------------------- acquire
    def _acquire_args(self, wait: int) -> List[Any]:
        args: List[Any] = ["LOCK.ACQUIRE", self.name, self.owner, self.lease_ms]
        if self._permits is not None:
            args += ["PERMITS", self._permits]
            if self._take > 1:
                args += ["TAKE", self._take]
        if self.session:
            args.append("SESSION")
        if self.lock_delay_ms:
            args += ["LOCKDELAY", self.lock_delay_ms]
        if self._mode:
            args.append(self._mode)
        args += wait_args(wait)
        return args

    # The release and renewal commands (MultiLock's are the LOCK.*_ALL ones).
    def _release_args(self) -> List[Any]:
        return ["LOCK.RELEASE", self.name, self.owner]

    def _extend_args(self, ms: int) -> List[Any]:
        return ["LOCK.EXTEND", self.name, self.owner, ms]

    def _release_missed(self, reply: Any) -> Optional[str]:
        """Why a release's reply shows part of the hold was gone already (None: it was not)."""
        return None


class Lock(_LockBase):
    """A leased mutex held on the server, with fencing tokens and a renewing watchdog.

    ``Lock(client, name, lease_ms, wait_ms=None, session=False)``

    - ``client``: a ``redis.Redis`` or ``redis.cluster.RedisCluster`` (replies as bytes or str).
    - ``name``: the lock's key (in Redis Cluster the lock lives in that key's slot).
    - ``lease_ms``: the lease, in milliseconds. While the lock is held a watchdog thread renews
      it (``LOCK.EXTEND name owner lease_ms``) every ``renew_every_ms`` (default ``lease_ms // 3``),
      so a live holder keeps it however long its work takes, and a crashed one loses it at most
      ``lease_ms`` after its last renewal.
    - ``wait_ms``: how long ``acquire()`` (and ``with``) waits for a lock someone else holds:
      ``None`` (default) waits indefinitely, ``0`` tries once, ``N`` waits up to N ms. The wait
      happens **on the server** (``LOCK.ACQUIRE … WAIT``): the client blocks, queued first come
      first served, and is answered as soon as the lock is its; nothing polls. A wait longer
      than the client's ``socket_timeout`` is split into rounds that each end before it
      (``socket_timeout`` minus 20%, at least 100 ms); between two rounds the waiter re-queues
      at the tail. Give the client ``socket_timeout=None`` (redis-py's default) to wait in one
      round.
    - ``session``: ``LOCK.ACQUIRE … SESSION``: the server also releases the lock when the
      connection that acquired it closes (process exit, network loss). With ``redis.Redis`` the
      lock acquires and releases on a connection of its own (``client.client()``) for as long
      as it holds the lock; with ``RedisCluster`` it uses a pooled connection.

    Keyword-only: ``auto_renew=True`` (False: no watchdog, the lease just runs out),
    ``renew_every_ms=None``, ``on_lost=None`` (called with the lock, from the watchdog thread,
    when a renewal finds the lock lost), ``owner=None`` (default: a random ``uuid4().hex`` per
    instance; every acquisition of this instance uses it), ``lock_delay_ms=None``
    (``LOCK.ACQUIRE … LOCKDELAY``: if this holder's lease runs out or its session closes
    without a release, nobody gets the lock for that many ms more, so a holder that stalled
    past its lease can notice before the next one acts; a ``release()`` frees it at once).

    After a grant: ``token`` is the fencing token (int; larger than any the lock granted
    before, also across restarts); pass it to the resource you protect. ``held`` is True.

    Losing the lease is never silent: when a renewal is refused because this owner no longer
    holds it (lease ended, key deleted or overwritten, session closed), or renewals fail
    (connection errors, OOM, READONLY, ...) until the lease has run out, the watchdog stops,
    ``lost`` becomes True, ``on_lost(lock)`` is called, and the next ``release()`` or
    ``extend()`` (and so the end of a ``with`` block) raises :class:`LockLost`. When the
    block itself raised, its own exception propagates instead; the loss is then reported by
    the logger (``mcaptcha_cache``, a warning), ``on_lost`` and ``lost``/``lost_reason``.

    One instance is one holder: it is not reentrant (``acquire()`` while holding raises
    :class:`LockError`), and it is not meant to be shared between threads.
    """

    _thread: Optional[threading.Thread] = None

    def __init__(self, client: Any, name: KeyT, lease_ms: int, wait_ms: Optional[int] = None, session: bool = False, *,
                 auto_renew: bool = True, renew_every_ms: Optional[int] = None,
                 on_lost: Optional[OnLost] = None, owner: Optional[KeyT] = None,
                 lock_delay_ms: Optional[int] = None, _mode: Optional[str] = None) -> None:
        _LockBase.__init__(self, client, name, lease_ms, wait_ms, session, auto_renew=auto_renew,
                           renew_every_ms=renew_every_ms, on_lost=on_lost, owner=owner,
                           lock_delay_ms=lock_delay_ms, _mode=_mode)

    def _acquire_client(self) -> Any:
        if self.session and not is_cluster(self.client) and hasattr(self.client, "client"):
            self._session_client = self.client.client()
            return self._session_client
        return self.client

    def _drop_session_client(self) -> None:
        c, self._session_client = self._session_client, None
        if c is not None:
            try:
                c.close()
            except Exception:  # pragma: no cover
                pass

    def acquire(self, wait_ms: Optional[int] = _UNSET) -> bool:
        """Acquire the lock; True when granted, False when ``wait_ms`` ran out.

        ``wait_ms`` overrides the instance's (None: indefinitely; 0: try once). Raises
        :class:`LockError` if this instance already holds it, :class:`PermitsMismatch` for a
        semaphore held with another size, :class:`WrongType` when the key is not a lock."""
        if self._held:
            raise LockError("%r is already held by this instance; release it first" % (self.name,))
        wait = self.wait_ms if wait_ms is _UNSET else check_wait_ms(wait_ms)
        self._stop_watchdog()
        self._lost = False
        self._lost_reason = None
        conn = self._acquire_client()
        budget = WaitBudget(wait, round_cap_ms(conn))
        while True:
            rnd = budget.next_round_ms()
            started = time.monotonic()
            try:
                reply = conn.execute_command(*self._acquire_args(rnd))
            except redis.exceptions.ResponseError as e:
                self._drop_session_client()
                raise map_error(e) from e
            except Exception:
                # the reply is lost: a grant may have been made (best effort to undo it;
                # otherwise its lease ends by itself)
                self._best_effort_release(conn)
                self._drop_session_client()
                raise
            granted, token, ms = parse_grant(reply)
            if granted:
                self.token = token
                self._lease_deadline = started + ms / 1000.0
                with self._state:
                    self._held = True
                self._start_watchdog()
                return True
            if budget.expired():
                self._drop_session_client()
                return False
            if rnd > 0 and time.monotonic() - started < rnd / 2000.0:
                time.sleep(0.01)  # answered long before its WAIT ended: never spin

    def _best_effort_release(self, conn: Any) -> None:
        try:
            conn.execute_command(*self._release_args())
        except Exception:
            pass

    # --------------------------------------------------------------- release
    def release(self) -> None:
        """Release the lock (``LOCK.RELEASE``); the longest waiter gets it.

        The watchdog is stopped first (and joined: no renewal is sent after the release).
        Raises :class:`LockLost` if the lock was lost while held (found by the watchdog, or
        by the server's answer now), :class:`LockNotOwned` if this instance does not hold it.
        On a connection error the lock stays ``held`` (the lease ends by itself unless you
        retry ``release()``)."""
        self._stop_watchdog()
        with self._state:
            held, lost = self._held, self._lost
        if not held:
            self._drop_session_client()
            if lost:
                raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason))
            raise LockNotOwned("lock %r is not held by this instance" % (self.name,))
        conn = self._session_client or self.client
        try:
            missed = self._release_missed(conn.execute_command(*self._release_args()))
        except redis.exceptions.ResponseError as e:
            err = map_error(e)
            if isinstance(err, (LockNotOwned, WrongType)):
                self._mark_lost("the server answered the release: %s" % (err,))
                self._drop_session_client()
                raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason),
                               reply=err.reply) from e
            raise err from e
        if missed:
            self._mark_lost("the server answered the release: %s" % (missed,))
            self._drop_session_client()
            raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason))
        with self._state:
            self._held = False
        self._drop_session_client()

    # ---------------------------------------------------------------- extend
    def extend(self, ms: Optional[int] = None) -> int:
        """Renew the lease to end ``ms`` milliseconds from now (default ``lease_ms``); returns
        the new lease in ms. A one-off: the watchdog keeps renewing to ``lease_ms``.
        Raises :class:`LockLost` when the server no longer has it for this owner."""
        lease_to: int = self.lease_ms if ms is None else check_ms("ms", ms)
        if not self._held:
            if self._lost:
                raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason))
            raise LockNotOwned("lock %r is not held by this instance" % (self.name,))
        sent = time.monotonic()
        try:
            lease = int(self.client.execute_command(*self._extend_args(lease_to)))
        except redis.exceptions.ResponseError as e:
            err = map_error(e)
            if isinstance(err, (LockNotOwned, WrongType)):
                self._mark_lost("the server refused the extension: %s" % (err,))
                raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason),
                               reply=err.reply) from e
            raise err from e
        self._lease_deadline = sent + lease / 1000.0
        return lease

    # --------------------------------------------------------------- queries
    def inspect(self) -> Optional[LockInfo]:
        """``LOCK.INSPECT``: a :class:`LockInfo` (permits, last_token, waiters, holders), or
        None when the key does not exist."""
        try:
            return LockInfo.from_reply(self.client.execute_command("LOCK.INSPECT", self.name))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    def owned(self) -> bool:
        """Whether the server lists this instance's owner among the holders (a lock-delay
        entry of the owner does not count: it holds nothing). A held lock that the server
        no longer lists is marked lost."""
        info = self.inspect()
        mine = info is not None and any(h.owner == self.owner and not h.lock_delay for h in info.holders)
        if self._held and not mine:
            self._mark_lost("LOCK.INSPECT does not list this owner")
        return mine

    def locked(self) -> bool:
        """Whether any permit is taken (for a semaphore: any), by a holder or by a
        lock-delay (a hold that ended without a release, for its ``lock_delay_ms``)."""
        info = self.inspect()
        return info is not None and bool(info.holders)

    # --------------------------------------------------------- context manager
    def __enter__(self) -> "Lock":
        if not self.acquire():
            raise LockNotAcquired("could not acquire %r within %s ms" % (self.name, self.wait_ms))
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc is None:
            self.release()
            return None
        # the body raised: its exception goes first. A lost lease is still reported -- by
        # the logger (warning), on_lost and lock.lost / lock.lost_reason -- not raised over it.
        try:
            self.release()
        except Exception as e:
            if not isinstance(e, LockNotOwned):
                log.warning("lock %r: release after a failed block failed: %r", self.name, e)
        return None

    # --------------------------------------------------------------- watchdog
    def _mark_lost(self, reason: str) -> None:
        with self._state:
            if not self._held:
                return
            self._held = False
            self._lost = True
            self._lost_reason = reason
        stop = self._stop
        if stop is not None:
            stop.set()
        log.warning("lock %r (owner %s, token %s) lost: %s", self.name, self.owner, self.token,
                    reason)
        if self.on_lost is not None:
            try:
                self.on_lost(self)
            except Exception:
                log.exception("on_lost callback of lock %r failed", self.name)

    def _start_watchdog(self) -> None:
        if not self.auto_renew:
            return
        stop = threading.Event()
        t = threading.Thread(target=self._watchdog, args=(stop,), daemon=True,
                             name="mcaptcha-cache-watchdog %s" % (to_str(self.name),))
        self._stop, self._thread = stop, t
        t.start()

    def _stop_watchdog(self) -> None:
        stop, t = self._stop, self._thread
        if stop is not None:
            stop.set()
        if t is not None and t is not threading.current_thread():
            t.join()  # an EXTEND in flight finishes before anything else is sent
        self._stop = self._thread = None

    def _watchdog(self, stop: threading.Event) -> None:
        interval = (self.renew_every_ms or self.lease_ms // 3) / 1000.0
        while not stop.wait(interval):
            if not self._held:
                return
            sent = time.monotonic()
            try:
                lease = self.client.execute_command(*self._extend_args(self.lease_ms))
            except redis.exceptions.ResponseError as e:
                err = map_error(e)
                if isinstance(err, (LockNotOwned, WrongType)):
                    self._mark_lost("renewal refused: %s" % (err,))
                    return
                # OOM, READONLY, LOADING, TRYAGAIN...: retry until the lease ends
                if time.monotonic() >= self._lease_deadline:
                    self._mark_lost("renewals failed until the lease ended: %s" % (err,))
                    return
                continue
            except Exception as e:  # connection errors, timeouts: retry until the lease ends
                if time.monotonic() >= self._lease_deadline:
                    self._mark_lost("renewals failed until the lease ended: %r" % (e,))
                    return
                continue
            self._lease_deadline = sent + int(lease) / 1000.0


class Semaphore(Lock):
    """A counting semaphore: at most ``permits`` holders at once, each with its own lease,
    fencing token and release (``LOCK.ACQUIRE … PERMITS n``).

    ``Semaphore(client, name, permits, lease_ms, wait_ms=None, session=False, *, take=1, **kw)``:
    the same shape as :class:`Lock` (one instance is one holder; the watchdog renews it). It
    takes ``take`` permits at once (``LOCK.ACQUIRE … TAKE k``: all or none, first come first
    served, so a large request is not overtaken by smaller ones). Every holder must use the
    same ``permits`` while any holds it, or the acquire raises :class:`PermitsMismatch`.

    The pool (Redisson's ``addPermits``, ``drainPermits``, ``availablePermits``):
    :meth:`add_permits`, :meth:`drain_permits` and :meth:`available_permits` change or read the
    pool's size on the server, which is ``permits`` plus a persisted adjustment; every instance
    keeps passing the same ``permits``."""

    def __init__(self, client: Any, name: KeyT, permits: int, lease_ms: int,
                 wait_ms: Optional[int] = None, session: bool = False, *, take: int = 1,
                 **kw: Any) -> None:
        permits = check_permits(permits)
        take = check_permits(take)
        if take > permits:
            raise ValueError("take (%d) must not exceed permits (%d)" % (take, permits))
        _LockBase.__init__(self, client, name, lease_ms, wait_ms, session, _permits=permits, _take=take, **kw)

    def _pool(self, cmd: str, *args: Any) -> int:
        try:
            return int(self.client.execute_command(cmd, self.name, *args, "PERMITS", self._permits))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    def add_permits(self, delta: int) -> int:
        """``LOCK.ADD_PERMITS``: change the pool's size by ``delta`` (an int, -1024 to 1024;
        negative: smaller, even below the permits taken -- the holders keep theirs and no
        permit is granted until fewer are taken than the size). Returns the size after; a
        size outside 0..1024 raises :class:`ServerError` and changes nothing. Permits added
        serve the waiters first."""
        return self._pool("LOCK.ADD_PERMITS", check_delta(delta))

    def drain_permits(self) -> int:
        """``LOCK.DRAIN_PERMITS``: take every permit free now out of the pool (held by nobody)
        until :meth:`add_permits` gives them back. Returns how many."""
        return self._pool("LOCK.DRAIN_PERMITS")

    def available_permits(self) -> int:
        """``LOCK.AVAILABLE_PERMITS``: the permits free now (the pool's size minus those taken by
        holders and lock-delays; queued requests are not subtracted)."""
        return self._pool("LOCK.AVAILABLE_PERMITS")


def check_delta(delta: Any) -> int:
    if isinstance(delta, bool) or not isinstance(delta, int) or not -1024 <= delta <= 1024:
        raise ValueError("delta must be an int from -1024 to 1024, got %r" % (delta,))
    return delta


def check_permits(permits: Any) -> int:
    if isinstance(permits, bool) or not isinstance(permits, int) or permits < 1:
        raise ValueError("permits must be an int >= 1, got %r" % (permits,))
    return permits


class ReadWriteLock:
    """A read-write lock held on the server (``LOCK.ACQUIRE … READ`` / ``WRITE``): many readers
    at once, or one writer.

    ``ReadWriteLock(client, name, lease_ms, wait_ms=None, session=False, **kw)`` (the arguments
    of :class:`Lock`). ``read_lock()`` and ``write_lock()`` each return a new :class:`Lock` --
    one holder, with its own owner, watchdog and fencing token -- that takes the shared or the
    exclusive hold of the same key. Waiters are served first come first served on the server,
    so readers that come after a waiting writer wait behind it. A ``read_lock()`` and a
    ``write_lock()`` are different owners: a write lock taken while the same thread holds a
    read lock waits for that read lock (release it first)."""

    _lock_class: Any = Lock

    def __init__(self, client: Any, name: KeyT, lease_ms: int, wait_ms: Optional[int] = None, session: bool = False,
                 **kw: Any) -> None:
        self.client, self.name, self.lease_ms = client, name, lease_ms
        self.wait_ms, self.session, self._kw = wait_ms, session, kw

    def _make(self, mode: str) -> "Lock":
        return cast(Lock, self._lock_class(self.client, self.name, self.lease_ms, self.wait_ms,
                                           self.session, _mode=mode, **self._kw))

    def read_lock(self) -> Lock:
        """A new lock object for a shared (read) hold."""
        return self._make("READ")

    def write_lock(self) -> Lock:
        """A new lock object for an exclusive (write) hold."""
        return self._make("WRITE")


class _MultiArgs(_LockBase):
    """The LOCK.*_ALL commands of a multi-key lock (shared by the sync and asyncio classes)."""

    def _multi_init(self, keys: Iterable[KeyT]) -> KeyT:
        keys = list(keys)
        if not keys:
            raise ValueError("a MultiLock needs at least one key")
        if len(set(to_str(k) for k in keys)) != len(keys):
            raise ValueError("a MultiLock's keys must be distinct")
        slots = {key_slot(k if isinstance(k, bytes) else str(k).encode("utf-8", "surrogateescape"))
                 for k in keys}
        if len(slots) > 1:
            # the server (standalone too) and redis-py's cluster client would refuse it: say so
            # before anything is sent
            raise CrossSlot("CROSSSLOT Keys in request don't hash to the same slot (a MultiLock's "
                            "keys must share one hash slot: use a hash tag, e.g. {acct}:1, {acct}:2)")
        self.keys = keys
        return keys[0]

    def _acquire_args(self, wait: int) -> List[Any]:
        args: List[Any] = ["LOCK.ACQUIRE_ALL", len(self.keys), *self.keys, self.owner, self.lease_ms]
        if self.session:
            args.append("SESSION")
        if self.lock_delay_ms:
            args += ["LOCKDELAY", self.lock_delay_ms]
        return args + list(wait_args(wait))

    def _release_args(self) -> List[Any]:
        return ["LOCK.RELEASE_ALL", len(self.keys), *self.keys, self.owner]

    def _extend_args(self, ms: int) -> List[Any]:
        return ["LOCK.EXTEND_ALL", len(self.keys), *self.keys, self.owner, ms]

    def _release_missed(self, reply: Any) -> Optional[str]:
        gone = [to_str(k) for k, left in zip(self.keys, reply) if int(left) < 0]
        return ("not held any more at %s" % ", ".join(gone)) if gone else None


class MultiLock(_MultiArgs, Lock):
    """Several exclusive locks taken all or none (``LOCK.ACQUIRE_ALL``), renewed together
    (``LOCK.EXTEND_ALL``) and released together (``LOCK.RELEASE_ALL``).

    ``MultiLock(client, keys, lease_ms, wait_ms=None, session=False, **kw)``: the arguments of
    :class:`Lock`, with a list of distinct keys of one hash slot (use a hash tag:
    ``["{acct}:1", "{acct}:2"]``; else :class:`CrossSlot`) instead of one name. While it waits
    it holds none of the keys, so two MultiLocks over the same keys in different orders cannot
    deadlock; but it keeps free keys whose queue it heads, so do not wait for one of its keys
    while holding another of them in a separate lock (that waits until your lease ends).
    ``token`` is one fencing token valid on every key. ``name`` is the first key
    (``inspect()`` shows that one); ``keys`` all of them. A release that finds some key no
    longer held (its lease ended) releases the others and raises :class:`LockLost`."""

    def __init__(self, client: Any, keys: Iterable[KeyT], lease_ms: int,
                 wait_ms: Optional[int] = None, session: bool = False, **kw: Any) -> None:
        Lock.__init__(self, client, self._multi_init(keys), lease_ms, wait_ms, session, **kw)

# SPDX-License-Identifier: BSD-3-Clause
"""The asyncio classes, for ``redis.asyncio.Redis`` (and ``redis.asyncio.cluster.RedisCluster``).

Same names, arguments, units, replies and exceptions as the sync classes; every method that
talks to the server is a coroutine, and locks are ``async with`` context managers whose
watchdog is an asyncio task::

    from mcaptcha_cache.asyncio import Lock, RateLimiter
    async with Lock(r, "orders:42", lease_ms=2000) as lock:
        ... lock.token ...

They are also importable from the package as ``AsyncLock``, ``AsyncSemaphore``,
``AsyncRateLimiter``, ``AsyncSlidingWindowLimiter`` and ``AsyncCaptcha``.
"""

from __future__ import annotations

import asyncio
import inspect as _inspect
import time
import warnings
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple, Type, Union

import redis.exceptions

from . import captcha as _captcha
from . import lock as _lock
from . import ratelimit as _rl
from ._common import (Challenge, Decision, LockInfo, WaitBudget, check_ms, check_wait_ms, is_cluster, parse_challenge,
                      parse_grant, parse_visit, round_cap_ms, captcha_config_json, challenge_json)
from .errors import ClusterPolicyError, LockError, LockLost, LockNotAcquired, LockNotOwned, WrongType, map_error
from .ratelimit import rate_limited

__all__ = ["Lock", "MultiLock", "Semaphore", "RateLimiter", "SlidingWindowLimiter", "Captcha", "rate_limited"]

_UNSET: Any = _lock._UNSET
KeyT = Union[str, bytes]


class Lock(_lock._LockBase):
    __doc__ = ("asyncio version of :class:`mcaptcha_cache.Lock` (``await lock.acquire()``, "
               "``async with lock:``; the watchdog is an asyncio task, ``on_lost`` may be a "
               "coroutine function).\n\n" + (_lock.Lock.__doc__ or ""))

    _task: Optional["asyncio.Task[None]"] = None

    def __init__(self, client: Any, name: KeyT, lease_ms: int, wait_ms: Optional[int] = None, session: bool = False, *,
                 auto_renew: bool = True, renew_every_ms: Optional[int] = None,
                 on_lost: Optional[_lock.OnLost] = None, owner: Optional[KeyT] = None,
                 lock_delay_ms: Optional[int] = None, _mode: Optional[str] = None) -> None:
        _lock._LockBase.__init__(self, client, name, lease_ms, wait_ms, session,
                                 auto_renew=auto_renew, renew_every_ms=renew_every_ms,
                                 on_lost=on_lost, owner=owner, lock_delay_ms=lock_delay_ms,
                                 _mode=_mode)

    # ------------------------------------------------------------ session
    def _acquire_client(self) -> Any:
        if self.session and not is_cluster(self.client) and hasattr(self.client, "client"):
            self._session_client = self.client.client()
            return self._session_client
        return self.client

    async def _drop_session_client(self) -> None:
        c, self._session_client = self._session_client, None
        if c is not None:
            try:
                await c.close(close_connection_pool=False)
            except Exception:  # pragma: no cover
                pass

    # ------------------------------------------------------------ acquire
    async def acquire(self, wait_ms: Optional[int] = _UNSET) -> bool:
        """See :meth:`mcaptcha_cache.Lock.acquire`."""
        if self._held:
            raise LockError("%r is already held by this instance; release it first" % (self.name,))
        wait = self.wait_ms if wait_ms is _UNSET else check_wait_ms(wait_ms)
        await self._stop_watchdog()
        self._lost = False
        self._lost_reason = None
        conn = self._acquire_client()
        budget = WaitBudget(wait, round_cap_ms(conn))
        while True:
            rnd = budget.next_round_ms()
            started = time.monotonic()
            try:
                reply = await conn.execute_command(*self._acquire_args(rnd))
            except redis.exceptions.ResponseError as e:
                await self._drop_session_client()
                raise map_error(e) from e
            except Exception:
                try:
                    await conn.execute_command(*self._release_args())
                except Exception:
                    pass
                await self._drop_session_client()
                raise
            granted, token, ms = parse_grant(reply)
            if granted:
                self.token = token
                self._lease_deadline = started + ms / 1000.0
                self._held = True
                self._start_watchdog()
                return True
            if budget.expired():
                await self._drop_session_client()
                return False
            if rnd > 0 and time.monotonic() - started < rnd / 2000.0:
                await asyncio.sleep(0.01)

    # ------------------------------------------------------------ release
    async def release(self) -> None:
        """See :meth:`mcaptcha_cache.Lock.release` (the watchdog task is awaited, not
        cancelled, before the release is sent)."""
        await self._stop_watchdog()
        if not self._held:
            await self._drop_session_client()
            if self._lost:
                raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason))
            raise LockNotOwned("lock %r is not held by this instance" % (self.name,))
        conn = self._session_client or self.client
        try:
            missed = self._release_missed(await conn.execute_command(*self._release_args()))
        except redis.exceptions.ResponseError as e:
            err = map_error(e)
            if isinstance(err, (LockNotOwned, WrongType)):
                await self._mark_lost("the server answered the release: %s" % (err,))
                await self._drop_session_client()
                raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason),
                               reply=err.reply) from e
            raise err from e
        if missed:
            await self._mark_lost("the server answered the release: %s" % (missed,))
            await self._drop_session_client()
            raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason))
        self._held = False
        await self._drop_session_client()

    async def extend(self, ms: Optional[int] = None) -> int:
        """See :meth:`mcaptcha_cache.Lock.extend`."""
        lease_to: int = self.lease_ms if ms is None else check_ms("ms", ms)
        if not self._held:
            if self._lost:
                raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason))
            raise LockNotOwned("lock %r is not held by this instance" % (self.name,))
        sent = time.monotonic()
        try:
            lease = int(await self.client.execute_command(*self._extend_args(lease_to)))
        except redis.exceptions.ResponseError as e:
            err = map_error(e)
            if isinstance(err, (LockNotOwned, WrongType)):
                await self._mark_lost("the server refused the extension: %s" % (err,))
                raise LockLost("lock %r was lost while held: %s" % (self.name, self._lost_reason),
                               reply=err.reply) from e
            raise err from e
        self._lease_deadline = sent + lease / 1000.0
        return lease

    # ------------------------------------------------------------ queries
    async def inspect(self) -> Optional[LockInfo]:
        """See :meth:`mcaptcha_cache.Lock.inspect`."""
        try:
            return LockInfo.from_reply(await self.client.execute_command("LOCK.INSPECT", self.name))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    async def owned(self) -> bool:
        """See :meth:`mcaptcha_cache.Lock.owned`."""
        info = await self.inspect()
        mine = info is not None and any(h.owner == self.owner and not h.lock_delay for h in info.holders)
        if self._held and not mine:
            await self._mark_lost("LOCK.INSPECT does not list this owner")
        return mine

    async def locked(self) -> bool:
        """See :meth:`mcaptcha_cache.Lock.locked`."""
        info = await self.inspect()
        return info is not None and bool(info.holders)

    # --------------------------------------------------- context manager
    async def __aenter__(self) -> "Lock":
        if not await self.acquire():
            raise LockNotAcquired("could not acquire %r within %s ms" % (self.name, self.wait_ms))
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if exc is None:
            await self.release()
            return None
        # the body's exception goes first; a lost lease is reported by the logger, on_lost
        # and lock.lost (see mcaptcha_cache.Lock.__exit__)
        try:
            await self.release()
        except Exception as e:
            if not isinstance(e, LockNotOwned):
                _lock.log.warning("lock %r: release after a failed block failed: %r", self.name, e)
        return None

    def __enter__(self) -> None:
        raise TypeError("use 'async with' with mcaptcha_cache.asyncio locks")

    def __exit__(self, *a: Any) -> None:  # pragma: no cover
        return None

    # ----------------------------------------------------------- watchdog
    async def _mark_lost(self, reason: str) -> None:
        if not self._held:
            return
        self._held = False
        self._lost = True
        self._lost_reason = reason
        if self._stop is not None:
            self._stop.set()
        _lock.log.warning("lock %r (owner %s, token %s) lost: %s", self.name, self.owner,
                          self.token, reason)
        if self.on_lost is not None:
            try:
                r = self.on_lost(self)
                if _inspect.isawaitable(r):
                    await r
            except Exception:
                _lock.log.exception("on_lost callback of lock %r failed", self.name)

    def _start_watchdog(self) -> None:
        if not self.auto_renew:
            return
        self._stop = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._watchdog(self._stop))

    async def _stop_watchdog(self) -> None:
        stop, task = self._stop, self._task
        if stop is not None:
            stop.set()
        if task is not None and task is not asyncio.current_task():
            await task  # an EXTEND in flight finishes before anything else is sent
        self._stop = self._task = None

    async def _watchdog(self, stop: asyncio.Event) -> None:
        interval = (self.renew_every_ms or self.lease_ms // 3) / 1000.0
        while True:
            try:
                await asyncio.wait_for(stop.wait(), interval)
                return
            except asyncio.TimeoutError:
                pass
            if not self._held:
                return
            sent = time.monotonic()
            try:
                lease = await self.client.execute_command(*self._extend_args(self.lease_ms))
            except redis.exceptions.ResponseError as e:
                err = map_error(e)
                if isinstance(err, (LockNotOwned, WrongType)):
                    await self._mark_lost("renewal refused: %s" % (err,))
                    return
                if time.monotonic() >= self._lease_deadline:
                    await self._mark_lost("renewals failed until the lease ended: %s" % (err,))
                    return
                continue
            except Exception as e:
                if time.monotonic() >= self._lease_deadline:
                    await self._mark_lost("renewals failed until the lease ended: %r" % (e,))
                    return
                continue
            self._lease_deadline = sent + int(lease) / 1000.0


class Semaphore(Lock):
    __doc__ = ("asyncio version of :class:`mcaptcha_cache.Semaphore`.\n\n"
               + (_lock.Semaphore.__doc__ or ""))

    def __init__(self, client: Any, name: KeyT, permits: int, lease_ms: int,
                 wait_ms: Optional[int] = None, session: bool = False, *, take: int = 1,
                 **kw: Any) -> None:
        permits = _lock.check_permits(permits)
        take = _lock.check_permits(take)
        if take > permits:
            raise ValueError("take (%d) must not exceed permits (%d)" % (take, permits))
        _lock._LockBase.__init__(self, client, name, lease_ms, wait_ms, session, _permits=permits,
                                 _take=take, **kw)

    async def _pool(self, cmd: str, *args: Any) -> int:
        try:
            return int(await self.client.execute_command(cmd, self.name, *args, "PERMITS", self._permits))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    async def add_permits(self, delta: int) -> int:
        """See :meth:`mcaptcha_cache.Semaphore.add_permits`."""
        return await self._pool("LOCK.ADD_PERMITS", _lock.check_delta(delta))

    async def drain_permits(self) -> int:
        """See :meth:`mcaptcha_cache.Semaphore.drain_permits`."""
        return await self._pool("LOCK.DRAIN_PERMITS")

    async def available_permits(self) -> int:
        """See :meth:`mcaptcha_cache.Semaphore.available_permits`."""
        return await self._pool("LOCK.AVAILABLE_PERMITS")


class MultiLock(_lock._MultiArgs, Lock):
    __doc__ = ("asyncio version of :class:`mcaptcha_cache.MultiLock` (``async with``).\n\n"
               + (_lock.MultiLock.__doc__ or ""))

    def __init__(self, client: Any, keys: Iterable[KeyT], lease_ms: int,
                 wait_ms: Optional[int] = None, session: bool = False, **kw: Any) -> None:
        Lock.__init__(self, client, self._multi_init(keys), lease_ms, wait_ms, session, **kw)


class ReadWriteLock(_lock.ReadWriteLock):
    __doc__ = ("asyncio version of :class:`mcaptcha_cache.ReadWriteLock`: ``read_lock()`` and "
               "``write_lock()`` return :class:`Lock` objects of this module.\n\n"
               + (_lock.ReadWriteLock.__doc__ or ""))
    _lock_class = Lock

    def read_lock(self) -> Lock:  # type: ignore[override]
        """A new asyncio lock object for a shared (read) hold."""
        return self._make("READ")  # type: ignore[return-value]

    def write_lock(self) -> Lock:  # type: ignore[override]
        """A new asyncio lock object for an exclusive (write) hold."""
        return self._make("WRITE")  # type: ignore[return-value]


# ------------------------------------------------------------------ limiters
class _AsyncLimiterMixin:
    is_async = True
    client: Any
    key: Any

    if TYPE_CHECKING:  # given by the sync limiter class it is mixed into
        def _take_args(self, cost: int, wait: int) -> List[Any]: ...

        def _peek_args(self, cost: int) -> List[Any]: ...

    async def _call(self, args: List[Any]) -> Decision:
        try:
            return Decision.from_reply(await self.client.execute_command(*args))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    async def acquire(self, cost: int = 1, wait_ms: Optional[int] = 0) -> Decision:
        """See :meth:`mcaptcha_cache.RateLimiter.acquire`."""
        _rl._check_units("cost", cost)
        budget = WaitBudget(check_wait_ms(wait_ms), round_cap_ms(self.client))
        while True:
            rnd = budget.next_round_ms()
            started = time.monotonic()
            d = await self._call(self._take_args(cost, rnd))
            if d.allowed or d.retry_after_ms < 0 or budget.expired():
                return d
            if rnd > 0 and time.monotonic() - started < rnd / 2000.0:
                await asyncio.sleep(0.01)

    async def peek(self, cost: int = 1) -> Decision:
        """See :meth:`mcaptcha_cache.RateLimiter.peek`."""
        _rl._check_units("cost", cost)
        return await self._call(self._peek_args(cost))

    async def refund(self, units: int) -> int:
        """See :meth:`mcaptcha_cache.RateLimiter.refund`."""
        try:
            return int(await self.client.execute_command("RL.REFUND", self.key, units))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e


class RateLimiter(_AsyncLimiterMixin, _rl.RateLimiter):  # type: ignore[misc]
    __doc__ = "asyncio version of :class:`mcaptcha_cache.RateLimiter`.\n\n" + (
        _rl.RateLimiter.__doc__ or "")


class SlidingWindowLimiter(_AsyncLimiterMixin, _rl.SlidingWindowLimiter):  # type: ignore[misc]
    __doc__ = "asyncio version of :class:`mcaptcha_cache.SlidingWindowLimiter`.\n\n" + (
        _rl.SlidingWindowLimiter.__doc__ or "")


# ------------------------------------------------------------ stored policies
async def _run_policy(client: Any, args: List[Any]) -> Dict[str, Any]:
    """As :func:`mcaptcha_cache.ratelimit._run`, awaited (every primary of a cluster client)."""
    if not is_cluster(client):
        try:
            return {"": await client.execute_command(*args)}
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e
    results: Dict[str, Any] = {}
    failures: Dict[str, BaseException] = {}
    nodes = client.get_primaries()
    if not nodes and hasattr(client, "initialize"):
        await client.initialize()  # a new asyncio cluster client knows no node yet
        nodes = client.get_primaries()
    if not nodes:
        raise ClusterPolicyError("%s: the cluster client knows no primary" % (args[0],), {}, {})
    for node in nodes:
        try:
            results[_rl._node_name(node)] = await client.execute_command(*args, target_nodes=node)
        except redis.exceptions.RedisError as e:
            failures[_rl._node_name(node)] = map_error(e)
    return _rl._check_every_primary(str(args[0]), results, failures)


async def set_gcra_policy(client: Any, name: Union[str, bytes], rate: int, period_ms: int,
                          burst: Optional[int] = None) -> None:
    """See :func:`mcaptcha_cache.ratelimit.set_gcra_policy`."""
    await _run_policy(client, _rl._gcra_policy_args(name, rate, period_ms, burst))


async def set_window_policy(client: Any, name: Union[str, bytes], limit: int, window_ms: int) -> None:
    """See :func:`mcaptcha_cache.ratelimit.set_window_policy`."""
    await _run_policy(client, _rl._window_policy_args(name, limit, window_ms))


async def get_policy(client: Any, name: Union[str, bytes]) -> Optional[Dict[str, Any]]:
    """See :func:`mcaptcha_cache.ratelimit.get_policy`."""
    return _rl._one_policy(name, await _run_policy(client, ["RL.POLICY_GET", name]))


async def delete_policy(client: Any, name: Union[str, bytes]) -> bool:
    """See :func:`mcaptcha_cache.ratelimit.delete_policy`."""
    return any(bool(r) for r in (await _run_policy(client, ["RL.POLICY_DEL", name])).values())


async def list_policies(client: Any) -> List[str]:
    """See :func:`mcaptcha_cache.ratelimit.list_policies`."""
    return _rl._policy_names(await _run_policy(client, ["RL.POLICY_LIST"]))


# ------------------------------------------------------------------- captcha
class Captcha(_captcha.Captcha):
    __doc__ = "asyncio version of :class:`mcaptcha_cache.Captcha`.\n\n" + (
        _captcha.Captcha.__doc__ or "")

    async def _cmd(self, *args: Any) -> Any:
        try:
            return await self.client.execute_command(*args)
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    async def add(self, levels: Iterable[Any], duration_s: int = 30) -> None:  # type: ignore[override]
        await self._cmd("MCAPTCHA_CACHE.ADD_CAPTCHA", self.name,
                        captcha_config_json(levels, duration_s))

    async def visit(self) -> int:  # type: ignore[override]
        return parse_visit(await self._cmd("MCAPTCHA_CACHE.ADD_VISITOR", self.name))[0]

    async def visit_with_duration(self) -> Tuple[int, int]:  # type: ignore[override]
        return parse_visit(await self._cmd("MCAPTCHA_CACHE.ADD_VISITOR", self.name))

    async def visit_info(self) -> Tuple[int, int]:  # type: ignore[override]
        warnings.warn(_captcha.VISIT_INFO_DEPRECATED, DeprecationWarning, stacklevel=2)
        return await self.visit_with_duration()

    async def count(self) -> int:  # type: ignore[override]
        return int(await self._cmd("MCAPTCHA_CACHE.GET", self.name))

    async def exists(self) -> bool:  # type: ignore[override]
        return int(await self._cmd("MCAPTCHA_CACHE.CAPTCHA_EXISTS", self.name)) == 0

    async def delete(self) -> None:  # type: ignore[override]
        await self._cmd("MCAPTCHA_CACHE.DELETE_CAPTCHA", self.name)

    async def rename(self, new_name: KeyT) -> "Captcha":  # type: ignore[override]
        await self._cmd("MCAPTCHA_CACHE.RENAME_CAPTCHA", self.name, new_name)
        return type(self)(self.client, new_name)

    async def add_challenge(self, challenge: KeyT, difficulty: int,  # type: ignore[override]
                            duration_s: int) -> None:
        await self._cmd("MCAPTCHA_CACHE.ADD_CHALLENGE", self.name,
                        challenge_json(challenge, difficulty, duration_s))

    async def get_challenge(self, challenge: KeyT) -> Challenge:  # type: ignore[override]
        return parse_challenge(await self._cmd("MCAPTCHA_CACHE.GET_CHALLENGE", self.name,
                                               challenge))

    async def delete_challenge(self, challenge: KeyT) -> None:  # type: ignore[override]
        await self._cmd("MCAPTCHA_CACHE.DELETE_CHALLENGE", self.name, challenge)


for _name in ("add", "visit", "visit_with_duration", "visit_info", "count", "exists", "delete", "rename", "add_challenge",
              "get_challenge", "delete_challenge"):
    getattr(Captcha, _name).__doc__ = getattr(_captcha.Captcha, _name).__doc__
del _name

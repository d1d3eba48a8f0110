"""A drop-in for redis-py's ``redis.asyncio.lock.Lock`` on the module's leased locks.

SPDX-License-Identifier: BSD-3-Clause

::

    from mcaptcha_cache.compat.redis_py_asyncio import Lock
    async with r.lock("orders:42", timeout=10, lock_class=Lock) as lock:
        ... lock.fencing_token ...

The same API, rules and differences as :class:`mcaptcha_cache.compat.redis_py.Lock`, every
method that talks to the server a coroutine; the renewal of a lock without ``timeout`` is
an asyncio task.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, Optional, Type, Union

import redis.exceptions

from ..asyncio import Lock as _ModuleLock
from ..errors import LockError, LockNotAcquired, LockNotOwned, WrongType, map_error
from .redis_py import DEFAULT_LEASE_MS, Lock as _SyncLock, LockArgs, LockNotOwnedError, Number, encode_token, log, seconds_to_ms

__all__ = ["Lock", "LockError", "LockNotOwnedError", "DEFAULT_LEASE_MS"]


class Lock(LockArgs):
    __doc__ = ("A drop-in for ``redis.asyncio.lock.Lock`` (``await lock.acquire()``, "
               "``async with lock:``).\n\n" + (_SyncLock.__doc__ or ""))

    async def acquire(self, sleep: Optional[Number] = None, blocking: Optional[bool] = None,
                      blocking_timeout: Optional[Number] = None,
                      token: Union[str, bytes, None] = None) -> bool:
        """See :meth:`mcaptcha_cache.compat.redis_py.Lock.acquire`."""
        loop = asyncio.get_running_loop()
        pause = float(self.sleep if sleep is None else sleep)
        wait_ms = self._wait_ms(blocking, blocking_timeout)
        tok = encode_token(token)
        deadline = None if wait_ms is None else loop.time() + wait_ms / 1000.0
        while True:
            left = None if deadline is None else max(0, int((deadline - loop.time()) * 1000))
            held = _ModuleLock(self.redis, self.name, self.lease_ms, **self._module_lock_kw(tok, left))
            try:
                ok = await held.acquire()
            except WrongType:
                if wait_ms == 0 or (deadline is not None and loop.time() >= deadline):
                    return False
                await asyncio.sleep(pause)
                continue
            if ok:
                self.local.token, self.local.held = tok, held
            return ok

    async def __aenter__(self) -> "Lock":
        if await self.acquire():
            return self
        raise LockNotAcquired("Unable to acquire lock within the time specified")

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            await self.release()
        except LockError:
            if self.raise_on_release_error:
                raise
            log.warning("Lock was unlocked or no longer owned when exiting context manager.")

    async def release(self) -> None:
        """See :meth:`mcaptcha_cache.compat.redis_py.Lock.release`."""
        token, held = self.local.token, self.local.held
        if token is None:
            raise LockError("Cannot release an unlocked lock")
        self.local.token = self.local.held = None
        try:
            await held.release()
        except LockNotOwned as e:
            raise LockNotOwned("Cannot release a lock that's no longer owned") from e

    async def extend(self, additional_time: Number, replace_ttl: bool = False) -> bool:
        """See :meth:`mcaptcha_cache.compat.redis_py.Lock.extend`."""
        token = self._check_extend("extend")
        ms = seconds_to_ms("additional_time", additional_time)
        if not replace_ttl:
            left = self._holder_lease_ms(await self._inspect(), token)
            if left is None:
                raise LockNotOwned("Cannot extend a lock that's no longer owned")
            ms += left
        return await self._extend_to(max(1, ms), "extend")

    async def reacquire(self) -> bool:
        """See :meth:`mcaptcha_cache.compat.redis_py.Lock.reacquire`."""
        self._check_extend("reacquire")
        return await self._extend_to(self.lease_ms, "reacquire")

    async def _extend_to(self, ms: int, verb: str) -> bool:
        try:
            await self.local.held.extend(ms)
        except LockNotOwned as e:
            raise LockNotOwned("Cannot %s a lock that's no longer owned" % verb) from e
        return True

    async def _inspect(self) -> Any:
        try:
            return await self.redis.execute_command("LOCK.INSPECT", self.name)
        except redis.exceptions.ResponseError as e:
            err = map_error(e)
            if isinstance(err, WrongType):
                return "wrongtype"
            raise err from e

    async def locked(self) -> bool:
        """See :meth:`mcaptcha_cache.compat.redis_py.Lock.locked`."""
        reply = await self._inspect()
        if reply == "wrongtype":
            return True
        return reply is not None and any(int(h[3]) > 0 for h in reply[3])

    async def owned(self) -> bool:
        """See :meth:`mcaptcha_cache.compat.redis_py.Lock.owned`."""
        token = self.local.token
        if token is None:
            return False
        reply = await self._inspect()
        return reply != "wrongtype" and self._holder_lease_ms(reply, token) is not None

"""The ``limits.aio`` storages (asyncio) on the module: ``async+mcaptcha+redis://host:port``
and ``async+mcaptcha+redis+cluster://host:port,host:port``.

SPDX-License-Identifier: BSD-3-Clause

The asyncio twins of :mod:`mcaptcha_cache.compat.limits` (same commands and answers, on
``redis.asyncio``), for ``limits.aio.strategies``. Importing either module registers both.
"""

from __future__ import annotations

import time
from typing import Any, List, Optional, Tuple, Union

import redis.asyncio
import redis.asyncio.cluster
from limits.aio.storage.base import MovingWindowSupport, Storage

from .limits import (_KEY_PATTERN, cluster_nodes, fixed_args, peek_count, standalone_url,
                     window_args, window_start)

__all__ = ["McaptchaAsyncStorage", "McaptchaAsyncClusterStorage"]


class _AsyncModuleStorage(Storage, MovingWindowSupport):
    """What the asyncio standalone and Cluster storages share (``self.storage``: the client)."""

    DEPENDENCIES = {}
    storage: Any

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """See :meth:`mcaptcha_cache.compat.limits.McaptchaStorage.acquire_entry`."""
        reply = await self.storage.execute_command("RL.WINDOW", *window_args(key, limit, expiry),
                                                   "COST", int(amount))
        return bool(int(reply[0]))

    async def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[int, int]:
        """See :meth:`mcaptcha_cache.compat.limits.McaptchaStorage.get_moving_window`."""
        args = window_args(key, limit, expiry)
        now = time.time()
        reply = await self.storage.execute_command("RL.WINDOW_PEEK", *args)
        count, more = peek_count(limit, reply)
        if count == 0:
            return int(now), 0
        if more is not None:
            reply = await self.storage.execute_command("RL.WINDOW_PEEK", *args, "COST", more)
        return window_start(now, expiry, reply), count

    async def incr(self, key: str, expiry: int, elastic_expiry: bool = False,
                   amount: int = 1) -> int:
        """See :meth:`mcaptcha_cache.compat.limits.McaptchaStorage.incr`."""
        reply = await self.storage.execute_command("RL.FIXED", *fixed_args(key, expiry, elastic_expiry,
                                                                           amount))
        return int(reply[0])

    async def get(self, key: str) -> int:
        return int(await self.storage.get(key) or 0)

    async def get_expiry(self, key: str) -> int:
        return int(max(int(await self.storage.ttl(key)), 0) + time.time())

    async def clear(self, key: str) -> None:
        await self.storage.delete(key)

    async def check(self) -> bool:
        try:
            return bool(await self.storage.ping())
        except Exception:
            return False

    async def _clients(self) -> List[Any]:
        # a cluster client's SCAN goes to every primary
        return [self.storage]

    async def reset(self) -> Optional[int]:
        """Delete every ``limits`` key (``LIMITER*``) on every primary; returns how many."""
        n = 0
        for c in await self._clients():
            keys = [k async for k in c.scan_iter(match=_KEY_PATTERN, count=1000)]
            for k in keys:
                n += int(await c.delete(k))
        return n


class McaptchaAsyncStorage(_AsyncModuleStorage):
    """``async+mcaptcha+redis://host:port[/db]`` (also ``async+mcaptcha+rediss://``,
    ``async+mcaptcha+redis+unix://``); ``options`` go to ``redis.asyncio.from_url``."""

    STORAGE_SCHEME = ["async+mcaptcha+redis", "async+mcaptcha+rediss", "async+mcaptcha+redis+unix"]

    def __init__(self, uri: str = "async+mcaptcha+redis://localhost:6379",
                 **options: Union[float, str, bool]) -> None:
        super().__init__(uri, **options)
        self.storage = redis.asyncio.from_url(standalone_url(uri), **options)


class McaptchaAsyncClusterStorage(_AsyncModuleStorage):
    """``async+mcaptcha+redis+cluster://[:password]@host:port,host:port``; ``options`` go to
    ``redis.asyncio.cluster.RedisCluster``."""

    STORAGE_SCHEME = ["async+mcaptcha+redis+cluster"]

    def __init__(self, uri: str, **options: Union[float, str, bool]) -> None:
        super().__init__(uri, **options)
        hosts, kw = cluster_nodes(uri, options)
        nodes = [redis.asyncio.cluster.ClusterNode(h, p) for h, p in hosts]
        self.storage = redis.asyncio.cluster.RedisCluster(startup_nodes=nodes, **kw)

"""A storage for the ``limits`` library (and so Flask-Limiter and SlowAPI) on the module.

SPDX-License-Identifier: BSD-3-Clause

Importing this module registers the URI schemes with ``limits``::

    import mcaptcha_cache.compat.limits  # noqa: F401 (registers mcaptcha+redis://)
    from limits import parse, storage, strategies

    store = storage.storage_from_string("mcaptcha+redis://localhost:6379")
    window = strategies.MovingWindowRateLimiter(store)
    window.hit(parse("10/minute"), "user:42")

    # Flask-Limiter: Limiter(get_remote_address, app=app, storage_uri="mcaptcha+redis://host:6379")

Schemes: ``mcaptcha+redis://[:password]@host:port[/db]``, ``mcaptcha+rediss://…`` (TLS),
``mcaptcha+redis+unix:///path/to/socket`` (standalone, :class:`McaptchaStorage`) and
``mcaptcha+redis+cluster://[:password]@host:port,host:port`` (Redis Cluster,
:class:`McaptchaClusterStorage`); extra keyword options go to the redis-py client. For
``limits.aio``: the same schemes prefixed ``async+`` (``async+mcaptcha+redis://…``,
``async+mcaptcha+redis+cluster://…``; :mod:`mcaptcha_cache.compat.limits_aio`, registered by
importing this module too).

How ``limits``' strategies are answered:

- moving window (``MovingWindowRateLimiter``): the module's exact sliding window
  (``RL.WINDOW key limit window-ms COST n``; ``RL.WINDOW_PEEK`` for ``test`` and
  ``get_window_stats``). Its memory per key is constant (``limits``' own Redis storage keeps a
  list entry per hit). The window's length is the limit's (a key keeps one length).
- fixed window (``FixedWindowRateLimiter``, ``FixedWindowElasticExpiryRateLimiter``): the
  module's fixed-window counter (``RL.FIXED key window-ms COST n [ELASTIC]``), one command
  where ``limits``' own Redis storage runs a Lua script. The key is the same plain string
  counter with the window's end as its expiry (set by the first hit, or by every hit for the
  elastic strategy), so ``get`` and ``get_expiry`` read it with ``GET`` and ``TTL``, and
  counters that ``limits``' own storage wrote go on counting.
"""

from __future__ import annotations

import math
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple, Union

import redis
import redis.cluster
from limits.storage.base import MovingWindowSupport, Storage

__all__ = ["McaptchaStorage", "McaptchaClusterStorage", "McaptchaAsyncStorage",
           "McaptchaAsyncClusterStorage"]

def fixed_args(key: str, expiry: int, elastic_expiry: bool, amount: int) -> List[Any]:
    """RL.FIXED's arguments: a window of ``expiry`` seconds (the module takes ms), ``amount``
    added, ELASTIC for the elastic strategy."""
    args: List[Any] = [key, int(expiry) * 1000, "COST", int(amount)]
    if elastic_expiry:
        args.append("ELASTIC")
    return args


# limits' keys start with this ("LIMITER/namespace/…"): reset() removes those.
_KEY_PATTERN = "LIMITER*"


def window_args(key: str, limit: int, expiry: int) -> List[Any]:
    """RL.WINDOW's key and limit: ``limit`` per ``expiry`` seconds (the module takes ms)."""
    return [key, int(limit), int(expiry) * 1000]


def peek_count(limit: int, reply: Any) -> Tuple[int, Optional[int]]:
    """From ``RL.WINDOW_PEEK … COST 1``: ``(count, cost)`` -- the units taken in the window,
    and the cost whose peek tells when the oldest hit leaves (None: this reply's
    ``retry_after_ms`` already does, the window being full). An allowed peek's ``remaining``
    is what is left after it, a refused one's what is free now."""
    allowed, remaining = int(reply[0]), int(reply[1])
    free = remaining + 1 if allowed else remaining
    count = max(0, int(limit) - free)
    return count, (free + 1 if allowed else None)


def window_start(now: float, expiry: int, reply: Any) -> int:
    """``start`` of limits' ``(start, count)`` from the peek whose ``retry_after_ms`` is the time
    until one more unit fits: ``start + expiry`` is then (rounded up to a second)."""
    retry_ms = int(reply[2])
    if retry_ms < 0:  # not for a cost that fits the limit; be safe
        retry_ms = int(expiry) * 1000
    return int(math.ceil(now + retry_ms / 1000.0)) - int(expiry)


def cluster_nodes(uri: str, options: Dict[str, Any]) -> Tuple[List[Tuple[str, int]], Dict[str, Any]]:
    """``mcaptcha+redis+cluster://[user:password@]host:port,host:port`` -> the startup nodes
    and the client's keyword options (credentials added)."""
    parsed = urllib.parse.urlparse(uri)
    netloc = parsed.netloc.rsplit("@", 1)
    auth, hosts = (netloc[0], netloc[1]) if len(netloc) == 2 else ("", netloc[0])
    kw: Dict[str, Any] = dict(options)
    if auth:
        user, _, password = auth.partition(":")
        if user:
            kw.setdefault("username", urllib.parse.unquote(user))
        if password:
            kw.setdefault("password", urllib.parse.unquote(password))
    nodes = []
    for loc in hosts.split(","):
        host, _, port = loc.rpartition(":")
        nodes.append((host or "localhost", int(port or 6379)))
    return nodes, kw


def standalone_url(uri: str) -> str:
    """The redis-py URL of a ``mcaptcha+redis…://`` URI."""
    url = uri[len("async+"):] if uri.startswith("async+") else uri
    url = url[len("mcaptcha+"):] if url.startswith("mcaptcha+") else url
    return url.replace("redis+unix://", "unix://", 1)


class _ModuleStorage(Storage, MovingWindowSupport):
    """What the standalone and Cluster storages share; ``self.storage`` is the redis-py client."""

    DEPENDENCIES = {}  # redis is this package's own dependency
    storage: Any

    # ---------------------------------------------------------- moving window
    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Take ``amount`` from the sliding window of ``limit`` per ``expiry`` seconds (``RL.WINDOW``);
        True when taken. A refused hit takes nothing."""
        reply = self.storage.execute_command("RL.WINDOW", *window_args(key, limit, expiry),
                                             "COST", int(amount))
        return bool(int(reply[0]))

    def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[int, int]:
        """``(start, count)``: ``count`` units taken within the last ``expiry`` seconds, and
        ``start`` such that ``start + expiry`` is when one more unit fits again (the oldest
        hit leaves the window; ``limits`` reports it as the reset time). Read-only
        (``RL.WINDOW_PEEK``)."""
        args = window_args(key, limit, expiry)
        now = time.time()
        reply = self.storage.execute_command("RL.WINDOW_PEEK", *args)
        count, more = peek_count(limit, reply)
        if count == 0:
            return int(now), 0
        if more is not None:
            reply = self.storage.execute_command("RL.WINDOW_PEEK", *args, "COST", more)
        return window_start(now, expiry, reply), count

    # ------------------------------------------------------------ fixed window
    def incr(self, key: str, expiry: int, elastic_expiry: bool = False, amount: int = 1) -> int:
        """Add ``amount`` to the fixed window's counter; the first hit (every hit with
        ``elastic_expiry``) sets its expiry to ``expiry`` seconds. Returns the count."""
        return int(self.storage.execute_command("RL.FIXED", *fixed_args(key, expiry, elastic_expiry,
                                                                        amount))[0])

    def get(self, key: str) -> int:
        """The fixed window's count (0 when none)."""
        return int(self.storage.get(key) or 0)

    def get_expiry(self, key: str) -> int:
        """When the fixed window ends (Unix seconds)."""
        return int(max(int(self.storage.ttl(key)), 0) + time.time())

    # ------------------------------------------------------------------ admin
    def clear(self, key: str) -> None:
        """Forget the key (either kind)."""
        self.storage.delete(key)

    def check(self) -> bool:
        """Whether the server answers."""
        try:
            return bool(self.storage.ping())
        except Exception:
            return False

    def _clients(self) -> List[Any]:
        return [self.storage]

    def reset(self) -> Optional[int]:
        """Delete every ``limits`` key (``LIMITER*``, found by SCAN on every primary); returns
        how many."""
        n = 0
        for c in self._clients():
            batch: List[Any] = []
            for k in c.scan_iter(match=_KEY_PATTERN, count=1000):
                batch.append(k)
                if len(batch) >= 500:
                    n += sum(int(c.delete(x)) for x in batch)
                    batch = []
            n += sum(int(c.delete(x)) for x in batch)
        return n


class McaptchaStorage(_ModuleStorage):
    """The ``limits`` storage on a standalone server: ``mcaptcha+redis://host:port[/db]``,
    ``mcaptcha+rediss://…``, ``mcaptcha+redis+unix:///path``. ``options`` go to
    ``redis.from_url``."""

    STORAGE_SCHEME = ["mcaptcha+redis", "mcaptcha+rediss", "mcaptcha+redis+unix"]

    def __init__(self, uri: str = "mcaptcha+redis://localhost:6379",
                 **options: Union[float, str, bool]) -> None:
        super().__init__(uri, **options)
        self.storage = redis.from_url(standalone_url(uri), **options)


class McaptchaClusterStorage(_ModuleStorage):
    """The ``limits`` storage on a Redis Cluster:
    ``mcaptcha+redis+cluster://[:password]@host:port,host:port``. ``options`` go to
    ``redis.cluster.RedisCluster``."""

    STORAGE_SCHEME = ["mcaptcha+redis+cluster"]

    def __init__(self, uri: str, **options: Union[float, str, bool]) -> None:
        super().__init__(uri, **options)
        hosts, kw = cluster_nodes(uri, options)
        nodes = [redis.cluster.ClusterNode(h, p) for h, p in hosts]
        self.storage = redis.cluster.RedisCluster(startup_nodes=nodes, **kw)

    def _clients(self) -> List[Any]:
        return [self.storage.get_redis_connection(n) for n in self.storage.get_primaries()]


# the asyncio storages register their schemes too (one import for both)
from . import limits_aio  # noqa: E402,F401

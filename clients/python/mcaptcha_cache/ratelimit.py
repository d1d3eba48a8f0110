# SPDX-License-Identifier: BSD-3-Clause
"""Rate limiters on ``RL.GCRA`` and ``RL.WINDOW`` (sync), the :func:`rate_limited`
decorator (sync and asyncio), and the stored policies (``RL.POLICY_*``: :func:`set_gcra_policy`,
:func:`set_window_policy`, :func:`get_policy`, :func:`delete_policy`, :func:`list_policies`),
which a limiter names with ``policy=``. All times are **milliseconds**."""

from __future__ import annotations

import functools
import inspect
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union, cast

import redis.exceptions

from ._common import (Decision, WaitBudget, check_ms, check_wait_ms, is_cluster, round_cap_ms,
                      to_str, wait_args)
from .errors import ClusterPolicyError, RateLimited, map_error

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["RateLimiter", "SlidingWindowLimiter", "rate_limited", "set_gcra_policy", "set_window_policy",
           "get_policy", "delete_policy", "list_policies"]


def _check_units(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError("%s must be an int >= 0, got %r" % (name, v))
    return v


class _LimiterBase:
    is_async = False
    client: Any
    key: Any

    def _take_args(self, cost: int, wait: int) -> List[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _peek_args(self, cost: int) -> List[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _call(self, args: List[Any]) -> Decision:
        try:
            return Decision.from_reply(self.client.execute_command(*args))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    def acquire(self, cost: int = 1, wait_ms: Optional[int] = 0) -> Decision:
        """Take ``cost`` units; returns a :class:`Decision` (``allowed``, ``remaining``,
        ``retry_after_ms``, ``reset_after_ms``).

        ``wait_ms`` (ms): 0 (default) answers at once; N waits on the server (``WAIT``, first
        come first served, no polling) up to N ms for the units to fit; None waits until they
        do. A request that can never fit (cost above the capacity) is refused at once with
        ``retry_after_ms == -1``. Waits longer than the client's socket timeout are split into
        rounds, as for :class:`~mcaptcha_cache.Lock`."""
        _check_units("cost", cost)
        budget = WaitBudget(check_wait_ms(wait_ms), round_cap_ms(self.client))
        while True:
            rnd = budget.next_round_ms()
            started = time.monotonic()
            d = self._call(self._take_args(cost, rnd))
            if d.allowed or d.retry_after_ms < 0 or budget.expired():
                return d
            if rnd > 0 and time.monotonic() - started < rnd / 2000.0:
                time.sleep(0.01)

    def peek(self, cost: int = 1) -> Decision:
        """What ``acquire(cost)`` would answer now, taking nothing (``*_PEEK``; runs on
        replicas, creates nothing)."""
        _check_units("cost", cost)
        return self._call(self._peek_args(cost))

    def refund(self, units: int) -> int:
        """Give up to ``units`` back (``RL.REFUND``), never below empty; returns the units
        given back. Waiters are woken."""
        try:
            return int(self.client.execute_command("RL.REFUND", self.key, units))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    def __repr__(self) -> str:
        return "<%s %r>" % (type(self).__name__, self.key)


def _limit_args(policy: Optional[Union[str, bytes]], numbers: Tuple[Any, ...]) -> List[Any]:
    """The limit's arguments: ``POLICY name``, or the numbers."""
    return ["POLICY", policy] if policy is not None else list(numbers)


def _check_policy(policy: Any, given: Dict[str, Any]) -> Optional[Union[str, bytes]]:
    """``policy`` (a name) excludes the numbers; without it they are all needed."""
    if policy is not None:
        if not isinstance(policy, (str, bytes)) or not policy:
            raise ValueError("policy must be a non-empty str or bytes, got %r" % (policy,))
        if any(v is not None for v in given.values()):
            raise ValueError("policy= replaces %s: give one or the other" % ", ".join(sorted(given)))
        return policy
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise ValueError("%s needed (or policy=)" % ", ".join(sorted(missing)))
    return None


class RateLimiter(_LimiterBase):
    """A GCRA token bucket (``RL.GCRA``): ``rate`` units per ``period_ms`` milliseconds, at
    most ``burst`` at once (default: ``rate``); or the stored GCRA policy ``policy``.

    ``RateLimiter(client, key, rate, period_ms, burst=None)`` or
    ``RateLimiter(client, key, policy="api")``; ``acquire(cost=1, wait_ms=0)``
    returns a :class:`Decision`. The key expires when the bucket is full again, so idle keys
    cost nothing. Errors: :class:`InvalidArgument` (range; cost above what the rate allows;
    no such policy, or a WINDOW policy), :class:`WrongType`."""

    def __init__(self, client: Any, key: Union[str, bytes], rate: Optional[int] = None,
                 period_ms: Optional[int] = None, burst: Optional[int] = None, *,
                 policy: Optional[Union[str, bytes]] = None) -> None:
        self.client = client
        self.key = key
        self.policy = _check_policy(policy, {"rate": rate, "period_ms": period_ms} if policy is None else
                                    {"rate": rate, "period_ms": period_ms, "burst": burst})
        self.rate = None if rate is None else _check_units("rate", rate)
        self.period_ms = None if period_ms is None else check_ms("period_ms", period_ms)
        self.burst = None if burst is None else _check_units("burst", burst)

    def _opts(self, cost: int) -> List[Any]:
        opts: List[Any] = []
        if self.burst is not None:
            opts += ["BURST", self.burst]
        if cost != 1:
            opts += ["COST", cost]
        return opts

    def _take_args(self, cost: int, wait: int) -> List[Any]:
        return ["RL.GCRA", self.key] + _limit_args(self.policy, (self.rate, self.period_ms)) + self._opts(
            cost) + list(wait_args(wait))

    def _peek_args(self, cost: int) -> List[Any]:
        return ["RL.GCRA_PEEK", self.key] + _limit_args(self.policy, (self.rate, self.period_ms)) + self._opts(cost)


class SlidingWindowLimiter(_LimiterBase):
    """An exact sliding window (``RL.WINDOW``): at most ``limit`` units within any
    ``window_ms`` milliseconds, or the stored WINDOW policy ``policy``
    (``SlidingWindowLimiter(client, key, policy="login")``). Same methods and
    :class:`Decision` as :class:`RateLimiter`."""

    def __init__(self, client: Any, key: Union[str, bytes], limit: Optional[int] = None,
                 window_ms: Optional[int] = None, *,
                 policy: Optional[Union[str, bytes]] = None) -> None:
        self.client = client
        self.key = key
        self.policy = _check_policy(policy, {"limit": limit, "window_ms": window_ms})
        self.limit = None if limit is None else _check_units("limit", limit)
        self.window_ms = None if window_ms is None else check_ms("window_ms", window_ms)

    def _take_args(self, cost: int, wait: int) -> List[Any]:
        args: List[Any] = ["RL.WINDOW", self.key] + _limit_args(self.policy, (self.limit, self.window_ms))
        if cost != 1:
            args += ["COST", cost]
        return args + list(wait_args(wait))

    def _peek_args(self, cost: int) -> List[Any]:
        args: List[Any] = ["RL.WINDOW_PEEK", self.key] + _limit_args(self.policy, (self.limit, self.window_ms))
        if cost != 1:
            args += ["COST", cost]
        return args


# ------------------------------------------------------------ stored policies
# Node-wide, not keys: on a Redis Cluster client every helper runs on every primary (a
# keyless command would otherwise go to one node) and reports the primaries where it failed
# (ClusterPolicyError). The asyncio helpers are in mcaptcha_cache.asyncio.
def _policy_set_args(name: Union[str, bytes], kind: str, a: int, b: int,
                     burst: Optional[int] = None) -> List[Any]:
    args: List[Any] = ["RL.POLICY_SET", name, kind, a, b]
    return args + (["BURST", burst] if burst is not None else [])


def _gcra_policy_args(name: Union[str, bytes], rate: int, period_ms: int,
                      burst: Optional[int] = None) -> List[Any]:
    _check_units("rate", rate)
    check_ms("period_ms", period_ms)
    if burst is not None:
        _check_units("burst", burst)
    return _policy_set_args(name, "GCRA", rate, period_ms, burst)


def _window_policy_args(name: Union[str, bytes], limit: int, window_ms: int) -> List[Any]:
    _check_units("limit", limit)
    check_ms("window_ms", window_ms)
    return _policy_set_args(name, "WINDOW", limit, window_ms)


def _parse_policy(reply: Any) -> Optional[Dict[str, Any]]:
    """``RL.POLICY_GET``'s reply as a dict, or None."""
    if reply is None:
        return None
    kind = to_str(reply[0])
    if kind == "GCRA":
        return {"type": "GCRA", "rate": int(reply[1]), "period_ms": int(reply[2]),
                "burst": int(reply[4]) if len(reply) >= 5 else None}
    return {"type": "WINDOW", "limit": int(reply[1]), "window_ms": int(reply[2])}


def _node_name(node: Any) -> str:
    return str(getattr(node, "name", None) or "%s:%s" % (node.host, node.port))


def _check_every_primary(cmd: str, results: Dict[str, Any],
                         failures: Dict[str, BaseException]) -> Dict[str, Any]:
    """Raise ClusterPolicyError when some primary failed; else the replies by node."""
    if failures:
        raise ClusterPolicyError(
            "%s failed on %s (it succeeded on %s)" % (
                cmd, "; ".join("%s: %s" % (n, e) for n, e in sorted(failures.items())),
                ", ".join(sorted(results)) or "no primary"), failures, results)
    return results


def _run(client: Any, args: List[Any]) -> Dict[str, Any]:
    """Run a policy command: on a cluster client on every primary, else on the server.
    Returns ``{node name: reply}`` (one entry, ``""``, for a standalone client)."""
    if not is_cluster(client):
        try:
            return {"": client.execute_command(*args)}
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e
    results: Dict[str, Any] = {}
    failures: Dict[str, BaseException] = {}
    nodes = client.get_primaries()
    if not nodes:
        raise ClusterPolicyError("%s: the cluster client knows no primary" % (args[0],), {}, {})
    for node in nodes:
        try:
            results[_node_name(node)] = client.execute_command(*args, target_nodes=node)
        except redis.exceptions.RedisError as e:
            failures[_node_name(node)] = map_error(e)
    return _check_every_primary(str(args[0]), results, failures)


def _one_policy(name: Union[str, bytes], replies: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The policy every node answered, or ClusterPolicyError naming the nodes that differ."""
    parsed = {n: _parse_policy(r) for n, r in replies.items()}
    values = list(parsed.values())
    if any(v != values[0] for v in values[1:]):
        raise ClusterPolicyError("policy %r differs between the primaries: %s" % (
            to_str(name), "; ".join("%s: %s" % kv for kv in sorted(parsed.items()))), {}, parsed)
    return values[0] if values else None


def _policy_names(replies: Dict[str, Any]) -> List[str]:
    return sorted({to_str(n) for r in replies.values() for n in r})


def set_gcra_policy(client: Any, name: Union[str, bytes], rate: int, period_ms: int,
                    burst: Optional[int] = None) -> None:
    """Store (or replace) the GCRA policy ``name`` (``RL.POLICY_SET name GCRA rate period_ms
    [BURST burst]``): ``RateLimiter(client, key, policy=name)`` then uses these numbers. On a
    Cluster client: on every primary (:class:`ClusterPolicyError` names those where it failed)."""
    _run(client, _gcra_policy_args(name, rate, period_ms, burst))


def set_window_policy(client: Any, name: Union[str, bytes], limit: int, window_ms: int) -> None:
    """Store (or replace) the WINDOW policy ``name`` (``RL.POLICY_SET name WINDOW limit
    window_ms``), for ``SlidingWindowLimiter(client, key, policy=name)``; every primary of a
    Cluster."""
    _run(client, _window_policy_args(name, limit, window_ms))


def get_policy(client: Any, name: Union[str, bytes]) -> Optional[Dict[str, Any]]:
    """The policy as a dict (``{"type": "GCRA", "rate", "period_ms", "burst"}`` with burst None
    when not given, or ``{"type": "WINDOW", "limit", "window_ms"}``), or None. On a Cluster
    client, every primary is asked; :class:`ClusterPolicyError` when they differ."""
    return _one_policy(name, _run(client, ["RL.POLICY_GET", name]))


def delete_policy(client: Any, name: Union[str, bytes]) -> bool:
    """Remove the policy (from every primary of a Cluster); True if there was one (on any)."""
    return any(bool(r) for r in _run(client, ["RL.POLICY_DEL", name]).values())


def list_policies(client: Any) -> List[str]:
    """The policy names (str, whatever the client's ``decode_responses``), in order; on a
    Cluster client the names stored on any primary."""
    return _policy_names(_run(client, ["RL.POLICY_LIST"]))


def rate_limited(limiter: Any, cost: Union[int, Callable[..., int]] = 1,
                 wait_ms: Optional[int] = 0) -> Callable[[F], F]:
    """Decorator: each call of the function first takes ``cost`` units from ``limiter``
    (waiting up to ``wait_ms`` ms on the server) and raises :class:`RateLimited` (with the
    refused ``.decision``) instead of calling it when refused.

    ``cost`` may be a callable ``cost(*args, **kwargs) -> int`` computed per call. With an
    asyncio limiter (``mcaptcha_cache.asyncio``) the function must be a coroutine function
    and the wrapper is one too.

    ::

        @rate_limited(RateLimiter(r, "api:export", rate=10, period_ms=60_000))
        def export(user): ...
    """
    def _cost(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> int:
        return cost(*args, **kwargs) if callable(cost) else cost

    def deco(fn: F) -> F:
        if getattr(limiter, "is_async", False):
            if not inspect.iscoroutinefunction(fn):
                raise TypeError("an asyncio limiter needs a coroutine function (async def)")

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                d = await limiter.acquire(cost=_cost(args, kwargs), wait_ms=wait_ms)
                if not d.allowed:
                    raise RateLimited(d, limiter.key)
                return await fn(*args, **kwargs)

            async_wrapper.limiter = limiter  # type: ignore[attr-defined]
            return cast(F, async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            d = limiter.acquire(cost=_cost(args, kwargs), wait_ms=wait_ms)
            if not d.allowed:
                raise RateLimited(d, limiter.key)
            return fn(*args, **kwargs)

        wrapper.limiter = limiter  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return deco

"""Rate limiters on ``RL.GCRA`` and ``RL.WINDOW`` (sync), and the :func:`rate_limited`
decorator (sync and asyncio). All times are **milliseconds**."""

import functools
import inspect
import time

import redis.exceptions

from ._common import Decision, WaitBudget, check_ms, check_wait_ms, round_cap_ms, wait_args
from .errors import RateLimited, map_error

__all__ = ["RateLimiter", "SlidingWindowLimiter", "rate_limited"]


def _check_units(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError("%s must be an int >= 0, got %r" % (name, v))
    return v


class _LimiterBase:
    is_async = False

    def _take_args(self, cost, wait):  # pragma: no cover - abstract
        raise NotImplementedError

    def _peek_args(self, cost):  # pragma: no cover - abstract
        raise NotImplementedError

    def _call(self, args):
        try:
            return Decision.from_reply(self.client.execute_command(*args))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    def acquire(self, cost=1, wait_ms=0):
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

    def peek(self, cost=1):
        """What ``acquire(cost)`` would answer now, taking nothing (``*_PEEK``; runs on
        replicas, creates nothing)."""
        _check_units("cost", cost)
        return self._call(self._peek_args(cost))

    def refund(self, units):
        """Give up to ``units`` back (``RL.REFUND``), never below empty; returns the units
        given back. Waiters are woken."""
        try:
            return int(self.client.execute_command("RL.REFUND", self.key, units))
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    def __repr__(self):
        return "<%s %r>" % (type(self).__name__, self.key)


class RateLimiter(_LimiterBase):
    """A GCRA token bucket (``RL.GCRA``): ``rate`` units per ``period_ms`` milliseconds, at
    most ``burst`` at once (default: ``rate``).

    ``RateLimiter(client, key, rate, period_ms, burst=None)``; ``acquire(cost=1, wait_ms=0)``
    returns a :class:`Decision`. The key expires when the bucket is full again, so idle keys
    cost nothing. Errors: :class:`InvalidArgument` (range; cost above what the rate allows),
    :class:`WrongType`."""

    def __init__(self, client, key, rate, period_ms, burst=None):
        self.client = client
        self.key = key
        self.rate = _check_units("rate", rate)
        self.period_ms = check_ms("period_ms", period_ms)
        self.burst = None if burst is None else _check_units("burst", burst)

    def _opts(self, cost):
        opts = []
        if self.burst is not None:
            opts += ["BURST", self.burst]
        if cost != 1:
            opts += ["COST", cost]
        return opts

    def _take_args(self, cost, wait):
        return ["RL.GCRA", self.key, self.rate, self.period_ms] + self._opts(cost) + list(
            wait_args(wait))

    def _peek_args(self, cost):
        return ["RL.GCRA_PEEK", self.key, self.rate, self.period_ms] + self._opts(cost)


class SlidingWindowLimiter(_LimiterBase):
    """An exact sliding window (``RL.WINDOW``): at most ``limit`` units within any
    ``window_ms`` milliseconds. Same methods and :class:`Decision` as :class:`RateLimiter`."""

    def __init__(self, client, key, limit, window_ms):
        self.client = client
        self.key = key
        self.limit = _check_units("limit", limit)
        self.window_ms = check_ms("window_ms", window_ms)

    def _take_args(self, cost, wait):
        args = ["RL.WINDOW", self.key, self.limit, self.window_ms]
        if cost != 1:
            args += ["COST", cost]
        return args + list(wait_args(wait))

    def _peek_args(self, cost):
        args = ["RL.WINDOW_PEEK", self.key, self.limit, self.window_ms]
        if cost != 1:
            args += ["COST", cost]
        return args


def rate_limited(limiter, cost=1, wait_ms=0):
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
    def _cost(args, kwargs):
        return cost(*args, **kwargs) if callable(cost) else cost

    def deco(fn):
        if getattr(limiter, "is_async", False):
            if not inspect.iscoroutinefunction(fn):
                raise TypeError("an asyncio limiter needs a coroutine function (async def)")

            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                d = await limiter.acquire(cost=_cost(args, kwargs), wait_ms=wait_ms)
                if not d.allowed:
                    raise RateLimited(d, limiter.key)
                return await fn(*args, **kwargs)

            async_wrapper.limiter = limiter
            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            d = limiter.acquire(cost=_cost(args, kwargs), wait_ms=wait_ms)
            if not d.allowed:
                raise RateLimited(d, limiter.key)
            return fn(*args, **kwargs)

        wrapper.limiter = limiter
        return wrapper

    return deco

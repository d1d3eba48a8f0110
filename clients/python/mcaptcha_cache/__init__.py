# SPDX-License-Identifier: BSD-3-Clause
"""Python client for the mcaptcha-cache Redis module, on redis-py (sync and asyncio).

::

    import redis
    from mcaptcha_cache import Lock, Semaphore, RateLimiter, Captcha, rate_limited

    r = redis.Redis()
    with Lock(r, "orders:42", lease_ms=2000) as lock:    # waits on the server, no polling
        write(order, fencing_token=lock.token)           # renewed in the background while held

    limiter = RateLimiter(r, "api:user:42", rate=100, period_ms=60_000, burst=20)
    d = limiter.acquire()          # Decision(allowed, remaining, retry_after_ms, reset_after_ms)

    site = Captcha(r, "mysite")
    site.add(levels=[(50, 50), (500, 500)], duration_s=30)
    difficulty = site.visit()

Units: the lock and rate-limit classes take **milliseconds** (``*_ms``), the captcha classes
**seconds** (``duration_s``), as the module's commands do. Errors are the typed exceptions of
:mod:`mcaptcha_cache.errors`. The asyncio classes are in :mod:`mcaptcha_cache.asyncio` (also
exported here as ``AsyncLock``, ``AsyncReadWriteLock``, ``AsyncSemaphore``, ``AsyncRateLimiter``,
``AsyncSlidingWindowLimiter``, ``AsyncCaptcha``).

Drop-ins for other libraries' APIs are in :mod:`mcaptcha_cache.compat` (not imported here):
``compat.redis_py.Lock`` / ``compat.redis_py_asyncio.Lock`` for redis-py's
``r.lock(..., lock_class=...)``, and ``compat.limits`` (a storage for ``limits``,
Flask-Limiter and SlowAPI: ``mcaptcha+redis://host:port``).
"""

from ._common import Challenge, Decision, Holder, LockInfo
from .captcha import Captcha
from .errors import (CaptchaError, ClusterPolicyError, CaptchaExists, CaptchaNotFound, ChallengeExists,
                     ChallengeNotFound, CrossSlot, InvalidArgument, InvalidCaptchaConfig,
                     LockError, LockLost, LockNotAcquired, LockNotOwned, McaptchaCacheError,
                     PermitsMismatch, RateLimited, RateLimitError, ServerError, WrongType)
from .lock import Lock, MultiLock, ReadWriteLock, Semaphore
from .ratelimit import (RateLimiter, SlidingWindowLimiter, delete_policy, get_policy, list_policies,
                        rate_limited, set_gcra_policy, set_window_policy)
from .asyncio import Captcha as AsyncCaptcha
from .asyncio import Lock as AsyncLock
from .asyncio import MultiLock as AsyncMultiLock
from .asyncio import RateLimiter as AsyncRateLimiter
from .asyncio import ReadWriteLock as AsyncReadWriteLock
from .asyncio import Semaphore as AsyncSemaphore
from .asyncio import SlidingWindowLimiter as AsyncSlidingWindowLimiter

__version__ = "0.2.0"

__all__ = [
    "Lock", "MultiLock", "ReadWriteLock", "Semaphore", "RateLimiter", "SlidingWindowLimiter", "Captcha",
    "rate_limited", "set_gcra_policy", "set_window_policy", "get_policy", "delete_policy", "list_policies",
    "AsyncLock", "AsyncMultiLock", "AsyncReadWriteLock", "AsyncSemaphore", "AsyncRateLimiter", "AsyncSlidingWindowLimiter",
    "AsyncCaptcha",
    "Decision", "LockInfo", "Holder", "Challenge",
    "McaptchaCacheError", "ServerError", "InvalidArgument", "WrongType", "CrossSlot",
    "LockError", "LockNotOwned", "LockLost", "LockNotAcquired", "PermitsMismatch",
    "RateLimitError", "RateLimited", "ClusterPolicyError",
    "CaptchaError", "CaptchaNotFound", "CaptchaExists", "ChallengeNotFound", "ChallengeExists",
    "InvalidCaptchaConfig",
]

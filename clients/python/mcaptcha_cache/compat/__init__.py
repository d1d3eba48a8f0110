"""Drop-ins for the APIs Python code already calls, answered by the mcaptcha-cache module.

SPDX-License-Identifier: BSD-3-Clause

- :mod:`mcaptcha_cache.compat.redis_py`: ``Lock``, a drop-in for ``redis.lock.Lock``
  (``r.lock(name, timeout=10, lock_class=Lock)``); :mod:`mcaptcha_cache.compat.redis_py_asyncio`:
  the same for ``redis.asyncio``.
- :mod:`mcaptcha_cache.compat.limits`: a storage for the ``limits`` library (and so for
  Flask-Limiter and SlowAPI) under the URI schemes ``mcaptcha+redis://`` and
  ``mcaptcha+redis+cluster://``, and for ``limits.aio`` the same prefixed ``async+``
  (:mod:`mcaptcha_cache.compat.limits_aio`); importing either module registers them all.

Nothing here is imported by ``import mcaptcha_cache`` (``limits`` is an optional dependency).
"""

"""Request rate limits: per source address, per token, and failed authentications per address.

Fixed one-second windows (one-minute for failed authentications) counted by a
:class:`RateLimiter` from the ``RATE_LIMITERS`` registry:

* ``memory``: counters owned by the service instance (one worker process);
* ``redis``: ``INCR`` + ``EXPIRE`` on shared keys, so several uvicorn workers (or hosts) share one
  budget (settings ``rate_limiter: redis`` and ``redis_url``).

Over a limit the API answers ``429`` with ``Retry-After`` (seconds to the next window). Failed
authentications are counted after the store said no; once an address is over its budget, its
requests are refused with 429 *before* the token is looked up, so guessing tokens costs no store
query. The limits are settings (``0`` turns one off).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from abc import ABC, abstractmethod
from typing import Any

from seedance.core.registry import Registry

RATE_LIMITERS: Registry[type[RateLimiter]] = Registry("rate limiter")
_MAX_KEYS = 100_000


class RateLimiter(ABC):
    """Counts hits per key in fixed windows; built with the settings' options (``redis_url``, ``prefix``)."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    @abstractmethod
    def hit(self, key: str, limit: int, window_s: int) -> float | None:
        """Count one hit; the seconds to wait when ``key`` is now over ``limit`` in this window, else None."""

    @abstractmethod
    def over(self, key: str, limit: int, window_s: int) -> float | None:
        """Like :meth:`hit` without counting (is ``key`` already over its limit?)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


def _retry_after(window: int, window_s: int, now: float) -> float:
    return max(0.001, (window + 1) * window_s - now)


@RATE_LIMITERS.register("memory")
class MemoryRateLimiter(RateLimiter):
    """Counters in this process (one worker)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._counts: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def _count(self, key: str, window_s: int, add: int) -> tuple[int, int, float]:
        now = time.time()
        window = int(now // window_s)
        with self._lock:
            seen_window, n = self._counts.get(key, (window, 0))
            if seen_window != window:
                n = 0
            n += add
            if add:
                if len(self._counts) >= _MAX_KEYS:
                    self._counts.clear()
                self._counts[key] = (window, n)
        return n, window, now

    def hit(self, key: str, limit: int, window_s: int) -> float | None:
        n, window, now = self._count(key, window_s, 1)
        return _retry_after(window, window_s, now) if n > limit else None

    def over(self, key: str, limit: int, window_s: int) -> float | None:
        n, window, now = self._count(key, window_s, 0)
        return _retry_after(window, window_s, now) if n >= limit else None


@RATE_LIMITERS.register("redis")
class RedisRateLimiter(RateLimiter):
    """Counters in Redis, shared by every worker using the same ``redis_url`` and ``prefix``."""

    def __init__(self, *, redis_url: str = "redis://127.0.0.1:6379/0", prefix: str = "seedance:rl:",
                 **_: Any) -> None:
        import redis

        self._redis = redis.Redis.from_url(redis_url, socket_timeout=1.0, socket_connect_timeout=1.0)
        self.prefix = prefix

    def _key(self, key: str, window: int) -> str:
        return f"{self.prefix}{key}:{window}"

    def hit(self, key: str, limit: int, window_s: int) -> float | None:
        now = time.time()
        window = int(now // window_s)
        k = self._key(key, window)
        pipe = self._redis.pipeline(transaction=False)
        pipe.incr(k)
        pipe.expire(k, window_s * 2)
        n = int(pipe.execute()[0])
        return _retry_after(window, window_s, now) if n > limit else None

    def over(self, key: str, limit: int, window_s: int) -> float | None:
        now = time.time()
        window = int(now // window_s)
        raw = self._redis.get(self._key(key, window))
        n = int(raw) if raw is not None else 0
        return _retry_after(window, window_s, now) if n >= limit else None

    def close(self) -> None:
        self._redis.close()


def token_key(header_value: str) -> str:
    """A short key for a presented token (its value never leaves the process)."""
    return hashlib.sha256(header_value.encode("utf-8", "replace")).hexdigest()[:24]


def retry_header(seconds: float) -> str:
    """``Retry-After`` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))

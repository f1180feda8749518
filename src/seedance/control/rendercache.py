"""``RenderCache``: a rendered answer kept for a few seconds and shared by every caller asking the same.

The dashboard's data call reads six store queries and serialises a few hundred values; each open
tab repeats it every 5 s. Kept here for ``ttl_s`` seconds, keyed by what the answer depends on
(the caller's tenant scope, the cluster, the window), five tabs cost one render per ``ttl_s``
instead of five, and concurrent callers of one key wait for one render (single flight) instead
of each rendering it. The answer says how old it is (``Age``; its ``generated_at`` is when it was
read). ``ttl_s = 0`` renders every call. Per process: workers each keep their own.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable


class RenderCache:
    """Rendered bodies by key for ``ttl_s`` seconds, at most ``max_items`` keys (least recently stored evicted).

    Args:
        ttl_s: Seconds a body is served after it was rendered (0: never cached).
        max_items: Keys kept.
        clock: Monotonic seconds (tests pass their own).
    """

    __slots__ = ("_building", "_clock", "_items", "_lock", "_max", "_ttl")

    def __init__(self, ttl_s: float, *, max_items: int = 256,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if ttl_s < 0 or max_items < 1:
            raise ValueError(f"RenderCache: ttl_s must be >= 0 and max_items >= 1 (got {ttl_s}, {max_items})")
        self._ttl = ttl_s
        self._max = max_items
        self._clock = clock
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[bytes, float]] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, render: Callable[[], bytes]) -> tuple[bytes, float]:
        """The body for ``key`` and its age in seconds: the kept one while younger than ``ttl_s``, else
        ``render()``'s (called by one caller at a time per key; an exception is passed on and nothing kept)."""
        if self._ttl <= 0:
            return render(), 0.0
        hit = self._fresh(key)
        if hit is not None:
            return hit
        with self._lock:
            gate = self._building.setdefault(key, threading.Lock())
        with gate:
            hit = self._fresh(key)  # another caller may have rendered it while this one waited
            if hit is not None:
                return hit
            body = render()
            with self._lock:
                self._items[key] = (body, self._clock())
                self._items.move_to_end(key)
                while len(self._items) > self._max:
                    old, _ = self._items.popitem(last=False)
                    self._building.pop(old, None)
        return body, 0.0

    def clear(self) -> None:
        """Forget every kept body."""
        with self._lock:
            self._items.clear()

    def _fresh(self, key: Hashable) -> tuple[bytes, float] | None:
        with self._lock:
            hit = self._items.get(key)
        if hit is None:
            return None
        age = self._clock() - hit[1]
        return (hit[0], age) if age < self._ttl else None

"""A set whose members expire one by one: a Redis sorted set scored by expiry time.

Plain ``EXPIRE`` works on whole keys; a blacklist needs a life per member. The pattern:
``ZADD key <expires_at> <member>``; a member counts while its score is in the future
(``ZSCORE``); ``ZREMRANGEBYSCORE key -inf <now>`` prunes the expired ones (O(log N + M)); the key
itself gets ``EXPIREAT`` at its largest score, so an abandoned set disappears on its own. Adding
runs as one Lua script, so concurrent adds cannot leave the key's expiry below a member's.
"""

from __future__ import annotations

import math
from typing import Any

_ADD = """
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('EXPIREAT', KEYS[1], math.ceil(tonumber(top[2])))
return 1
"""


class ExpiringSet:
    """Members with their own expiry (scores are UNIX seconds of the caller's clock)."""

    def __init__(self, redis: Any, key: str) -> None:
        self.redis = redis
        self.key = key
        self._add = redis.register_script(_ADD)

    def add(self, member: str, expires_at: float) -> None:
        """Add ``member`` (or move its expiry) to ``expires_at``."""
        if not math.isfinite(expires_at):
            raise ValueError("expiry must be a finite time")
        self._add(keys=[self.key], args=[repr(float(expires_at)), member])

    def expires_at(self, member: str, now: float) -> float | None:
        """The member's expiry, or ``None`` when absent or already expired."""
        score = self.redis.zscore(self.key, member)
        return float(score) if score is not None and float(score) > now else None

    def contains_any(self, members: list[str], now: float) -> str | None:
        """The first of ``members`` that is in the set and not expired."""
        if not members:
            return None
        scores = self.redis.zmscore(self.key, members)
        for member, score in zip(members, scores, strict=True):
            if score is not None and float(score) > now:
                return member
        return None

    def prune(self, now: float) -> int:
        """Remove expired members (score <= now); returns how many."""
        return int(self.redis.zremrangebyscore(self.key, "-inf", now))

    def members(self, now: float) -> list[tuple[str, float]]:
        """Live members and expiries, soonest first."""
        return [(str(m), float(s)) for m, s in self.redis.zrangebyscore(self.key, f"({now}", "+inf", withscores=True)]

    def remove(self, *members: str) -> int:
        """Remove members; returns how many were there."""
        return int(self.redis.zrem(self.key, *members)) if members else 0

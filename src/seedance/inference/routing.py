"""Cluster front end: which replica an arriving request joins, and whether it is admitted at all.

Routers (registry ``ROUTERS``; each sees a :class:`RouteQuery`, never simulator ground truth):

* ``shared``: one queue per pool that every replica of the pool pulls from at its iteration
  boundaries (late binding; Triton instance groups work this way).
* ``least-loaded``: the replica with the fewest outstanding requests (queued plus running;
  Vidur's "LOR" global scheduler), the usual load balancer in front of vLLM replicas.
* ``prefix-aware``: SGLang router's cache-aware policy (sgl-router ``CacheAwareConfig``; defaults
  ``cache_threshold=0.5``, ``balance_abs_threshold=32``, ``balance_rel_threshold=1.0001``): if the
  load is imbalanced (``max - min > balance_abs`` *and* ``max > balance_rel * min``) take the
  least-loaded replica; otherwise, if the longest cached prefix of the request on some replica
  covers more than ``cache_threshold`` of its prompt, take that replica (ties: least loaded);
  otherwise the least-loaded one. (SGLang's fallback is the replica with the smallest radix tree;
  here it is the least-loaded one.) The cached prefix per replica is read from the replica's own
  cache, as a router fed by KV-cache events does (llm-d's precise prefix-cache scorer), not from
  an approximate tree of past routing.
* SLO classes: ``prefix-aware`` takes per-class ``balance_abs`` thresholds (option
  ``tight_balance_abs``, class 0 = the tight class): a latency-critical request follows its cache
  only onto a replica whose load is within that many requests of the least loaded.

:class:`Admission` decides early, before a request queues: from each replica's *measured* prefill
rate (prefill tokens per ms of the iterations that prefilled, an exponential average of what the
replica has run) and its queued uncached prompt tokens it predicts the request's TTFT on the chosen
replica and, failing that, on every other replica of the pool; when none keeps
``slack * ttft_target`` of the request's class, the request is rejected at once with the reason
(``"predicted TTFT 12345 ms > 10000 ms on every replica"``) instead of queueing to miss its SLO.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from seedance.core.errors import InputError
from seedance.core.registry import Registry


@dataclass(slots=True)
class RouteQuery:
    """What a router knows about one arriving request and the pool's replicas (filled by the engine).

    Attributes:
        request: Request id.
        prompt: Prompt tokens.
        slo_class: The request's SLO class (0: tightest).
        outstanding: Queued plus running requests per replica.
        matched: Prompt tokens cached on each replica (longest cached prefix; zeros without caches).
        queued_tokens: Uncached prompt tokens waiting per replica.
    """

    request: int = 0
    prompt: int = 0
    slo_class: int = 0
    outstanding: list[int] = field(default_factory=list)
    matched: list[int] = field(default_factory=list)
    queued_tokens: list[int] = field(default_factory=list)


class Router(ABC):
    """Chooses a replica for an arriving request."""

    name: ClassVar[str]
    shared: ClassVar[bool] = False
    uses_prefix: ClassVar[bool] = False
    options: ClassVar[dict[str, Any]] = {}

    def __init__(self, **opts: Any) -> None:
        self.opts = dict(opts)

    @abstractmethod
    def pick(self, replicas: Sequence[int], q: RouteQuery) -> int:
        """Called once per arrival with the pool's replicas; returns one of them."""


ROUTERS: Registry[type[Router]] = Registry("router")


def make_router(name: str, options: dict[str, Any] | None = None) -> Router:
    """Build the router registered as ``name`` with validated options."""
    cls = ROUTERS.get(name)
    opts = dict(cls.options)
    for key, value in (options or {}).items():
        if key not in cls.options:
            raise InputError(f"{cls.name}: unknown option {key!r}; valid options: {', '.join(cls.options) or 'none'}",
                             source="--router-option", field=key)
        try:
            opts[key] = type(cls.options[key])(value)
        except (TypeError, ValueError):
            raise InputError(f"{cls.name}: option {key} must be a {type(cls.options[key]).__name__}, got {value!r}",
                             source="--router-option", field=key) from None
    return cls(**opts)


def _least(outstanding: Sequence[int]) -> int:
    best = 0
    for k in range(1, len(outstanding)):
        if outstanding[k] < outstanding[best]:
            best = k
    return best


@ROUTERS.register("shared", aliases=("pull",))
class SharedQueue(Router):
    """One queue per pool; replicas pull at their iteration boundaries."""

    name = "shared"
    shared = True

    def pick(self, replicas: Sequence[int], q: RouteQuery) -> int:
        return replicas[0]


@ROUTERS.register("least-loaded", aliases=("lor", "least-outstanding"))
class LeastLoaded(Router):
    """Fewest outstanding requests; ties go to the lowest replica index."""

    name = "least-loaded"

    def pick(self, replicas: Sequence[int], q: RouteQuery) -> int:
        return replicas[_least(q.outstanding)]


@ROUTERS.register("prefix-aware", aliases=("cache-aware", "sglang"))
class PrefixAware(Router):
    """SGLang-style cache-aware routing balanced against load, with a tighter balance for class 0."""

    name = "prefix-aware"
    uses_prefix = True
    options = {"cache_threshold": 0.5, "balance_abs": 32, "balance_rel": 1.0001, "tight_balance_abs": 32}

    def pick(self, replicas: Sequence[int], q: RouteQuery) -> int:
        load = q.outstanding
        lo = _least(load)
        mx, mn = max(load), load[lo]
        if mx - mn > int(self.opts["balance_abs"]) and mx > float(self.opts["balance_rel"]) * mn:
            return replicas[lo]
        best = -1
        for k in range(len(replicas)):
            if q.matched[k] > 0 and (best < 0 or q.matched[k] > q.matched[best]
                                     or (q.matched[k] == q.matched[best] and load[k] < load[best])):
                best = k
        if best < 0 or q.matched[best] <= float(self.opts["cache_threshold"]) * q.prompt:
            return replicas[lo]
        if q.slo_class == 0 and load[best] - mn > int(self.opts["tight_balance_abs"]):
            return replicas[lo]
        return replicas[best]


@dataclass(slots=True)
class Admission:
    """Early admission control (see the module note).

    Attributes:
        ttft_ms: TTFT target per SLO class (class 0 first).
        slack: Reject when the predicted TTFT exceeds ``slack * target`` on every replica.
        alpha: Weight of the newest measurement in the prefill-rate average.
    """

    ttft_ms: tuple[float, ...] = (10_000.0,)
    slack: float = 1.0
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if not self.ttft_ms or any(not (t > 0) for t in self.ttft_ms):
            raise InputError("admission: every class needs a TTFT target > 0", source="--admission")
        if not (self.slack > 0 and math.isfinite(self.slack)):
            raise InputError(f"admission: slack must be > 0, got {self.slack}", source="--admission-slack")

    def target(self, slo_class: int) -> float:
        """The TTFT target of a class (the last class's for classes beyond the list)."""
        return self.ttft_ms[min(max(slo_class, 0), len(self.ttft_ms) - 1)]

    def update_rate(self, rate: float, tokens: int, ms: float) -> float:
        """The new prefill-rate average (tokens/ms) after an iteration that prefilled ``tokens`` in ``ms``."""
        if tokens <= 0 or ms <= 0:
            return rate
        x = tokens / ms
        return x if rate <= 0 else (1.0 - self.alpha) * rate + self.alpha * x

    def predicted_ttft_ms(self, queued_tokens: int, own_tokens: int, rate: float) -> float:
        """Queued plus own uncached tokens at the measured rate (0 before any measurement)."""
        return (queued_tokens + own_tokens) / rate if rate > 0 else 0.0

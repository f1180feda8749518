"""Availability accounting per pod and per SLA tier: attainment, distribution, error budget, burn rate.

NOTE(seedance): the definitions, stated once.
  * A pod requests its lifetime, creation → deletion. Its availability is the time it ran inside
    that window divided by the window; waiting (before the first start, and after every
    preemption until it runs again) counts against it. A pod with a zero-length window is
    available (1) when it ran at all, else 0. Availability is clipped to [0, 1].
  * Attainment of a tier = share of its pods whose availability ≥ the tier's target.
  * Error budget of a tier = (1 − target) × the pod-seconds its pods requested. Consumption =
    pod-seconds requested but not run (downtime). Burn rate over a time bin = (downtime in the
    bin / pod-seconds requested in the bin) / (1 − target): 1 spends the budget exactly at the
    allowed pace, 14.4 over one hour is the Google SRE workbook's paging threshold (2% of a
    30-day budget in one hour).
  Inputs are columnar: one row per run segment (pod, start, end).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Burn rate that pages over a 1-hour window (Google SRE workbook, "Alerting on SLOs").
PAGE_BURN_RATE = 14.4


def pod_availability(
    creation: F64, deletion: F64, seg_pod: I64, seg_start: F64, seg_end: F64
) -> tuple[F64, F64]:
    """Per pod ``(ran seconds, availability)`` from its run segments.

    >>> import numpy as np
    >>> ran, av = pod_availability(np.array([0.0, 0.0]), np.array([100.0, 50.0]),
    ...     np.array([0, 0]), np.array([10.0, 60.0]), np.array([50.0, 100.0]))
    >>> ran.tolist(), av.tolist()
    ([80.0, 0.0], [0.8, 0.0])
    """
    n = len(creation)
    ran = np.bincount(seg_pod, weights=seg_end - seg_start, minlength=n).astype(np.float64)
    life = deletion - creation
    has_run = np.bincount(seg_pod, minlength=n) > 0
    safe = np.where(life > 0, life, 1.0)
    av = np.where(life > 0, ran / safe, has_run.astype(np.float64))
    return ran, np.clip(av, 0.0, 1.0)


def _step_integral(starts: F64, ends: F64, edges: F64) -> F64:
    """∫ (number of open intervals) dt from ``edges[0]`` to each edge (intervals [start, end))."""
    if starts.size == 0:
        return np.zeros_like(edges)
    t = np.concatenate([starts, ends])
    d = np.concatenate([np.ones_like(starts), -np.ones_like(ends)])
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    count = np.cumsum(d)
    area = np.concatenate([[0.0], np.cumsum(count[:-1] * np.diff(t))])
    at_edges: F64 = np.interp(edges, t, area, left=0.0, right=float(area[-1]))
    out: F64 = at_edges - at_edges[0]
    return out


@dataclass(frozen=True, slots=True)
class ErrorBudget:
    """Error budget of one tier over a replay.

    Attributes:
        budget_pod_s: (1 − target) × requested pod-seconds.
        consumed_pod_s: Requested pod-seconds not run.
        bin_s: Width of the burn-rate bins.
        t_s: Start of each bin.
        burn_rate: Burn rate per bin (0 where nothing was requested).
        page_alerts: Hours whose burn rate reached ``PAGE_BURN_RATE``.
        exhausted_at_s: First time the cumulative consumption exceeded the whole budget (or ``None``).
    """

    budget_pod_s: float
    consumed_pod_s: float
    bin_s: float
    t_s: list[float] = field(default_factory=list)
    burn_rate: list[float] = field(default_factory=list)
    page_alerts: int = 0
    exhausted_at_s: float | None = None

    @property
    def remaining_pct(self) -> float:
        """Budget left, in % of the budget (negative when overspent)."""
        if self.budget_pod_s <= 0:
            return 100.0 if self.consumed_pod_s <= 0 else -100.0
        return 100.0 * (1.0 - self.consumed_pod_s / self.budget_pod_s)

    @property
    def max_burn_rate(self) -> float:
        """Largest burn rate over the bins."""
        return max(self.burn_rate, default=0.0)

    def to_json(self, *, series: bool = True) -> dict[str, Any]:
        """JSON form (``series=False`` leaves out the per-bin arrays)."""
        out: dict[str, Any] = {
            "budget_pod_s": round(self.budget_pod_s, 3),
            "consumed_pod_s": round(self.consumed_pod_s, 3),
            "remaining_pct": round(self.remaining_pct, 3),
            "max_burn_rate": round(self.max_burn_rate, 3),
            "page_alerts_1h": self.page_alerts,
            "exhausted_at_s": self.exhausted_at_s,
            "bin_s": self.bin_s,
        }
        if series:
            out["t_s"] = self.t_s
            out["burn_rate"] = self.burn_rate
        return out


@dataclass(frozen=True, slots=True)
class TierAvailability:
    """Availability of one tier's pods.

    Attributes:
        tier: Tier name.
        target: Target availability (0..1).
        pods: Pods of the tier.
        met: Pods at or above the target.
        mean, p1, p5, p50, minimum: Availability distribution.
        error_budget: The tier's error budget.
    """

    tier: str
    target: float
    pods: int
    met: int
    mean: float
    p1: float
    p5: float
    p50: float
    minimum: float
    error_budget: ErrorBudget

    @property
    def attainment_pct(self) -> float:
        """Share of pods at or above the target, in % (100 without pods)."""
        return 100.0 * self.met / self.pods if self.pods else 100.0

    def to_json(self, *, series: bool = True) -> dict[str, Any]:
        """JSON form: the issue's keys first, then the distribution and the budget."""
        return {
            "target_pct": round(100.0 * self.target, 4),
            "attainment_pct": round(self.attainment_pct, 4),
            "availability_mean": round(self.mean, 6),
            "pods": self.pods,
            "pods_missed": self.pods - self.met,
            "availability_p1": round(self.p1, 6),
            "availability_p5": round(self.p5, 6),
            "availability_p50": round(self.p50, 6),
            "availability_min": round(self.minimum, 6),
            "error_budget": self.error_budget.to_json(series=series),
        }


def tier_availability(
    creation: F64,
    deletion: F64,
    tier_of: I64,
    seg_pod: I64,
    seg_start: F64,
    seg_end: F64,
    tier_config: TierConfig = DEFAULT_TIER_CONFIG,
    *,
    bin_s: float = 86400.0,
) -> dict[str, TierAvailability]:
    """Per tier availability report (see the module docstring).

    Args:
        creation, deletion: Per pod requested window.
        tier_of: Per pod tier index (position in ``tier_config.names()``).
        seg_pod, seg_start, seg_end: Run segments.
        tier_config: Tier targets.
        bin_s: Width of the burn-rate bins.
    """
    _, av = pod_availability(creation, deletion, seg_pod, seg_start, seg_end)
    t0 = float(creation.min()) if creation.size else 0.0
    t1 = float(deletion.max()) if deletion.size else 0.0
    nb = max(1, int(np.ceil((t1 - t0) / bin_s)))
    edges = t0 + bin_s * np.arange(nb + 1, dtype=np.float64)
    hours = t0 + 3600.0 * np.arange(max(1, int(np.ceil((t1 - t0) / 3600.0))) + 1, dtype=np.float64)
    out: dict[str, TierAvailability] = {}
    seg_tier = tier_of[seg_pod] if seg_pod.size else np.zeros(0, dtype=np.int64)
    for i, name in enumerate(tier_config.names()):
        target = tier_config.tiers[name].target_availability
        m = tier_of == i
        a = av[m]
        sm = seg_tier == i
        budget = _budget(
            creation[m], deletion[m], seg_start[sm], seg_end[sm], 1.0 - target, edges, hours, bin_s
        )
        out[name] = TierAvailability(
            tier=name,
            target=target,
            pods=int(m.sum()),
            met=int((a >= target - 1e-12).sum()),
            mean=float(a.mean()) if a.size else 1.0,
            p1=float(np.percentile(a, 1)) if a.size else 1.0,
            p5=float(np.percentile(a, 5)) if a.size else 1.0,
            p50=float(np.percentile(a, 50)) if a.size else 1.0,
            minimum=float(a.min()) if a.size else 1.0,
            error_budget=budget,
        )
    return out


def _budget(
    c: F64, d: F64, s: F64, e: F64, allowed: float, edges: F64, hours: F64, bin_s: float
) -> ErrorBudget:
    req = _step_integral(c, d, edges)
    run = _step_integral(s, e, edges)
    down = req - run
    requested = float(req[-1])
    consumed = float(max(0.0, down[-1]))
    budget = allowed * requested
    rb, db = np.diff(req), np.diff(down)
    burn = np.where(rb > 0, db / np.where(rb > 0, rb, 1.0), 0.0) / allowed
    req_h = _step_integral(c, d, hours)
    rh, dh = np.diff(req_h), np.diff(req_h - _step_integral(s, e, hours))
    burn_h = np.where(rh > 0, dh / np.where(rh > 0, rh, 1.0), 0.0) / allowed
    over = np.flatnonzero(down > budget + 1e-9) if budget > 0 else np.flatnonzero(down > 1e-9)
    exhausted = None
    if over.size:
        j = int(over[0])  # the crossing lies in (edges[j-1], edges[j]]: report the bin end
        exhausted = round(float(edges[j]), 1)
    return ErrorBudget(
        budget_pod_s=budget,
        consumed_pod_s=consumed,
        bin_s=bin_s,
        t_s=[round(float(x), 1) for x in edges[:-1]],
        burn_rate=[round(float(x), 4) for x in burn],
        page_alerts=int((burn_h >= PAGE_BURN_RATE).sum()),
        exhausted_at_s=exhausted,
    )


def attainment_overall(per_tier: Mapping[str, TierAvailability]) -> float:
    """Share of all pods (every tier) at or above their tier's target, in %."""
    pods = sum(t.pods for t in per_tier.values())
    met = sum(t.met for t in per_tier.values())
    return 100.0 * met / pods if pods else 100.0

"""The live deferral decision: given a job, the live signals and the time, when should it start?

A pure function, no I/O, for a scheduling-profile stage of the live control plane to call once
per pending flexible job (the live loop's wiring is pending, see docs/costmodel.md). It applies
the same cost model the evaluation measures: :func:`~seedance.costmodel.score.cost_score` of the
job against the signals (published day-ahead prices, carbon forecast), within the tier's and the
deadline's limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seedance.costmodel.score import JobFeatures, Signals, Weights, cost_score
from seedance.signals.series import HOUR, iso
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig


@dataclass(frozen=True, slots=True)
class DeferralDecision:
    """Where a job should run and why.

    Attributes:
        start, end: The chosen run window (epoch seconds).
        defer: Whether that window starts later than the current hour.
        reason: One line for users and logs.
        saving: Score saved against starting now (currency of the signals).
        cost_now, cost_window: Energy cost now / in the window; ``co2_now_kg``, ``co2_window_kg`` likewise.
    """

    start: float
    end: float
    defer: bool
    reason: str
    saving: float
    cost_now: float
    cost_window: float
    co2_now_kg: float
    co2_window_kg: float
    currency: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"start": iso(self.start), "end": iso(self.end), "defer": self.defer, "reason": self.reason,
                "saving": self.saving, "cost_now": self.cost_now, "cost_window": self.cost_window,
                "co2_now_kg": self.co2_now_kg, "co2_window_kg": self.co2_window_kg, "currency": self.currency}


def decide_deferral(job: JobFeatures, signals: Signals, now: float, weights: Weights, *,
                    tiers: TierConfig = DEFAULT_TIER_CONFIG) -> DeferralDecision:
    """The start window for ``job`` at ``now`` (see the module docstring).

    Runs now when the job is not flexible, its tier may not wait, its deadline leaves no room, or
    the best window begins within the current hour; otherwise starts at the best window.
    """
    cs = cost_score(job, signals, weights, now, tiers=tiers)
    d = job.duration_s
    if not job.flexible:
        why = "not flexible: runs now"
    elif not tiers.tiers.get(job.tier) or not tiers.tiers[job.tier].deferrable:
        why = f"tier {job.tier!r} is not deferrable: runs now"
    elif not cs.deferrable:
        why = "no room before the deadline: runs now"
    else:
        why = ""
    start = cs.best_start if not why else now
    defer = bool(not why and start >= (now // HOUR + 1) * HOUR)
    if not why:
        if defer:
            why = (f"deferred {(start - now) / HOUR:.1f} h to {iso(start)}: energy {cs.cost_now:.2f} -> "
                   f"{cs.cost_best:.2f} {cs.currency}, CO2 {cs.co2_now_kg:.1f} -> {cs.co2_best_kg:.1f} kg "
                   f"({signals.label})")
        else:
            start = cs.best_start
            why = f"the best window starts within this hour ({signals.label}): runs now"
    return DeferralDecision(start=start, end=start + d, defer=defer, reason=why, saving=cs.regret if defer else 0.0,
                            cost_now=cs.cost_now, cost_window=cs.cost_best if defer else cs.cost_now,
                            co2_now_kg=cs.co2_now_kg, co2_window_kg=cs.co2_best_kg if defer else cs.co2_now_kg,
                            currency=cs.currency)


class LiveDeferral:
    """The deferral stage a live scheduling profile calls: ``stage(job, now) -> DeferralDecision``.

    Holds a :class:`~seedance.signals.live.LiveSignalProvider` and the cost policy; fetches one
    snapshot per clock hour (``refresh_s``) and reuses it for every job decided in that hour.

    Args:
        provider: The live signal provider.
        policy: The cost policy (weights, currency, horizon).
        refresh_s: Seconds a snapshot is reused.
        tiers: SLA tiers.
    """

    name = "deferral"

    def __init__(self, provider: Any, policy: Any, *, refresh_s: float = 3600.0,
                 tiers: TierConfig = DEFAULT_TIER_CONFIG) -> None:
        self.provider = provider
        self.policy = policy
        self.refresh_s = refresh_s
        self.tiers = tiers
        self._snap: Any = None
        self._at = -1.0

    def signals(self, now: float) -> Signals:
        """The snapshot in force at ``now`` (fetched when the last one is older than ``refresh_s``)."""
        if self._snap is None or now // self.refresh_s != self._at // self.refresh_s:
            self._snap = self.provider.snapshot(now, self.policy.spec.forecast.horizon_hours)
            self._at = now
        return self._snap.signals  # type: ignore[no-any-return]

    def __call__(self, job: JobFeatures, now: float) -> DeferralDecision:
        sig = self.signals(now)
        return decide_deferral(job, sig, now, self.policy.weights(sig.currency), tiers=self.tiers)

"""A year of training work from a pod trace: the jobs the cost policies are evaluated on.

Every GPU pod of the trace becomes a job with its own duration (``deletion - creation``) and GPU
share (``num_gpu * gpu_milli / 1000``). Arrivals in the Alibaba trace are far from uniform: 99% of
its GPU pods are created in the last ~34 of its ~149 days, the first 115 days hold a few dozen
long-running pods. The trace is therefore *folded* onto its busy part: the period is the span
from the ``busy_quantile`` of creation times to the last creation, rounded up to whole weeks (so
weekdays stay aligned), every pod keeps its creation time modulo that period (earlier pods fold
into it, none is lost), the period's start is laid on ``start`` (UTC) and it repeats until
``end``. Jobs that would still run at ``end`` are dropped (they cannot be costed). A
documented share of the jobs is marked *flexible*: drawn with a seeded permutation among the
jobs whose tier (from the pod's QoS class) is ``deferrable``; a flexible job must finish within
``slack_hours`` of the time it would finish if started on arrival (and before ``end``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.costmodel.energy import EnergyModel
from seedance.costmodel.score import latest_starts
from seedance.signals.series import HOUR
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig
from seedance.traces.schema import PodTrace

DAY = 86400
WEEK = 7 * DAY
FloatA = NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class Workload:
    """Columnar jobs (one row per job, sorted by arrival).

    Attributes:
        arrival: Submission times (epoch seconds, UTC).
        duration: Run times in seconds (> 0).
        gpus: GPUs held (fractions for shared GPUs).
        power_kw: Facility power while running.
        tier: Tier names.
        flexible: Whether the job may be deferred (tier permitting; see the module docstring).
        deadline: Latest finish (epoch seconds); ``arrival + duration`` for inflexible jobs.
        pod: Row of the pod in the trace; ``copy``: which repetition of the trace.
        gpu_model: GPU model of each job (catalog name) used by the energy model.
        info: How the workload was built (shares, drops, period), for reports.
    """

    arrival: FloatA
    duration: FloatA
    gpus: FloatA
    power_kw: FloatA
    tier: NDArray[np.object_]
    flexible: NDArray[np.bool_]
    deadline: FloatA
    pod: NDArray[np.int64]
    copy: NDArray[np.int64]
    gpu_model: NDArray[np.object_]
    info: dict[str, object]

    def __len__(self) -> int:
        return len(self.arrival)

    @property
    def energy_kwh(self) -> FloatA:
        """Energy of each job's run."""
        return np.asarray(self.power_kw * self.duration / HOUR, dtype=np.float64)

    def latest_start(self, max_delay_h: float) -> FloatA:
        """Latest start of each job (its arrival when inflexible)."""
        lat = latest_starts(self.arrival, self.arrival, self.deadline, self.duration, max_delay_h)
        return np.where(self.flexible, lat, self.arrival)


def build_workload(trace: PodTrace, *, start: float, end: float, flexible_share: float = 0.3,
                   slack_hours: float = 24.0, energy: EnergyModel | None = None, gpu_model: str = "G2",
                   tiers: TierConfig = DEFAULT_TIER_CONFIG, seed: int = 0, busy_quantile: float = 0.01) -> Workload:
    """Lay ``trace`` onto ``[start, end)`` and mark a share of it flexible.

    Args:
        trace: A pod trace with creation and deletion times.
        start, end: UTC span (epoch seconds) to fill.
        flexible_share: Share of all GPU jobs marked flexible (drawn among deferrable-tier jobs;
            capped at their share, the effective value is in ``info``).
        slack_hours: A flexible job's deadline is its immediate finish plus this slack.
        energy: Energy model (default: :class:`EnergyModel`).
        gpu_model: GPU model of pods without a GPU-type constraint (the first allowed type is
            used otherwise).
        tiers: Tier configuration (QoS → tier, which tiers are deferrable).
        seed: Seed of the draw of flexible jobs.
        busy_quantile: Creation-time quantile where the folded period starts (0 = the first pod).

    Raises:
        InputError: a trace without times, bad shares, an empty span.
    """
    if not trace.has_times:
        raise InputError("the pod trace has no creation/deletion times (a multigpu file?)", source=trace.source)
    if not 0.0 <= flexible_share <= 1.0:
        raise InputError(f"must be within 0..1, got {flexible_share}", source="--flexible-share")
    if slack_hours < 0:
        raise InputError(f"must be >= 0, got {slack_hours}", source="--slack-hours")
    if end <= start:
        raise InputError("the evaluation span is empty", source="--start-date")
    energy = energy or EnergyModel()
    g = trace.num_gpu * trace.gpu_milli / 1000.0
    dur = trace.deletion - trace.creation
    keep = np.flatnonzero((g > 0) & (dur > 0))
    if not len(keep):
        raise InputError("the pod trace has no GPU pods with a positive run time", source=trace.source)
    if not 0.0 <= busy_quantile < 1.0:
        raise InputError(f"busy_quantile must be within [0, 1), got {busy_quantile}", source="busy_quantile")
    created = trace.creation[keep]
    t0 = float(np.quantile(created, busy_quantile))
    span = float(created.max()) - t0
    period = max(WEEK, WEEK * float(np.ceil((span + 1) / WEEK)))
    offset = np.mod(created - t0, period)
    copies = int(np.ceil((end - start) / period))
    arr = np.concatenate([start + c * period + offset for c in range(copies)])
    pod = np.tile(keep, copies)
    copy = np.repeat(np.arange(copies, dtype=np.int64), len(keep))
    d = dur[pod]
    inside = (arr < end) & (arr + d <= end)
    dropped = int(((arr < end) & (arr + d > end)).sum())
    arr, pod, copy, d = arr[inside], pod[inside], copy[inside], d[inside]
    order = np.lexsort((pod, arr))
    arr, pod, copy, d = arr[order], pod[order], copy[order], d[order]
    tier = np.array([tiers.tier_of(str(q)) for q in trace.qos[pod]], dtype=object)
    deferrable_tiers = {name for name, spec in tiers.tiers.items() if spec.deferrable}
    eligible = np.flatnonzero(np.isin(tier, list(deferrable_tiers)) & (slack_hours > 0))
    want = int(round(flexible_share * len(arr)))
    rng = np.random.default_rng(seed)
    chosen = rng.permutation(eligible)[: min(want, len(eligible))]
    flexible = np.zeros(len(arr), dtype=bool)
    flexible[chosen] = True
    deadline = np.where(flexible, np.minimum(arr + d + slack_hours * HOUR, end), arr + d)
    models = _models(trace, pod, gpu_model)
    power = np.array([energy.job_power_kw(m, 1.0) for m in models]) * g[pod]
    info: dict[str, object] = {
        "trace": trace.source, "gpu_pods": len(keep), "copies": copies, "period_days": period / DAY,
        "folded_pods": int((created < t0).sum()), "busy_quantile": busy_quantile,
        "jobs": len(arr), "dropped_past_end": dropped, "flexible_share_requested": flexible_share,
        "flexible_share_effective": float(flexible.mean()) if len(arr) else 0.0,
        "deferrable_tiers": sorted(deferrable_tiers), "slack_hours": slack_hours, "seed": seed,
        "gpu_model": gpu_model, "gpu_models": sorted(set(models)),
    }
    return Workload(arrival=arr, duration=d, gpus=g[pod], power_kw=power, tier=tier, flexible=flexible,
                    deadline=deadline, pod=pod.astype(np.int64), copy=copy,
                    gpu_model=np.array(models, dtype=object), info=info)


def _models(trace: PodTrace, pod: NDArray[np.int64], default: str) -> list[str]:
    EnergyModel.model(default)  # a bad default fails here, with the valid names
    out: list[str] = []
    memo: dict[str, str] = {}
    for spec in trace.gpu_spec[pod].tolist():
        key = str(spec)
        if key not in memo:
            allowed = trace.gpu_types.get(key, ())
            memo[key] = allowed[0] if allowed else default
        out.append(memo[key])
    return out

"""``cost_score``: the expected cost of a job, stored on it at submission and refined at bind.

The whitepaper (§1) gives every new TrainingJob a ``cost_score`` that takes part in global
reordering. Scorers are plug-ins registered by name in :data:`COST_SCORERS`; the control plane
uses the one named by ``ControlSettings.cost_scorer``:

* ``gpu-hours`` (default): ``cost_score = GPU-hours × $/GPU-hour`` (GPU rental), where GPU-hours =
  ``gpus × duration_hours`` (``DEFAULT_DURATION_H`` when the job gives none) and the price is the
  catalog list price of the cheapest acceptable GPU model present in the cluster at submission
  (any acceptable model when the cluster has none yet), then of the model actually bound at bind
  time. CPU-only jobs score 0. US dollars. Needs no data.
* ``costmodel``: :func:`seedance.costmodel.score.cost_score` (energy cost + priced carbon + delay
  penalty over the job's run window, in the region's currency) with the default cost policy's
  weights and the region's hourly price and carbon signals (``ControlSettings.cost_region``).
  The signals are historical (2023), so "now" is the wall clock when they cover it, else the
  latest time they cover (the cost model's own convention in ``costmodel estimate``); the basis
  line names the instant used.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from seedance.core.catalog import CATALOG, GpuCatalog
from seedance.core.registry import Registry
from seedance.core.resources import MILLI_PER_GPU

DEFAULT_DURATION_H = 1.0


@dataclass(frozen=True, slots=True)
class CostInput:
    """What a scorer may know about a job.

    Attributes:
        num_gpu: GPU count (1 for a fraction).
        gpu_milli: Milli-GPU per GPU.
        gpu_types: Acceptable GPU models (canonical names; empty: any).
        cluster_models: GPU models present in the job's cluster.
        duration_hours: Expected run time, if given.
        tier: SLA tier name.
        flexibility_hours: How long the start may be deferred.
    """

    num_gpu: int
    gpu_milli: int
    gpu_types: tuple[str, ...]
    cluster_models: tuple[str, ...]
    duration_hours: float | None
    tier: str
    flexibility_hours: float = 0.0
    deadline_in_s: float | None = None


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """A score and one line saying how it was computed."""

    score: float
    basis: str


class CostScorer(ABC):
    """Computes ``cost_score``; stateless and cheap (called on every submission)."""

    name: ClassVar[str]

    @classmethod
    def from_settings(cls, settings: Any) -> CostScorer:
        """Build the scorer for a service (settings: ``ControlSettings``)."""
        return cls()

    @abstractmethod
    def estimate(self, job: CostInput) -> CostEstimate:
        """Called once per submitted job, before it is stored."""

    @abstractmethod
    def at_bind(self, job: CostInput, gpu_model: str | None) -> CostEstimate:
        """Called once per bound job with the model of the GPUs it got."""


COST_SCORERS: Registry[type[CostScorer]] = Registry("cost scorer")


@COST_SCORERS.register("gpu-hours", aliases=("fallback",))
class GpuHoursPrice(CostScorer):
    """Fallback: GPU-hours × catalog $/GPU-hour (see the module docstring)."""

    name = "gpu-hours"

    def __init__(self, catalog: GpuCatalog = CATALOG) -> None:
        self.catalog = catalog

    def _gpu_hours(self, job: CostInput) -> tuple[float, float]:
        hours = job.duration_hours if job.duration_hours is not None else DEFAULT_DURATION_H
        return job.num_gpu * job.gpu_milli / MILLI_PER_GPU * hours, hours

    def _price(self, models: Sequence[str]) -> tuple[float, str]:
        best = min(models, key=lambda m: self.catalog.resolve(m).price_usd_per_hour)
        return self.catalog.resolve(best).price_usd_per_hour, self.catalog.resolve(best).name

    def estimate(self, job: CostInput) -> CostEstimate:
        gpu_hours, hours = self._gpu_hours(job)
        if gpu_hours == 0:
            return CostEstimate(0.0, "cpu-only: 0")
        allowed = set(job.gpu_types) if job.gpu_types else None
        present = [m for m in job.cluster_models if allowed is None or m in allowed]
        candidates = present or list(job.gpu_types) or list(self.catalog)
        price, model = self._price(candidates)
        return CostEstimate(round(gpu_hours * price, 6), _basis(gpu_hours, hours, job, price, model))

    def at_bind(self, job: CostInput, gpu_model: str | None) -> CostEstimate:
        if gpu_model is None:
            return self.estimate(job)
        gpu_hours, hours = self._gpu_hours(job)
        if gpu_hours == 0:
            return CostEstimate(0.0, "cpu-only: 0")
        price, model = self._price([gpu_model])
        return CostEstimate(round(gpu_hours * price, 6), _basis(gpu_hours, hours, job, price, model))


def _basis(gpu_hours: float, hours: float, job: CostInput, price: float, model: str) -> str:
    dur = f"{hours:g}h" + ("" if job.duration_hours is not None else " (default)")
    return f"gpu-hours: {gpu_hours:g} GPU-h ({dur}) x ${price:g}/GPU-h ({model})"


@COST_SCORERS.register("costmodel", aliases=("electricity-pricing",))
class CostModelScorer(CostScorer):
    """The cost model's ``cost_score`` (energy + carbon + delay), see the module docstring.

    Args:
        region: Region of the price and carbon signals (e.g. ``US-CAL-CISO``, ``DE-LU``).
        policy: A ``seedance.costmodel.policy.CostPolicy`` (default: its defaults).
    """

    name = "costmodel"

    def __init__(self, region: str = "US-CAL-CISO", policy: Any = None) -> None:
        from seedance.costmodel.evaluation import actual_signals, policy_signals
        from seedance.costmodel.policy import CostPolicy

        self.policy = policy if policy is not None else CostPolicy()
        rs = policy_signals(self.policy, region)
        self.region = rs.region
        self.currency = rs.currency
        self.signals = actual_signals(rs, int(rs.start), int(rs.end))
        self.weights = self.policy.weights(rs.currency)
        self._models = GpuHoursPrice()

    @classmethod
    def from_settings(cls, settings: Any) -> CostScorer:
        return cls(region=settings.cost_region)

    def _score(self, job: CostInput, model: str) -> CostEstimate:
        from seedance.costmodel.score import JobFeatures, cost_score
        from seedance.signals.series import HOUR, iso

        if job.num_gpu == 0:
            return CostEstimate(0.0, "cpu-only: 0")
        duration = (job.duration_hours if job.duration_hours is not None else DEFAULT_DURATION_H) * HOUR
        horizon = duration + self.weights.max_delay_h * HOUR
        wall = time.time()
        if self.signals.start <= wall and wall + horizon <= self.signals.end:
            now, which = float(wall), "now"
        else:
            now, which = float((self.signals.end - horizon) // HOUR * HOUR), "latest time the signals cover"
        deadline = now + job.deadline_in_s if job.deadline_in_s is not None and job.deadline_in_s > 0 else None
        feats = JobFeatures(duration_s=duration, gpu_model=model, gpus=job.num_gpu * job.gpu_milli / MILLI_PER_GPU,
                            deadline=deadline, tier=job.tier, flexible=job.flexibility_hours > 0, submitted=now)
        cs = cost_score(feats, self.signals, self.weights, now)
        basis = (f"costmodel {self.region}: energy+carbon+delay {cs.score:.4g} {cs.currency} at {iso(now)} "
                 f"({which}); regret {cs.regret:.3g}")
        return CostEstimate(round(cs.score, 6), basis)

    def estimate(self, job: CostInput) -> CostEstimate:
        allowed = set(job.gpu_types) if job.gpu_types else None
        present = [m for m in job.cluster_models if allowed is None or m in allowed]
        candidates = present or list(job.gpu_types) or ["A100-80GB"]
        _, model = self._models._price(candidates)
        return self._score(job, model)

    def at_bind(self, job: CostInput, gpu_model: str | None) -> CostEstimate:
        return self._score(job, gpu_model) if gpu_model is not None else self.estimate(job)


def make_cost_scorer(name: str, settings: Any = None) -> CostScorer:
    """Build the scorer registered as ``name`` (configured from ``settings`` when given)."""
    cls = COST_SCORERS.get(name)
    return cls.from_settings(settings) if settings is not None else cls()

"""Stage-shaped plug-ins for a scheduling profile: a compatibility filter, a throughput-per-$ scorer, a fallback.

Interface (what a profile calls; every stage is a pure function of the job and the fleet):

* ``FilterStage``: ``mask(job, fleet) -> bool[n_nodes]`` (vectorised over nodes) and
  ``reason(job, node) -> str | None`` (``None``: feasible; else why not, for explanations).
* ``ScoreStage``: ``score(job, fleet) -> float[n_nodes]``, higher is better; ``nan`` = no opinion
  (the profile then asks the fallback).
* ``FallbackStage``: ``score(job, fleet) -> float[n_nodes]`` used when the scorer has no opinion.

A job here is a :class:`HeteroJob`: its type (a row of the throughput matrix, or none), its GPU count
and its CUDA build. Stages are registered by name in :data:`HETERO_STAGES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
from numpy.typing import NDArray

from seedance.core.registry import Registry
from seedance.hetero.fleet import Fleet, FleetNode
from seedance.hetero.throughput import ThroughputMatrix
from seedance.topology.compat import CudaBuild, check


@dataclass(frozen=True, slots=True)
class HeteroJob:
    """What the stages know of a job (never its true remaining work)."""

    job_id: int
    job_type: str | None
    gpus: int
    build: CudaBuild


class FilterStage(Protocol):
    """A feasibility stage."""

    name: ClassVar[str]

    def mask(self, job: HeteroJob, fleet: Fleet) -> NDArray[np.bool_]: ...

    def reason(self, job: HeteroJob, node: FleetNode) -> str | None: ...


class ScoreStage(Protocol):
    """A scoring stage."""

    name: ClassVar[str]

    def score(self, job: HeteroJob, fleet: Fleet) -> NDArray[np.float64]: ...


HETERO_STAGES: Registry[type] = Registry("hetero stage")


@HETERO_STAGES.register("cuda-compat")
class CompatFilter:
    """Pre-flight check: the job's CUDA build runs on the node's GPU under the node's driver."""

    name: ClassVar[str] = "cuda-compat"

    def reason(self, job: HeteroJob, node: FleetNode) -> str | None:
        """``None`` if compatible, else the reason (driver, architecture)."""
        v = check(job.build, node.gpu.compute_capability, node.driver)
        return None if v.ok else v.reason

    def mask(self, job: HeteroJob, fleet: Fleet) -> NDArray[np.bool_]:
        """Compatible nodes (one check per distinct GPU type and driver)."""
        memo: dict[tuple[tuple[int, int], tuple[int, ...]], bool] = {}
        out = np.zeros(len(fleet.nodes), dtype=np.bool_)
        for i, n in enumerate(fleet.nodes):
            key = (n.gpu.compute_capability, n.driver)
            if key not in memo:
                memo[key] = check(job.build, *key).ok
            out[i] = memo[key]
        return out


@HETERO_STAGES.register("throughput-per-dollar")
class ThroughputPerDollar:
    """Effective steps/s per $ (throughput of the job type on the node's GPU, power cap applied, over the
    price of the GPUs it takes); ``nan`` where the matrix has no figure."""

    name: ClassVar[str] = "throughput-per-dollar"

    def __init__(self, matrix: ThroughputMatrix, *, objective: str = "per-dollar") -> None:
        self.matrix = matrix
        self.objective = objective

    def score(self, job: HeteroJob, fleet: Fleet) -> NDArray[np.float64]:
        out = np.full(len(fleet.nodes), np.nan)
        if job.job_type is None or job.job_type not in self.matrix.job_types or job.gpus not in self.matrix.scales:
            return out
        j, s = self.matrix.job_index(job.job_type), self.matrix.scale_index(job.gpus)
        for i, n in enumerate(fleet.nodes):
            col = matrix_column(self.matrix, n.gpu.name)
            if col is None:
                continue
            rate = float(self.matrix.steps_per_s[j, s, col]) * n.power_factor
            out[i] = rate if self.objective == "throughput" else rate / (n.gpu.price_usd_per_hour * job.gpus)
        return out


@HETERO_STAGES.register("flops-per-dollar")
class FlopsPerDollarFallback:
    """Fallback for job types without a profile: dense TFLOPS per $ of the node's GPU."""

    name: ClassVar[str] = "flops-per-dollar"

    def score(self, job: HeteroJob, fleet: Fleet) -> NDArray[np.float64]:
        return np.array([n.gpu.dense_tflops * n.power_factor / n.gpu.price_usd_per_hour for n in fleet.nodes])


def matrix_column(matrix: ThroughputMatrix, gpu_name: str) -> int | None:
    """Column of fleet GPU type ``gpu_name`` in ``matrix`` (Gavel names mapped), ``None`` if absent."""
    from seedance.hetero.fleet import GAVEL_NAMES

    by_fleet = {v: k for k, v in GAVEL_NAMES.items()}
    key = by_fleet.get(gpu_name, gpu_name).lower()
    for i, g in enumerate(matrix.gpu_types):
        if g.lower() == key:
            return i
    return None


def rank_nodes(job: HeteroJob, fleet: Fleet, filt: CompatFilter, scorer: ThroughputPerDollar,
               fallback: FlopsPerDollarFallback) -> list[tuple[int, float, str]]:
    """Feasible nodes best first as ``(node, score, stage)``: nodes the scorer rates first (by its score),
    then the ones it has no figure for, ranked by the fallback."""
    ok = np.flatnonzero(filt.mask(job, fleet))
    s = scorer.score(job, fleet)
    f = fallback.score(job, fleet)
    rows = [(int(i), float(s[i]), scorer.name) if not np.isnan(s[i]) else (int(i), float(f[i]), fallback.name)
            for i in ok]
    return sorted(rows, key=lambda r: (r[2] != scorer.name, -r[1], r[0]))

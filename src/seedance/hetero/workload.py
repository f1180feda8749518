"""The Gavel workload mix with arrivals from the Alibaba GPU trace.

Following Gavel's trace generator (OSDI'20, section 7.1 and ``scheduler/utils.py`` of its repository):
a job's type is drawn uniformly from the throughput matrix's job types, its run time on a V100 is
``10**x`` minutes with ``x ~ U(1.5, 3)`` (probability 0.8) or ``U(3, 4)`` (0.2), and its length in
steps is that run time times the type's V100 throughput. Jobs take one GPU (Gavel's
"continuous-single" setting).

Arrival times are not Poisson here but the creation times of the GPU pods of the Alibaba GPU trace
(``openb_pod_list_default.csv``): consecutive inter-arrival gaps from a seed-chosen offset, rescaled so
their mean is ``3600 / jobs_per_hour`` seconds (the trace's burstiness is kept, its rate is set).

A job's *true* speed on each GPU type is the matrix figure times a per-job factor (log-normal,
sigma 0.1: run-to-run and input variation); policies only see the matrix (no oracle).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.hetero.throughput import ThroughputMatrix


@dataclass(frozen=True, slots=True, eq=False)
class Workload:
    """Columnar jobs: arrival (s), job-type index, total steps, true steps/s per GPU type."""

    arrival: NDArray[np.float64]
    job_type: NDArray[np.int64]
    steps: NDArray[np.float64]
    true_rate: NDArray[np.float64]
    matrix: ThroughputMatrix

    def __len__(self) -> int:
        return len(self.arrival)


def alibaba_gaps(pods: Path) -> NDArray[np.float64]:
    """Inter-arrival gaps (s) of the GPU pods of an Alibaba pod list, in creation order."""
    from seedance.traces.alibaba import load_pods

    trace = load_pods(pods)
    t = np.sort(trace.creation[(trace.num_gpu > 0) & ~np.isnan(trace.creation)])
    gaps = np.diff(t)
    if len(gaps) < 2 or gaps.sum() <= 0:
        raise InputError("the pod list has too few GPU pods with creation times for arrivals", source=str(pods))
    return gaps.astype(np.float64)


def gavel_mix(matrix: ThroughputMatrix, gaps: NDArray[np.float64], *, jobs: int, jobs_per_hour: float,
              seed: int, noise: float = 0.1, reference: str = "v100") -> Workload:
    """``jobs`` single-GPU jobs of the Gavel mix arriving with the trace's gaps at ``jobs_per_hour``."""
    if jobs < 1:
        raise InputError("must be >= 1", field="jobs")
    if not jobs_per_hour > 0:
        raise InputError("must be > 0", field="jobs_per_hour")
    rng = np.random.default_rng(seed)
    scale = matrix.scale_index(1)
    ref = matrix.gpu_index(reference)
    usable = np.flatnonzero(~np.isnan(matrix.steps_per_s[:, scale, :]).any(axis=1))
    jt = rng.choice(usable, size=jobs)
    long = rng.random(jobs) >= 0.8
    x = np.where(long, rng.uniform(3.0, 4.0, jobs), rng.uniform(1.5, 3.0, jobs))
    run_s = 60.0 * 10.0**x
    rates = matrix.steps_per_s[jt, scale, :]
    steps = run_s * rates[:, ref]
    start = int(rng.integers(0, max(1, len(gaps) - jobs)))
    g = np.resize(gaps[start:start + jobs - 1], max(jobs - 1, 1))[: jobs - 1]
    if len(g) and g.sum() <= 0:
        g = np.ones_like(g)
    g = g * (3600.0 / jobs_per_hour) / max(float(g.mean()), 1e-9) if len(g) else g
    arrival = np.concatenate([[0.0], np.cumsum(g)])
    factor = rng.lognormal(0.0, noise, jobs)[:, None]
    return Workload(arrival, jt.astype(np.int64), steps, rates * factor, matrix)

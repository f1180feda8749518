"""Interference between pods that share one GPU (MPS / time-slicing), applied to replay segments.

NOTE(seedance): what tiers exist to prevent, as a model over the run segments of a replay.
  * Two shares on the same GPU (same node, same GPU index, both < 1000 milli, overlapping in
    time) slow each other down. Whole GPUs and MIG slices (nodes labelled ``gpu.mode=mig``: MIG
    partitions SMs, L2 and memory bandwidth in hardware) never interfere.
  * While a segment shares its GPU with partners it progresses at ``1 / slowdown`` of its
    isolated speed, ``slowdown ≥ 1`` from the model. Its *effective* run time is
    ``Σ Δt / slowdown``; a pod slowed by ``s`` for ``Δt`` delivers ``Δt / s`` of its requested
    service. The replay's windows are fixed (a pod leaves at its deletion time), so the stretched
    remainder of its work falls past its deadline and counts against its availability, exactly
    as waiting does. The scheduler never sees any of this (no oracle): the model is applied to
    the segments after the replay, by the accounting.
  * ``gavel-pair``: each pod gets a job type (seeded, uniform over Gavel's 26 single-GPU job
    types; the trace does not say what its pods run). The slowdown of job ``a`` beside ``b`` is
    Gavel's measured isolated throughput of ``a`` divided by its throughput when sharing the GPU
    with ``b`` (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for Deep
    Learning Workloads", OSDI '20; ``../shared/data/gavel-throughputs``). Pairs Gavel marks
    infeasible (``[0, 0]``: they do not fit together) take the median of the job's feasible pairs.
    The GPU's model picks Gavel's worker type (P100 → p100, K80 → k80, any other → v100, the newest
    Gavel measured). With three or more pods on a GPU the slowdown is the worst pair (``max``, a
    lower bound of the true contention) or ``additive`` (``1 + Σ (s_ab − 1)``).
  * ``mps-llm``: every co-located pod runs at 0.925 of its isolated speed (slowdown 1/0.925), the
    output-throughput loss measured for two vLLM processes (Qwen3-4B-FP8) sharing an A100-80GB
    through MPS (Pebble, "NVIDIA MPS vs dedicated GPU allocation for LLM inference", case study).
    A mild inference-serving sensitivity next to Gavel's training pairs.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from seedance.core.cluster import ClusterSpec
from seedance.core.errors import InputError
from seedance.core.registry import Registry

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

GAVEL_FILE = "gavel-throughputs/simulation_throughputs.json"
#: Gavel worker type for a catalog GPU model; any other model uses ``DEFAULT_WORKER``.
GAVEL_WORKER = {"P100": "p100", "K80": "k80"}
DEFAULT_WORKER = "v100"
MIG_LABEL, MIG_MODE = "gpu.mode", "mig"
MILLI = 1000


class InterferenceOptions(BaseModel):
    """Typed options of an interference model.

    Attributes:
        seed: Seed of the job-type draw (``gavel-pair``).
        composition: Slowdown with two or more partners: the worst pair or the sum of the pairs' excess.
        data: Gavel's throughput file (default: the shared copy).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    seed: int = 0
    composition: Literal["max", "additive"] = "max"
    data: Path | None = Field(default=None, description="Gavel simulation_throughputs.json")


class InterferenceModel(ABC):
    """Slowdown of a pod beside its partners on one GPU. Register with ``@INTERFERENCE_MODELS.register``."""

    name: ClassVar[str]
    source: ClassVar[str]

    def __init__(self, options: InterferenceOptions | None = None) -> None:
        self.options = options or InterferenceOptions()

    def prepare(self, n_pods: int) -> None:  # noqa: B027 - optional hook
        """Called once per replay with the number of pods (draw per-pod attributes here)."""

    @abstractmethod
    def pair(self, worker: str, pod: int, other: int) -> float:
        """Slowdown (≥ 1) of ``pod`` while it shares a GPU of Gavel worker type ``worker`` with ``other``."""

    def slowdown(self, worker: str, pod: int, partners: list[int]) -> float:
        """Slowdown of ``pod`` beside every pod in ``partners`` (1 without partners)."""
        if not partners:
            return 1.0
        s = [self.pair(worker, pod, o) for o in partners]
        if self.options.composition == "additive":
            return 1.0 + sum(x - 1.0 for x in s)
        return max(s)


INTERFERENCE_MODELS: Registry[type[InterferenceModel]] = Registry("interference model")


@INTERFERENCE_MODELS.register("mps-llm", aliases=("mps",))
class MpsLlm(InterferenceModel):
    """Every pair slows by 1/0.925 (two vLLM processes under MPS on one A100-80GB)."""

    name = "mps-llm"
    source = "Pebble case study: NVIDIA MPS vs dedicated GPU allocation for LLM inference (-7.5% throughput)"
    SPEED = 0.925

    def pair(self, worker: str, pod: int, other: int) -> float:
        return 1.0 / self.SPEED


@dataclass(frozen=True, slots=True)
class GavelPairs:
    """Gavel's single-GPU job types and their pairwise slowdowns per worker type.

    Attributes:
        jobs: Job type names (e.g. ``ResNet-50 (batch size 64)``).
        slowdown: Worker type → matrix ``[a, b]`` = isolated / co-located throughput of ``a`` beside ``b``.
        infeasible: Worker type → count of pairs Gavel marks infeasible (filled by the row median).
    """

    jobs: tuple[str, ...]
    slowdown: dict[str, F64]
    infeasible: dict[str, int]

    @classmethod
    def load(cls, path: Path) -> GavelPairs:
        """Parse Gavel's ``simulation_throughputs.json`` (errors name the file and the field)."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read Gavel throughputs: {exc}", source=str(path)) from exc
        if not isinstance(raw, dict):
            raise InputError("expected an object of worker types", source=str(path))
        jobs: tuple[str, ...] | None = None
        slow: dict[str, F64] = {}
        bad: dict[str, int] = {}
        for worker, table in raw.items():
            if worker.endswith("_unconsolidated"):
                continue
            keys = sorted(k for k in table if k.endswith(", 1)"))
            if jobs is None:
                jobs = tuple(keys)
            elif tuple(keys) != jobs:
                raise InputError("worker types list different single-GPU jobs", source=str(path), field=worker)
            m, n_bad = _matrix(table, keys, str(path), worker)
            slow[worker], bad[worker] = m, n_bad
        if not jobs:
            raise InputError("no single-GPU job types found", source=str(path))
        names = tuple(_job_name(k) for k in jobs)
        return cls(names, slow, bad)


def _job_name(key: str) -> str:
    return key.split("'")[1] if "'" in key else key


def _matrix(table: dict[str, Any], keys: list[str], src: str, worker: str) -> tuple[F64, int]:
    n = len(keys)
    m = np.full((n, n), np.nan)
    for i, a in enumerate(keys):
        row = table[a]
        iso = row.get("null")
        if not isinstance(iso, (int, float)) or iso <= 0:
            raise InputError("isolated throughput must be a positive number", source=src, field=f"{worker}.{a}.null")
        for j, b in enumerate(keys):
            pair = row.get(b)
            if pair is None:
                continue
            if not (isinstance(pair, list) and len(pair) == 2):
                raise InputError("a pair must be [this job, other job]", source=src, field=f"{worker}.{a}.{b}")
            if pair[0] > 0:
                m[i, j] = max(1.0, float(iso) / float(pair[0]))
    infeasible = int(np.isnan(m).sum())
    for i in range(n):
        ok = m[i][~np.isnan(m[i])]
        m[i][np.isnan(m[i])] = float(np.median(ok)) if ok.size else 1.0
    return m, infeasible


@INTERFERENCE_MODELS.register("gavel-pair", aliases=("gavel",))
class GavelPair(InterferenceModel):
    """Measured pairwise slowdowns of Gavel's job types, one seeded job type per pod."""

    name = "gavel-pair"
    source = "Gavel (Narayanan et al., OSDI '20), scheduler/simulation_throughputs.json, space-sharing pairs"

    def __init__(self, options: InterferenceOptions | None = None, pairs: GavelPairs | None = None) -> None:
        super().__init__(options)
        if pairs is None:
            from seedance.traces.paths import data_file

            pairs = GavelPairs.load(self.options.data or data_file(GAVEL_FILE))
        self.pairs = pairs
        self.job_of: I64 = np.zeros(0, dtype=np.int64)

    def prepare(self, n_pods: int) -> None:
        rng = np.random.default_rng(self.options.seed)
        self.job_of = rng.integers(0, len(self.pairs.jobs), size=n_pods).astype(np.int64)

    def pair(self, worker: str, pod: int, other: int) -> float:
        m = self.pairs.slowdown[worker]
        return float(m[self.job_of[pod], self.job_of[other]])


def make_interference(name: str, options: InterferenceOptions | None = None) -> InterferenceModel:
    """The registered model called ``name`` (unknown names list the valid ones)."""
    return INTERFERENCE_MODELS.get(name)(options)


@dataclass(frozen=True, slots=True)
class Interference:
    """Effect of a model on the segments of one replay.

    Attributes:
        effective_s: Per segment, its run time at isolated speed (≤ its wall-clock run time).
        slowed_s: Per segment, wall-clock time it shared its GPU with at least one partner.
        lost_s: Per segment, wall-clock run time minus effective run time.
    """

    effective_s: F64
    slowed_s: F64
    lost_s: F64

    def summary(self, req_milli: I64, model: str) -> dict[str, Any]:
        """JSON summary: slowed segments, hours slowed, GPU-hours of requested work lost to interference."""
        slowed = self.slowed_s > 0
        wall = float(self.slowed_s.sum())
        lost = float(self.lost_s.sum())
        return {
            "model": model,
            "slowed_segments": int(slowed.sum()),
            "slowed_hours": round(wall / 3600.0, 3),
            "mean_slowdown_while_shared": round(wall / (wall - lost), 4) if wall > lost else 1.0,
            "lost_gpu_hours": round(float((req_milli * self.lost_s).sum()) / MILLI / 3600.0, 4),
        }


def effective_runtimes(
    spec: ClusterSpec,
    model: InterferenceModel,
    *,
    n_pods: int,
    pod: I64,
    start: F64,
    end: F64,
    node: I64,
    alloc_milli: I64,
    gpu_mask: I64,
) -> Interference:
    """Effective run time of every segment under ``model`` (see the module docstring)."""
    model.prepare(n_pods)
    dur = np.maximum(end - start, 0.0)
    eff = dur.copy()
    slowed = np.zeros_like(dur)
    share = (alloc_milli > 0) & (alloc_milli < MILLI) & (dur > 0)
    mig = np.array([n.labels.get(MIG_LABEL) == MIG_MODE for n in spec.nodes], dtype=np.bool_)
    if len(node):
        share &= ~mig[node]
    idx = np.flatnonzero(share)
    if idx.size == 0:
        return Interference(eff, slowed, dur - eff)
    workers = [_worker(n.gpu_model) for n in spec.nodes]
    order = np.lexsort((start[idx], gpu_mask[idx], node[idx]))
    idx = idx[order]
    keys = np.stack([node[idx], gpu_mask[idx]], axis=1)
    cut = np.flatnonzero(np.any(keys[1:] != keys[:-1], axis=1)) + 1
    for group in np.split(idx, cut):
        if group.size < 2:
            continue
        worker = workers[int(node[group[0]])]
        _sweep(model, worker, group, pod, start, end, eff, slowed)
    return Interference(eff, slowed, dur - eff)


def _worker(gpu_model: str | None) -> str:
    if gpu_model is None:
        return DEFAULT_WORKER
    return GAVEL_WORKER.get(gpu_model.upper(), DEFAULT_WORKER)


def _sweep(
    model: InterferenceModel, worker: str, group: I64, pod: I64, start: F64, end: F64, eff: F64, slowed: F64
) -> None:
    """Walk the start/end events of one GPU's share segments; rescale the time shared with partners."""
    events = sorted([(float(start[s]), 1, int(s)) for s in group] + [(float(end[s]), 0, int(s)) for s in group])
    active: list[int] = []
    t_prev = events[0][0]
    for t, kind, s in events:
        dt = t - t_prev
        if dt > 0 and len(active) > 1:
            for a in active:
                partners = [int(pod[b]) for b in active if b != a]
                f = model.slowdown(worker, int(pod[a]), partners)
                eff[a] -= dt - dt / f
                slowed[a] += dt
        t_prev = t
        if kind == 1:
            active.append(s)
        else:
            active.remove(s)

"""The inflation experiment over slice pools: the cost of MIG isolation vs free fractional sharing.

NOTE(seedance): the arrival stream, node ranks, policies, failure rule and bucketing are exactly
those of :func:`seedance.sim.inflation.run_inflation` (same ``build_stream``, same seed); only the
scheduler differs: the profile (``build_profile``) gets the MIG stage over the pools of
``mig_map``. With ``slices="free"`` (no MIG pool) every decision and every reported number equals
``run_inflation``'s (tested). With ``slices="mig"`` the MIG pools accept shares only as legal MIG
instances, so two allocation figures are kept per event:

* **requested** — Σ ``gpu_milli × num_gpu`` of the placed pods: the GPU work actually asked for
  and served. ``unallocated_pct_at_100`` uses this basis in both modes, so
  ``mig − free`` is the cost of isolation (rounding shares up to profiles, and profiles that
  cannot be placed around the instances already there).
* **booked** — milli the cluster state reserves (a 2g instance books 285 for a 250 request);
  reported as ``booked_unallocated_pct_at_100``.
Fragmentation (``frag_pct``) is the FGD measure on booked milli; it does not know about MIG
placement rules and is reported for reference only in MIG mode.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from seedance.core.cluster import ClusterSpec
from seedance.core.decision import Decision
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest, SliceBackend
from seedance.profile import build_profile, profile_of_policy
from seedance.profile.config import SlicesConfig
from seedance.scheduling.tasktypes import TaskTypes
from seedance.sim.experiment import sweep
from seedance.sim.inflation import InflationRun, inflation_record, prepare_inflation, run_stream, trace_stem
from seedance.sim.metrics import bucket_by_arrival
from seedance.slicing.placement import DEFAULT_MIG_MAP
from seedance.traces.schema import PodTrace

SLICE_MODES = ("free", "mig")


@dataclass(frozen=True, slots=True)
class SlicedRun:
    """One inflation run over slice pools.

    Attributes:
        slices: ``"free"`` or ``"mig"``.
        mig_map: Node GPU model → MIG GPU model used for the MIG pools (empty for ``free``).
        run: The run's record; its allocation and unallocated figures are on the requested basis.
        booked_alloc_pct: Allocation % per arrived-% column on the booked basis.
        booked_unallocated_pct_at_100: ``100 −`` booked allocation at 100% arrived.
        mig_instances: MIG instances created, by profile.
        shares_placed: Fractional pods placed (any pool).
        shares_on_mig: Fractional pods placed as MIG instances.
        booked_waste_milli: Booked minus requested milli at the end of the run.
    """

    slices: str
    mig_map: Mapping[str, str]
    run: InflationRun
    booked_alloc_pct: list[float | None]
    booked_unallocated_pct_at_100: float | None
    mig_instances: Mapping[str, int] = field(default_factory=dict)
    shares_placed: int = 0
    shares_on_mig: int = 0
    booked_waste_milli: int = 0

    def to_json(self) -> dict[str, object]:
        """The record of ``seedancectl simulate --slices ... -o json``."""
        out = self.run.to_json()
        out.update(
            {
                "slices": self.slices,
                "mig_map": dict(self.mig_map),
                "booked_alloc_pct": self.booked_alloc_pct,
                "booked_unallocated_pct_at_100": self.booked_unallocated_pct_at_100,
                "mig_instances": dict(self.mig_instances),
                "shares_placed": self.shares_placed,
                "shares_on_mig": self.shares_on_mig,
                "booked_waste_milli": self.booked_waste_milli,
            }
        )
        return out


def run_sliced_inflation(
    spec: ClusterSpec,
    trace: PodTrace,
    policy: str,
    seed: int,
    *,
    slices: str = "mig",
    mig_map: Mapping[str, str] | None = None,
    native: bool = True,
    ratio: float = 1.3,
    arrived_max: int | None = None,
    task_types: TaskTypes | None = None,
    trace_name: str | None = None,
) -> SlicedRun:
    """One inflation run of ``policy`` with ``seed`` where MIG pools take only legal MIG slices.

    Args:
        spec: The cluster.
        trace: The pods (any order; sorted by name first, as in ``run_inflation``).
        policy: Registered placement policy name.
        seed: Seed of the shuffle, resampling and node ranks (same stream as ``run_inflation``).
        slices: ``"mig"`` (MIG pools per ``mig_map``) or ``"free"`` (no MIG pool: the baseline).
        mig_map: Node GPU model → MIG GPU model (default ``G2 → A100-80GB``, an assumption).
        native: Also treat nodes of MIG-capable catalog models as MIG pools (``"mig"`` only).
        ratio: Submit pods until arrived GPU reaches ``ratio`` × capacity.
        arrived_max: Last arrived-% column (default ``round(100 * ratio)``).
        task_types: Target workload for FGD and the fragmentation metric (default: the trace's).
        trace_name: Name in results (default: the trace file's stem).
    """
    if slices not in SLICE_MODES:
        raise InputError(f"unknown slice mode {slices!r}; valid: {', '.join(SLICE_MODES)}", source="--slices")
    t0 = time.perf_counter()
    setup = prepare_inflation(spec, trace, seed, ratio, task_types)
    trace, state = setup.trace, setup.state
    pools = dict(DEFAULT_MIG_MAP if mig_map is None else mig_map) if slices == "mig" else {}
    mode = SlicesConfig(mode="mig", mig_map=pools, native=native) if slices == "mig" else SlicesConfig()
    cfg = profile_of_policy(policy, slices=mode)
    prof = build_profile(cfg, state, seed=seed, task_types=setup.types)
    c = {"shares": 0, "shares_mig": 0}
    instances: dict[str, int] = {}
    mig_value = SliceBackend.MIG.value
    req_milli = np.zeros(len(setup.stream.pods), dtype=np.int64)

    def on_bind(i: int, req: ResourceRequest, d: Decision) -> None:
        req_milli[i] = req.total_gpu_milli
        if req.is_sharing:
            c["shares"] += 1
        info = d.explanation.get("slice")
        if info is not None and info["backend"] == mig_value:
            c["shares_mig"] += int(req.is_sharing)
            instances[info["profile"]] = instances.get(info["profile"], 0) + 1

    res = run_stream(setup, prof, spec, on_bind)
    arrived, used_booked, frag_milli = res.arrived, res.used, res.frag_milli
    used_req = np.cumsum(req_milli)
    requested = int(used_req[-1]) if used_req.size else 0
    top = int(round(ratio * 100)) if arrived_max is None else arrived_max
    run = inflation_record(
        policy=policy,
        trace=trace_name or trace_stem(trace.source),
        seed=seed,
        arrived=arrived,
        used=used_req,
        frag_milli=frag_milli,
        total_gpus=spec.total_gpus,
        top=top,
        placed=res.placed,
        failed=res.failed,
        wall_s=time.perf_counter() - t0,
        final_alloc_pct=round(100.0 * requested / state.capacity_gpu_milli, 2),
    )
    _, booked, _ = bucket_by_arrival(arrived, used_booked, frag_milli, spec.total_gpus, top)
    b100 = booked[100] if top >= 100 else None
    return SlicedRun(
        slices=slices,
        mig_map=dict(pools),
        run=run,
        booked_alloc_pct=booked,
        booked_unallocated_pct_at_100=None if b100 is None else round(100.0 - b100, 2),
        mig_instances=dict(sorted(instances.items())),
        shares_placed=c["shares"],
        shares_on_mig=c["shares_mig"],
        booked_waste_milli=state.used_gpu_milli - requested,
    )


# ---------------------------------------------------------------------------- sweeps


@dataclass(frozen=True, slots=True)
class SlicedRunSpec:
    """One run of a sliced sweep (picklable: paths, not loaded data)."""

    nodes: str
    pods: str
    policy: str
    seed: int
    slices: str
    mig_map: tuple[tuple[str, str], ...] = ()
    ratio: float = 1.3
    arrived_max: int | None = None


def execute_sliced(run: SlicedRunSpec) -> SlicedRun:
    """Run one sliced experiment in this process (files are re-read, ~0.1 s)."""
    from seedance.traces.alibaba import load_nodes, load_pods

    return run_sliced_inflation(
        load_nodes(run.nodes),
        load_pods(run.pods),
        run.policy,
        run.seed,
        slices=run.slices,
        mig_map=dict(run.mig_map),
        ratio=run.ratio,
        arrived_max=run.arrived_max,
        trace_name=Path(run.pods).stem.removeprefix("openb_pod_list_"),
    )


def sweep_sliced(
    runs: Sequence[SlicedRunSpec],
    *,
    workers: int = 1,
    progress: Callable[[SlicedRun], None] | None = None,
) -> list[SlicedRun]:
    """Execute ``runs`` (results in the order of ``runs``, independent of ``workers``)."""
    return sweep(runs, workers=workers, progress=progress, execute=execute_sliced)


@dataclass(frozen=True, slots=True)
class IsolationCost:
    """Free sharing vs MIG for one (trace, policy), over the seeds both modes ran.

    Attributes:
        trace, policy: What was run.
        seeds: Seeds present in both modes.
        free_unallocated: Mean unallocated GPU % at 100% arrived, free sharing.
        mig_unallocated: Same under MIG pools (requested basis).
        cost_pp: Mean over seeds of (MIG − free), percentage points.
        cost_sd: Standard deviation of the per-seed differences.
        mig_booked_unallocated: Mean booked-basis unallocated % under MIG.
        free_wall_s, mig_wall_s: Mean wall time per run.
        mig_instances: Mean MIG instances per run, by profile.
    """

    trace: str
    policy: str
    seeds: tuple[int, ...]
    free_unallocated: float
    mig_unallocated: float
    cost_pp: float
    cost_sd: float | None
    mig_booked_unallocated: float
    free_wall_s: float
    mig_wall_s: float
    mig_instances: Mapping[str, float]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "trace": self.trace,
            "policy": self.policy,
            "seeds": list(self.seeds),
            "free_unallocated_pct_at_100": self.free_unallocated,
            "mig_unallocated_pct_at_100": self.mig_unallocated,
            "isolation_cost_pp": self.cost_pp,
            "isolation_cost_sd": self.cost_sd,
            "mig_booked_unallocated_pct_at_100": self.mig_booked_unallocated,
            "free_wall_s_mean": round(self.free_wall_s, 3),
            "mig_wall_s_mean": round(self.mig_wall_s, 3),
            "mig_instances_mean": dict(self.mig_instances),
        }


def isolation_costs(runs: Sequence[SlicedRun]) -> list[IsolationCost]:
    """Pair free and MIG runs by (trace, policy, seed) and average per (trace, policy)."""
    free: dict[tuple[str, str, int], SlicedRun] = {}
    mig: dict[tuple[str, str, int], SlicedRun] = {}
    order: list[tuple[str, str]] = []
    for r in runs:
        key = (r.run.trace, r.run.policy, r.run.seed)
        (free if r.slices == "free" else mig)[key] = r
        if (r.run.trace, r.run.policy) not in order:
            order.append((r.run.trace, r.run.policy))
    out: list[IsolationCost] = []
    for trace, policy in order:
        seeds = sorted(s for (t, p, s) in free if (t, p) == (trace, policy) and (t, p, s) in mig)
        pairs = [(free[(trace, policy, s)], mig[(trace, policy, s)]) for s in seeds]
        pairs = [(f, m) for f, m in pairs if f.run.unallocated_pct_at_100 is not None]
        if not pairs:
            continue
        fu = [float(f.run.unallocated_pct_at_100 or 0.0) for f, _ in pairs]
        mu = [float(m.run.unallocated_pct_at_100 or 0.0) for _, m in pairs]
        diffs = [b - a for a, b in zip(fu, mu, strict=True)]
        profiles = sorted({p for _, m in pairs for p in m.mig_instances})
        out.append(
            IsolationCost(
                trace=trace,
                policy=policy,
                seeds=tuple(f.run.seed for f, _ in pairs),
                free_unallocated=round(statistics.fmean(fu), 2),
                mig_unallocated=round(statistics.fmean(mu), 2),
                cost_pp=round(statistics.fmean(diffs), 2),
                cost_sd=round(statistics.stdev(diffs), 2) if len(diffs) > 1 else None,
                mig_booked_unallocated=round(
                    statistics.fmean(float(m.booked_unallocated_pct_at_100 or 0.0) for _, m in pairs), 2
                ),
                free_wall_s=statistics.fmean(f.run.wall_s for f, _ in pairs),
                mig_wall_s=statistics.fmean(m.run.wall_s for _, m in pairs),
                mig_instances={
                    p: round(statistics.fmean(m.mig_instances.get(p, 0) for _, m in pairs), 1) for p in profiles
                },
            )
        )
    return out

"""``optimize deploy``: build a family's space, enumerate its exact front, run NSGA-II, report both.

:func:`run_deploy` returns the JSON payload the CLI prints (``front``: NSGA-II's points;
``exact_front_size``, ``hypervolume``, ``exact_hypervolume``, ``hypervolume_ratio``) and the
objects the HTML report draws.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

import numpy as np

from seedance.kernels.profile import KernelProfile, load_profile
from seedance.optimize.families import Family
from seedance.optimize.search import (
    ExactFront,
    NsgaSettings,
    Slo,
    exact_front,
    hv_ratio,
    run_nsga2,
)
from seedance.optimize.sources import cite
from seedance.optimize.space import OK, DeploymentSpace, SpaceOptions, build_space
from seedance.optimize.submit import pick


def default_profile() -> KernelProfile:
    """The kernel profile measured on this project's CPU machine (shipped with the package)."""
    with resources.as_file(resources.files("seedance.kernels") / "profiles" / "cpu.json") as p:
        return load_profile(p)


@dataclass(slots=True)
class DeployResult:
    """Everything one ``optimize deploy`` produced."""

    payload: dict[str, Any]
    space: DeploymentSpace
    exact: ExactFront
    found: np.ndarray[Any, Any]


def _sorted_configs(space: DeploymentSpace, idx: np.ndarray[Any, Any]) -> list[dict[str, Any]]:
    order = np.lexsort((-space.accuracy[idx], space.p95_ms[idx], space.cost[idx]))
    return [space.config(int(i)) for i in idx[order]]


def _whitepaper(space: DeploymentSpace, found: np.ndarray[Any, Any]) -> dict[str, Any] | None:
    """The whitepaper's claimed point beside NSGA-II's front points that reach its accuracy."""
    w = space.family.whitepaper
    if w is None:
        return None
    rows: list[dict[str, Any]] = [{"row": "whitepaper claim", "variant": "", "precision": "", "gpu": "", "count": "",
                                   "batch": "", "mode": "", "cost": "", "p95_ms": w.latency_ms,
                                   "accuracy": w.accuracy, "gflops_per_request": w.gflops,
                                   "throughput_rps": "", "usd_per_gpu_hour": ""}]
    idx = np.asarray(found, dtype=np.int64)
    good = idx[space.accuracy[idx] >= w.accuracy]
    if len(good):
        for label, key in (("cheapest front point with accuracy >= claim", space.cost),
                           ("fastest front point with accuracy >= claim", space.p95_ms),
                           ("fewest-FLOPs front point with accuracy >= claim", space.gflops)):
            i = int(good[np.argmin(key[good])])
            rows.append({**space.config(i), "row": label})
    if len(idx):
        i = int(idx[np.argmax(space.accuracy[idx])])
        rows.append({**space.config(i), "row": "most accurate front point"})
    return {"benchmark": w.benchmark, "claim": {"gflops": w.gflops, "latency_ms": w.latency_ms,
                                                "accuracy": w.accuracy, "vs_baseline": w.claim}, "rows": rows}


def run_deploy(family: Family, slo: Slo, *, options: SpaceOptions | None = None,
               settings: NsgaSettings = NsgaSettings(), seeds: tuple[int, ...] = (1,)) -> DeployResult:
    """Build, enumerate, search; raises ``InputError`` (naming the binding constraint) if nothing is feasible."""
    import time

    opts = options or SpaceOptions()
    if opts.profile is None:
        opts.profile = default_profile()
    t0 = time.perf_counter()
    space = build_space(family, opts)
    build_s = time.perf_counter() - t0
    exact = exact_front(space, slo)
    runs = []
    first = None
    for seed in seeds:
        r = run_nsga2(space, slo, settings, seed=seed)
        hv, ex_hv, ratio = hv_ratio(space, exact, r.indices)
        runs.append({"seed": seed, "seconds": round(r.seconds, 3), "evaluations": r.evaluations,
                     "front_size": int(len(r.indices)), "hypervolume": round(hv, 6),
                     "hypervolume_ratio": round(ratio, 6)})
        if first is None:
            first = (r, hv, ex_hv, ratio)
    assert first is not None
    r0, hv0, ex_hv, ratio0 = first
    ratios = [x["hypervolume_ratio"] for x in runs]
    sources: set[str] = {"splitwise-vidur", "azure-conv", "nvidia-datasheets"} if family.kind == "llm" else {
        "nvidia-datasheets", "splitwise-vidur" if family.kind == "encoder" else "ultralytics-yolov8"}
    for v in family.variants:
        sources.update(v.sources)
        for a in v.accuracy.values():
            sources.update(a.sources)
    front = _sorted_configs(space, r0.indices)
    payload: dict[str, Any] = {
        "family": family.name, "task": family.task, "metric": family.metric,
        "slo": {"p95_latency_ms": slo.latency_ms, "min_accuracy": slo.min_accuracy},
        "cost_unit": "usd_per_1k_requests" if opts.cost == "usd" else "gflops_per_request",
        "prices": opts.prices,
        "dimensions": {d: list(lv) for d, lv in zip(("variant", "precision", "gpu", "count", "batch", "mode"),
                                                     space.levels, strict=True)},
        "enumerated": space.size, "deployable": int((space.reason == OK).sum()), "feasible": exact.feasible,
        "build_seconds": round(build_s, 3), "enumeration_seconds": round(exact.seconds, 4),
        "exact_front_size": int(len(exact.indices)),
        "hypervolume": round(hv0, 6), "exact_hypervolume": round(ex_hv, 6), "hypervolume_ratio": round(ratio0, 6),
        "nsga2": {"settings": asdict(settings), "seeds": list(seeds), "runs": runs,
                  "hypervolume_ratio_mean": round(statistics.fmean(ratios), 6),
                  "hypervolume_ratio_min": round(min(ratios), 6),
                  "seconds_max": max(x["seconds"] for x in runs)},
        "front": front,
        "chosen": pick(front, "cheapest") if front else None,
        "exact_front": _sorted_configs(space, exact.indices),
        "calibration": space.calibration,
        "whitepaper": _whitepaper(space, r0.indices),
        "notes": family.notes,
        "sources": cite(tuple(sorted(sources))),
    }
    return DeployResult(payload, space, exact, r0.indices)




"""NSGA-II against the exact Pareto front of every family's deployment space, over 10 seeds.

Run: ``.venv/bin/python benchmarks/bench_optimize.py [--families llama-3,bert,resnet,detr,yolo] [--seeds 1-10]
[--json out.json]`` (wrap in ``flock /tmp/seedance-bench.lock`` on a shared machine).

For each family: the grid is built and enumerated (size and time printed), the exact front is the
non-dominated set of all deployable points (no SLO: the largest front), then

* NSGA-II at the whitepaper's settings (population 100, 200 generations, crossover 0.9, mutation 0.2):
  its final population's front, and the same run with an external archive (every non-dominated
  point it evaluated);
* at a budget of about 1,000 evaluations (population 100, 10 generations) NSGA-II against random
  search drawing the same number of grid points (the baseline measured in the same run).

Hypervolume ratios are against the exact front on its own normalised box (see
``seedance.optimize.pareto``); mean and minimum over the seeds, and the slowest run's seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

from seedance.cli.common import parse_seeds
from seedance.optimize.deploy import default_profile
from seedance.optimize.families import FAMILIES
from seedance.optimize.search import NsgaSettings, Slo, exact_front, hv_ratio, run_nsga2
from seedance.optimize.space import OK, SpaceOptions, build_space


def random_search(space: Any, slo: Slo, evaluations: int, seed: int) -> np.ndarray[Any, Any]:
    from seedance.optimize.pareto import nondominated

    rng = np.random.default_rng(seed)
    idx = np.unique(rng.integers(0, space.size, size=evaluations))
    idx = idx[space.feasible(slo.latency_ms, slo.min_accuracy)[idx]]
    return idx[nondominated(space.objectives(idx))] if len(idx) else idx  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(FAMILIES.names()))
    ap.add_argument("--seeds", default="1-10")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    seeds = parse_seeds(args.seeds)
    slo = Slo()
    profile = default_profile()
    out: list[dict[str, Any]] = []
    for name in args.families.split(","):
        fam = FAMILIES.get(name)
        t0 = time.perf_counter()
        space = build_space(fam, SpaceOptions(profile=profile))
        build_s = time.perf_counter() - t0
        ex = exact_front(space, slo)
        row: dict[str, Any] = {"family": name, "grid": space.size, "deployable": int((space.reason == OK).sum()),
                               "build_s": round(build_s, 3), "enumeration_s": round(ex.seconds, 4),
                               "exact_front": int(len(ex.indices))}
        for label, settings in (("whitepaper", NsgaSettings()), ("whitepaper+archive", NsgaSettings(archive=True)),
                                ("budget-1k", NsgaSettings(generations=10))):
            ratios, secs, evals, sizes = [], [], [], []
            for s in seeds:
                r = run_nsga2(space, slo, settings, seed=s)
                ratios.append(hv_ratio(space, ex, r.indices)[2])
                secs.append(r.seconds)
                evals.append(r.evaluations)
                sizes.append(len(r.indices))
            row[label] = {"hv_ratio_mean": round(statistics.fmean(ratios), 5), "hv_ratio_min": round(min(ratios), 5),
                          "seconds_max": round(max(secs), 2), "seconds_mean": round(statistics.fmean(secs), 2),
                          "evaluations_mean": round(statistics.fmean(evals)), "front_mean": statistics.fmean(sizes)}
        budget = int(row["budget-1k"]["evaluations_mean"])
        rr = [hv_ratio(space, ex, random_search(space, slo, budget, s))[2] for s in seeds]
        row["random-1k"] = {"hv_ratio_mean": round(statistics.fmean(rr), 5), "hv_ratio_min": round(min(rr), 5),
                            "evaluations": budget}
        out.append(row)
        w, a, b, rnd = row["whitepaper"], row["whitepaper+archive"], row["budget-1k"], row["random-1k"]
        print(f"{name:8s} grid {row['grid']:5d} deployable {row['deployable']:5d} exact front {row['exact_front']:4d} "
              f"(enumerated {row['enumeration_s']:.3f} s) | NSGA-II 100x200: HV {w['hv_ratio_mean']:.4f} "
              f"(min {w['hv_ratio_min']:.4f}) slowest {w['seconds_max']:.1f} s | +archive {a['hv_ratio_mean']:.4f} | "
              f"~{budget} evals: NSGA-II {b['hv_ratio_mean']:.4f} vs random {rnd['hv_ratio_mean']:.4f} "
              f"({b['hv_ratio_mean'] / max(rnd['hv_ratio_mean'], 1e-9):.3f}x)", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"seeds": seeds, "families": out}, fh, indent=2)


if __name__ == "__main__":
    main()

"""MIG geometry planner vs every single fixed geometry, on the default trace's fractional requests.

Run: ``.venv/bin/python benchmarks/bench_mig_planner.py [--sizes 433,866,1299,1732,2598] [--time-limit 30]``

Demand: every fractional pod of ``openb_pod_list_default.csv`` (3,078 pods with ``gpu_milli`` < 1000,
1,731,800 milli in all), one class per distinct ``gpu_milli``, each needing the smallest A100-80GB
profile covering its compute share. Pool: N idle, unpartitioned A100-80GB GPUs, for N around the
mix's free-sharing size (1,732 GPUs = its total milli / 1000).

"Fits" = what the layout serves *at once*: the most requests of the mix (``requests`` objective)
or the most GPU-milli of them (``milli`` objective) that its instances can hold, one request per
instance whose profile covers it; computed exactly (min-cost flow) for every fixed geometry and
for the planner's per-GPU layouts. The fixed-geometry baseline evaluates every distinct maximal
legal geometry cut identically on all N GPUs and keeps the best for the objective. Planner
timing is the baseline for nothing: it is reported as is, with the solver status.
"""

from __future__ import annotations

import argparse
import time

from seedance.slicing.mig import mig_gpu
from seedance.slicing.planner import PlannerOptions, demand_from_shares, plan_geometries, pool_of, rank_fixed_geometries
from seedance.traces import load_pods
from seedance.traces.paths import DEFAULT_PODS, data_file


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="433,866,1299,1732,2598")
    ap.add_argument("--objectives", default="milli,requests")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    trace = load_pods(data_file(DEFAULT_PODS))
    shares = [int(m) for k, m in zip(trace.num_gpu.tolist(), trace.gpu_milli.tolist(), strict=True) if k == 1]
    demand = demand_from_shares(shares)
    total = sum(d.count for d in demand)
    milli = sum(d.count * d.gpu_milli for d in demand)
    print(f"demand: {total} fractional requests, {milli} milli, {len(demand)} classes; GPU: A100-80GB")
    g = mig_gpu("A100-80GB")
    print(
        f"{'N':>5} {'objective':<9} {'best fixed geometry':<32} {'fixed served':>13} {'planner served':>15} "
        f"{'gain':>7} {'status':<10} {'aggregate':<9} {'bound gap':>9} {'plan s':>7}"
    )
    for n in (int(x) for x in args.sizes.split(",")):
        for obj in args.objectives.split(","):
            ranked = rank_fixed_geometries(g, n, demand, objective=obj)
            best = ranked[0]
            t0 = time.perf_counter()
            plan = plan_geometries(
                pool_of("A100-80GB", n),
                demand,
                PlannerOptions(objective=obj, reconfig_s=0.0, time_limit_s=args.time_limit, workers=args.workers),
            )
            wall = time.perf_counter() - t0
            if obj == "milli":
                fixed_v, plan_v = best.fit.served_milli, plan.fit.served_milli
                cols = (
                    f"{fixed_v:>8} ({best.fit.served_milli_pct:4.1f}%) {plan_v:>8} ({plan.fit.served_milli_pct:4.1f}%)"
                )
            else:
                fixed_v, plan_v = best.fit.served_requests, plan.fit.served_requests
                fp, pp = best.fit.served_requests_pct, plan.fit.served_requests_pct
                cols = f"{fixed_v:>6} ({fp:4.1f}%)  {plan_v:>8} ({pp:4.1f}%)"
            gap = (
                "-"
                if plan.bound != plan.bound
                else f"{100 * (plan.bound - plan.objective) / max(plan.objective, 1):.1f}%"
            )
            assert plan_v >= fixed_v, "the planner must fit at least as much as the best fixed geometry"
            print(
                f"{n:>5} {obj:<9} {best.name:<32} {cols} {100 * (plan_v - fixed_v) / max(fixed_v, 1):>+6.1f}% "
                f"{plan.status:<10} {plan.aggregate_status:<9} {gap:>9} {wall:>7.1f}"
            )
            mix: dict[str, int] = {}
            for gp in plan.gpus:
                key = "+".join(i.profile for i in gp.layout) or "(empty)"
                mix[key] = mix.get(key, 0) + 1
            top = sorted(mix.items(), key=lambda kv: -kv[1])[:4]
            print("      planner geometries: " + ", ".join(f"{k} x{v}" for k, v in top))


if __name__ == "__main__":
    main()

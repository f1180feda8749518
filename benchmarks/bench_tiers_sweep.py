"""Capacity sweep of the A/B replay: where shared scheduling (A) misses Gold, and the smallest
capacity at which tiered binding (B) meets every tier's target.

Run: ``.venv/bin/python benchmarks/bench_tiers_sweep.py [--seeds 0] [--lo 0.001 --hi 0.02 --step 0.0005]
[--variant default|reclaim-protected|proportional] [--workers 2] [--json out.json]``

For each capacity scale (the default trace's nodes scaled by ``scale_cluster``, seeded; scales that
give the same nodes are run once) both variants replay all 8,152 pods; the table shows per-tier
attainment (share of pods whose availability reaches the tier's target), utilisation and unit cost.
Variants of B:
  * ``default``: the whitepaper defaults (borrowed capacity is reclaimed at once);
  * ``reclaim-protected``: a borrower is protected for its tier's full min-runtime (silver 600 s,
    bronze 300 s) before its lender may reclaim it (the sensitivity of Gold to that choice);
  * ``proportional``: pools sized by max-min coverage instead of highest tier first.
The summary names the scales where A misses Gold, and the smallest scale at which B meets all
targets and keeps meeting them at every larger scale of the sweep.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from seedance.sim.ab import ABOptions, prepare_cluster, run_ab
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig
from seedance.traces import load_nodes, load_pods
from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file

TIERS = ("gold", "silver", "bronze")


def config(variant: str) -> tuple[TierConfig, str]:
    if variant == "reclaim-protected":
        tiers = {
            n: s.model_copy(update={"reclaim_min_runtime_s": s.min_runtime_s})
            for n, s in DEFAULT_TIER_CONFIG.tiers.items()
        }
        return DEFAULT_TIER_CONFIG.model_copy(update={"tiers": tiers}), "priority"
    if variant == "proportional":
        return DEFAULT_TIER_CONFIG, "proportional"
    return DEFAULT_TIER_CONFIG, "priority"


def one(job: tuple[float, int, str]) -> dict[str, Any]:
    scale, seed, variant = job
    cfg, rule = config(variant)
    spec, trace = load_nodes(data_file(DEFAULT_NODES)), load_pods(data_file(DEFAULT_PODS))
    recs, plan = run_ab(spec, trace, ["shared", "tiered"], capacity_scale=scale,
                        opts=ABOptions(seed=seed, tier_config=cfg), pool_rule=rule, series=False)
    return {"scale": scale, "seed": seed, "shared": recs[0], "tiered": recs[1], "pools": plan.to_json()}


def meets(rec: dict[str, Any]) -> bool:
    return all(rec["tiers"][t]["attainment_pct"] >= rec["tiers"][t]["target_pct"] for t in TIERS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--lo", type=float, default=0.001)
    ap.add_argument("--hi", type=float, default=0.02)
    ap.add_argument("--step", type=float, default=0.0005)
    ap.add_argument("--variant", default="default", choices=["default", "reclaim-protected", "proportional"])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    n = int(round((args.hi - args.lo) / args.step)) + 1
    scales = [round(args.lo + i * args.step, 6) for i in range(n)]
    spec, trace = load_nodes(data_file(DEFAULT_NODES)), load_pods(data_file(DEFAULT_PODS))
    jobs, alias = [], {}
    for seed in seeds:
        seen: dict[tuple[str, ...], float] = {}
        for sc in scales:
            cluster, _ = prepare_cluster(spec, trace, capacity_scale=sc, seed=seed)
            key = tuple(x.name for x in cluster.nodes)
            if key in seen:
                alias[(sc, seed)] = seen[key]
            else:
                seen[key] = sc
                jobs.append((sc, seed, args.variant))
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = {(r["scale"], r["seed"]): r for r in pool.map(one, jobs)}
    rows = [done[(sc, seed)] if (sc, seed) in done else {**done[(alias[(sc, seed)], seed)], "scale": sc}
            for seed in seeds for sc in scales]
    print(f"B variant: {args.variant}; attainment % per tier (targets 99.95 / 99.5 / 95), "
          "util = work served / capacity, $ = unit cost per GPU-hour served")
    print(f"{'seed':>4} {'scale':>7} {'GPUs':>5} | {'A gold':>7} {'silver':>7} {'bronze':>7} {'util':>6} {'$':>6} | "
          f"{'B gold':>7} {'silver':>7} {'bronze':>7} {'util':>6} {'$':>6} {'pre':>4} | pools g/s/b GPUs")
    for r in rows:
        a, b = r["shared"], r["tiered"]
        pools = "/".join(str(r["pools"]["tiers"][t]["gpus"]) for t in TIERS)
        print(f"{r['seed']:>4} {r['scale']:>7g} {a['gpus']:>5} | "
              + " ".join(f"{a['tiers'][t]['attainment_pct']:>7.2f}" for t in TIERS)
              + f" {a['utilization_pct']:>6.2f} {a['unit_cost_usd_per_gpu_hour']:>6.2f} | "
              + " ".join(f"{b['tiers'][t]['attainment_pct']:>7.2f}" for t in TIERS)
              + f" {b['utilization_pct']:>6.2f} {b['unit_cost_usd_per_gpu_hour']:>6.2f}"
              + f" {b['preemptions']:>4} | {pools}")
    for seed in seeds:
        mine = [r for r in rows if r["seed"] == seed]
        a_miss = [r["scale"] for r in mine
                  if r["shared"]["tiers"]["gold"]["attainment_pct"] < r["shared"]["tiers"]["gold"]["target_pct"]]
        b_ok = [meets(r["tiered"]) for r in mine]
        a_ok = [meets(r["shared"]) for r in mine]
        first_b = next((mine[i]["scale"] for i in range(len(mine)) if all(b_ok[i:])), None)
        first_a = next((mine[i]["scale"] for i in range(len(mine)) if all(a_ok[i:])), None)
        print(f"seed {seed}: A misses Gold at scales {a_miss or 'none'}; smallest scale from which B meets all "
              f"targets: {first_b} (A: {first_a})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()

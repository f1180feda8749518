"""Capacity sweep of the A/B replay under GPU-sharing interference: the smallest capacity at which
shared scheduling (A) and tiered binding (B) meet Gold 99.95 / Silver 99.5 / Bronze 95.

Run: ``.venv/bin/python benchmarks/bench_tiers_interference.py [--interference gavel-pair]
[--charge isolated-tiers|all] [--tiers default|isolated-bronze] [--policies best-fit,random]
[--seeds 0] [--lo 0.001 --hi 0.02 --step 0.0005]
[--coarse 0.03,0.05,0.1,0.2,0.3,0.4,0.5,0.75,1.0] [--workers 1] [--json out.json]``

Both variants replay all 8,152 pods of the default trace on the same scaled, labelled cluster with the
same placement policy; afterwards the interference model (``seedance.sim.interference``) rescales
the time every share spent beside partners on its GPU. The scheduler never sees it. Each policy in
``--policies`` is a tuning knob of both variants (``best-fit`` is the default; ``random`` spreads
shares, the registered policy that co-locates least); the summary gives, per variant and policy,
the smallest scale at which it meets every target, the smallest scale from which it meets them at
every larger scale of the sweep, and the tuned figure (best policy). ``--tiers isolated-bronze``
takes MPS and time-slicing away from Bronze too (its shares become whole GPUs, and with
``--charge isolated-tiers`` its availability is then charged as well): no GPU is shared in B at all.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from seedance.core.resources import SliceBackend
from seedance.sim.ab import ABOptions, prepare_cluster, run_ab
from seedance.sim.interference import InterferenceOptions, make_interference
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig
from seedance.traces import load_nodes, load_pods
from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file

TIERS = ("gold", "silver", "bronze")
VARIANTS = ("shared", "tiered")


def tier_config(name: str) -> TierConfig:
    if name == "isolated-bronze":
        tiers = dict(DEFAULT_TIER_CONFIG.tiers)
        isolated = (SliceBackend.WHOLE, SliceBackend.MIG)
        tiers["bronze"] = tiers["bronze"].model_copy(update={"allowed_backends": isolated})
        return DEFAULT_TIER_CONFIG.model_copy(update={"tiers": tiers})
    return DEFAULT_TIER_CONFIG


def one(job: tuple[float, int, str, str, str, str]) -> dict[str, Any]:
    scale, seed, policy, model, charge, tiers = job
    spec, trace = load_nodes(data_file(DEFAULT_NODES)), load_pods(data_file(DEFAULT_PODS))
    interference = None if model == "none" else make_interference(model, InterferenceOptions(seed=seed))
    opts = ABOptions(policy=policy, seed=seed, interference=interference, interference_charge=charge,
                     tier_config=tier_config(tiers))
    recs, plan = run_ab(spec, trace, list(VARIANTS), capacity_scale=scale, opts=opts, series=False)
    return {"scale": scale, "seed": seed, "policy": policy, "shared": recs[0], "tiered": recs[1],
            "pools": plan.to_json()}


def meets(rec: dict[str, Any]) -> bool:
    return all(rec["tiers"][t]["attainment_pct"] >= rec["tiers"][t]["target_pct"] for t in TIERS)


def _row(r: dict[str, Any]) -> str:
    a, b = r["shared"], r["tiered"]
    pools = "/".join(str(r["pools"]["tiers"][t]["gpus"]) for t in TIERS)
    cells = [f"{r['seed']:>4} {r['policy']:>8} {r['scale']:>7g} {a['gpus']:>5} |"]
    for v in (a, b):
        cells.append(" ".join(f"{v['tiers'][t]['attainment_pct']:>7.2f}" for t in TIERS))
        cells.append(f"{v['utilization_pct']:>6.2f} {v['unit_cost_usd_per_gpu_hour']:>8.2f}"
                     f" {v['interference']['lost_gpu_hours'] if 'interference' in v else 0.0:>7.1f} |")
    return " ".join(cells) + f" {r['tiered']['preemptions']:>4} | {pools}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--interference", default="gavel-pair")
    ap.add_argument("--charge", default="isolated-tiers", choices=["isolated-tiers", "all"])
    ap.add_argument("--tiers", default="default", choices=["default", "isolated-bronze"])
    ap.add_argument("--policies", default="best-fit,random")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--lo", type=float, default=0.001)
    ap.add_argument("--hi", type=float, default=0.02)
    ap.add_argument("--step", type=float, default=0.0005)
    ap.add_argument("--coarse", default="0.03,0.05,0.1,0.2,0.3,0.4,0.5,0.75,1.0")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    n = int(round((args.hi - args.lo) / args.step)) + 1
    scales = [round(args.lo + i * args.step, 6) for i in range(n)]
    scales += [float(x) for x in args.coarse.split(",") if x.strip() and float(x) > args.hi]
    spec, trace = load_nodes(data_file(DEFAULT_NODES)), load_pods(data_file(DEFAULT_PODS))
    jobs, alias = [], {}
    for seed in seeds:
        seen: dict[tuple[str, ...], float] = {}
        for sc in scales:
            cluster, _ = prepare_cluster(spec, trace, capacity_scale=sc, seed=seed, tier_config=tier_config(args.tiers))
            key = tuple(x.name for x in cluster.nodes)
            if key in seen:
                alias[(sc, seed)] = seen[key]
            else:
                seen[key] = sc
                jobs += [(sc, seed, p, args.interference, args.charge, args.tiers) for p in policies]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = {(r["scale"], r["seed"], r["policy"]): r for r in pool.map(one, jobs)}
    rows = []
    for seed in seeds:
        for p in policies:
            for sc in scales:
                src = alias.get((sc, seed), sc)
                rows.append({**done[(src, seed, p)], "scale": sc})
    print(f"interference {args.interference} (charged to: {args.charge}; tiers {args.tiers}); attainment % per tier "
          "(targets 99.95 / 99.5 / 95); util = useful work / capacity; $ = cluster $ per GPU-hour of useful "
          "work; lostI = GPU-hours lost to interference")
    head = f"{'gold':>7} {'silver':>7} {'bronze':>7} {'util':>6} {'$':>8} {'lostI':>7} |"
    print(f"{'seed':>4} {'policy':>8} {'scale':>7} {'GPUs':>5} | A {head} B {head} {'pre':>4} | pools g/s/b GPUs")
    for r in rows:
        print(_row(r))
    summary: dict[str, Any] = {}
    for seed in seeds:
        for v in VARIANTS:
            best: tuple[float, str, int] | None = None
            for p in policies:
                mine = [r for r in rows if r["seed"] == seed and r["policy"] == p]
                ok = [meets(r[v]) for r in mine]
                first = next((mine[i] for i in range(len(mine)) if ok[i]), None)
                stable = next((mine[i] for i in range(len(mine)) if all(ok[i:])), None)
                summary[f"{seed}/{v}/{p}"] = {
                    "first_scale": first["scale"] if first else None,
                    "first_gpus": first[v]["gpus"] if first else None,
                    "from_scale": stable["scale"] if stable else None,
                    "from_gpus": stable[v]["gpus"] if stable else None,
                }
                print(f"seed {seed} {v:>6} {p:>8}: first meets all targets at "
                      + (f"scale {first['scale']:g} ({first[v]['gpus']} GPUs, util {first[v]['utilization_pct']:.2f}%,"
                         f" ${first[v]['unit_cost_usd_per_gpu_hour']:.2f}/GPU-h)" if first else "no scale of the sweep")
                      + "; meets at every larger scale from "
                      + (f"{stable['scale']:g} ({stable[v]['gpus']} GPUs)" if stable else "none"))
                if first and (best is None or first[v]["gpus"] < best[2]):
                    best = (first["scale"], p, first[v]["gpus"])
            print(f"seed {seed} {v:>6} tuned: " + (f"scale {best[0]:g} ({best[2]} GPUs) with {best[1]}"
                                                   if best else "misses at every scale and policy of the sweep"))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "summary": summary}, fh, indent=1)


if __name__ == "__main__":
    main()

"""Simulator cost at fleet scale: one inflation run and one replay per policy at k = 1, 4, 16.

Run (the machine is shared: hold the bench lock, and read ratios, not absolute seconds):
``flock /tmp/seedance-bench.lock .venv/bin/python benchmarks/bench_scale.py [--out scale.json]``

The fleet at factor k is the default Alibaba node list and pod list scaled by
``seedance.traces.scale.scale_fleet`` (what ``seedancectl trace scale --factor k`` writes): k = 16
is 19,408 nodes, 99,392 GPUs and 130,432 pods. Per policy and mode it prints seconds per run at
each k, the ratio k=16 / k=1 and the growth exponent b of ``seconds ~ k^b`` (least squares in
log-log; b = 1 is linear in the number of pods). Goals (issue: fleet scale): k=16 costs <= 20x
k=1 for every policy, and FGD inflation at k=16 <= 60 s.
Inflation: seed 42, to 130% of capacity. Replay: seed 42, the whole scaled trace, fixed end times.
``--repeat N`` runs each (mode, policy, k) N times and keeps the fastest run (``timeit``'s rule: on a
shared or virtual machine the others measure the disturbance too); every run's seconds are printed
and written. With ``--interleave`` the N runs go in rounds (one run per k each round), and each
round's k=last / k=first ratio is reported with their median: on a machine whose speed drifts over
minutes, the fastest k=1 run and the fastest k=16 run may come from windows of different speed,
while the two runs of one round are minutes apart at most.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from seedance.sim.inflation import run_inflation
from seedance.sim.replay import run_replay
from seedance.traces import load_nodes, load_pods
from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file
from seedance.traces.scale import scale_fleet

POLICIES = ("random", "best-fit", "fgd", "seedance")
FACTORS = (1, 4, 16)


def exponent(ks: list[int], secs: list[float]) -> float:
    """Least-squares slope of log(seconds) against log(k)."""
    return float(np.polyfit(np.log(ks), np.log(secs), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--factors", default=",".join(map(str, FACTORS)))
    ap.add_argument("--modes", default="inflation,replay")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", type=Path, default=None, help="also write the figures as JSON here")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="seconds of the table and goals: wall clock, or CPU time of this process (steadier on "
                         "a shared machine); both are printed per run")
    ap.add_argument("--repeat", type=int, default=1, help="runs per (mode, policy, k); the fastest is kept")
    ap.add_argument("--interleave", action="store_true",
                    help="run the repeats in rounds, one run per k each round (k=1, 4, 16, k=1, 4, 16, ...), and "
                         "report also the median over rounds of each round's k=last / k=first ratio: a drift of "
                         "the machine's speed then moves both runs of a ratio alike")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    policies = [p for p in args.policies.split(",") if p]
    factors = [int(k) for k in args.factors.split(",") if k]
    modes = [m for m in args.modes.split(",") if m]
    spec, trace = load_nodes(data_file(DEFAULT_NODES)), load_pods(data_file(DEFAULT_PODS))
    fleets = {k: scale_fleet(spec, trace, k, seed=k) for k in factors}
    rows: list[dict[str, object]] = []
    for mode in modes:
        for policy in policies:
            secs: list[float] = []
            walls: list[float] = []
            cpus: list[float] = []
            every: list[list[list[float]]] = []
            # runs[i][j]: the j-th run at factors[i]; grouped: every run of a k in turn; interleaved: rounds
            runs: list[list[tuple[float, float]]] = [[] for _ in factors]
            order = ([i for _ in range(args.repeat) for i in range(len(factors))] if args.interleave
                     else [i for i in range(len(factors)) for _ in range(args.repeat)])
            for i in order:
                k = factors[i]
                f = fleets[k]
                t0, c0 = time.perf_counter(), time.process_time()
                if mode == "inflation":
                    r = run_inflation(f.nodes, f.pods, policy, args.seed)
                    detail = {"events": r.events, "placed": r.placed}
                else:
                    rr = run_replay(f.nodes, f.pods, policy, seed=args.seed)
                    detail = {"pods": rr.pods, "scheduled": rr.scheduled}
                runs[i].append((time.perf_counter() - t0, time.process_time() - c0))
                print(f"{mode:9s} {policy:9s} k={k:<3d} nodes={len(f.nodes.nodes):6d} "
                      f"gpus={f.nodes.total_gpus:6d} {runs[i][-1][0]:8.2f} s wall {runs[i][-1][1]:8.2f} s cpu {detail}",
                      flush=True)
            pick = 0 if args.clock == "wall" else 1
            for per_k in runs:
                wall, cpu = min(per_k, key=lambda wc: wc[pick])
                walls.append(wall)
                cpus.append(cpu)
                secs.append((wall, cpu)[pick])
                every.append([[round(w, 2), round(c, 2)] for w, c in per_k])
            row: dict[str, object] = {"mode": mode, "policy": policy, "factors": factors, "clock": args.clock,
                                      "seconds": [round(s, 2) for s in secs],
                                      "wall_s": [round(s, 2) for s in walls], "cpu_s": [round(s, 2) for s in cpus],
                                      "runs_wall_cpu_s": every}
            if len(factors) > 1:
                row["ratio_last_first"] = round(secs[-1] / secs[0], 2)
                row["growth_exponent"] = round(exponent(factors, secs), 3)
                if args.interleave:
                    rounds = [last[pick] / first[pick] for first, last in zip(runs[0], runs[-1], strict=True)]
                    row["round_ratios"] = [round(x, 2) for x in rounds]
                    row["median_round_ratio"] = round(float(np.median(rounds)), 2)
            rows.append(row)
    print()
    head = f"{'mode':9s} {'policy':9s} " + " ".join(f"{'k=' + str(k):>9s}" for k in factors) + "     ratio  exponent"
    print(head)
    for row in rows:
        shown = row["seconds"]
        assert isinstance(shown, list)
        print(f"{row['mode']!s:9s} {row['policy']!s:9s} " + " ".join(f"{s:8.2f}s" for s in shown)
              + f"  {row.get('ratio_last_first', math.nan):8}  {row.get('growth_exponent', math.nan):8}"
              + (f"  rounds {row['round_ratios']} median {row['median_round_ratio']}" if "round_ratios" in row else ""))
    if factors[0] == 1 and factors[-1] == 16:
        print("\ngoals: k=16 <= 20x k=1 per policy and mode; FGD inflation at k=16 <= 60 s")
        for row in rows:
            ratio = row["ratio_last_first"]
            assert isinstance(ratio, float)
            print(f"  {row['mode']} {row['policy']}: {ratio}x -> {'met' if ratio <= 20 else 'MISSED'}")
            if "median_round_ratio" in row:
                med = row["median_round_ratio"]
                assert isinstance(med, float)
                verdict = "met" if med <= 20 else "MISSED"
                print(f"  {row['mode']} {row['policy']} (median of rounds): {med}x -> {verdict}")
        for row in rows:
            if row["mode"] == "inflation" and row["policy"] == "fgd":
                s16 = row["seconds"][-1]  # type: ignore[index]
                print(f"  inflation fgd at k=16: {s16} s -> {'met' if s16 <= 60 else 'MISSED'}")
    if args.out:
        args.out.write_text(json.dumps({"note": "shared machine; figures from one run", "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

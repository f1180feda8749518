"""Speed of the tiered replay (variant B) on the full default trace, against the shared replay (A).

Run: ``.venv/bin/python benchmarks/bench_tiers.py [--repeat 3] [--scales 1.0,0.003]``

For each capacity scale, replays all 8,152 pods of the default trace under tiered binding
(``TieredReplay``) and under the plain shared replay (``ReplaySimulation``, the baseline measured
in the same run), on the same scaled and labelled cluster, and prints the medians and the ratio.
Cluster preparation (scaling, pool labelling) is timed separately. Target (issue 4): tiered
replay of the full default trace ≤ 30 s (median).
"""

from __future__ import annotations

import argparse
import statistics
import time

from seedance.sim.ab import prepare_cluster
from seedance.sim.replay import ReplaySimulation
from seedance.sim.tiered import TieredReplay
from seedance.traces import load_nodes, load_pods
from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file

TARGET_S = 30.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scales", default="1.0,0.003")
    args = ap.parse_args()
    spec, trace = load_nodes(data_file(DEFAULT_NODES)), load_pods(data_file(DEFAULT_PODS))
    for scale in (float(x) for x in args.scales.split(",")):
        t0 = time.perf_counter()
        cluster, plan = prepare_cluster(spec, trace, capacity_scale=scale, seed=0)
        prep = time.perf_counter() - t0
        tiered, shared = [], []
        decisions = preemptions = 0
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            b = TieredReplay(cluster, trace)
            b.run()
            tiered.append(time.perf_counter() - t0)
            decisions, preemptions = b.decisions, b.preemptions
            t0 = time.perf_counter()
            ReplaySimulation(cluster, trace, "best-fit").run()
            shared.append(time.perf_counter() - t0)
        mt, ms = statistics.median(tiered), statistics.median(shared)
        print(
            f"scale {scale:g}: {len(cluster.nodes)} nodes / {cluster.total_gpus} GPUs, {len(trace)} pods; "
            f"prepare (scale + label pools) {prep:.2f} s"
        )
        print(
            f"  tiered (B) median {mt:.2f} s  [{', '.join(f'{x:.2f}' for x in tiered)}]  "
            f"{decisions} decisions, {preemptions} preemptions, {decisions / mt:,.0f} decisions/s"
        )
        print(f"  shared (A) median {ms:.2f} s  [{', '.join(f'{x:.2f}' for x in shared)}]")
        print(f"  ratio tiered/shared {mt / ms:.2f}x; target {TARGET_S:.0f} s: {'met' if mt <= TARGET_S else 'MISSED'}")
        del plan


if __name__ == "__main__":
    main()

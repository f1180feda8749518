"""Live migration on a real 3-node local Ray cluster: measured migration time beside the planner's estimate.

    flock /tmp/seedance-bench.lock flock /tmp/seedance-ray.lock \
        .venv/bin/python benchmarks/bench_live_migration.py [--trials 3] [--json out.json]

Each trial migrates three ``torch-train`` jobs at once (a->b, b->c, c->a), each stopped after step 20 of
40 with its real state dict, resumed on the target node in a fresh worker process; prints every job's
largest loss difference to its uninterrupted run, the measured migration time (checkpoint start to
state loaded on the target), its median over all moves, and the planner's estimate for the same
checkpoint size (10 Gbit/s network, its default 10 s restart). The machine is shared and noisy: the
figures are one run's, medians over the moves of that run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from seedance.hetero.live import migrate_jobs, planner_estimate, start_local_cluster


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    moves = []
    with start_local_cluster(["gpu-a", "gpu-b", "gpu-c"]):
        start_s = time.perf_counter() - t0
        for trial in range(args.trials):
            plan = [(100 * trial + 1, "gpu-a", "gpu-b"), (100 * trial + 2, "gpu-b", "gpu-c"),
                    (100 * trial + 3, "gpu-c", "gpu-a")]
            for r in migrate_jobs(plan, steps=40, checkpoint_at=20):
                moves.append({k: v for k, v in r.items() if "losses" not in k})
    for m in moves:
        print(m)
    est = planner_estimate(moves[0]["checkpoint_bytes"])
    summary = {
        "moves": len(moves),
        "jobs_completed": sum(m["completed"] for m in moves),
        "max_loss_diff": max(m["max_loss_diff"] for m in moves),
        "median_migration_s": statistics.median(m["migration_s"] for m in moves),
        "max_migration_s": max(m["migration_s"] for m in moves),
        "planner_estimate": est,
        "cluster_start_s": start_s,
    }
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"summary": summary, "moves": moves}, fh, indent=2)


if __name__ == "__main__":
    main()

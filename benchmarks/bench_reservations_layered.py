"""The layered program against the exact MILP: cost gap and speed, measured in the same run.

On windows of one split (``tune`` by default; the receding-horizon planner solves this program
on its forecast 48 times per window, so its speed decides whether PPO can train with it):

    .venv/bin/python benchmarks/bench_reservations_layered.py --split tune --windows 24
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from seedance.reservations.accounting import simulate_plan
from seedance.reservations.forecast import layered_plan
from seedance.reservations.milp import hindsight_optimal
from seedance.reservations.scenarios import WindowFactory


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="tune")
    ap.add_argument("--windows", type=int, default=24)
    args = ap.parse_args()
    gaps, t_milp, t_layer = [], [], []
    for w, p in WindowFactory(args.split).fixed(args.windows):
        t0 = time.process_time()
        milp = hindsight_optimal(w, p)
        t1 = time.process_time()
        plan, cost = layered_plan(w.values, p)
        t2 = time.process_time()
        true = float(simulate_plan(plan, w, p).cost.sum())
        if true > cost * (1 + 1e-9):
            raise SystemExit(f"{w.label}: the plan costs {true}, above the layered objective {cost}")
        gaps.append(true / milp.objective - 1.0)
        t_milp.append(t1 - t0)
        t_layer.append(t2 - t1)
    g = np.array(gaps) * 100
    print(f"{len(gaps)} {args.split} windows (4 years, monthly epochs): layered plan's cost above the MILP's "
          f"mean {g.mean():.4f} %, median {np.median(g):.4f} %, worst {g.max():.4f} %")
    print(f"CPU per window: MILP median {np.median(t_milp):.3f} s, layered median {np.median(t_layer) * 1e3:.2f} ms; "
          f"speed-up (median of per-window ratios) {np.median(np.array(t_milp) / np.array(t_layer)):.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

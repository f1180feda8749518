"""The reservation engine's acceptance figures: PPO against every baseline and the hindsight MILP.

Splits (disjoint by construction, :mod:`seedance.reservations.scenarios`): PPO trains on the
``train`` split; the percentile baseline's lookback / percentile / term and the online
algorithm's term are tuned on the ``tune`` split; every figure below is measured on the ``test``
split only (other scenario seeds, the ``gpushare100`` pod list no training window came from, PAI
streams of other seeds). Each window: one year of history, then four years evaluated.

Prints per policy the mean / median / worst cost ratio to the hindsight-optimal MILP (the honest
bound) and the savings against no reservation as a share of the total bill, per family too; the
training wall time (run it under ``flock /tmp/seedance-bench.lock`` for a figure to report);
the baseline measured in the same run is ``none`` (all on demand).

    .venv/bin/python benchmarks/bench_reservations.py --timesteps 125000 --test 90 --tune 24 \
        --save report/reservations-ppo.zip          # --action levels: the first encoding
    .venv/bin/python benchmarks/bench_reservations.py --policy report/reservations-ppo.zip   # evaluate only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from seedance.reservations.accounting import simulate_plan
from seedance.reservations.engine import run_policy, tune_forecast, tune_online, tune_percentile
from seedance.reservations.forecast import ForecastPlanner
from seedance.reservations.milp import hindsight_optimal
from seedance.reservations.policies import BestFixed, NoReservation, OnlineBreakEven, Percentile
from seedance.reservations.ppo import PpoReservation, TrainConfig, config_json, train_ppo
from seedance.reservations.scenarios import WindowFactory


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timesteps", type=int, default=TrainConfig().timesteps)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-envs", type=int, default=TrainConfig().n_envs)
    ap.add_argument("--action", default=TrainConfig().action, help="PPO's action encoding: levels or planner.")
    ap.add_argument("--test", type=int, default=30, help="Test windows (families in turn).")
    ap.add_argument("--tune", type=int, default=24, help="Tuning windows for the baselines.")
    ap.add_argument("--policy", type=Path, default=None, help="Evaluate this saved PPO policy instead of training.")
    ap.add_argument("--save", type=Path, default=None, help="Save the trained PPO policy here.")
    ap.add_argument("--json", type=Path, default=None, help="Also write every figure here.")
    args = ap.parse_args()
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    if args.policy:
        ppo = PpoReservation(path=args.policy)
        out["training"] = {"policy_file": str(args.policy)}
    else:
        cfg = TrainConfig(timesteps=args.timesteps, seed=args.seed, n_envs=args.n_envs, action=args.action)
        load0 = os.getloadavg()
        res = train_ppo(WindowFactory("train").draw, cfg)
        ppo = PpoReservation(res.model)
        load1 = os.getloadavg()
        out["training"] = {"config": config_json(cfg), "wall_s": res.wall_s, "cpu_s": res.cpu_s,
                           "episodes": res.episodes, "mean_return_last_100": res.mean_return_last,
                           "load_average_before": load0, "load_average_after": load1}
        print(f"PPO training: {cfg.timesteps} steps, {res.episodes} episodes, {res.wall_s:.1f} s wall "
              f"({res.wall_s / 60:.1f} min), {res.cpu_s:.1f} s CPU; load average before "
              f"{' '.join(f'{x:.2f}' for x in load0)}, after {' '.join(f'{x:.2f}' for x in load1)}", flush=True)
        if args.save:
            args.save.parent.mkdir(parents=True, exist_ok=True)
            res.model.save(str(args.save))
    tune = WindowFactory("tune").fixed(args.tune)
    t1 = time.perf_counter()
    pct, pct_rows = tune_percentile(tune)
    onl, onl_rows = tune_online(tune)
    mpc, mpc_rows = tune_forecast(tune)
    out["tuning"] = {"percentile": pct.describe(), "online": onl.describe(), "forecast-mpc": mpc.describe(),
                     "percentile_grid": pct_rows, "online_grid": onl_rows, "forecast_grid": mpc_rows,
                     "wall_s": time.perf_counter() - t1}
    print(f"tuned on {len(tune)} tune windows: percentile {pct.describe()}, online {onl.describe()}, "
          f"forecast-mpc {mpc.describe()}", flush=True)
    policies = {"none": NoReservation(), "percentile (AWS default: 30 d, lookback-optimal)": Percentile(30.0),
                "percentile (tuned)": pct, "online (Wang et al., 1y)": OnlineBreakEven("1y"),
                "online (tuned term)": onl, "forecast-mpc (default)": ForecastPlanner(),
                "forecast-mpc (tuned)": mpc, "best-fixed (hindsight)": BestFixed(), "ppo": ppo}
    test = WindowFactory("test").fixed(args.test)
    rows: list[dict[str, Any]] = []
    for i, (w, p) in enumerate(test):
        milp = hindsight_optimal(w, p)
        opt_att = simulate_plan(milp.plan, w, p).totals()
        opt = opt_att["baseline"] - opt_att["savings"]
        row: dict[str, Any] = {"window": w.label, "family": w.label.split(":")[0], "prices": p.label,
                               "optimal": opt, "milp_status": milp.status, "milp_s": milp.solve_s}
        for name, pol in policies.items():
            r = run_policy(pol, w, p)
            row[name] = r.total_cost
            tot = r.attribution.totals()
            # where the cost above the MILP's comes from: idle commitments (over-commitment), demand paid
            # on demand (under-commitment), and the committed hours used (term / price mix)
            row[name + " excess"] = {part: (tot[part] - opt_att[part]) / opt
                                     for part in ("committed_idle", "on_demand", "committed_used")}
        rows.append(row)
        print(f"  test window {i + 1}/{len(test)} {row['family']}: ppo/opt {row['ppo'] / opt:.4f}, "
              f"tuned percentile/opt {row['percentile (tuned)'] / opt:.4f}", flush=True)
    out["test"] = rows
    print(f"\nheld-out test windows: {len(rows)} ({', '.join(sorted({r['family'] for r in rows}))}); "
          f"4-year windows, monthly decisions; ratio = policy cost / hindsight-optimal MILP cost")
    print(f"{'policy':<50} {'mean':>7} {'median':>7} {'worst':>7} {'saves vs none (share of bill)':>30}")
    summary: dict[str, dict[str, Any]] = {}
    for name in policies:
        ratio = np.array([r[name] / r["optimal"] for r in rows])
        saving = np.array([1 - r[name] / r["none"] for r in rows])
        summary[name] = {"mean": float(ratio.mean()), "median": float(np.median(ratio)), "worst": float(ratio.max()),
                         "saving_share_mean": float(saving.mean())}
        print(f"{name:<50} {ratio.mean():>7.4f} {np.median(ratio):>7.4f} {ratio.max():>7.4f} {saving.mean():>29.1%}")
    print("\nexcess over the MILP, share of the MILP's cost (mean over windows): idle commitments / on demand / "
          "committed hours used")
    for name in policies:
        ex = {part: float(np.mean([r[name + " excess"][part] for r in rows]))
              for part in ("committed_idle", "on_demand", "committed_used")}
        summary[name]["excess"] = ex
        print(f"  {name:<48} {ex['committed_idle']:>+7.1%} {ex['on_demand']:>+7.1%} {ex['committed_used']:>+7.1%}")
    opt_saving = float(np.mean([1 - r["optimal"] / r["none"] for r in rows]))
    print(f"{'hindsight-optimal (MILP)':<50} {1.0:>7.4f} {1.0:>7.4f} {1.0:>7.4f} {opt_saving:>29.1%}")
    for fam in sorted({r["family"] for r in rows}):
        sub = [r for r in rows if r["family"] == fam]
        print(f"  {fam}: " + ", ".join(f"{n.split(' ')[0]} {np.mean([r[n] / r['optimal'] for r in sub]):.4f}"
                                       for n in policies))
    out["summary"] = summary
    out["wall_s"] = time.perf_counter() - t0
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

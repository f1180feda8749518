"""The year-long cost-policy evaluation (the issue's acceptance figures) and its speed.

Runs :func:`seedance.costmodel.evaluation.run_evaluation` on every region given (default
US-CAL-CISO and DE-LU, all of 2023) with every start-time policy: ``immediate``, the
``day-ahead-rule`` baseline, ``peak-aware`` (combined score) and its single-objective variants
``peak-aware-cost`` / ``peak-aware-co2``, and the exact optimum of each objective
(``optimal-cost``, ``optimal-co2``, ``optimal-score``). Prints absolute energy cost and CO2, the
ratio to run-immediately, deadline misses, and the share of each objective's optimum saving that
a policy captures ($ against optimal-cost, CO2 against optimal-co2, score against optimal-score;
beside it the old measure, $ and CO2 against the combined-score optimum). Baseline measured in
the same run: ``immediate`` (its cost, CO2 and wall time). ``peak-aware`` plans on the published
day-ahead prices where the market publishes them (the default ``price_forecaster: auto``);
``--variant forecast`` plans on past-only price forecasts instead, ``--forecaster NAME`` with
another registered forecaster.

    .venv/bin/python benchmarks/bench_costmodel.py                         # both regions, all 2023
    .venv/bin/python benchmarks/bench_costmodel.py --start-date 2023-07-01   # held-out half
    .venv/bin/python benchmarks/bench_costmodel.py --variant forecast        # past-only price forecasts
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from seedance.costmodel.evaluation import run_evaluation
from seedance.costmodel.policy import CostPolicy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--region", action="append", help="Region (repeatable; default US-CAL-CISO and DE-LU).")
    ap.add_argument("--start-date", default="2023-01-01")
    ap.add_argument("--days", type=float, default=None)
    ap.add_argument("--flexible-share", type=float, default=0.3)
    ap.add_argument("--slack-hours", type=float, default=None)
    ap.add_argument("--capacity-gpus", type=float, default=None)
    ap.add_argument("--config-file", type=Path, default=None, help="Cost policy YAML (default: built-in).")
    ap.add_argument("--variant", choices=("auto", "forecast", "published-day-ahead"), default="auto",
                    help="auto: published DA prices where the market publishes them (the default policy); "
                    "forecast: past data only; published-day-ahead: DAM prices as published.")
    ap.add_argument("--forecaster", default=None,
                    help="Forecaster for both signals (default: the policy's, profile-ridge).")
    ap.add_argument("--json", type=Path, default=None, help="Also write the full payload here.")
    args = ap.parse_args()
    regions = args.region or ["US-CAL-CISO", "DE-LU"]
    policy_file = args.config_file
    if args.variant != "auto" or args.forecaster:
        doc = (CostPolicy() if args.config_file is None else CostPolicy.model_validate(
            yaml.safe_load(args.config_file.read_text()))).model_dump(mode="json")
        if args.forecaster:
            doc["spec"]["forecast"]["forecaster"] = args.forecaster
            doc["spec"]["forecast"]["options"] = {}
        if args.variant == "published-day-ahead":
            doc["spec"]["forecast"]["price_forecaster"] = "published-day-ahead"
        elif args.variant == "forecast":
            doc["spec"]["forecast"]["price_forecaster"] = None
        tmp = Path(tempfile.mkdtemp()) / "policy.yaml"
        tmp.write_text(yaml.safe_dump(doc))
        policy_file = tmp
    t0 = time.perf_counter()
    payload = run_evaluation(regions=regions, policy_file=policy_file, start_date=args.start_date, days=args.days,
                             flexible_share=args.flexible_share, slack_hours=args.slack_hours,
                             capacity_gpus=args.capacity_gpus,
                             progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    wall = time.perf_counter() - t0
    print(f"variant: {args.variant}; forecaster: {payload['assumptions']['forecaster']}; span from "
          f"{args.start_date}; flexible share {args.flexible_share}; total wall {wall:.1f} s")
    for reg in payload["regions"]:
        w = reg["workload"]
        print(f"\n== {reg['region']} {reg['start']} .. {reg['end']} ({reg['currency']}); {w['jobs']:,} jobs, "
              f"{w['flexible_jobs']:,} flexible, trace period {w['period_days']:g} d x {w['copies']}")
        rows = [r for r in payload["results"] if r["region"] == reg["region"]]
        base = next(r for r in rows if r["policy"] == "immediate")
        print(f"{'policy':<16} {'energy cost':>13} {'vs imm.':>8} {'CO2 kg':>11} {'vs imm.':>8} {'misses':>6} "
              f"{'capt.$':>7} {'capt.CO2':>8} {'capt.score':>10} {'$ vs S*':>7} {'CO2 vs S*':>9} {'wall/imm':>8}")

        def pc(v: float | None) -> str:
            return "-" if v is None else f"{v:.1%}"

        for r in rows:
            print(f"{r['policy']:<16} {r['energy_cost']:>13,.2f} {r['energy_cost'] / base['energy_cost']:>8.5f} "
                  f"{r['co2_kg']:>11,.1f} {r['co2_kg'] / base['co2_kg']:>8.5f} {r['deadline_misses']:>6} "
                  f"{pc(r.get('cost_saving_captured')):>7} {pc(r.get('co2_saving_captured')):>8} "
                  f"{pc(r.get('score_saving_captured')):>10} {pc(r.get('cost_saving_vs_score_optimum')):>7} "
                  f"{pc(r.get('co2_saving_vs_score_optimum')):>9} {r['wall_s'] / max(base['wall_s'], 1e-3):>8.0f}")
        for s in reg["forecast_scores"]:
            print(f"  forecast {s['kind']:<6} ({s['forecaster']}): MAE {s['mae']:.2f} {s['unit']} vs seasonal-naive "
                  f"{s['mae_naive']:.2f}; 10-90% band coverage {s['coverage']:.1%} "
                  f"(nominal {s['nominal_coverage']:.0%})")
    if args.json:
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

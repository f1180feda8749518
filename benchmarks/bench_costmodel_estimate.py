"""The training-job estimate (LLaMA-3-8B fine-tune by default) swept over decision times in 2023.

One ``seedancectl costmodel estimate`` answers for one "now". This runs the same estimate at
every ``--step-hours`` through the year and prints the distribution of what deferral within the
deadline changes: energy cost, CO2 and total cost (GPU rental + energy) of the window Seedance
picks from the forecast, against running now (the baseline, measured in the same run) and
against the best window in hindsight. Also prints the whitepaper's claim beside it.

    .venv/bin/python benchmarks/bench_costmodel_estimate.py --region US-CAL-CISO --region DE-LU
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from seedance.costmodel.estimate import WHITEPAPER_CLAIM_USD, TrainingJob, estimate
from seedance.signals.series import iso, parse_utc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--region", action="append")
    ap.add_argument("--params", type=float, default=8.03e9)
    ap.add_argument("--tokens", type=float, default=1e8)
    ap.add_argument("--mfu", type=float, default=0.4)
    ap.add_argument("--gpu", default="A100-80GB")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--deadline-hours", type=float, default=24.0)
    ap.add_argument("--start", default="2023-01-15")
    ap.add_argument("--end", default="2023-12-29")
    ap.add_argument("--step-hours", type=float, default=53.0, help="Spacing of decision times (53 h: every hour of "
                                                                     "the day and weekday gets its turn).")
    args = ap.parse_args()
    job = TrainingJob(params=args.params, tokens=args.tokens, mfu=args.mfu, gpu_model=args.gpu, gpus=args.gpus,
                      deadline_hours=args.deadline_hours)
    before, after = WHITEPAPER_CLAIM_USD
    print(f"{job.name}: {job.flops:.3g} FLOPs on {job.gpus} x {job.gpu_model} at MFU {job.mfu}; deadline "
          f"{job.deadline_hours:g} h; whitepaper claim ${before:.2f} -> ${after:.2f}")
    for region in args.region or ["US-CAL-CISO", "DE-LU"]:
        t0 = time.perf_counter()
        rows = []
        t = parse_utc(args.start)
        while t < parse_utc(args.end):
            e = estimate(job, region=region, now=iso(t))
            now, pick, best = e["scenarios"]
            rows.append((now["energy_cost"], pick["energy_cost"], best["energy_cost"], now["co2_kg"], pick["co2_kg"],
                         best["co2_kg"], now.get("total_usd", np.nan), pick.get("total_usd", np.nan)))
            t += args.step_hours * 3600
        a = np.array(rows)
        cur = e["currency"]
        print(f"\n== {region}: {len(a)} decision times {args.start} .. {args.end}, {time.perf_counter() - t0:.0f} s")
        print(f"  run hours {e['assumptions']['run_hours']:.2f}, energy {now['energy_kwh']:.1f} kWh, GPU rental "
              f"${now['gpu_rental_usd']:.2f} (catalog list price)")
        print(f"  energy cost  now {a[:, 0].mean():.3f} {cur}  Seedance {a[:, 1].mean():.3f} ({_pct(a[:, 1], a[:, 0])})"
              f"  hindsight {a[:, 2].mean():.3f} ({_pct(a[:, 2], a[:, 0])})")
        print(f"  CO2 kg       now {a[:, 3].mean():.3f}  Seedance {a[:, 4].mean():.3f} ({_pct(a[:, 4], a[:, 3])})"
              f"  hindsight {a[:, 5].mean():.3f} ({_pct(a[:, 5], a[:, 3])})")
        if np.isfinite(a[:, 6]).all():
            print(f"  total USD    now {a[:, 6].mean():.2f}  Seedance {a[:, 7].mean():.2f} ({_pct(a[:, 7], a[:, 6])})")
    return 0


def _pct(new: np.ndarray, base: np.ndarray) -> str:
    return f"{100 * (new.sum() - base.sum()) / abs(base.sum()):+.2f}%"


if __name__ == "__main__":
    sys.exit(main())

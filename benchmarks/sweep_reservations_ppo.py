"""PPO hyper-parameter sweep for the reservation engine, scored on the ``tune`` split only.

Trains on the ``train`` split with one setting and, at each checkpoint (``--checkpoints``, in
environment steps), scores the policy on the fixed ``tune`` windows: mean / median / worst cost over
the hindsight MILP (the MILP costs are cached in ``--milp-cache``, computed once). The ``test``
split is never touched. One JSON line per checkpoint goes to ``--out``. With a constant learning
rate and clip range a checkpoint at k steps is the same policy as a run of k steps.

    nice -n 19 .venv/bin/python benchmarks/sweep_reservations_ppo.py --name lam1 --gae-lambda 1.0 \
        --timesteps 150000 --checkpoints 50000 100000 150000 --out sweep.jsonl --milp-cache tune-milp.json
    .venv/bin/python benchmarks/sweep_reservations_ppo.py --baselines --milp-cache tune-milp.json
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
from stable_baselines3.common.callbacks import BaseCallback

from seedance.reservations.accounting import simulate_plan
from seedance.reservations.demand import DemandWindow
from seedance.reservations.engine import run_policy, tune_percentile
from seedance.reservations.forecast import ForecastPlanner
from seedance.reservations.milp import hindsight_optimal
from seedance.reservations.policies import BestFixed, ReservationPolicy
from seedance.reservations.ppo import PpoReservation, TrainConfig, config_json, train_ppo
from seedance.reservations.pricing import ReservationPrices
from seedance.reservations.scenarios import WindowFactory

Windows = list[tuple[DemandWindow, ReservationPrices]]


def milp_costs(windows: Windows, cache: Path | None) -> list[float]:
    """The hindsight MILP's cost of each tune window (cached by window label and price label)."""
    keys = [f"{i}|{w.label}|{p.label}" for i, (w, p) in enumerate(windows)]
    if cache and cache.exists():
        got = json.loads(cache.read_text())
        if all(k in got for k in keys):
            return [float(got[k]) for k in keys]
    out = {}
    for k, (w, p) in zip(keys, windows, strict=True):
        att = simulate_plan(hindsight_optimal(w, p).plan, w, p).totals()
        out[k] = att["baseline"] - att["savings"]
    if cache:
        cache.write_text(json.dumps(out, indent=1))
    return [out[k] for k in keys]


def score(policy: ReservationPolicy, windows: Windows, opt: list[float]) -> dict[str, float]:
    """Cost over the MILP's on the tune windows."""
    r = np.array([run_policy(policy, w, p).total_cost / o for (w, p), o in zip(windows, opt, strict=True)])
    return {"mean": float(r.mean()), "median": float(np.median(r)), "worst": float(r.max())}


class TuneCheckpoints(BaseCallback):
    """Scores the policy on the tune windows when the step count passes each checkpoint."""

    def __init__(self, marks: list[int], windows: Windows, opt: list[float], emit: Any) -> None:
        super().__init__()
        self.marks, self.windows, self.opt, self.emit = sorted(marks), windows, opt, emit
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        while self.marks and self.num_timesteps >= self.marks[0]:
            self.marks.pop(0)
            train_wall, train_cpu = time.perf_counter() - self.t0, time.process_time() - self.c0
            t, c = time.perf_counter(), time.process_time()
            s = score(PpoReservation(self.model), self.windows, self.opt)
            self.emit({"steps": self.num_timesteps, "train_wall_s": train_wall, "train_cpu_s": train_cpu, **s})
            # evaluation time is not training time
            self.t0 += time.perf_counter() - t
            self.c0 += time.process_time() - c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    d = TrainConfig()
    ap.add_argument("--name", default="default")
    ap.add_argument("--timesteps", type=int, default=d.timesteps)
    ap.add_argument("--checkpoints", type=int, nargs="*", default=None)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--n-steps", type=int, default=d.n_steps)
    ap.add_argument("--batch-size", type=int, default=d.batch_size)
    ap.add_argument("--n-epochs", type=int, default=d.n_epochs)
    ap.add_argument("--learning-rate", type=float, default=d.learning_rate)
    ap.add_argument("--gamma", type=float, default=d.gamma)
    ap.add_argument("--gae-lambda", type=float, default=d.gae_lambda)
    ap.add_argument("--ent-coef", type=float, default=d.ent_coef)
    ap.add_argument("--clip-range", type=float, default=d.clip_range)
    ap.add_argument("--net-arch", type=int, nargs="+", default=list(d.net_arch))
    ap.add_argument("--n-envs", type=int, default=d.n_envs)
    ap.add_argument("--action", default=d.action, help="Action encoding: levels or planner.")
    ap.add_argument("--tune", type=int, default=24)
    ap.add_argument("--milp-cache", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--baselines", action="store_true", help="Score the tuned advisor and best-fixed only.")
    args = ap.parse_args()
    windows = WindowFactory("tune").fixed(args.tune)
    opt = milp_costs(windows, args.milp_cache)

    def emit(row: dict[str, Any]) -> None:
        row = {"name": args.name, **row, "load_average": os.getloadavg()}
        print(json.dumps(row), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")

    if args.baselines:
        pct, _ = tune_percentile(windows)
        emit({"policy": "percentile (tuned)", "settings": pct.describe(), **score(pct, windows, opt)})
        emit({"policy": "best-fixed (hindsight)", **score(BestFixed(), windows, opt)})
        emit({"policy": "forecast-mpc (default)", **score(ForecastPlanner(), windows, opt)})
        return 0
    cfg = TrainConfig(timesteps=args.timesteps, seed=args.seed, n_steps=args.n_steps, batch_size=args.batch_size,
                      n_epochs=args.n_epochs, learning_rate=args.learning_rate, gamma=args.gamma,
                      gae_lambda=args.gae_lambda, ent_coef=args.ent_coef, clip_range=args.clip_range,
                      net_arch=tuple(args.net_arch), n_envs=args.n_envs, action=args.action)
    marks = args.checkpoints or [args.timesteps]
    emit({"config": config_json(cfg)})
    cb = TuneCheckpoints(marks, windows, opt, emit)
    res = train_ppo(WindowFactory("train").draw, cfg, callback=cb)
    if cb.marks:  # the last rollout ended before a mark (rounding to whole rollouts)
        emit({"steps": res.model.num_timesteps, "train_wall_s": res.wall_s, "train_cpu_s": res.cpu_s,
              **score(PpoReservation(res.model), windows, opt)})
    return 0


if __name__ == "__main__":
    sys.exit(main())

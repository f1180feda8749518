"""Cost and CO2 of one training job, started now versus in its best window before a deadline.

Compute: ``FLOPs = flops_per_param_token * N * D`` (6 for a full forward and backward pass over
``D`` tokens of an ``N``-parameter dense model; Kaplan et al. 2020, Hoffmann et al. 2022),
run time ``= FLOPs / (gpus * dense peak FLOP/s * MFU)`` with the catalog's dense BF16 (or FP16)
peak. Energy and emissions come from :mod:`seedance.costmodel.energy`, money from the region's
hourly prices. GPU rental is the catalog's on-demand list price (USD), the same whenever the job
runs. Three starts are compared: now, the window Seedance picks from the forecast issued now
(costed on what actually happened), and the best window in hindsight.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.costmodel.policy import CostPolicy
from seedance.costmodel.score import JobFeatures, cost_score, window_costs
from seedance.signals.series import HOUR, iso, parse_utc

# The whitepaper's headline (§1), printed beside our estimate, never used in a computation.
WHITEPAPER_CLAIM_USD: tuple[float, float] = (217.40, 112.90)


@dataclass(frozen=True, slots=True)
class TrainingJob:
    """A training job described by its size.

    Attributes:
        params: Model parameters ``N``.
        tokens: Training tokens ``D`` (all epochs).
        flops_per_param_token: FLOPs per parameter and token (6 = forward + backward).
        mfu: Model FLOPs utilisation (0..1).
        gpu_model: Catalog GPU model.
        gpus: GPUs used.
        deadline_hours: The job must finish within this many hours from now.
        name: A label for reports.
    """

    params: float = 8.03e9
    tokens: float = 1.0e8
    flops_per_param_token: float = 6.0
    mfu: float = 0.4
    gpu_model: str = "A100-80GB"
    gpus: int = 8
    deadline_hours: float = 24.0
    name: str = "LLaMA-3-8B fine-tune"

    def __post_init__(self) -> None:
        for field_name in ("params", "tokens", "flops_per_param_token", "deadline_hours"):
            if not getattr(self, field_name) > 0:
                raise InputError(f"must be > 0, got {getattr(self, field_name)}", source=f"--{field_name}")
        if not 0 < self.mfu <= 1:
            raise InputError(f"must be within (0, 1], got {self.mfu}", source="--mfu")
        if self.gpus < 1:
            raise InputError(f"must be >= 1, got {self.gpus}", source="--gpus")

    @property
    def flops(self) -> float:
        """Total training FLOPs."""
        return self.flops_per_param_token * self.params * self.tokens


def estimate(job: TrainingJob, *, region: str, policy: CostPolicy | None = None, now: str | None = None,
             prices: str | Path | None = None, carbon: str | Path | None = None,
             price_tz: str | None = None) -> dict[str, Any]:
    """Estimate ``job`` in ``region``; returns a JSON-ready dict with every assumption.

    Args:
        job: The training job.
        region: Region code (prices and carbon by region, or the given files).
        policy: Cost policy (default: the built-in defaults).
        now: Decision time (ISO UTC); default: the wall clock when the signals cover it, else the
            latest time at which the deadline window still lies inside the data.
        prices, carbon, price_tz: Signal file overrides.

    Raises:
        InputError: a run that does not fit the deadline, or a ``now`` outside the data.
    """
    from seedance.costmodel.energy import EnergyModel
    from seedance.costmodel.evaluation import actual_signals, pct_change, planner_forecasts, policy_signals

    pol = policy or CostPolicy()
    model = EnergyModel.model(job.gpu_model)
    peak = model.dense_tflops * 1e12
    duration = job.flops / (job.gpus * peak * job.mfu)
    window = job.deadline_hours * HOUR
    if duration > window:
        raise InputError(f"the run takes {duration / HOUR:.1f} h, longer than the {job.deadline_hours:g} h deadline",
                         source="--deadline-hours")
    rs = policy_signals(pol, region, prices=prices, carbon=carbon, price_tz=price_tz)
    weights = pol.weights(rs.currency)
    latest_now = rs.end - window
    if now is None:
        wall = time.time()
        t_now = wall if rs.start + 24 * HOUR <= wall <= latest_now else latest_now
        now_note = "wall clock" if t_now == wall else "latest time whose deadline window the data covers"
    else:
        t_now = parse_utc(now, source="--now")
        now_note = "given"
    t_now = float(np.floor(t_now / HOUR) * HOUR)
    if not rs.start <= t_now <= latest_now:
        raise InputError(f"now must lie within {iso(rs.start)} .. {iso(latest_now)} (the data, less the deadline)",
                         source="--now")
    deadline = t_now + window
    feats = JobFeatures(duration_s=duration, gpu_model=job.gpu_model, gpus=float(job.gpus), deadline=deadline,
                        tier="bronze", flexible=True, submitted=t_now)
    actual = actual_signals(rs, int(t_now), int(np.ceil(deadline / HOUR) * HOUR))
    hindsight = cost_score(feats, actual, weights, t_now)
    forecasts = planner_forecasts(pol, rs, int(t_now), int(t_now) + HOUR)
    planned = t_now
    fc_label = "no forecast (too little history): run now"
    sig = forecasts.signals_at(int(t_now), deadline)
    if sig is not None:
        planned = cost_score(feats, sig, weights, t_now).best_start
        fc_label = sig.label
    power = weights.energy.job_power_kw(job.gpu_model, float(job.gpus))
    starts = np.array([t_now, planned, hindsight.best_start])
    wc = window_costs(starts, duration, power, float(job.gpus), t_now, actual, weights)
    hours = duration / HOUR
    rental = job.gpus * model.price_usd_per_hour * hours
    energy_kwh = power * hours
    rows: list[dict[str, Any]] = []
    for label, i in (("run now", 0), ("Seedance window (forecast)", 1), ("best window (hindsight)", 2)):
        row = {"scenario": label, "start": iso(float(starts[i])), "end": iso(float(starts[i]) + duration),
               "energy_kwh": energy_kwh, "energy_cost": float(wc.cost[i]), "currency": rs.currency,
               "co2_kg": float(wc.co2_kg[i]), "gpu_rental_usd": rental, "score": float(wc.score[i])}
        if rs.currency == "USD":
            row["total_usd"] = rental + float(wc.cost[i])
        rows.append(row)
    return {
        "job": job.name, "region": rs.region, "currency": rs.currency, "scenarios": rows,
        "saving_vs_now": {
            "energy_cost_pct": pct_change(rows[1]["energy_cost"], rows[0]["energy_cost"]),
            "co2_pct": pct_change(rows[1]["co2_kg"], rows[0]["co2_kg"]),
            "total_usd_pct": pct_change(rows[1].get("total_usd"), rows[0].get("total_usd")),
        },
        "whitepaper_claim_usd": {"before": WHITEPAPER_CLAIM_USD[0], "after": WHITEPAPER_CLAIM_USD[1],
                                 "pct": pct_change(WHITEPAPER_CLAIM_USD[1], WHITEPAPER_CLAIM_USD[0])},
        "assumptions": {
            "params": job.params, "tokens": job.tokens, "flops_per_param_token": job.flops_per_param_token,
            "flops": job.flops, "mfu": job.mfu, "gpu_model": model.name, "gpus": job.gpus,
            "gpu_peak_tflops_dense": model.dense_tflops, "gpu_spec_source": model.spec_source,
            "run_hours": hours, "gpu_util_for_power": weights.energy.gpu_util,
            "gpu_power_w": weights.energy.gpu_power_w(model.name), "host_w_per_gpu": weights.energy.host_w_per_gpu,
            "pue": weights.energy.pue, "facility_power_kw": power,
            "gpu_price_usd_per_hour": model.price_usd_per_hour, "gpu_price_source": model.price_source,
            "now": iso(t_now), "now_is": now_note, "deadline": iso(deadline), "deadline_hours": job.deadline_hours,
            "prices": rs.price.source, "carbon": rs.carbon.source, "forecast": fc_label,
            "carbon_accounting": weights.accounting.method,
            "carbon_price_per_tonne": weights.carbon_price_per_tonne, "weights": pol.spec.weights.model_dump(),
        },
    }


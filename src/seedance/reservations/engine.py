"""Running reservation policies on demand windows: tuning the baselines, evaluating, ``reserve plan``.

``reserve plan --demand FILE --train-until T`` evaluates every policy on the hours after ``T``
(the held-out window) with the hours before it as history. Nothing after ``T`` is used for
training or tuning: PPO trains, and the percentile baseline is tuned, on windows drawn by
:func:`file_sampler`, which builds multi-year scenarios from the history before ``T`` alone (its
level and weekly profile, with the scenario family's growth, seasonality and bursts) plus the
generic synthetic family.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from seedance.core.errors import InputError
from seedance.reservations.accounting import EPOCH_HOURS, Attribution, Plan, simulate_plan
from seedance.reservations.demand import HOUR, DemandWindow, HourlyDemand, Scenario, random_scenario, scenario_demand
from seedance.reservations.demand import weekly_profile as _weekly_profile
from seedance.reservations.forecast import FORECAST_GRID, ForecastPlanner
from seedance.reservations.policies import (
    RESERVATION_POLICIES,
    OnlineBreakEven,
    Percentile,
    ReservationPolicy,
)
from seedance.reservations.pricing import ReservationPrices

YEAR_H = 8760
REPORTED = ("none", "percentile", "best-fixed", "online", "forecast-mpc", "ppo", "hindsight-optimal")
PERCENTILE_GRID: tuple[tuple[float, float | None, str], ...] = tuple(
    (lb, pct, term) for lb in (7.0, 30.0, 60.0) for pct in (None, 10.0, 25.0, 40.0, 50.0, 60.0, 75.0)
    for term in ("auto", "1y"))


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One policy on one window."""

    policy: str
    plan: Plan
    attribution: Attribution
    wall_s: float
    settings: dict[str, Any]

    @property
    def total_cost(self) -> float:
        """Total cost over the window."""
        return float(self.attribution.cost.sum())


def run_policy(policy: ReservationPolicy, window: DemandWindow, prices: ReservationPrices,
               epoch_hours: int = EPOCH_HOURS) -> PolicyResult:
    """Plan and cost ``policy`` on ``window``."""
    t0 = time.perf_counter()
    plan = policy.plan(window, prices, epoch_hours)
    wall = time.perf_counter() - t0
    return PolicyResult(policy.name, plan, simulate_plan(plan, window, prices), wall, policy.describe())


P = TypeVar("P", bound=ReservationPolicy)


def _pick_setting(candidates: Sequence[tuple[dict[str, Any], P]],
                  windows: Sequence[tuple[DemandWindow, ReservationPrices]],
                  epoch_hours: int) -> tuple[P, list[dict[str, Any]]]:
    """The candidate with the lowest mean cost relative to 'none' over ``windows`` (the first on ties),
    and one row per candidate: its setting and that mean."""
    nones = [float(simulate_plan(Plan.empty(len(w), epoch_hours), w, p).cost.sum()) for w, p in windows]
    rows: list[dict[str, Any]] = []
    scored: list[tuple[float, P]] = []
    for setting, pol in candidates:
        rel = [run_policy(pol, w, p, epoch_hours).total_cost / n for (w, p), n in zip(windows, nones, strict=True)]
        scored.append((float(np.mean(rel)), pol))
        rows.append({**setting, "mean_cost_vs_none": scored[-1][0]})
    return min(scored, key=lambda x: x[0])[1], rows


def tune_percentile(windows: Sequence[tuple[DemandWindow, ReservationPrices]],
                    grid: Sequence[tuple[float, float | None, str]] = PERCENTILE_GRID,
                    epoch_hours: int = EPOCH_HOURS) -> tuple[Percentile, list[dict[str, Any]]]:
    """The percentile setting with the lowest mean cost relative to 'none' over ``windows``."""
    return _pick_setting([({"lookback_days": lb, "percentile": pct, "term": term}, Percentile(lb, pct, term))
                          for lb, pct, term in grid], windows, epoch_hours)


def tune_online(windows: Sequence[tuple[DemandWindow, ReservationPrices]],
                epoch_hours: int = EPOCH_HOURS) -> tuple[OnlineBreakEven, list[dict[str, Any]]]:
    """The online algorithm's term (1 or 3 years) with the lowest mean cost over ``windows``."""
    return _pick_setting([({"term": term}, OnlineBreakEven(term)) for term in ("1y", "3y")], windows, epoch_hours)


def tune_forecast(windows: Sequence[tuple[DemandWindow, ReservationPrices]],
                  grid: Sequence[dict[str, float]] = FORECAST_GRID,
                  epoch_hours: int = EPOCH_HOURS) -> tuple[ForecastPlanner, list[dict[str, Any]]]:
    """The receding-horizon planner's setting with the lowest mean cost relative to 'none' over ``windows``."""
    return _pick_setting([(dict(setting), ForecastPlanner(**setting)) for setting in grid], windows, epoch_hours)


def file_sampler(history: HourlyDemand, *, window_hours: int, synthetic_share: float = 0.3,
                 prices: Sequence[ReservationPrices] = ()) -> Callable[[np.random.Generator],
                                                                       tuple[DemandWindow, ReservationPrices]]:
    """Training windows built from ``history`` only (its level and weekly profile), one year of history each."""
    if len(history) < 24 * 14:
        raise InputError("need at least 14 days of demand before --train-until to train on", source=history.source,
                         field="--train-until")
    prof = _weekly_profile(history.values, history.start)
    level = float(np.mean(history.values[-24 * 30:])) or 1.0
    pts = list(prices)
    if not pts:
        raise ValueError("file_sampler needs price points")

    def draw(rng: np.random.Generator) -> tuple[DemandWindow, ReservationPrices]:
        seed = int(rng.integers(0, 2**31 - 1))
        sc_rng = np.random.default_rng(seed)
        sc = random_scenario(sc_rng, profile=None if rng.random() < synthetic_share else prof, name="from-history")
        sc = Scenario(**{**_fields(sc), "base": level * float(sc_rng.uniform(0.5, 2.0))})
        d = scenario_demand(sc, start=history.start, hours=YEAR_H + window_hours, seed=seed)
        return d.window(YEAR_H, window_hours, label=f"from-history: {d.source}"), pts[int(rng.integers(0, len(pts)))]

    return draw


def _fields(sc: Scenario) -> dict[str, Any]:
    return {name: getattr(sc, name) for name in Scenario.__dataclass_fields__}


def results_json(results: Sequence[PolicyResult], window: DemandWindow) -> list[dict[str, Any]]:
    """The ``results`` list of ``reserve plan -o json``."""
    by = {r.policy: r for r in results}
    opt = by.get("hindsight-optimal")
    out = []
    for r in results:
        tot = r.attribution.totals()
        out.append({
            "policy": r.policy, "total_cost": r.total_cost, "baseline_cost": tot["baseline"],
            "savings": tot["savings"], "savings_pct": tot["savings_pct"],
            "vs_hindsight_optimal": r.total_cost / opt.total_cost if opt and opt.total_cost else None,
            "gap_to_optimal_pct": 100.0 * (r.total_cost / opt.total_cost - 1.0) if opt and opt.total_cost else None,
            "attribution": {k: tot[k] for k in ("committed_used", "committed_idle", "on_demand", "spot",
                                                "spot_interruption")},
            "utilisation_of_commitments": tot["utilisation_of_commitments"],
            "purchases": r.plan.to_json(window.start), "settings": r.settings, "wall_s": r.wall_s,
        })
    return out


def window_json(window: DemandWindow) -> dict[str, Any]:
    """Facts about the evaluated window."""
    from seedance.signals.series import iso

    v = window.values
    return {"start": iso(window.start), "end": iso(window.start + HOUR * len(v)), "hours": len(v),
            "history_hours": len(window.history), "mean_gpus": float(v.mean()), "peak_gpus": int(v.max(initial=0)),
            "label": window.label}


def make_policy(name: str, **kwargs: Any) -> ReservationPolicy:
    """Instantiate a registered policy."""
    return RESERVATION_POLICIES.get(name)(**kwargs)

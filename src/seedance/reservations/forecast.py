"""A receding-horizon planner: plan the rest of the window on a past-only forecast, buy the first step.

Model-predictive control for reservations. At every decision epoch the planner

1. forecasts the hourly demand of the rest of the window from the past only: the last
   ``base_days`` of observed demand repeated (it keeps the weekly shape), times a damped trend
   ``exp(g * D * (1 - exp(-t / D)))`` with ``g`` = ``growth_mult`` x the least-squares yearly growth
   of the last year's log daily mean (:func:`past_growth`) and ``D`` =
   ``damp_years`` (the trend flattens out: a young project's growth does not last four years),
   times ``scale`` (a hedge);
2. subtracts the units already in force and plans every later purchase on that forecast with the
   layered program below;
3. buys what that plan buys now, and re-plans next epoch with one more epoch of real demand.

It never reads the window's future. Its settings are tuned on the ``tune`` windows like every
other baseline (:func:`seedance.reservations.engine.tune_forecast`, grid :data:`FORECAST_GRID`);
the defaults are the best of that grid on 96 ``tune`` windows (1.0903 of the MILP's cost on
average, the tuned cloud advisor 1.1074 on the same windows).

**The layered program** (:func:`layered_plan`). With whole units, the hours paid on demand are
``max(0, d_t - R_t) = sum_l [d_t >= l > R_t]``: unit level ``l`` is a layer whose demand is the
indicator ``d_t >= l``. Planning each layer on its own is a shortest path over the epochs
(cover epoch ``e`` on demand at ``overflow x hours with d >= l in e``, or buy a term there and
jump past it): one backward pass for all layers at once, ``O(layers x epochs x terms)``. Its plan
is a feasible plan of the MILP's decision space; the returned objective is an upper bound on that
plan's true cost (equal when the covered layers of every hour are the lowest ones; a unit serves
any demand, so a gap below a covered layer only makes the true cost lower). The MILP can do better
only by units that serve different layers in different epochs. Measured by
``benchmarks/bench_reservations_layered.py`` on the 24 ``tune`` windows (figures in
docs/reservations.md); ``tests/reservations/test_reservations_forecast.py`` pins it against the MILP.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.reservations.accounting import EPOCH_HOURS, Plan, allowed_terms, n_epochs
from seedance.reservations.policies import RESERVATION_POLICIES, EpochView, OnlinePolicy
from seedance.reservations.pricing import TERM_HOURS, TERMS, ReservationPrices

IntA = NDArray[np.int64]
FloatA = NDArray[np.float64]
YEAR_H = 8760
FORECAST_GRID: tuple[dict[str, float], ...] = tuple(
    {"growth_mult": g, "damp_years": dy, "base_days": b, "scale": s}
    for g in (0.25, 0.4, 0.5) for dy in (0.5, 1.0, 2.0) for b in (45.0, 60.0) for s in (0.97, 1.0, 1.03))


def layered_plan(demand: IntA, prices: ReservationPrices, epoch_hours: int = EPOCH_HOURS) -> tuple[Plan, float]:
    """The layer-by-layer optimal plan for hourly ``demand`` and its objective, an upper bound on its cost.

    Terms that would end after ``len(demand)`` hours are not bought, as in the MILP.
    """
    d = np.asarray(demand, dtype=np.int64)
    hours = len(d)
    ne = n_epochs(hours, epoch_hours)
    top = int(d.max(initial=0))
    buys = np.zeros((ne, len(TERMS)), dtype=np.int64)
    if top <= 0:
        return Plan(buys, epoch_hours), 0.0
    pad = np.zeros(ne * epoch_hours, dtype=np.int64)
    pad[:hours] = np.maximum(d, 0)
    seg = np.sort(pad.reshape(ne, epoch_hours), axis=1)
    levels = np.arange(1, top + 1)
    # hours of epoch e with demand >= l, for every layer l: (epochs, layers)
    above = epoch_hours - np.stack([np.searchsorted(s, levels, side="left") for s in seg])
    uncovered = above * prices.overflow
    terms = [(k, TERM_HOURS[t] // epoch_hours, prices.commitments[t] * TERM_HOURS[t])
             for k, t in enumerate(TERMS) if t in prices.commitments]
    best_after = np.zeros((ne + 1, top))
    choice = np.full((ne, top), -1, dtype=np.int64)
    for e in range(ne - 1, -1, -1):
        best = uncovered[e] + best_after[e + 1]
        ch = np.full(top, -1, dtype=np.int64)
        ok = allowed_terms(e, hours, prices, epoch_hours)
        for k, span, cost in terms:
            if not ok[k]:
                continue
            c = cost + best_after[min(ne, e + span)]
            better = c < best - 1e-9
            best = np.where(better, c, best)
            ch = np.where(better, k, ch)
        best_after[e] = best
        choice[e] = ch
    due = np.zeros(top, dtype=np.int64)  # the epoch at which each layer decides next
    for e in range(ne):
        now = due == e
        due[now & (choice[e] < 0)] = e + 1
        for k, span, _cost in terms:
            sel = now & (choice[e] == k)
            buys[e, k] = int(sel.sum())
            due[sel] = e + span
    return Plan(buys, epoch_hours), float(best_after[0].sum())


def past_growth(observed: IntA) -> float:
    """Least-squares growth per year of the log daily mean over the last year (0 with < 120 days)."""
    n = min(len(observed) // 24, 365)
    if n < 120:
        return 0.0
    daily = np.asarray(observed[-n * 24:], dtype=np.float64).reshape(n, 24).mean(axis=1)
    x = np.arange(n) / 365.0
    y = np.log(np.maximum(daily, 1e-3))
    return float(np.clip(float(np.polyfit(x, y, 1)[0]), -2.0, 2.0))


def forecast_demand(observed: IntA, hours: int, *, base_days: float, growth: float, damp_years: float | None,
                    scale: float) -> FloatA:
    """The next ``hours`` of demand forecast from ``observed`` (see the module docstring)."""
    n = min(len(observed), max(1, int(base_days * 24)))
    if hours <= 0 or n == 0 or not len(observed):
        return np.zeros(max(0, hours))
    base = np.asarray(observed[-n:], dtype=np.float64)
    t = (np.arange(hours) + 0.5 * n) / YEAR_H  # years from the middle of the base period
    if damp_years:
        t = damp_years * (1.0 - np.exp(-t / damp_years))
    return np.asarray(base[np.arange(hours) % n] * np.exp(growth * t) * scale, dtype=np.float64)


@RESERVATION_POLICIES.register("forecast-mpc", aliases=("mpc", "receding-horizon"))
class ForecastPlanner(OnlinePolicy):
    """Re-plan the rest of the window every epoch on a past-only forecast; buy the first step."""

    name = "forecast-mpc"
    summary = "receding-horizon plan on a damped-trend forecast of the past (model-predictive control)"

    def __init__(self, base_days: float = 60.0, growth_mult: float = 0.5, damp_years: float | None = 0.5,
                 scale: float = 1.0, growth_clip: float = 1.0) -> None:
        if base_days <= 0:
            raise InputError("base_days must be > 0", field="base_days")
        if scale <= 0:
            raise InputError("scale must be > 0", field="scale")
        if damp_years is not None and damp_years <= 0:
            raise InputError("damp_years must be > 0 (or null for no damping)", field="damp_years")
        if growth_clip < 0:
            raise InputError("growth_clip must be >= 0", field="growth_clip")
        self.base_days = base_days
        self.growth_mult = growth_mult
        self.damp_years = damp_years
        self.scale = scale
        self.growth_clip = growth_clip

    def units(self, view: EpochView, scale: float | None = None, terms: tuple[bool, ...] | None = None) -> IntA:
        """What the plan on the forecast buys now, by term (``scale`` and ``terms`` override the settings)."""
        out = np.zeros(len(TERMS), dtype=np.int64)
        allowed = [a and (terms is None or terms[k]) for k, a in enumerate(view.allowed)]
        if not any(allowed):
            return out
        g = float(np.clip(past_growth(view.observed) * self.growth_mult, -self.growth_clip, self.growth_clip))
        f = forecast_demand(view.observed, view.hours_left, base_days=self.base_days, growth=g,
                            damp_years=self.damp_years, scale=self.scale if scale is None else scale)
        now = view.epoch * view.epoch_hours
        force = view.force_all[now:now + view.hours_left].sum(axis=1)
        need = np.maximum(0, np.ceil(f - 1e-9).astype(np.int64) - force)
        prices = view.prices
        if terms is not None:
            prices = replace(prices, commitments={t: r for t, r in prices.commitments.items()
                                                  if terms[TERMS.index(t)]})
        plan, _ = layered_plan(need, prices, view.epoch_hours)
        out[:] = np.where(allowed, plan.buys[0], 0)
        return out

    def decide(self, view: EpochView) -> IntA:
        return self.units(view)

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"base_days": self.base_days, "growth_mult": self.growth_mult,
                                     "damp_years": self.damp_years, "scale": self.scale,
                                     "growth_clip": self.growth_clip}

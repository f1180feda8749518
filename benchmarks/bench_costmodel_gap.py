"""Where peak-aware loses against the hindsight optimum: decision rules and forecast diagnostics.

For each region (default US-CAL-CISO and DE-LU, all of 2023, the evaluation's workload) this
measures, against run-immediately and the hindsight optimum computed in the same run, the share
of the optimum's $ / CO2 / score savings captured by

* decision rules on the same forecasts (``--rules``): the point rule of ``peak-aware`` and
  variants that use forecast-error scenarios (the error paths of the forecasts issued at the
  same hour on the 14 previous days whose targets were observed, both signals jointly) or a
  margin; every rule starts a job no later than its latest start (0 deadline misses) and is
  scored on the same actual score;
* forecast diagnostics (``--diagnostics``): the same planner given the actual values, the actual
  values plus the forecast's errors scaled, only their level or only their shape, actual prices;
* by month of arrival (``--months``).

Captures are also split by the arrival half (H1 = January-June, the tuning half; H2 = July-
December): jobs are independent without a capacity limit, so the optimum of a subset is the
optimum's schedule restricted to it. Forecasts read only the past (the policy's forecaster);
the diagnostics read the future on purpose and are not policies.

    .venv/bin/python benchmarks/bench_costmodel_gap.py --rules --diagnostics --months
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from seedance.costmodel.evaluation import actual_signals, planner_forecasts, policy_signals
from seedance.costmodel.policy import CostPolicy
from seedance.costmodel.schedulers import (
    SCHEDULE_POLICIES,
    PeakAware,
    PlannerForecasts,
    Schedule,
    ScheduleContext,
    deferrable_mask,
    place_inflexible,
)
from seedance.costmodel.score import Signals, WindowCosts, candidate_matrix, window_costs
from seedance.costmodel.workload import build_workload
from seedance.signals.forecast import ForecastMatrix
from seedance.signals.series import HOUR, parse_utc
from seedance.traces import load_pods
from seedance.traces.paths import DEFAULT_PODS, data_file

FloatA = NDArray[np.float64]
SPLIT = parse_utc("2023-07-01")


def _extend(row: FloatA, n: int) -> FloatA:
    """``row`` continued by repeating its last 24 values (as the planner does)."""
    if n <= len(row):
        return row[:n]
    reps = int(np.ceil((n - len(row)) / 24))
    return np.concatenate([row, np.tile(row[-24:], reps)])[:n]


class ScenarioPeakAware(PeakAware):
    """``peak-aware`` with a different start rule (no capacity limit).

    Rules: ``emin`` waits while ``score(now) > a * E[min later score] + (1 - a) * min later
    forecast score`` (the option value of waiting, over the scenarios); ``vote`` starts when now
    is the best start in at least a share ``a`` of the scenarios; ``margin`` starts when now is
    within ``a`` currency/MWh of the best later window, ``margin-lead`` with the margin scaled by
    the lead of that window / 24 h. Without enough scenarios the point rule decides.
    """

    def __init__(self, rule: str, a: float, days: int = 14) -> None:
        self.rule = rule
        self.a = a
        self.days = days

    def _scenarios(self, fc: PlannerForecasts, hour: int, hours: int) -> tuple[FloatA, FloatA] | None:
        out = []
        for fm in (fc.price, fc.carbon):
            r = fm.row(hour)
            if r < 0:
                return None
            lag = int((hour - int(fm.issue_times[r])) // HOUR)
            base = _extend(fm.point[r], lag + hours)[lag:]
            if not np.all(np.isfinite(base)):
                return None
            y, h, now_pos = fm.series.values, fm.horizon, int(fm.issues[r]) + lag
            rows = [base]
            for m in range(2, 2 + self.days):
                r2 = r - 24 * m
                if r2 < 0:
                    break
                t2 = int(fm.issues[r2])
                if t2 + h <= now_pos:  # every target of that forecast was observed by now
                    rows.append(base + _extend(y[t2:t2 + h] - fm.point[r2], hours))
            out.append(np.array(rows))
        k = min(len(out[0]), len(out[1]))
        return (out[0][:k], out[1][:k]) if k >= 5 else None

    def schedule(self, ctx: ScheduleContext) -> Schedule:
        assert ctx.forecasts is not None and ctx.capacity_gpus is None
        w = ctx.workload
        flex = deferrable_mask(ctx)
        starts, _ = place_inflexible(ctx, flex)
        latest = ctx.latest()
        queue = np.flatnonzero(flex)
        waiting = np.zeros(0, dtype=np.int64)
        nxt, hour = 0, 0
        while nxt < len(queue) or len(waiting):
            if not len(waiting):
                hour = max(hour, int(w.arrival[queue[nxt]] // HOUR) * HOUR)
            stop = int(np.searchsorted(w.arrival[queue], hour + HOUR, side="left"))
            waiting = np.concatenate([waiting, queue[nxt:stop]])
            nxt = max(nxt, stop)
            now = np.maximum(float(hour), w.arrival[waiting])
            hours = max(1, int(np.ceil((float((latest[waiting] + w.duration[waiting]).max()) - hour) / HOUR)))
            paths = self._scenarios(ctx.forecasts, hour, hours)
            sig = ctx.forecasts.signals_at(hour, hour + hours * HOUR)
            if sig is None:  # no forecast yet: run now (as peak-aware does)
                starts[waiting] = now
                waiting = waiting[:0]
                hour += HOUR
                continue
            c, valid = candidate_matrix(now, latest[waiting], w.duration[waiting])
            args = [np.asarray(x, dtype=np.float64)[:, None] for x in
                    (w.duration[waiting], w.power_kw[waiting], w.gpus[waiting], w.arrival[waiting])]
            point = np.where(valid, window_costs(c, *args, sig, ctx.weights).score, np.inf)
            rows = np.arange(len(c))
            this_hour = valid & (c < hour + HOUR)
            best = np.argmin(point, axis=1)  # rows ascending in time: the first minimum is the earliest
            want = c[rows, best]
            go = want < hour + HOUR
            now_i = np.argmin(np.where(this_hour, point, np.inf), axis=1)
            now_score = point[rows, now_i]
            later = np.where(this_hour, np.inf, point)
            later_i = np.argmin(later, axis=1)
            later_min = later[rows, later_i]
            has_later = np.isfinite(later_min)
            if paths is not None and self.rule in ("emin", "vote"):
                sc = np.array([np.where(valid, window_costs(c, *args, Signals(hour, p, q, sig.currency), ctx.weights)
                                        .score, np.inf) for p, q in zip(paths[0][1:], paths[1][1:], strict=True)])
                if self.rule == "emin":
                    e_min = np.where(this_hour[None], np.inf, sc).min(axis=2).mean(axis=0)
                    wait_value = np.where(has_later, self.a * e_min + (1 - self.a) * later_min, np.inf)
                    go = go & ~(has_later & (now_score > wait_value))
                else:
                    share = (c[rows[None], np.argmin(sc, axis=2)] < hour + HOUR).mean(axis=0)
                    go = share >= self.a
                    want = c[rows, now_i]
            elif self.rule in ("margin", "margin-lead"):
                mwh = w.power_kw[waiting] * w.duration[waiting] / HOUR / 1000.0
                lead = np.maximum((c[rows, later_i] - hour) / HOUR, 0.0)
                margin = self.a * mwh * (lead / 24.0 if self.rule == "margin-lead" else 1.0)
                early = has_later & (now_score <= later_min + margin)
                want = np.where(early & ~go, c[rows, now_i], want)
                go = go | early
            force = latest[waiting] < hour + HOUR  # the latest start is in this hour
            want = np.where(force & ~go, c[rows, now_i], want)
            go = go | force
            starts[waiting[go]] = want[go]
            waiting = waiting[~go]
            hour += HOUR
        return Schedule(starts, {})


@dataclass
class Region:
    name: str
    ctx: ScheduleContext
    flex: NDArray[np.bool_]
    forecasts: PlannerForecasts
    imm: WindowCosts
    opt: WindowCosts

    def costs(self, starts: FloatA) -> WindowCosts:
        w = self.ctx.workload
        return window_costs(starts, w.duration, w.power_kw, w.gpus, w.arrival, self.ctx.actual, self.ctx.weights)

    def capture(self, wc: WindowCosts, mask: NDArray[np.bool_]) -> tuple[float, float, float]:
        m = self.flex & mask
        out = []
        for a, b, o in ((self.imm.cost, wc.cost, self.opt.cost), (self.imm.co2_kg, wc.co2_kg, self.opt.co2_kg),
                        (self.imm.score, wc.score, self.opt.score)):
            best = float(a[m].sum() - o[m].sum())
            out.append(float(a[m].sum() - b[m].sum()) / best if abs(best) > 1e-12 else float("nan"))
        return out[0], out[1], out[2]

    def run(self, forecasts: PlannerForecasts, policy: PeakAware | None = None) -> tuple[WindowCosts, int]:
        ctx = ScheduleContext(workload=self.ctx.workload, actual=self.ctx.actual, weights=self.ctx.weights,
                              tiers=self.ctx.tiers, forecasts=forecasts)
        starts = (policy or PeakAware()).schedule(ctx).starts
        w = self.ctx.workload
        return self.costs(starts), int((starts + w.duration > w.deadline + 1e-6).sum())


def setup(region: str, start_date: str) -> Region:
    pol = CostPolicy()
    rs = policy_signals(pol, region)
    start = int(np.ceil(max(parse_utc(start_date), rs.start) / HOUR) * HOUR)
    end = rs.end
    weights = pol.weights(rs.currency)
    wl = build_workload(load_pods(data_file(DEFAULT_PODS)), start=start, end=end, flexible_share=0.3,
                        slack_hours=pol.spec.deferral.default_slack_hours, energy=weights.energy, seed=0)
    ctx = ScheduleContext(workload=wl, actual=actual_signals(rs, start, end), weights=weights)
    flex = deferrable_mask(ctx)
    reg = Region(region, ctx, flex, planner_forecasts(pol, rs, start, end), None, None)  # type: ignore[arg-type]
    reg.imm = reg.costs(SCHEDULE_POLICIES.get("immediate")().schedule(ctx).starts)
    reg.opt = reg.costs(SCHEDULE_POLICIES.get("hindsight-optimal")().schedule(ctx).starts)
    return reg


def replaced(fc: PlannerForecasts, fn: Callable[[FloatA, FloatA, int], FloatA]) -> PlannerForecasts:
    """Forecasts whose point rows are ``fn(point, truth, signal index)``."""
    mats = []
    for i, fm in enumerate((fc.price, fc.carbon)):
        y = fm.series.values
        t = fm.issues[:, None] + np.arange(fm.horizon)[None, :]
        truth = np.where(t < len(y), y[np.minimum(t, len(y) - 1)], np.nan)
        truth = np.where(np.isnan(truth), fm.point, truth)  # beyond the data: keep the forecast
        mats.append(ForecastMatrix(series=fm.series, issues=fm.issues, point=fn(fm.point, truth, i),
                                   quantiles=fm.quantiles, bands=fm.bands))
    return PlannerForecasts(mats[0], mats[1], fc.currency)


def level(e: FloatA) -> FloatA:
    """Mean error over leads 1-36 of each issue (0 where none is known)."""
    ok = np.isfinite(e[:, :36])
    total = np.where(ok, e[:, :36], 0.0).sum(axis=1, keepdims=True)
    return np.asarray(total / np.maximum(ok.sum(axis=1, keepdims=True), 1), dtype=np.float64)


DIAGNOSTICS: list[tuple[str, Callable[[FloatA, FloatA, int], FloatA]]] = [
    ("actual values (perfect 48 h forecast)", lambda p, t, i: t),
    ("actual + errors x 0.75", lambda p, t, i: t + 0.75 * (p - t)),
    ("actual + errors x 0.5", lambda p, t, i: t + 0.5 * (p - t)),
    ("actual + error level only (mean, leads 1-36)", lambda p, t, i: t + level(p - t)),
    ("actual + error shape only (minus that mean)", lambda p, t, i: p - level(p - t)),
    ("actual prices, forecast carbon", lambda p, t, i: t if i == 0 else p),
    ("actual values at leads 1-24, forecast beyond", lambda p, t, i: np.concatenate([t[:, :24], p[:, 24:]], axis=1)),
]
RULES: list[tuple[str, str, float]] = [
    ("wait for a=0.2 of the option value E[min] - min", "emin", 0.2),
    ("wait for a=0.5 of the option value", "emin", 0.5),
    ("start when now is best in >= 50% of scenarios", "vote", 0.5),
    ("start when within 3 /MWh of the best later window", "margin", 3.0),
    ("start when within 10 /MWh x lead/24h of it", "margin-lead", 10.0),
]


def line(label: str, reg: Region, wc: WindowCosts, misses: int, wall: float) -> str:
    w = reg.ctx.workload
    h1, h2 = w.arrival < SPLIT, w.arrival >= SPLIT
    a = reg.capture(wc, np.ones(len(w), dtype=bool))
    b, c = reg.capture(wc, h1), reg.capture(wc, h2)
    return (f"  {label:<52} {a[0]:7.1%} {a[1]:7.1%} {a[2]:7.1%} | H1 {b[2]:6.1%} | H2 {c[0]:6.1%} {c[1]:6.1%} "
            f"{c[2]:6.1%} | misses {misses} | {wall:5.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--region", action="append", help="Region (repeatable; default US-CAL-CISO and DE-LU).")
    ap.add_argument("--start-date", default="2023-01-01")
    ap.add_argument("--rules", action="store_true", help="Decision-rule variants.")
    ap.add_argument("--diagnostics", action="store_true", help="Forecast diagnostics (read the future).")
    ap.add_argument("--months", action="store_true", help="Capture by month of arrival.")
    args = ap.parse_args()
    for name in args.region or ["US-CAL-CISO", "DE-LU"]:
        t0 = time.perf_counter()
        reg = setup(name, args.start_date)
        print(f"\n== {name}: {int(reg.flex.sum()):,} flexible jobs; baselines (immediate, optimum) in "
              f"{time.perf_counter() - t0:.1f} s")
        head = f"  {'capture of the optimum savings':<52} {'$':>7} {'CO2':>7} {'score':>7}"
        print(head + " | H1 score | H2 $, CO2, score")
        t0 = time.perf_counter()
        wc, misses = reg.run(reg.forecasts)
        print(line("peak-aware (point rule, forecasts)", reg, wc, misses, time.perf_counter() - t0))
        if args.rules:
            for label, rule, a in RULES:
                t0 = time.perf_counter()
                wr, mr = reg.run(reg.forecasts, ScenarioPeakAware(rule, a))
                print(line(label, reg, wr, mr, time.perf_counter() - t0))
        if args.diagnostics:
            for label, fn in DIAGNOSTICS:
                t0 = time.perf_counter()
                wd, md = reg.run(replaced(reg.forecasts, fn))
                print(line(label, reg, wd, md, time.perf_counter() - t0))
        if args.months:
            w = reg.ctx.workload
            month = np.array([datetime.fromtimestamp(float(x), tz=UTC).month for x in w.arrival.tolist()])
            cells = []
            for m in sorted(set(month.tolist())):
                c = reg.capture(wc, month == m)
                cells.append(f"{m}: {c[0]:.0%}/{c[1]:.0%}")
            print("  by month of arrival ($/CO2): " + ", ".join(cells))
            c = reg.capture(wc, month > 1)
            print(f"  without January arrivals: $ {c[0]:.1%}, CO2 {c[1]:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

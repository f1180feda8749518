"""Start-time policies compared by the evaluation: run immediately, peak-aware, hindsight-optimal.

NOTE(seedance): the rules every policy shares, once.
  * Inflexible jobs (not flexible, or in a tier that is not ``deferrable``) start on arrival, in
    arrival order, identically under every policy; with a capacity they take the first hour
    with room. Only flexible jobs differ between policies.
  * A flexible job runs uninterrupted for its duration, starts no earlier than its arrival and no
    later than ``latest = min(deadline - duration, arrival + max_delay)``; the candidate starts
    are those of :func:`~seedance.costmodel.score.candidate_starts` (exact for any real start).
  * Capacity (optional, GPUs): checked per clock hour; a job holds its GPUs in every hour its run
    touches. The same ledger is used by every policy and by the optimum's constraints.
  * ``immediate`` starts flexible jobs on arrival too (first hour with room).
  * ``peak-aware`` is online: every hour it scores each waiting job with
    :func:`~seedance.costmodel.score.cost_score` against the *forecast* issued at that hour (past
    data only) and starts the job when its best window begins within the hour, or when its
    latest start arrives; waiting jobs are tried in :func:`~seedance.costmodel.deferral.reorder`
    order (regret first, tier shares guaranteed).
  * ``peak-aware`` plans on the day-ahead prices *as published* where the market publishes them
    (the policy's ``price_forecaster: auto``), the past-only forecaster beyond them and for carbon.
  * ``day-ahead-rule`` is the simple baseline: every hour, each waiting job goes to the start with
    the lowest *energy cost* on the published day-ahead prices (same hour of the last published day
    beyond them), carbon ignored; it starts when that start falls within the hour.
  * ``hindsight-optimal`` knows the actual signals and minimises the same score over all flexible
    jobs at once: an assignment LP (one variable per job and candidate start) with capacity rows
    where capacity can bind, solved by OR-Tools (GLOP when no row binds, which makes the LP
    integral; SCIP as a MIP otherwise). ``optimal-score`` is the same; ``optimal-cost`` and
    ``optimal-co2`` solve the same program for energy cost alone and for emissions alone (the
    exact optimum of each single objective, so a capture figure compares like with like).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.costmodel.deferral import reorder
from seedance.costmodel.score import JobFeatures, Signals, Weights, best_windows, candidate_matrix, window_costs
from seedance.costmodel.workload import Workload
from seedance.signals.forecast import ForecastMatrix
from seedance.signals.series import HOUR, iso
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig

FloatA = NDArray[np.float64]


class CapacityLedger:
    """GPUs held per clock hour over ``[start, end)``; ``capacity=None`` means unlimited."""

    __slots__ = ("capacity", "load", "start")

    def __init__(self, start: int, end: int, capacity: float | None) -> None:
        self.start = start
        self.capacity = capacity
        self.load = np.zeros(max(1, int(np.ceil((end - start) / HOUR))))

    def bins(self, s: float, d: float) -> tuple[int, int]:
        """Indices ``[i0, i1)`` of the clock hours touched by ``[s, s + d)``."""
        i0 = int((s - self.start) // HOUR)
        i1 = int(np.ceil((s + d - self.start) / HOUR))
        return max(i0, 0), min(max(i1, i0 + 1), len(self.load))

    def fits(self, s: float, d: float, g: float) -> bool:
        """Whether ``g`` more GPUs fit in every hour touched by ``[s, s + d)``."""
        if self.capacity is None:
            return True
        i0, i1 = self.bins(s, d)
        return bool(self.load[i0:i1].max(initial=0.0) + g <= self.capacity + 1e-9)

    def add(self, s: float, d: float, g: float) -> None:
        """Hold ``g`` GPUs in every hour touched by ``[s, s + d)``."""
        i0, i1 = self.bins(s, d)
        self.load[i0:i1] += g

    def first_fit(self, s: float, d: float, g: float) -> float:
        """The earliest start ``>= s`` (``s`` itself or an hour boundary) with room for the job."""
        t = s
        while not self.fits(t, d, g):
            t = (np.floor(t / HOUR) + 1) * HOUR
            if t - self.start > HOUR * len(self.load):
                raise InputError(f"a job of {g:g} GPUs never fits the capacity of {self.capacity:g} GPUs",
                                 source="--capacity-gpus")
        return float(t)


@dataclass(frozen=True, slots=True, eq=False)
class PlannerForecasts:
    """Forecasts issued every hour, turned into planning signals.

    Attributes:
        price, carbon: Forecast matrices (issued hourly over the evaluation span).
        currency: Currency of the prices.
    """

    price: ForecastMatrix
    carbon: ForecastMatrix
    currency: str

    def signals_at(self, t: int, until: float) -> Signals | None:
        """Point forecasts issued at hour ``t``, covering ``[t, until)``; ``None`` where unknown.

        Beyond the forecast horizon the last 24 forecast hours repeat (the daily profile).
        """
        hours = max(1, int(np.ceil((until - t) / HOUR)))
        rows = []
        for fm in (self.price, self.carbon):
            r = fm.row(t)
            if r < 0:
                return None
            lag = int((t - int(fm.issue_times[r])) // HOUR)  # hours since that issue
            v = _extend(fm.point[r], lag + hours)[lag:]
            if not np.all(np.isfinite(v)):
                return None
            rows.append(v)
        return Signals(t, rows[0], rows[1], self.currency, f"forecast issued {iso(t)}")


def _extend(row: FloatA, n: int) -> FloatA:
    if n <= len(row):
        return row[:n]
    period = row[-24:] if len(row) >= 24 else row[-1:]
    reps = int(np.ceil((n - len(row)) / len(period)))
    return np.concatenate([row, np.tile(period, reps)])[:n]


@dataclass(frozen=True, slots=True, eq=False)
class ScheduleContext:
    """Everything a start-time policy may use.

    Attributes:
        workload: The jobs.
        actual: Actual signals over the evaluation span (only ``hindsight-optimal`` reads them
            for decisions; every policy is *scored* on them).
        weights: The cost policy's weights.
        tiers: SLA tiers.
        capacity_gpus: GPU capacity per hour, or ``None``.
        forecasts: Hourly forecasts for online policies.
        day_ahead: Forecasts of the ``day-ahead-rule`` baseline (published day-ahead prices,
            seasonal naive beyond; carbon unused).
        mip_time_limit_s: Time limit of the MIP when capacity binds.
    """

    workload: Workload
    actual: Signals
    weights: Weights
    tiers: TierConfig = DEFAULT_TIER_CONFIG
    capacity_gpus: float | None = None
    forecasts: PlannerForecasts | None = None
    day_ahead: PlannerForecasts | None = None
    mip_time_limit_s: float = 300.0

    def ledger(self) -> CapacityLedger:
        """An empty capacity ledger over the signals' span."""
        return CapacityLedger(self.actual.start, self.actual.end, self.capacity_gpus)

    def latest(self) -> FloatA:
        """Latest start of every job."""
        return self.workload.latest_start(self.weights.max_delay_h)

    def features(self, j: int) -> JobFeatures:
        """Job ``j`` as the cost model sees it."""
        w = self.workload
        return JobFeatures(duration_s=float(w.duration[j]), gpu_model=str(w.gpu_model[j]), gpus=float(w.gpus[j]),
                           deadline=float(w.deadline[j]), tier=str(w.tier[j]), flexible=bool(w.flexible[j]),
                           submitted=float(w.arrival[j]))


@dataclass(frozen=True, slots=True)
class Schedule:
    """Start time of every job, and facts about how they were found."""

    starts: FloatA
    info: dict[str, Any] = field(default_factory=dict)


class SchedulePolicy(ABC):
    """Chooses start times; ``schedule`` is called once per evaluation run."""

    name: ClassVar[str]
    summary: ClassVar[str]

    @abstractmethod
    def schedule(self, ctx: ScheduleContext) -> Schedule:
        """Start times of all jobs of ``ctx.workload``."""


SCHEDULE_POLICIES: Registry[type[SchedulePolicy]] = Registry("schedule policy")

OBJECTIVES: tuple[str, ...] = ("score", "cost", "co2")


def objective_weights(weights: Weights, objective: str) -> Weights:
    """``weights`` reduced to one objective: ``score`` (unchanged), ``cost`` (energy cost only) or
    ``co2`` (emissions only, 1 per tonne); the deferral limits are kept."""
    if objective == "score":
        return weights
    if objective == "cost":
        return replace(weights, price=1.0, carbon=0.0, delay=0.0, min_gain=0.0)
    if objective == "co2":
        return replace(weights, price=0.0, carbon=1.0, carbon_price_per_tonne=1.0, delay=0.0, min_gain=0.0)
    raise InputError(f"unknown objective {objective!r}; valid: {', '.join(OBJECTIVES)}", field="objective")


def place_inflexible(ctx: ScheduleContext, deferrable: NDArray[np.bool_]) -> tuple[FloatA, CapacityLedger]:
    """Start every job that may not wait on arrival (first hour with room); NaN for the others."""
    w = ctx.workload
    starts = np.full(len(w), np.nan)
    ledger = ctx.ledger()
    fixed = np.flatnonzero(~deferrable)
    if ctx.capacity_gpus is None:
        starts[fixed] = w.arrival[fixed]
        return starts, ledger
    for j in fixed.tolist():
        s = ledger.first_fit(float(w.arrival[j]), float(w.duration[j]), float(w.gpus[j]))
        ledger.add(s, float(w.duration[j]), float(w.gpus[j]))
        starts[j] = s
    return starts, ledger


def deferrable_mask(ctx: ScheduleContext) -> NDArray[np.bool_]:
    """Jobs that may be deferred: flexible, deferrable tier, and room before the latest start."""
    w = ctx.workload
    ok_tier = np.array([ctx.tiers.tiers[t].deferrable if t in ctx.tiers.tiers else False for t in w.tier.tolist()],
                       dtype=bool)
    return np.asarray(w.flexible & ok_tier & (ctx.latest() > w.arrival), dtype=bool)


@SCHEDULE_POLICIES.register("immediate", aliases=("run-immediately", "fifo"))
class Immediate(SchedulePolicy):
    """Every job starts on arrival (the first hour with room when capacity is limited)."""

    name = "immediate"
    summary = "every job starts on arrival"

    def schedule(self, ctx: ScheduleContext) -> Schedule:
        w = ctx.workload
        flex = deferrable_mask(ctx)
        starts, ledger = place_inflexible(ctx, flex)
        idx = np.flatnonzero(flex)
        if ctx.capacity_gpus is None:
            starts[idx] = w.arrival[idx]
        else:
            for j in idx.tolist():
                d, g = float(w.duration[j]), float(w.gpus[j])
                s = ledger.first_fit(float(w.arrival[j]), d, g)
                ledger.add(s, d, g)
                starts[j] = s
        return Schedule(starts, {})


@SCHEDULE_POLICIES.register("peak-aware", aliases=("seedance", "electricity-pricing"))
class PeakAware(SchedulePolicy):
    """Online: defer flexible jobs to their best forecast window (price + carbon + delay)."""

    name = "peak-aware"
    summary = "hourly re-planning of waiting jobs on published day-ahead prices and forecasts"

    def planning(self, ctx: ScheduleContext) -> ScheduleContext:
        """The context this policy plans in (its forecasts and weights)."""
        if ctx.forecasts is None:
            raise InputError(f"{self.name} needs forecasts", source=self.name)
        return ctx

    def schedule(self, ctx: ScheduleContext) -> Schedule:
        ctx = self.planning(ctx)
        assert ctx.forecasts is not None
        w = ctx.workload
        flex = deferrable_mask(ctx)
        starts, ledger = place_inflexible(ctx, flex)
        latest = ctx.latest()
        queue = np.flatnonzero(flex)  # sorted by arrival (the workload is)
        waiting = np.zeros(0, dtype=np.int64)
        nxt = 0
        evaluations = 0
        no_forecast = 0
        hour = 0
        while nxt < len(queue) or len(waiting):
            if not len(waiting):
                hour = max(hour, int(w.arrival[queue[nxt]] // HOUR) * HOUR)
            stop = int(np.searchsorted(w.arrival[queue], hour + HOUR, side="left"))
            waiting = np.concatenate([waiting, queue[nxt:stop]])
            nxt = max(nxt, stop)
            now = np.maximum(float(hour), w.arrival[waiting])
            sig = ctx.forecasts.signals_at(hour, float((latest[waiting] + w.duration[waiting]).max()))
            if sig is None:  # no forecast yet: nothing to plan with, run now
                no_forecast += len(waiting)
                want = now
                regret = np.zeros(len(waiting))
            else:
                bw = best_windows(now, latest[waiting], w.duration[waiting], w.power_kw[waiting], w.gpus[waiting],
                                  w.arrival[waiting], sig, ctx.weights)
                want = bw.best_start
                regret = bw.score_now - bw.best_score
            evaluations += len(waiting)
            go = want < hour + HOUR  # the best window starts within this hour
            if ctx.capacity_gpus is None:
                starts[waiting[go]] = want[go]
                waiting = waiting[~go]
            else:
                waiting = self._admit(ctx, ledger, starts, waiting, want, regret, now, latest, hour)
            hour += HOUR
        return Schedule(starts, {"evaluations": evaluations, "jobs_without_forecast": no_forecast})

    @staticmethod
    def _admit(ctx: ScheduleContext, ledger: CapacityLedger, starts: FloatA, waiting: NDArray[np.int64],
               want: FloatA, regret: FloatA, now: FloatA, latest: FloatA, hour: int) -> NDArray[np.int64]:
        """Start the jobs that want this hour, in reordered queue order, while capacity lasts."""
        w = ctx.workload
        by_deadline = np.lexsort((waiting, latest[waiting]))
        order = reorder([str(t) for t in w.tier[waiting[by_deadline]]], regret[by_deadline].tolist(), ctx.tiers)
        still = []
        for pos in order:
            i = int(by_deadline[pos])
            j = int(waiting[i])
            d, g = float(w.duration[j]), float(w.gpus[j])
            if want[i] >= hour + HOUR:
                still.append(j)
            elif ledger.fits(float(want[i]), d, g):
                ledger.add(float(want[i]), d, g)
                starts[j] = want[i]
            elif latest[j] < hour + HOUR:  # no room and no later start allowed: run late (a miss)
                s_late = ledger.first_fit(float(now[i]), d, g)
                ledger.add(s_late, d, g)
                starts[j] = s_late
            else:
                still.append(j)
        return np.array(sorted(still, key=lambda j: (w.arrival[j], j)), dtype=np.int64)


@SCHEDULE_POLICIES.register("peak-aware-cost")
class PeakAwareCost(PeakAware):
    """``peak-aware`` planning for energy cost alone (same signals and rule, carbon and delay off)."""

    name = "peak-aware-cost"
    summary = "peak-aware planning for energy cost alone"

    def planning(self, ctx: ScheduleContext) -> ScheduleContext:
        return replace(super().planning(ctx), weights=objective_weights(ctx.weights, "cost"))


@SCHEDULE_POLICIES.register("peak-aware-co2")
class PeakAwareCo2(PeakAware):
    """``peak-aware`` planning for emissions alone (same signals and rule, price and delay off)."""

    name = "peak-aware-co2"
    summary = "peak-aware planning for emissions alone"

    def planning(self, ctx: ScheduleContext) -> ScheduleContext:
        return replace(super().planning(ctx), weights=objective_weights(ctx.weights, "co2"))


@SCHEDULE_POLICIES.register("day-ahead-rule", aliases=("dam-rule",))
class DayAheadRule(PeakAware):
    """Baseline: every hour, the cheapest start on the published day-ahead prices (energy cost only).

    Beyond the published hours it assumes the last published day repeats (seasonal naive); it
    never looks at carbon. Same constraints and start rule as ``peak-aware``.
    """

    name = "day-ahead-rule"
    summary = "hourly re-planning on published day-ahead prices, energy cost only"

    def planning(self, ctx: ScheduleContext) -> ScheduleContext:
        if ctx.day_ahead is None:
            raise InputError("day-ahead-rule needs the published day-ahead prices", source=self.name)
        return replace(ctx, forecasts=ctx.day_ahead, weights=objective_weights(ctx.weights, "cost"))


@SCHEDULE_POLICIES.register("hindsight-optimal", aliases=("optimal", "oracle"))
class HindsightOptimal(SchedulePolicy):
    """Perfect knowledge of the actual signals: the minimum-score schedule (OR-Tools LP/MIP).

    Jobs that share no capacity row are independent, so the problem is solved as independent
    blocks (connected components of the jobs linked by capacity rows; without binding capacity,
    consecutive chunks of ``block_jobs`` jobs), each an exact LP/MIP: the sum of the blocks'
    optima is the global optimum.
    """

    name = "hindsight-optimal"
    summary = "assignment LP/MIP over every flexible job's candidate starts with the actual signals"
    objective: ClassVar[str] = "score"
    block_jobs = 2000

    def schedule(self, ctx: ScheduleContext) -> Schedule:
        ctx = replace(ctx, weights=objective_weights(ctx.weights, self.objective))
        w = ctx.workload
        flex = deferrable_mask(ctx)
        starts, ledger = place_inflexible(ctx, flex)
        jobs = np.flatnonzero(flex)
        if not len(jobs):
            return Schedule(starts, {"solver": None, "jobs": 0})
        cand, valid = candidate_matrix(w.arrival[jobs], ctx.latest()[jobs], w.duration[jobs])
        if ctx.capacity_gpus is not None:  # drop starts that cannot fit beside the inflexible load
            for k, j in enumerate(jobs.tolist()):
                for i in np.flatnonzero(valid[k]).tolist():
                    valid[k, i] = ledger.fits(float(cand[k, i]), float(w.duration[j]), float(w.gpus[j]))
            empty = np.flatnonzero(~valid.any(axis=1))
            if len(empty):
                j = int(jobs[empty[0]])
                raise InputError(f"job {j} (arrival {iso(float(w.arrival[j]))}) has no start within its deadline "
                                 "that fits the capacity", source="--capacity-gpus")
        wc = window_costs(cand, w.duration[jobs, None], w.power_kw[jobs, None], w.gpus[jobs, None],
                          w.arrival[jobs, None], ctx.actual, ctx.weights)
        rows = self._capacity_rows(ctx, ledger, jobs, cand, valid)
        t0 = time.perf_counter()
        choice = np.zeros(len(jobs), dtype=np.int64)
        stats: dict[str, Any] = {"blocks": 0, "status": "optimal", "fractional_jobs": 0, "solvers": set(),
                                 "gap": 0.0}
        for block, block_rows in self._blocks(len(jobs), rows):
            self._solve(block, block_rows, wc.score, valid, w.gpus[jobs], choice, stats, ctx.mip_time_limit_s)
        starts[jobs] = cand[np.arange(len(jobs)), choice]
        info = {"objective": self.objective, "solver": "+".join(sorted(stats["solvers"])), "status": stats["status"],
                "blocks": stats["blocks"],
                "variables": int(valid.sum()), "jobs": len(jobs), "capacity_rows": len(rows),
                "fractional_jobs": stats["fractional_jobs"], "solve_s": round(time.perf_counter() - t0, 3)}
        if rows:
            info["max_relative_gap"] = stats["gap"]
        return Schedule(starts, info)

    def _blocks(self, n: int, rows: list[tuple[float, list[tuple[int, int]]]]
                ) -> list[tuple[NDArray[np.int64], list[tuple[float, list[tuple[int, int]]]]]]:
        """Independent groups of jobs (indices into the flexible jobs) with their capacity rows."""
        if not rows:
            return [(np.arange(a, min(a + self.block_jobs, n)), []) for a in range(0, n, self.block_jobs)]
        parent = list(range(n))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for _, members in rows:
            first = find(members[0][0])
            for k, _i in members[1:]:
                r = find(k)
                if r != first:
                    parent[r] = first
        groups: dict[int, list[int]] = {}
        for k in range(n):
            groups.setdefault(find(k), []).append(k)
        row_of: dict[int, list[tuple[float, list[tuple[int, int]]]]] = {}
        for row in rows:
            row_of.setdefault(find(row[1][0][0]), []).append(row)
        return [(np.array(ks, dtype=np.int64), row_of.get(root, [])) for root, ks in groups.items()]

    @staticmethod
    def _solve(block: NDArray[np.int64], rows: list[tuple[float, list[tuple[int, int]]]], score: FloatA,
               valid: NDArray[np.bool_], gpus: FloatA, choice: NDArray[np.int64], stats: dict[str, Any],
               time_limit_s: float) -> None:
        from ortools.linear_solver import pywraplp

        name = "SCIP" if rows else "GLOP"
        solver = pywraplp.Solver.CreateSolver(name)
        if solver is None:  # pragma: no cover - OR-Tools wheels ship both
            raise InputError(f"OR-Tools solver {name} is not available", source="ortools")
        obj = solver.Objective()
        xs: dict[tuple[int, int], Any] = {}
        for k in block.tolist():
            cols = np.flatnonzero(valid[k])
            base = float(score[k, cols].min())  # a per-job shift: same optimum, better conditioning
            ct = solver.Constraint(1.0, 1.0)
            for i in cols.tolist():
                v = solver.IntVar(0.0, 1.0, "") if rows else solver.NumVar(0.0, 1.0, "")
                ct.SetCoefficient(v, 1.0)
                obj.SetCoefficient(v, float(score[k, i]) - base)
                xs[(k, i)] = v
        for cap, members in rows:
            ct = solver.Constraint(-solver.infinity(), cap)
            for k, i in members:
                ct.SetCoefficient(xs[(k, i)], float(gpus[k]))
        obj.SetMinimization()
        if rows:
            solver.SetTimeLimit(int(time_limit_s * 1000))
        status = solver.Solve()
        if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
            raise InputError("no schedule meets every deadline within the capacity", source="--capacity-gpus")
        if status != pywraplp.Solver.OPTIMAL:
            stats["status"] = "feasible (time limit)"
        if rows:
            stats["gap"] = max(stats["gap"], _gap(solver) or 0.0)
        stats["blocks"] += 1
        stats["solvers"].add(name)
        for k in block.tolist():
            cols = np.flatnonzero(valid[k])
            vals = np.array([xs[(k, i)].solution_value() for i in cols.tolist()])
            best = int(np.argmax(vals))
            stats["fractional_jobs"] += int(vals[best] < 1.0 - 1e-6)
            choice[k] = cols[best]

    @staticmethod
    def _capacity_rows(ctx: ScheduleContext, ledger: CapacityLedger, jobs: NDArray[np.int64], cand: FloatA,
                       valid: NDArray[np.bool_]) -> list[tuple[float, list[tuple[int, int]]]]:
        """Capacity rows for the hours where the flexible jobs could together exceed what is free."""
        if ctx.capacity_gpus is None:
            return []
        w = ctx.workload
        members: dict[int, list[tuple[int, int]]] = {}
        potential = np.zeros_like(ledger.load)
        for k, j in enumerate(jobs.tolist()):
            d, g = float(w.duration[j]), float(w.gpus[j])
            touched: set[int] = set()
            for i in np.flatnonzero(valid[k]).tolist():
                b0, b1 = ledger.bins(float(cand[k, i]), d)
                for b in range(b0, b1):
                    members.setdefault(b, []).append((k, i))
                    touched.add(b)
            for b in touched:
                potential[b] += g
        free = ctx.capacity_gpus - ledger.load
        return [(float(free[b]), members[b]) for b in sorted(members) if potential[b] > free[b] + 1e-9]


@SCHEDULE_POLICIES.register("optimal-score")
class OptimalScore(HindsightOptimal):
    """The exact minimum of the policy's combined score (the same program as hindsight-optimal)."""

    name = "optimal-score"
    summary = "exact minimum of the combined score (price + carbon + delay) with the actual signals"
    objective = "score"


@SCHEDULE_POLICIES.register("optimal-cost", aliases=("optimal-$",))
class OptimalCost(HindsightOptimal):
    """The exact minimum of the flexible jobs' energy cost alone (same constraints)."""

    name = "optimal-cost"
    summary = "exact minimum of energy cost alone with the actual signals"
    objective = "cost"


@SCHEDULE_POLICIES.register("optimal-co2", aliases=("optimal-carbon",))
class OptimalCo2(HindsightOptimal):
    """The exact minimum of the flexible jobs' emissions alone (same constraints)."""

    name = "optimal-co2"
    summary = "exact minimum of emissions alone with the actual signals"
    objective = "co2"


def _gap(solver: Any) -> float | None:
    try:
        best = solver.Objective().BestBound()
        val = solver.Objective().Value()
    except Exception:  # pragma: no cover - depends on the backend
        return None
    return float(abs(val - best) / max(abs(val), 1e-9))

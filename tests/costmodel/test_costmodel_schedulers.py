"""Start-time policies on hand-made jobs: the optimum is exact, peak-aware with perfect forecasts matches
it, capacity and deadlines hold for every policy, and the workload is laid out as documented."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from tests.conftest import make_trace

from seedance.core.errors import InputError
from seedance.costmodel import EnergyModel, JobFeatures, Signals, Weights, cost_score
from seedance.costmodel.schedulers import (
    SCHEDULE_POLICIES,
    CapacityLedger,
    PlannerForecasts,
    ScheduleContext,
)
from seedance.costmodel.workload import Workload, build_workload
from seedance.signals import HourlySeries
from seedance.signals.forecast import ForecastMatrix

H = 3600.0
T0 = 1_672_531_200  # 2023-01-01T00:00:00Z
FLAT = EnergyModel(gpu_util=1.0, host_w_per_gpu=0.0, pue=1.0)


def hand_signals(hours: int = 72) -> Signals:
    h = np.arange(hours)
    price = 50 + 30 * np.cos((h % 24 - 13) * 2 * np.pi / 24) + 5 * (h % 7)  # cheap around 01:00
    carbon = 300 - 100 * np.cos((h % 24 - 12) * 2 * np.pi / 24)  # clean around noon
    return Signals(T0, price, carbon, "USD")


def workload(rows: list[tuple[float, float, float, str, bool, float]]) -> Workload:
    """Rows: (arrival offset h, duration h, gpus, tier, flexible, slack h)."""
    a = np.array([T0 + r[0] * H for r in rows])
    d = np.array([r[1] * H for r in rows])
    g = np.array([r[2] for r in rows])
    flex = np.array([r[4] for r in rows])
    dl = np.where(flex, a + d + np.array([r[5] * H for r in rows]), a + d)
    power = np.array([FLAT.job_power_kw("A100-80GB", x) for x in g])
    return Workload(arrival=a, duration=d, gpus=g, power_kw=power, tier=np.array([r[3] for r in rows], dtype=object),
                    flexible=flex, deadline=dl, pod=np.arange(len(rows)), copy=np.zeros(len(rows), dtype=np.int64),
                    gpu_model=np.array(["A100-80GB"] * len(rows), dtype=object), info={})


def perfect_forecasts(sig: Signals) -> PlannerForecasts:
    def fm(kind: str, values: np.ndarray) -> ForecastMatrix:
        s = HourlySeries(kind, "X", sig.start, values, "u", "USD", "test")
        issues = np.arange(len(values))
        t = issues[:, None] + np.arange(48)[None, :]
        point = np.where(t < len(values), values[np.minimum(t, len(values) - 1)], np.nan)
        return ForecastMatrix(s, issues, point, (0.1, 0.9), np.stack([point, point], axis=1))

    return PlannerForecasts(fm("price", sig.price), fm("carbon", sig.carbon), "USD")


JOBS = [
    (0.2, 1.5, 1.0, "bronze", True, 20.0),
    (3.7, 0.25, 0.5, "bronze", True, 10.0),
    (5.0, 2.0, 2.0, "gold", False, 0.0),
    (9.4, 6.0, 1.0, "bronze", True, 30.0),
    (20.0, 3.0, 4.0, "bronze", False, 0.0),
]
WEIGHTS = Weights(carbon_price_per_tonne=190.0, delay_per_mwh_hour=0.1, max_delay_h=24.0, energy=FLAT)


def ctx(wl: Workload, capacity: float | None = None, forecasts: PlannerForecasts | None = None) -> ScheduleContext:
    sig = hand_signals()
    return ScheduleContext(workload=wl, actual=sig, weights=WEIGHTS, capacity_gpus=capacity,
                           forecasts=forecasts or perfect_forecasts(sig))


def run(name: str, c: ScheduleContext) -> np.ndarray:
    return SCHEDULE_POLICIES.get(name)().schedule(c).starts


def test_immediate_starts_everything_on_arrival() -> None:
    wl = workload(JOBS)
    assert run("immediate", ctx(wl)).tolist() == wl.arrival.tolist()


def test_hindsight_equals_each_jobs_exact_best_window() -> None:
    wl = workload(JOBS)
    c = ctx(wl)
    starts = run("hindsight-optimal", c)
    for j in range(len(wl)):
        job = c.features(j)
        best = cost_score(job, c.actual, WEIGHTS, float(wl.arrival[j])).best_start
        assert starts[j] == pytest.approx(best), j
    assert starts[2] == wl.arrival[2] and starts[4] == wl.arrival[4]  # gold / inflexible stay put
    assert np.all(starts + wl.duration <= wl.deadline + 1e-6)


def test_peak_aware_with_perfect_forecasts_matches_the_optimum() -> None:
    wl = workload(JOBS)
    c = ctx(wl)
    assert run("peak-aware", c) == pytest.approx(run("hindsight-optimal", c))


def test_peak_aware_without_any_forecast_runs_jobs_now() -> None:
    wl = workload(JOBS)
    sig = hand_signals()
    blind = perfect_forecasts(sig)
    nan = ForecastMatrix(blind.price.series, blind.price.issues, np.full_like(blind.price.point, np.nan), (0.1, 0.9),
                         np.full_like(blind.price.bands, np.nan))
    c = ctx(wl, forecasts=PlannerForecasts(nan, blind.carbon, "USD"))
    assert run("peak-aware", c).tolist() == wl.arrival.tolist()


def brute_force(c: ScheduleContext, jobs: list[int], cands: list[np.ndarray]) -> float:
    best = np.inf
    for combo in itertools.product(*cands):
        ledger = c.ledger()
        ok = True
        for j in range(len(c.workload)):
            if j not in jobs:
                ledger.add(float(c.workload.arrival[j]), float(c.workload.duration[j]), float(c.workload.gpus[j]))
        for j, s in zip(jobs, combo, strict=True):
            d, g = float(c.workload.duration[j]), float(c.workload.gpus[j])
            ok = ok and ledger.fits(s, d, g)
            ledger.add(s, d, g)
        if ok:
            best = min(best, score_of(c, dict(zip(jobs, combo, strict=True))))
    return best


def score_of(c: ScheduleContext, starts: dict[int, float]) -> float:
    from seedance.costmodel.score import window_costs

    w = c.workload
    return float(sum(window_costs(np.array([s]), w.duration[j], w.power_kw[j], w.gpus[j], w.arrival[j], c.actual,
                                  c.weights).score[0] for j, s in starts.items()))


def test_capacity_binds_the_same_way_for_every_policy_and_the_mip_is_exact() -> None:
    # three 1-GPU jobs that all like the same cheap hours, two GPUs of capacity
    wl = workload([(0.0, 1.0, 1.0, "bronze", True, 8.0), (0.0, 1.0, 1.0, "bronze", True, 8.0),
                   (0.0, 1.0, 1.0, "bronze", True, 8.0), (2.0, 1.0, 1.0, "gold", False, 0.0)])
    c = ctx(wl, capacity=2.0)
    for name in ("immediate", "peak-aware", "hindsight-optimal"):
        starts = run(name, c)
        ledger = CapacityLedger(c.actual.start, c.actual.end, None)
        for j in range(len(wl)):
            ledger.add(float(starts[j]), float(wl.duration[j]), float(wl.gpus[j]))
        assert ledger.load.max() <= 2.0 + 1e-9, name
    sched = SCHEDULE_POLICIES.get("hindsight-optimal")().schedule(c)
    assert sched.info["solver"] == "SCIP" and sched.info["capacity_rows"] > 0 and sched.info["status"] == "optimal"
    cands = [np.arange(T0, T0 + 9 * H, H) for _ in range(3)]  # every whole hour before the deadline
    got = score_of(c, {j: float(sched.starts[j]) for j in range(3)})
    assert got == pytest.approx(brute_force(c, [0, 1, 2], cands), rel=1e-9)
    assert np.all(sched.starts + wl.duration <= wl.deadline + 1e-6)


def test_an_impossible_capacity_is_an_input_error() -> None:
    wl = workload([(0.0, 1.0, 3.0, "bronze", True, 2.0)])
    with pytest.raises(InputError, match="never fits the capacity"):
        run("immediate", ctx(wl, capacity=2.0))
    with pytest.raises(InputError, match="no start within its deadline"):
        run("hindsight-optimal", ctx(workload([(0.0, 1.0, 1.0, "gold", False, 0.0),
                                               (0.0, 1.0, 1.0, "bronze", True, 0.5)]), capacity=1.0))


def test_workload_folds_the_trace_and_marks_a_documented_share_flexible() -> None:
    day = 86400.0
    rows = [(1000, 1024, 1, 500)] * 6 + [(1000, 1024, 2, 1000)] * 4 + [(1000, 1024, 0, 0)]
    times = [(0.0, 3600.0), (50 * day, 50 * day + 60)] + [(100 * day + i * 3600, 100 * day + i * 3600 + 1800)
                                                          for i in range(9)]
    trace = make_trace(rows, times=times, qos="BE")
    wl = build_workload(trace, start=T0, end=T0 + 30 * day, flexible_share=0.5, slack_hours=6, energy=FLAT,
                        gpu_model="A100-80GB", busy_quantile=0.25)
    assert wl.info["period_days"] == 7.0 and wl.info["folded_pods"] == 3 and wl.info["gpu_pods"] == 10
    assert len(wl) == wl.info["jobs"] == 47 and wl.info["copies"] == 5  # 30 days of 7-day periods, 10 pods each
    assert np.all(np.diff(wl.arrival) >= 0) and np.all(wl.arrival >= T0) and np.all(wl.arrival + wl.duration <= T0
                                                                                    + 30 * day)
    assert wl.flexible.sum() == round(0.5 * len(wl))
    flex = wl.flexible
    assert np.allclose(wl.deadline[flex], np.minimum(wl.arrival + wl.duration + 6 * H, T0 + 30 * day)[flex])
    assert np.allclose(wl.power_kw, wl.gpus * 0.4)
    gold = build_workload(make_trace(rows, times=times, qos="LS"), start=T0, end=T0 + 30 * day, flexible_share=0.5)
    assert gold.flexible.sum() == 0 and gold.info["flexible_share_effective"] == 0.0  # gold never defers
    with pytest.raises(InputError, match="no creation/deletion times"):
        build_workload(make_trace(rows), start=T0, end=T0 + day)


def test_cost_score_of_a_workload_job_is_the_pure_function() -> None:
    wl = workload(JOBS)
    c = ctx(wl)
    f = c.features(0)
    assert isinstance(f, JobFeatures) and f.deadline == wl.deadline[0] and f.submitted == wl.arrival[0]

"""Reservation accounting, the MILP and the baselines: exact values on hand-built demand, hypothesis properties."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.reservations.accounting import Plan, allowed_terms, simulate_plan
from seedance.reservations.demand import DemandWindow
from seedance.reservations.milp import hindsight_optimal
from seedance.reservations.policies import (
    BestFixed,
    NoReservation,
    OnlineBreakEven,
    Percentile,
    lookback_optimal_level,
    run_online,
)
from seedance.reservations.pricing import ReservationPrices

Y = 8760
START = 1672531200
PRICES = ReservationPrices(on_demand=4.0, commitments={"1y": 2.5, "3y": 1.5})


def window(values: list[int] | np.ndarray, history: list[int] | np.ndarray = ()) -> DemandWindow:
    return DemandWindow(history=np.asarray(history, dtype=np.int64), values=np.asarray(values, dtype=np.int64),
                        start=START)


def test_hand_computed_costs_and_attribution() -> None:
    # one year: 5 GPUs for the first half, 1 for the second; 3 one-year units bought at the start
    d = np.array([5] * (Y // 2) + [1] * (Y // 2))
    buys = np.zeros((12, 2), dtype=np.int64)
    buys[0, 0] = 3
    att = simulate_plan(Plan(buys), window(d), PRICES)
    half = Y // 2
    assert att.baseline.sum() == pytest.approx(4.0 * (5 + 1) * half)
    assert att.committed_used.sum() == pytest.approx(2.5 * (3 * half + 1 * half))
    assert att.committed_idle.sum() == pytest.approx(2.5 * 2 * half)
    assert att.on_demand.sum() == pytest.approx(4.0 * 2 * half)
    assert att.cost.sum() == pytest.approx(3 * 2.5 * Y + 4.0 * 2 * half)
    tot = att.totals()
    assert tot["savings"] == pytest.approx(24 * half - (7.5 * Y + 8 * half))
    # first half: demand above the commitments (burst); second half: idle commitments (low load)
    assert set(att.cause[:half].tolist()) == {2} and set(att.cause[half:].tolist()) == {1}
    rows = att.by_slot()
    assert len(rows) == 12 and rows[0]["slot"] == "00:00-02:00"
    assert sum(r["baseline_cost"] for r in rows) == pytest.approx(att.baseline.sum())
    assert sum(r["savings"] for r in rows) == pytest.approx(tot["savings"])


def test_spot_share_and_rework_enter_the_overflow_price() -> None:
    p = ReservationPrices(on_demand=4.0, commitments={"1y": 2.5}, spot=1.0, spot_share=0.25, spot_rework=0.1)
    assert p.overflow == pytest.approx(0.75 * 4.0 + 0.25 * 1.1)
    att = simulate_plan(Plan.empty(Y), window([2] * Y), p)
    assert att.spot.sum() == pytest.approx(2 * 0.25 * 1.0 * Y)
    assert att.spot_interruption.sum() == pytest.approx(2 * 0.25 * 0.1 * Y)
    assert set(att.cause.tolist()) == {2}  # premium over the commitment rate (0.375 per unit-hour) beats rework
    with pytest.raises(InputError, match="spot share needs a spot price"):
        ReservationPrices(on_demand=4.0, commitments={}, spot_share=0.5)
    with pytest.raises(InputError, match="1y rate must be within"):
        ReservationPrices(on_demand=4.0, commitments={"1y": 4.5})


def test_a_plan_cannot_buy_past_the_window_or_a_term_the_prices_lack() -> None:
    buys = np.zeros((24, 2), dtype=np.int64)
    buys[13, 0] = 1  # a 1-year unit bought in month 13 of a 2-year window ends after it
    with pytest.raises(InputError, match="term ends after the window"):
        simulate_plan(Plan(buys), window([1] * (2 * Y)), PRICES)
    only1 = ReservationPrices(on_demand=4.0, commitments={"1y": 2.5})
    buys = np.zeros((36, 2), dtype=np.int64)
    buys[0, 1] = 1
    with pytest.raises(InputError, match="no 3y commitment"):
        simulate_plan(Plan(buys), window([1] * (3 * Y)), only1)
    assert allowed_terms(12, 2 * Y, PRICES) == [True, False] and allowed_terms(13, 2 * Y, PRICES) == [False, False]
    assert allowed_terms(0, 3 * Y, PRICES) == [True, True] and allowed_terms(0, 3 * Y, only1) == [True, False]


@st.composite
def demand_and_plan(draw: st.DrawFn) -> tuple[np.ndarray, Plan]:
    years = draw(st.integers(1, 3))
    hours = years * Y + draw(st.sampled_from([0, 730, 2000]))
    segs = draw(st.lists(st.integers(0, 12), min_size=1, max_size=8))
    d = np.repeat(np.array(segs), -(-hours // len(segs)))[:hours]
    epochs = -(-hours // 730)
    buys = np.zeros((epochs, 2), dtype=np.int64)
    for e in range(epochs):
        for k, ok in enumerate(allowed_terms(e, hours, PRICES)):
            if ok and draw(st.booleans()):
                buys[e, k] = draw(st.integers(0, 5))
    return d, Plan(buys)


@settings(max_examples=40, deadline=None)
@given(demand_and_plan())
def test_property_attribution_sums_to_the_hourly_cost_and_units_serve_only_within_their_term(
        case: tuple[np.ndarray, Plan]) -> None:
    d, plan = case
    att = simulate_plan(plan, window(d), PRICES)
    parts = att.committed_used + att.committed_idle + att.on_demand + att.spot + att.spot_interruption
    # the attribution vector sums to each hour's cost within $0.01, computed independently here
    rates = np.array([2.5, 1.5])
    force = plan.in_force(len(d))
    independent = force @ rates + np.maximum(0, d - force.sum(axis=1)) * 4.0
    assert np.abs(parts - independent).max() <= 0.01 and np.abs(att.cost - independent).max() <= 0.01
    assert abs(att.cost.sum() - independent.sum()) <= 0.01 * len(d)
    # units are in force exactly during their term, never after it (and never used beyond demand)
    expect = np.zeros((len(d), 2), dtype=np.int64)
    for e, k in zip(*np.nonzero(plan.buys), strict=True):
        a = int(e) * 730
        expect[a:a + (Y if k == 0 else 3 * Y), k] += plan.buys[e, k]
    assert (force == expect).all()
    used = np.minimum(d, force.sum(axis=1))
    assert (used <= force.sum(axis=1)).all() and (att.in_force == force.sum(axis=1)).all()


def brute_force(d: np.ndarray, epoch_hours: int) -> float:
    hours = len(d)
    slots = [(e, k) for e in range(-(-hours // epoch_hours))
             for k, ok in enumerate(allowed_terms(e, hours, PRICES, epoch_hours)) if ok]
    best = np.inf
    for combo in itertools.product(range(int(d.max()) + 1), repeat=len(slots)):
        buys = np.zeros((-(-hours // epoch_hours), 2), dtype=np.int64)
        for (e, k), n in zip(slots, combo, strict=True):
            buys[e, k] = n
        best = min(best, float(simulate_plan(Plan(buys, epoch_hours), window(d), PRICES).cost.sum()))
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_milp_is_the_exact_optimum_by_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # 3 years, yearly epochs: 1-year units at years 0, 1, 2 and 3-year units at year 0 (4 integers 0..4)
    d = np.repeat(rng.integers(0, 5, size=36), 730)
    res = hindsight_optimal(window(d), PRICES, epoch_hours=Y)
    assert res.status == "optimal" and res.integer_variables == 4
    cost = simulate_plan(res.plan, window(d), PRICES).cost.sum()
    assert cost == pytest.approx(res.objective) == pytest.approx(brute_force(d, Y))


def test_best_fixed_is_the_best_constant_level_and_no_policy_beats_the_milp() -> None:
    rng = np.random.default_rng(5)
    d = np.repeat(rng.integers(0, 30, size=4 * 12 * 30), 730 * 4 * 12 // (4 * 12 * 30) + 1)[:4 * Y]
    w = window(d, history=d[:Y])
    opt = simulate_plan(hindsight_optimal(w, PRICES).plan, w, PRICES).cost.sum()
    bf = BestFixed().plan(w, PRICES)
    bf_cost = simulate_plan(bf, w, PRICES).cost.sum()
    # brute force over levels of the 3-year unit bought at the start (plus nothing else)
    for level in range(0, 31, 3):
        buys = np.zeros_like(bf.buys)
        buys[0, 1] = level
        assert bf_cost <= simulate_plan(Plan(buys), w, PRICES).cost.sum() + 1e-6
    for pol in (NoReservation(), Percentile(30), Percentile(60, 50.0, "1y"), OnlineBreakEven("1y"), BestFixed()):
        assert simulate_plan(pol.plan(w, PRICES), w, PRICES).cost.sum() >= opt - 1e-6


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=60), st.floats(0.01, 0.99))
def test_property_the_lookback_level_minimises_the_lookback_cost(d: list[int], rate: float) -> None:
    arr = np.array(d)
    costs = [level * rate + np.maximum(0, arr - level).mean() for level in range(0, 21)]
    assert costs[lookback_optimal_level(arr, rate, 1.0)] <= min(costs) + 1e-9


def test_online_breaks_even_per_level_over_the_last_term() -> None:
    # history: a year with 4 GPUs 80 % of the time and 8 GPUs 50 % of the time; 1-year rate / on-demand = 0.625
    hist = np.array(([8] * 5 + [4] * 3 + [0] * 2) * (Y // 10))
    w = window(np.full(Y, 4), history=hist)
    plan = run_online(OnlineBreakEven("1y"), w, PRICES)
    # levels 1..4 were paid on demand 80 % of the last year (>= 62.5 %): reserve 4; level 5..8 only 50 %: not
    assert plan.buys[0].tolist() == [4, 0] and plan.buys[1:].sum() == 0
    # the advisor: the lookback-optimal level is the 37.5 % quantile of the last 30 days = 4 here as well
    pct = run_online(Percentile(365, None, "1y"), w, PRICES)
    assert pct.buys[0].tolist() == [4, 0]


def test_online_policies_never_see_the_future() -> None:
    rng = np.random.default_rng(3)
    d = rng.integers(0, 40, size=2 * Y)
    w1 = window(d, history=d[:Y])
    d2 = d.copy()
    d2[6000:] = 0  # change the future after month 8
    w2 = window(d2, history=d[:Y])
    for pol in (Percentile(30), OnlineBreakEven("1y")):
        p1, p2 = pol.plan(w1, PRICES), pol.plan(w2, PRICES)
        cut = 6000 // 730  # decisions before month 8 saw identical pasts
        assert (p1.buys[:cut + 1] == p2.buys[:cut + 1]).all()

"""cost_score: exact integration over the run window, deferral within deadlines and tiers (properties)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.costmodel import CarbonAccounting, EnergyModel, JobFeatures, Signals, Weights, cost_score
from seedance.costmodel.score import best_windows, candidate_starts, window_costs

H = 3600.0
FLAT = EnergyModel(gpu_util=1.0, host_w_per_gpu=0.0, pue=1.0)  # A100-80GB: 400 W per GPU


def test_energy_model_and_market_based_accounting() -> None:
    m = EnergyModel(gpu_util=0.5, host_w_per_gpu=100, pue=1.5)
    assert m.gpu_power_w("A100-80GB") == 225.0 and m.gpu_power_w("T4", 0.0) == 10.0
    assert m.job_power_kw("A100", 0.5) == pytest.approx(0.5 * 325 * 1.5 / 1000)
    assert CarbonAccounting("market", 0.25, 20.0).effective(np.array([100.0])).tolist() == [0.25 * 20 + 0.75 * 100]
    assert CarbonAccounting("market", 0.5, 0.0, 50.0).effective(np.array([400.0])).tolist() == [25.0]
    with pytest.raises(InputError, match="pue must be >= 1"):
        EnergyModel(pue=0.9)
    with pytest.raises(InputError, match="unknown GPU model 'B300'"):
        m.gpu_power_w("B300")


def test_a_measured_power_curve_replaces_the_idle_to_tdp_line() -> None:
    from seedance.core.catalog import CATALOG

    m = EnergyModel(host_w_per_gpu=0.0, pue=1.0)
    assert m.gpu_power_w("H200", 0.0) == 122.5 and m.gpu_power_w("H200", 0.52) == pytest.approx(510.8)
    assert m.gpu_power_w("H200", 0.645) == pytest.approx((510.8 + 659.9) / 2)  # halfway between two points
    assert m.gpu_power_w("H200", 1.0) == pytest.approx(693.3)  # the 700 W limit holds the clocks down
    assert m.gpu_power_w("A100-80GB", 0.5) == 50 + 0.5 * 350  # no curve: the line
    for name in CATALOG:
        curve = CATALOG[name].power_curve
        if curve:  # from 0 to 1, power rising, within the board limit
            us, ws = zip(*curve, strict=True)
            assert us[0] == 0.0 and us[-1] == 1.0 and list(us) == sorted(us)
            assert list(ws) == sorted(ws) and ws[-1] <= CATALOG[name].tdp_w and CATALOG[name].power_source


def test_cost_is_integrated_over_the_run_window_not_the_start_hour() -> None:
    # prices 10, 20, 40 USD/MWh; carbon 100, 200, 400 g/kWh; a 0.4 kW job from 00:30 for 1.5 h
    sig = Signals(0, np.array([10.0, 20.0, 40.0]), np.array([100.0, 200.0, 400.0]), "USD")
    w = Weights(carbon_price_per_tonne=100.0, energy=FLAT)
    wc = window_costs(np.array([1800.0]), 1.5 * H, 0.4, 1.0, 0.0, sig, w)
    assert wc.cost[0] == pytest.approx(0.4 / 1000 * (0.5 * 10 + 1.0 * 20))  # not 1.5 h at the 10 of the start hour
    assert wc.co2_kg[0] == pytest.approx(0.4 / 1000 * (0.5 * 100 + 1.0 * 200))
    assert wc.score[0] == pytest.approx(wc.cost[0] + wc.co2_kg[0] / 1000 * 100)
    market = Weights(energy=FLAT, accounting=CarbonAccounting("market", contract_share=1.0, contract_g_per_kwh=10))
    assert window_costs(np.array([1800.0]), 1.5 * H, 0.4, 1.0, 0.0, sig, market).co2_kg[0] == pytest.approx(
        0.4 * 1.5 * 10 / 1000)


def test_best_window_of_a_job_on_a_hand_made_day() -> None:
    price = np.array([50.0, 40.0, 10.0, 12.0, 60.0, 70.0])
    sig = Signals(0, price, np.zeros(6), "USD")
    job = JobFeatures(duration_s=2 * H, gpus=1.0, deadline=6 * H, submitted=0.0)
    cs = cost_score(job, sig, Weights(energy=FLAT), now=0.0)
    assert cs.best_start == 2 * H and cs.delay_h == 2.0
    assert cs.cost_now == pytest.approx(0.4 / 1000 * 90) and cs.cost_best == pytest.approx(0.4 / 1000 * 22)
    assert cs.regret == pytest.approx(cs.score - cs.best_score) and cs.deferrable and cs.deadline_feasible
    # a deadline at 04:00 leaves 02:00 as the latest start; at 03:30 the best is 01:30 (half of 01:00 at 40)
    assert cost_score(JobFeatures(duration_s=2 * H, deadline=3.5 * H), sig, Weights(energy=FLAT), 0.0).best_start == (
        1.5 * H)
    # the delay penalty can make waiting not worth it
    slow = Weights(energy=FLAT, delay_per_mwh_hour=1000.0)
    assert cost_score(job, sig, slow, 0.0).best_start == 0.0


def test_tiers_that_are_not_deferrable_and_inflexible_jobs_start_now() -> None:
    sig = Signals(0, np.array([50.0, 1.0, 1.0]), np.zeros(3), "USD")
    for job in (JobFeatures(duration_s=H, tier="gold"), JobFeatures(duration_s=H, flexible=False)):
        cs = cost_score(job, sig, Weights(energy=FLAT), 0.0)
        assert cs.best_start == 0.0 and not cs.deferrable and cs.regret == 0.0
    with pytest.raises(InputError, match="unknown tier 'platinum'; tiers: gold, silver, bronze"):
        cost_score(JobFeatures(duration_s=H, tier="platinum"), sig, Weights(), 0.0)
    with pytest.raises(InputError, match="not the job's run"):
        cost_score(JobFeatures(duration_s=4 * H), sig, Weights(), 0.0)


def test_min_gain_keeps_jobs_that_would_gain_little() -> None:
    sig = Signals(0, np.array([10.0, 9.5, 50.0]), np.zeros(3), "USD")
    job = JobFeatures(duration_s=H, deadline=3 * H)
    assert cost_score(job, sig, Weights(energy=FLAT), 0.0).best_start == H
    assert cost_score(job, sig, Weights(energy=FLAT, min_gain=0.1), 0.0).best_start == 0.0


def test_candidate_starts_are_every_breakpoint() -> None:
    assert candidate_starts(600.0, 2 * H, 1800.0).tolist() == [600.0, 1800.0, H, 5400.0, 2 * H]
    assert candidate_starts(100.0, 50.0, 10.0).tolist() == [100.0]


@settings(max_examples=80, deadline=None)
@given(
    prices=st.lists(st.floats(-100, 500), min_size=30, max_size=30),
    carbon=st.lists(st.floats(0, 800), min_size=30, max_size=30),
    now=st.floats(0, 5 * H),
    duration=st.floats(60, 10 * H),
    slack=st.floats(0, 15 * H),
    max_delay=st.floats(0.5, 30),
)
def test_deferral_never_passes_the_deadline_and_finds_the_true_minimum(
    prices: list[float], carbon: list[float], now: float, duration: float, slack: float, max_delay: float
) -> None:
    sig = Signals(0, np.array(prices), np.array(carbon), "USD")
    deadline = now + duration + slack
    assume(deadline <= sig.end)
    w = Weights(carbon_price_per_tonne=150.0, delay_per_mwh_hour=0.5, max_delay_h=max_delay, energy=FLAT)
    job = JobFeatures(duration_s=duration, gpus=2.0, deadline=deadline, submitted=now)
    cs = cost_score(job, sig, w, now)
    assert now <= cs.best_start <= now + max_delay * H + 1e-6
    assert cs.best_start + duration <= deadline + 1e-6  # never past the deadline
    # exact: no start on a fine grid of the allowed range does better
    latest = min(deadline - duration, now + max_delay * H)
    grid = np.linspace(now, max(latest, now), 400)
    fine = window_costs(grid, duration, cs.power_kw, 2.0, now, sig, w).score
    assert cs.best_score <= fine.min() + 1e-9 * max(1.0, abs(fine.min()))


def test_batched_windows_equal_one_by_one() -> None:
    rng = np.random.default_rng(3)
    sig = Signals(0, rng.uniform(0, 100, 60), rng.uniform(50, 500, 60), "EUR")
    w = Weights(carbon_price_per_tonne=85.0, delay_per_mwh_hour=0.1)
    now = rng.uniform(0, 10 * H, 20)
    dur = rng.uniform(60, 12 * H, 20)
    latest = now + rng.uniform(0, 20 * H, 20)
    bw = best_windows(now, latest, dur, 0.5, 1.0, now, sig, w)
    for i in range(20):
        job = JobFeatures(duration_s=float(dur[i]), gpus=1.0, deadline=float(latest[i] + dur[i]), submitted=now[i])
        cs = cost_score(job, sig, Weights(carbon_price_per_tonne=85.0, delay_per_mwh_hour=0.1, max_delay_h=48),
                        float(now[i]))
        scale = 0.5 / cs.power_kw  # the batch used 0.5 kW
        assert bw.best_start[i] == pytest.approx(cs.best_start)
        assert bw.best_score[i] == pytest.approx(cs.best_score * scale)

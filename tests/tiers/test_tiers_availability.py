"""Availability accounting: per pod, per tier attainment, error budget and burn rate (exact)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.tiers.availability import attainment_overall, pod_availability, tier_availability

F = np.float64


def test_waiting_and_preemption_gaps_count_against_availability() -> None:
    creation = np.array([0.0, 0.0, 100.0, 50.0], dtype=F)
    deletion = np.array([1000.0, 1000.0, 300.0, 50.0], dtype=F)
    # pod 0 ran the whole window; pod 1 waited 10 s, ran, was preempted 40 s, resumed;
    # pod 2 never ran; pod 3 has an empty window and ran (bound at once)
    seg_pod = np.array([0, 1, 1, 3])
    seg_start = np.array([0.0, 10.0, 540.0, 50.0], dtype=F)
    seg_end = np.array([1000.0, 500.0, 1000.0, 50.0], dtype=F)
    ran, av = pod_availability(creation, deletion, seg_pod, seg_start, seg_end)
    assert ran.tolist() == [1000.0, 950.0, 0.0, 0.0]
    assert av.tolist() == [1.0, 0.95, 0.0, 1.0]


def test_tier_attainment_and_error_budget() -> None:
    day = 86400.0
    # tier 0 (gold, 99.95%): two pods over two days; pod 1 is down for 100 s on day 2 (99.942%)
    creation = np.array([0.0, 0.0, 0.0], dtype=F)
    deletion = np.array([2 * day, 2 * day, 2 * day], dtype=F)
    tiers = np.array([0, 0, 2])
    seg_pod = np.array([0, 1, 1, 2])
    seg_start = np.array([0.0, 0.0, day + 100.0, 0.0], dtype=F)
    seg_end = np.array([2 * day, day, 2 * day, 2 * day], dtype=F)
    rep = tier_availability(creation, deletion, tiers, seg_pod, seg_start, seg_end, bin_s=day)
    gold = rep["gold"]
    assert (gold.pods, gold.met, gold.attainment_pct) == (2, 1, 50.0)
    assert gold.mean == pytest.approx((1.0 + (2 * day - 100) / (2 * day)) / 2)
    eb = gold.error_budget
    assert eb.budget_pod_s == pytest.approx(0.0005 * 4 * day)
    assert eb.consumed_pod_s == pytest.approx(100.0)
    assert eb.t_s == [0.0, day]
    assert eb.burn_rate[0] == 0.0
    assert eb.burn_rate[1] == pytest.approx((100.0 / (2 * day)) / 0.0005, rel=1e-3)
    assert eb.remaining_pct == pytest.approx(100.0 * (1 - 100.0 / (0.0005 * 4 * day)))
    assert eb.page_alerts == 1  # the hour holding the 100 s gap: (100/7200)/0.0005 = 27.8 >= 14.4
    assert eb.exhausted_at_s is None
    assert rep["silver"].pods == 0 and rep["silver"].attainment_pct == 100.0
    assert rep["bronze"].met == 1
    assert attainment_overall(rep) == pytest.approx(100.0 * 2 / 3)
    js = gold.to_json(series=False)
    assert {"target_pct", "attainment_pct", "availability_mean"} <= set(js) and "t_s" not in js["error_budget"]


def test_budget_exhaustion_time_is_reported() -> None:
    creation, deletion = np.array([0.0], dtype=F), np.array([10 * 3600.0], dtype=F)
    rep = tier_availability(creation, deletion, np.array([2]), np.array([0]), np.array([3600.0], dtype=F),
                            np.array([10 * 3600.0], dtype=F), bin_s=3600.0)
    eb = rep["bronze"].error_budget  # budget 5% of 10 h = 30 min; the first hour is all down
    assert eb.exhausted_at_s == 3600.0 and eb.burn_rate[0] == pytest.approx(20.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1000), st.floats(0, 1000), st.floats(0, 1), st.floats(0, 1)),
                min_size=1, max_size=20))
def test_availability_is_within_zero_and_one(rows: list[tuple[float, float, float, float]]) -> None:
    creation = np.array([min(a, b) for a, b, _, _ in rows], dtype=F)
    deletion = np.array([max(a, b) for a, b, _, _ in rows], dtype=F)
    life = deletion - creation
    s = creation + life * np.array([min(x, y) for _, _, x, y in rows])
    e = creation + life * np.array([max(x, y) for _, _, x, y in rows])
    _, av = pod_availability(creation, deletion, np.arange(len(rows)), s, e)
    assert ((av >= 0) & (av <= 1)).all()

"""Hourly series and exact window integrals on hand-made series."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.signals import HOUR, HourlySeries, Integrator, iso, parse_utc


def test_integral_over_partial_hours_is_exact() -> None:
    ig = Integrator(0, np.array([10.0, 20.0, 40.0]))
    assert float(ig.integral(1800.0, 3 * HOUR)) == pytest.approx(0.5 * 10 + 20 + 40)
    assert float(ig.integral(0.0, 600.0)) == pytest.approx(10 / 6)
    assert float(ig.mean(HOUR, 2.5 * HOUR)) == pytest.approx((20 + 0.5 * 40) / 1.5)


def test_two_signals_share_one_integrator() -> None:
    ig = Integrator(3600, np.column_stack([[1.0, 2.0], [100.0, 300.0]]))
    out = ig.integral(np.array([3600.0, 5400.0]), np.array([7200.0, 9000.0]))
    assert out.tolist() == [[1.0, 100.0], [1.5, 200.0]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-50, 500), min_size=2, max_size=30), st.floats(0, 1), st.floats(0, 1))
def test_integral_is_additive_and_matches_a_fine_sum(values: list[float], u: float, v: float) -> None:
    n = len(values)
    ig = Integrator(0, np.array(values))
    a, b = sorted((u * n * HOUR, v * n * HOUR))
    m = (a + b) / 2
    assert float(ig.integral(a, b)) == pytest.approx(float(ig.integral(a, m) + ig.integral(m, b)), abs=1e-6)
    a2 = np.ceil(a / 60) * 60  # whole minutes, so that a one-minute sum is exact
    b2 = max(a2, np.floor(b / 60) * 60)
    grid = np.arange(0, n * HOUR, 60.0)
    inside = (grid >= a2) & (grid + 60 <= b2)
    fine = np.array(values)[(grid // HOUR).astype(int)][inside].sum() / 60
    assert float(ig.integral(a2, b2)) == pytest.approx(fine, abs=1e-6)


def test_series_window_value_at_and_errors() -> None:
    s = HourlySeries("price", "X", int(parse_utc("2023-01-01")), np.arange(48.0), "USD/MWh", "USD", "test")
    w = s.window(parse_utc("2023-01-01T10:30:00Z"), parse_utc("2023-01-01T12:00:00Z"))
    assert w.values.tolist() == [10.0, 11.0] and iso(w.start) == "2023-01-01T10:00:00Z"
    assert s.value_at(parse_utc("2023-01-02T23:59:00Z")) == 47.0
    with pytest.raises(InputError, match="outside the price series"):
        s.value_at(parse_utc("2023-01-03"))
    with pytest.raises(ValueError, match="whole UTC hour"):
        HourlySeries("price", "X", 1, np.ones(2), "USD/MWh", "USD", "test")
    with pytest.raises(InputError, match="not an ISO date"):
        parse_utc("tomorrow")

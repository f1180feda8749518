"""Forecasters read only the past; quantile bands are calibrated; errors are measured on real months."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seedance.core.errors import InputError
from seedance.signals import HourlySeries, carbon_path, load_carbon_file, load_price_file, parse_utc, price_path
from seedance.signals.forecast import (
    FORECASTERS,
    PublishedDayAhead,
    SeasonalNaive,
    backtest,
    local_calendar,
    make_forecaster,
)

T0 = int(parse_utc("2023-01-02"))


def series(values: np.ndarray, kind: str = "price", region: str = "X") -> HourlySeries:
    return HourlySeries(kind, region, T0, np.asarray(values, dtype=np.float64), "EUR/MWh", "EUR", "test")


def test_seasonal_naive_repeats_the_last_observed_day() -> None:
    y = np.arange(72.0)
    p = SeasonalNaive().point(y, np.array([0, 30, 48]), 30)
    assert np.isnan(p[0]).all()  # no day of history yet
    assert p[1, :24].tolist() == (np.arange(30, 54) - 24).tolist()
    assert p[1, 24:].tolist() == (np.arange(54, 60) - 48).tolist()  # lead 25+: two days back
    assert p[2, 0] == 24.0


@pytest.mark.parametrize("name", ["seasonal-naive", "profile-ridge", "profile-ridge-blend"])
def test_forecasts_never_read_the_future(name: str) -> None:
    rng = np.random.default_rng(1)
    y = 50 + 20 * np.sin(np.arange(24 * 70) * 2 * np.pi / 24) + rng.normal(0, 3, 24 * 70)
    issue = 24 * 60 + 7
    f = make_forecaster(name)
    a = f.forecast(series(y), [issue], 48)
    z = y.copy()
    z[issue:] = -1000.0  # scramble everything from the issue hour on
    b = f.forecast(series(z), [issue], 48)
    assert np.array_equal(a.point, b.point) and np.array_equal(a.bands, b.bands)


def test_profile_ridge_learns_a_daily_shape_and_its_bands_cover_as_promised() -> None:
    rng = np.random.default_rng(7)
    hours = np.arange(24 * 120)
    shape = 60 + 25 * np.sin(hours * 2 * np.pi / 24) + 10 * (hours % 24 > 17)
    y = shape + rng.normal(0, 4, len(hours))
    s = series(y)
    start, end = T0 + 24 * 3600 * 60, T0 + 24 * 3600 * 120
    score = backtest(s, make_forecaster("profile-ridge"), start=start, end=end, horizon=24)
    assert score.mae < score.mae_naive * 0.85  # beats same-hour-yesterday on a noisy daily shape
    assert score.mae < 4.5  # close to the noise level (E|N(0, 4)| = 3.2)
    assert score.nominal == pytest.approx(0.8)
    assert abs(score.coverage - 0.8) < 0.05


def test_local_calendar_follows_daylight_saving_time() -> None:
    # 2023-03-26 00:00 UTC = 01:00 CET; an hour later clocks jump to 03:00 CEST
    hour, dow = local_calendar(int(parse_utc("2023-03-26")), 4, "Europe/Berlin")
    assert hour.tolist() == [1, 3, 4, 5] and dow.tolist() == [6, 6, 6, 6]  # a Sunday
    # 2023-11-05 08:00 UTC = 01:00 PDT, 09:00 UTC = 01:00 PST (the repeated hour), then 02:00 PST
    hour, dow = local_calendar(int(parse_utc("2023-11-05T08:00:00Z")), 3, "America/Los_Angeles")
    assert hour.tolist() == [1, 1, 2] and dow.tolist() == [6, 6, 6]
    hour, dow = local_calendar(T0, 49, "UTC")  # T0 is Monday 2023-01-02 00:00 UTC
    assert hour[:3].tolist() == [0, 1, 2] and dow[[0, 24, 48]].tolist() == [0, 1, 2]


def test_profile_ridge_learns_weekends_that_seasonal_naive_misses() -> None:
    rng = np.random.default_rng(3)
    hours = np.arange(24 * 7 * 16)  # 16 weeks from a Monday, UTC calendar
    weekend = ((hours // 24) % 7) >= 5
    y = 80 + 20 * np.sin(hours * 2 * np.pi / 24) - 35 * weekend + rng.normal(0, 2, len(hours))
    s = series(y, region="X")  # unknown region: the calendar is UTC
    start, end = T0 + 3600 * 24 * 7 * 10, T0 + 3600 * len(hours) - 3600 * 24
    score = backtest(s, make_forecaster("profile-ridge"), start=start, end=end, horizon=24)
    assert score.mae_naive > 5.0  # same hour yesterday is 35 off on every Saturday and Monday
    assert score.mae < 3.0  # the weekday terms carry the weekend (noise alone: E|N(0, 2)| = 1.6)


def test_profile_ridge_prices_survive_spikes_and_negative_values() -> None:
    rng = np.random.default_rng(5)
    hours = np.arange(24 * 90)
    y = 20 + 30 * np.sin(hours * 2 * np.pi / 24) + rng.normal(0, 3, len(hours))  # below 0 every night
    spikes = rng.choice(len(hours), 20, replace=False)
    y[spikes] += 2000.0  # scarcity spikes
    s = series(y)
    start, end = T0 + 3600 * 24 * 60, T0 + 3600 * 24 * 89
    fm = make_forecaster("profile-ridge").forecast(s, np.arange(24 * 60, 24 * 89), 24)
    t = fm.issues[:, None] + np.arange(24)[None, :]
    calm = ~np.isin(t, spikes) & ~np.isin(t - 24, spikes)  # targets not spiking, nor a day after a spike
    err = np.abs(fm.point - y[t])[calm]
    assert (y < 0).any() and np.median(err) < 4.0  # spikes do not drag the fit (noise alone: 2.0)
    naive = SeasonalNaive().point(y, fm.issues, 24)
    assert np.mean(np.abs(fm.point - y[t])) < np.mean(np.abs(naive - y[t]))
    assert backtest(s, make_forecaster("profile-ridge"), start=start, end=end).n > 0


def test_published_day_ahead_prices_are_known_until_the_end_of_the_next_local_day() -> None:
    # 2023-01-02 00:00 UTC = 01:00 CET; DE-LU auction results count as public from 13:00 CET
    y = np.arange(24 * 40, dtype=np.float64)
    s = series(y, region="DE-LU")
    f = PublishedDayAhead(base="seasonal-naive")
    morning, afternoon = 24 * 30 + 10, 24 * 30 + 12  # 11:00 and 13:00 CET
    known = f.known_until(s, np.array([morning, afternoon]))
    assert known.tolist() == [24 * 31 - 1, 24 * 32 - 1]  # end of today / of tomorrow (local midnight = 23:00 UTC)
    fm = f.forecast(s, [morning], 48)
    k = known[0] - morning
    assert fm.point[0, :k].tolist() == y[morning:known[0]].tolist()
    # unpublished hours: the base forecast issued where the published prices end (reads them all)
    base = SeasonalNaive().point(y, np.array([known[0]]), 48)
    assert fm.point[0, k:].tolist() == base[0, :48 - k].tolist()
    last_published_day = y[known[0] - 24:known[0]]
    assert fm.point[0, k:].tolist() == np.tile(last_published_day, 2)[:48 - k].tolist()
    assert fm.bands.shape == (1, 3, 48) and np.all(fm.bands[0, :, :k] == y[morning:known[0]])
    with pytest.raises(InputError, match="price series only"):
        f.forecast(series(y, kind="carbon", region="DE-LU"), [morning], 24)
    with pytest.raises(InputError, match="no day-ahead publication time"):
        f.known_until(series(y, region="XX"), np.array([morning]))


def test_unknown_forecasters_and_bad_options_are_input_errors() -> None:
    with pytest.raises(Exception, match="valid names: seasonal-naive, profile-ridge"):
        FORECASTERS.get("oracle")
    with pytest.raises(InputError, match="bad options for forecaster 'profile-ridge'"):
        make_forecaster("profile-ridge", window=3)
    with pytest.raises(InputError, match="naive_weight"):
        make_forecaster("profile-ridge-blend", naive_weight=2.0)
    with pytest.raises(InputError, match="halflife_days must be > 0"):
        make_forecaster("profile-ridge", halflife_days=0)
    with pytest.raises(InputError, match="ridge must be >= 0"):
        make_forecaster("calendar-ridge", ridge=-1.0)


def test_real_caiso_price_forecast_error_on_a_held_out_month(shared_data: Path) -> None:
    s = load_price_file(price_path("US-CAL-CISO"))
    sc = backtest(s, make_forecaster("profile-ridge"), start=parse_utc("2023-08-01"), end=parse_utc("2023-09-01"))
    assert sc.months == ("2023-08",) and sc.n > 700 * 24
    assert 2.0 < sc.mae < 30.0  # USD/MWh; measured 15.6 (seasonal naive 16.1) when written
    assert 0.6 < sc.coverage < 0.95


def test_real_de_lu_carbon_forecast_beats_seasonal_naive_on_a_held_out_month(shared_data: Path) -> None:
    s = load_carbon_file(carbon_path("DE-LU"))
    sc = backtest(s, make_forecaster("profile-ridge"), start=parse_utc("2023-11-01"), end=parse_utc("2023-12-01"))
    assert sc.months == ("2023-11",) and sc.region == "DE-LU"
    assert sc.mae < 0.85 * sc.mae_naive  # g/kWh; measured 71.6 vs 93.0 when written
    assert 0.65 < sc.coverage < 0.9

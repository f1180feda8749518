"""Day-ahead forecasts of hourly signals from the past only, with conformal quantiles.

NOTE(seedance): the contract, once.
  A forecast *issued* at hour ``T`` (position in the series) may read only values ``y[:T]``; it
  predicts hours ``T, T+1, ..., T+H-1`` (lead ``k = 1..H``: lead 1 is the hour that starts at the
  issue time). Forecasters compute the point forecasts of many issue hours at once
  (``predict``, or ``point`` on bare values), each from its own past. Quantiles are added the
  same way for every forecaster (split-conformal, rolling): the offset of quantile ``q`` at
  lead ``k`` for an issue at ``T`` is the empirical ``q``-quantile of the errors of forecasts
  issued in the previous ``calibration_days`` whose targets were already observed at ``T``. With
  fewer than a day of history a forecast is NaN, and callers treat NaN as "unknown" (the planner
  then runs jobs now).

Forecasters are registered by name in :data:`FORECASTERS`:
  * ``seasonal-naive``: the same hour of the last observed day.
  * ``profile-ridge`` (the default): a ridge regression per lead on lags (same hour 1, 2 and 7
    days back, the 7-day same-hour median, the last value, last-24 h mean/min/max, last-168 h
    mean) and the local calendar (hour of day, Monday/Saturday/Sunday), fitted on every past
    row with exponentially decaying weights (half-life 30 days) and refitted every 24 hours;
    prices through an ``asinh`` transform. Settings were chosen on January-June 2023 only.
  * ``profile-ridge-blend``: the previous default (a Huber ridge on five profile features over
    the last 42 days, averaged 50/50 with seasonal naive), kept for comparison.
  * ``published-day-ahead``: day-ahead market prices as published, a base forecaster beyond.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.signals.series import HOUR, HourlySeries

FloatA = NDArray[np.float64]
IntA = NDArray[np.int64]

DEFAULT_QUANTILES: tuple[float, ...] = (0.1, 0.5, 0.9)


@dataclass(frozen=True, slots=True, eq=False)
class ForecastMatrix:
    """Forecasts of one series issued at many hours.

    Attributes:
        series: The series forecast (its values are the truth for scoring).
        issues: Issue positions (index into ``series.values``), ascending.
        point: ``(len(issues), horizon)`` point forecasts; NaN where no forecast could be made.
        quantiles: The quantile levels, ascending.
        bands: ``(len(issues), len(quantiles), horizon)`` quantile forecasts (NaN where unknown).
    """

    series: HourlySeries
    issues: IntA
    point: FloatA
    quantiles: tuple[float, ...]
    bands: FloatA
    issue_times: IntA = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "issue_times", self.series.start + HOUR * np.asarray(self.issues, dtype=np.int64))

    @property
    def horizon(self) -> int:
        """Number of leads."""
        return int(self.point.shape[1])

    def row(self, t: float) -> int:
        """Row of the latest forecast issued at or before epoch seconds ``t`` (-1 when none was)."""
        return int(np.searchsorted(self.issue_times, t, side="right")) - 1


class Forecaster(ABC):
    """Predicts an hourly series from its past; subclasses implement ``point`` only."""

    name: ClassVar[str]
    summary: ClassVar[str]

    def __init__(self, calibration_days: int = 28) -> None:
        self.calibration_days = calibration_days

    @abstractmethod
    def point(self, y: FloatA, issues: IntA, horizon: int) -> FloatA:
        """Point forecasts ``(len(issues), horizon)``; row ``i`` reads only ``y[:issues[i]]``.

        Called once per batch of issue hours (a whole year in a backtest); NaN where the history
        is too short.
        """

    def predict(self, series: HourlySeries, issues: IntA, horizon: int) -> FloatA:
        """Point forecasts for issue positions of ``series`` (what :meth:`forecast` calls).

        The default reads the values only (:meth:`point`); forecasters that use the calendar
        (local hour, weekday) override this to read the series' start and region too.
        """
        return self.point(series.values, issues, horizon)

    def forecast(self, series: HourlySeries, issues: Sequence[int] | IntA, horizon: int,
                 quantiles: Sequence[float] = DEFAULT_QUANTILES) -> ForecastMatrix:
        """Point and quantile forecasts issued at positions ``issues`` of ``series``.

        The conformal calibration needs the point forecasts of the ``calibration_days`` before
        each issue, which are computed here too (from their own pasts).
        """
        if horizon < 1:
            raise InputError("forecast horizon must be >= 1 hour", source="horizon")
        qs = tuple(sorted(float(q) for q in quantiles))
        if any(not 0.0 < q < 1.0 for q in qs):
            raise InputError("quantiles must lie strictly between 0 and 1", source="quantiles")
        want = np.asarray(issues, dtype=np.int64)
        if not len(want):
            raise InputError("no issue hours to forecast", source=series.source)
        y = series.values
        cal = self.calibration_days * 24
        if want.min() < 0 or want.max() > len(series):
            raise InputError("issue hours outside the series", source=series.source)
        lo = max(0, int(want.min()) - cal - horizon)
        all_issues = np.arange(lo, int(want.max()) + 1, dtype=np.int64)
        pts = self.predict(series, all_issues, horizon)
        err = _errors(y, all_issues, pts)
        bands = np.full((len(want), len(qs), horizon), np.nan)
        # quantile offsets are recomputed once per day of issues (they move slowly)
        day_of = (want - lo) // 24
        offsets: dict[int, FloatA] = {}
        leads = np.arange(1, horizon + 1)
        for i, T in enumerate(want.tolist()):
            d = int(day_of[i])
            if d not in offsets:
                offsets[d] = _conformal(err, all_issues, int(lo + 24 * d), leads, cal, qs)
            bands[i] = pts[T - lo][None, :] + offsets[d]
        return ForecastMatrix(series=series, issues=want, point=pts[want - lo].copy(), quantiles=qs, bands=bands)


def _errors(y: FloatA, issues: IntA, pts: FloatA) -> FloatA:
    """``truth - forecast`` for every issue and lead (NaN where the target is beyond the data)."""
    h = pts.shape[1]
    t = issues[:, None] + np.arange(h)[None, :]
    ok = t < len(y)
    truth = np.where(ok, y[np.minimum(t, len(y) - 1)], np.nan)
    return np.asarray(truth - pts, dtype=np.float64)


def _conformal(err: FloatA, issues: IntA, T: int, leads: IntA, cal: int, qs: tuple[float, ...]) -> FloatA:
    """Quantile offsets ``(len(qs), H)`` at issue ``T`` from errors already observable at ``T``."""
    out = np.full((len(qs), len(leads)), np.nan)
    sel = (issues >= T - cal) & (issues < T)
    if not sel.any():
        return out
    e = err[sel]  # (n, H)
    known = (issues[sel][:, None] + leads[None, :] - 1) < T  # the target was observed before T
    e = np.where(known, e, np.nan)
    count = np.sum(np.isfinite(e), axis=0)
    enough = count >= 24
    if enough.any():
        srt = np.sort(e[:, enough], axis=0)  # NaNs sort last
        n = count[enough]
        cols = np.arange(len(n))
        for j, q in enumerate(qs):  # linear interpolation between order statistics (numpy's default)
            pos = q * (n - 1)
            lo = np.floor(pos).astype(np.int64)
            hi = np.minimum(lo + 1, n - 1)
            out[j, enough] = srt[lo, cols] + (pos - lo) * (srt[hi, cols] - srt[lo, cols])
        # leads without enough observed errors borrow the last lead that has them
        idx = np.maximum.accumulate(np.where(enough, np.arange(len(leads)), -1))
        fill = idx >= 0
        out[:, fill] = out[:, idx[fill]]
    return out


FORECASTERS: Registry[type[Forecaster]] = Registry("forecaster")


def _lag_stack(y: FloatA, lags: Sequence[int]) -> FloatA:
    """``out[j, p] = y[p - lags[j]]`` (NaN before the start)."""
    n = len(y)
    out = np.full((len(lags), n), np.nan)
    for j, lag in enumerate(lags):
        if lag < n:
            out[j, lag:] = y[: n - lag]
    return out


@FORECASTERS.register("seasonal-naive", aliases=("naive",))
class SeasonalNaive(Forecaster):
    """The same hour of the most recent observed day (the baseline every forecaster must beat)."""

    name = "seasonal-naive"
    summary = "same hour of the last observed day"

    def point(self, y: FloatA, issues: IntA, horizon: int) -> FloatA:
        k = np.arange(1, horizon + 1)
        t = issues[:, None] + k[None, :] - 1
        src = t - 24 * np.ceil(k / 24).astype(np.int64)[None, :]
        ok = (src >= 0) & (issues[:, None] >= 24)
        return np.where(ok, y[np.maximum(src, 0)], np.nan)


@FORECASTERS.register("profile-ridge-blend", aliases=("profile-ridge-v1",))
class ProfileRidgeBlend(Forecaster):
    """Ridge regression per lead on daily and weekly profile features, refitted daily, averaged
    with seasonal naive (the default forecaster before :class:`ProfileRidge`; kept for comparison).

    Args:
        window_days: Training window (days of issue hours before each refit).
        min_train_days: Below this much training data the seasonal-naive forecast is used.
        ridge: Ridge penalty relative to the mean diagonal of ``XᵀX``.
        naive_weight: Weight of the seasonal-naive forecast in the final forecast (shrinkage of
            the regression toward it; the regression's training window is not always the
            regime it forecasts).
        calibration_days: Days of past errors behind the quantiles.
    """

    name = "profile-ridge-blend"
    summary = "Huber ridge per lead on 5 profile features (42-day window), averaged 50/50 with seasonal naive"

    def __init__(self, window_days: int = 42, min_train_days: int = 7, ridge: float = 1e-3,
                 robust_iterations: int = 2, huber: float = 1.5, naive_weight: float = 0.5,
                 calibration_days: int = 28) -> None:
        super().__init__(calibration_days)
        if not 0.0 <= naive_weight <= 1.0:
            raise InputError(f"naive_weight must be within 0..1, got {naive_weight}", source="forecast.options")
        self.naive_weight = naive_weight
        self.window_days = window_days
        self.min_train_days = min_train_days
        self.ridge = ridge
        self.robust_iterations = robust_iterations
        self.huber = huber

    @staticmethod
    def _tables(y: FloatA) -> tuple[FloatA, FloatA]:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            med7 = np.nanmedian(_lag_stack(y, [24 * j for j in range(7)]), axis=0)
            mean24 = np.nanmean(_lag_stack(y, list(range(24))), axis=0)
        return med7, mean24

    @staticmethod
    def _features(y: FloatA, med7: FloatA, mean24: FloatA, issues: IntA, k: IntA) -> FloatA:
        """``(len(issues), len(k), 6)`` features; NaN where a lag reaches before the data."""
        t = issues[:, None] + k[None, :] - 1
        day = t - 24 * np.ceil(k / 24).astype(np.int64)[None, :]
        week = t - 168 * np.ceil(k / 168).astype(np.int64)[None, :]
        last = np.broadcast_to((issues - 1)[:, None], t.shape)

        def take(a: FloatA, idx: IntA) -> FloatA:
            return np.where(idx >= 0, a[np.maximum(idx, 0)], np.nan)

        d1 = take(y, day)
        wk = take(y, week)
        wk = np.where(np.isnan(wk), d1, wk)
        return np.stack([np.ones_like(d1), d1, take(med7, day), wk, take(mean24, last), take(y, last)], axis=-1)

    def point(self, y: FloatA, issues: IntA, horizon: int) -> FloatA:
        med7, mean24 = self._tables(y)
        k = np.arange(1, horizon + 1, dtype=np.int64)
        naive = SeasonalNaive().point(y, issues, horizon)
        out = naive.copy()
        if not len(issues):
            return out
        # refit at every issue that starts a block of 24, using only targets before it
        first = int(issues.min())
        blocks = (issues - first) // 24
        for b in np.unique(blocks).tolist():
            rows = np.flatnonzero(blocks == b)
            R = first + 24 * b
            coef = self._fit(y, med7, mean24, R, k)
            if coef is None:
                continue
            X = self._features(y, med7, mean24, issues[rows], k)  # (n, H, 6)
            pred = np.einsum("nhf,hf->nh", X, coef)
            pred = (1.0 - self.naive_weight) * pred + self.naive_weight * naive[rows]
            ok = np.isfinite(pred)
            out[rows] = np.where(ok, pred, naive[rows])
        return out

    def _fit(self, y: FloatA, med7: FloatA, mean24: FloatA, R: int, k: IntA) -> FloatA | None:
        """Coefficients ``(H, 6)`` from issues ``T' < R`` whose targets ``T'+k-1 < R``."""
        lo = max(24, R - 24 * self.window_days)
        train = np.arange(lo, R, dtype=np.int64)
        if len(train) < 24 * self.min_train_days:
            return None
        X = self._features(y, med7, mean24, train, k)  # (N, H, 6)
        t = train[:, None] + k[None, :] - 1
        target = np.where(t < R, y[np.minimum(t, len(y) - 1)], np.nan)
        ok = np.isfinite(target) & np.all(np.isfinite(X), axis=-1)
        if np.min(ok.sum(axis=0)) < 24 * self.min_train_days // 2:
            return None
        # lead-major layout so that the normal equations are batched matrix products
        Xz = np.ascontiguousarray(np.where(ok[..., None], X, 0.0).transpose(1, 0, 2))  # (H, N, 6)
        tz = np.ascontiguousarray(np.where(ok, target, 0.0).T)  # (H, N)
        okT = ok.T
        w = okT.astype(np.float64)
        eye = np.eye(X.shape[-1])
        eye[0, 0] = 0.0  # no penalty on the intercept
        coef = np.zeros((len(k), X.shape[-1]))
        # iteratively reweighted least squares with Huber weights: price spikes must not steer the fit
        for _ in range(1 + self.robust_iterations):
            Xw = Xz * w[..., None]
            xtx = np.matmul(Xw.transpose(0, 2, 1), Xz)
            xty = np.matmul(Xw.transpose(0, 2, 1), tz[..., None])[..., 0]
            lam = self.ridge * np.trace(xtx, axis1=1, axis2=2) / xtx.shape[-1]
            coef = np.linalg.solve(xtx + lam[:, None, None] * eye[None], xty[..., None])[..., 0]
            r = np.abs(tz - np.matmul(Xz, coef[..., None])[..., 0])
            # sigma from the mean absolute residual (1.2533 = sqrt(pi/2) for normal errors)
            sigma = 1.2533 * (r * okT).sum(axis=1) / np.maximum(okT.sum(axis=1), 1)
            c = self.huber * np.maximum(sigma, 1e-9)
            w = np.where(okT, np.minimum(1.0, c[:, None] / np.maximum(r, 1e-12)), 0.0)
        return np.asarray(coef, dtype=np.float64)


# Local (market) time of each known region: hour-of-day and weekday effects follow local time.
REGION_TIMEZONES: dict[str, str] = {
    "US-CAL-CISO": "America/Los_Angeles",
    "DE-LU": "Europe/Berlin",
    "US-TEX-ERCO": "America/Chicago",
}


def local_calendar(start: int, n: int, zone: str) -> tuple[IntA, IntA]:
    """Local hour of day (0-23) and weekday (0 = Monday) of ``n`` hours from ``start`` (UTC epoch s)."""
    from zoneinfo import ZoneInfo

    tz = ZoneInfo(zone)
    t = start + HOUR * np.arange(n, dtype=np.int64)
    # UTC offsets change at most a few times a year: look them up at each day's first hour and
    # at every hour of the days where they change
    off = np.empty(n, dtype=np.int64)
    memo: dict[int, int] = {}

    def offset(x: int) -> int:
        if x not in memo:
            u = datetime.fromtimestamp(x, tz=tz).utcoffset()
            memo[x] = int(u.total_seconds()) if u is not None else 0
        return memo[x]

    for i in range(0, n, 24):
        j = min(i + 24, n)
        a, b = offset(int(t[i])), offset(int(t[j - 1]))
        off[i:j] = a if a == b else [offset(int(x)) for x in t[i:j].tolist()]
    loc = t + off
    hour = (loc // HOUR) % 24
    dow = (loc // 86400 + 3) % 7  # 1970-01-01 was a Thursday
    return hour.astype(np.int64), dow.astype(np.int64)


@FORECASTERS.register("profile-ridge", aliases=("ridge", "calendar-ridge"))
class ProfileRidge(Forecaster):
    """Ridge regression per lead on lags and the local calendar, with exponential forgetting.

    For an issue at ``T`` and lead ``k`` (target hour ``t = T + k - 1``) the features read
    ``y[:T]`` only: the same hour on the last observed day, the day before and a week earlier,
    the 7-day same-hour median, the last value, the mean/min/max of the last 24 hours, the mean
    of the last 168 hours, the value 24 hours before the last; one-hot local hour of day of the
    target, whether the target is a Monday, Saturday or Sunday, and whether the "last observed
    day" lag falls on a Saturday or Sunday. One model per lead: weighted least squares with
    weight ``0.5 ** (age / halflife_days)`` per row (age in days since its target was observed)
    and a scale-free ridge penalty ``ridge * diag(XᵀWX)`` (not on the intercept). Refitted every
    24 hours on every row whose target was observed before the refit; the weighted sums are
    accumulated day by day, so a year of hourly issues takes seconds. Prices are modelled after
    ``asinh(y / price_asinh_scale)`` (a variance-stabilising transform that tames price spikes
    and keeps negative prices) and mapped back; carbon as is (``carbon_asinh_scale`` None).
    Before ``min_train_days`` of rows the forecast is seasonal naive. Settings were chosen on
    January-June 2023 only (CAISO and DE-LU), on the planner's captured savings.

    Args:
        halflife_days: Half-life of a training row's weight (days).
        ridge: Ridge penalty relative to each feature's weighted second moment.
        price_asinh_scale: Scale of the asinh transform for price series (currency/MWh); None: none.
        carbon_asinh_scale: The same for carbon series (g/kWh).
        min_train_days: Days of training rows needed before the regression is used.
        timezone: IANA zone of the calendar features (default: the region's, UTC when unknown).
        calibration_days: Days of past errors behind the quantiles.
    """

    name = "profile-ridge"
    summary = "ridge per lead on lags + local hour/weekday, exponential forgetting, daily refits"
    chunk = 12  # leads fitted together (memory: chunk x hours x features floats)

    def __init__(self, halflife_days: float = 30.0, ridge: float = 1e-3, price_asinh_scale: float | None = 40.0,
                 carbon_asinh_scale: float | None = None, min_train_days: int = 5, timezone: str | None = None,
                 calibration_days: int = 28) -> None:
        super().__init__(calibration_days)
        for label, v in (("halflife_days", halflife_days), ("price_asinh_scale", price_asinh_scale),
                         ("carbon_asinh_scale", carbon_asinh_scale)):
            if v is not None and not v > 0:
                raise InputError(f"{label} must be > 0, got {v}", source="forecast.options")
        if ridge < 0 or min_train_days < 1:
            raise InputError("ridge must be >= 0 and min_train_days >= 1", source="forecast.options")
        self.halflife_days = halflife_days
        self.ridge = ridge
        self.price_asinh_scale = price_asinh_scale
        self.carbon_asinh_scale = carbon_asinh_scale
        self.min_train_days = min_train_days
        self.timezone = timezone

    def point(self, y: FloatA, issues: IntA, horizon: int) -> FloatA:
        """Forecasts of a bare array: position 0 is taken as midnight UTC, no transform."""
        return self._predict(y, issues, horizon, 0, "UTC", None)

    def predict(self, series: HourlySeries, issues: IntA, horizon: int) -> FloatA:
        from seedance.signals.series import PRICE

        zone = self.timezone or REGION_TIMEZONES.get(series.region, "UTC")
        scale = self.price_asinh_scale if series.kind == PRICE else self.carbon_asinh_scale
        return self._predict(series.values, issues, horizon, series.start, zone, scale)

    def _predict(self, y_all: FloatA, issues: IntA, horizon: int, start: int, zone: str,
                 scale: float | None) -> FloatA:
        issues = np.asarray(issues, dtype=np.int64)
        out = np.full((len(issues), horizon), np.nan)
        if not len(issues):
            return out
        # nothing at or after the last issue is read: the model is built on y[:max(issues)] only
        n = int(issues.max())
        y = np.asarray(y_all[:n], dtype=np.float64)
        if scale is not None:
            y = np.arcsinh(y / scale)
        hour, dow = local_calendar(start, n + horizon, zone)
        tables = _lag_tables(y)
        nd = (n + horizon) // 24 + 2
        k_all = np.arange(1, horizon + 1, dtype=np.int64)
        lam = 0.5 ** (1.0 / self.halflife_days)
        for c0 in range(0, horizon, self.chunk):
            k = k_all[c0:c0 + self.chunk]
            beta, good = self._fit(y, tables, hour, dow, k, nd, lam)
            X, naive = self._features(y, tables, hour, dow, issues, k)  # (m, K, P)
            day = issues // 24
            pred = np.einsum("mkp,mkp->mk", X, beta[day])
            pred = np.where(good[day] & np.isfinite(pred), pred, naive)
            out[:, c0:c0 + len(k)] = pred
        if scale is not None:
            out = scale * np.sinh(out)
        return out

    def _fit(self, y: FloatA, tables: dict[str, FloatA], hour: IntA, dow: IntA, k: IntA, nd: int,
             lam: float) -> tuple[FloatA, NDArray[np.bool_]]:
        """Coefficients ``(days, K, P)``: those of day ``d`` use only targets observed before hour ``24 d``."""
        n = len(y)
        T = np.arange(n, dtype=np.int64)
        X, _ = self._features(y, tables, hour, dow, T, k)  # (n, K, P)
        K, P = X.shape[1], X.shape[2]
        t = T[:, None] + k[None, :] - 1
        inside = t < n
        target = np.where(inside, y[np.minimum(t, n - 1)], np.nan)
        ok = inside & np.isfinite(target) & np.all(np.isfinite(X), axis=-1)
        # rows grouped by the day of their target: day d's rows become usable at the refit of day d + 1
        Xh = np.zeros((K, nd * 24, P))
        yh = np.zeros((K, nd * 24))
        for i in range(K):
            rows = np.flatnonzero(ok[:, i])
            Xh[i, t[rows, i]] = X[rows, i]
            yh[i, t[rows, i]] = target[rows, i]
        Xd = Xh.reshape(K, nd, 24, P)
        yd = yh.reshape(K, nd, 24)
        xtx = np.einsum("kdnp,kdnq->dkpq", Xd, Xd)  # (nd, K, P, P)
        xty = np.einsum("kdnp,kdn->dkp", Xd, yd)
        rows_per_day = np.zeros((nd, K))
        for i in range(K):
            np.add.at(rows_per_day[:, i], t[ok[:, i], i] // 24, 1.0)
        beta = np.zeros((nd, K, P))
        good = np.zeros((nd, K), dtype=bool)
        A = np.zeros((K, P, P))
        B = np.zeros((K, P))
        seen = np.zeros(K)
        eye = np.eye(P)
        for d in range(nd):
            fit = seen >= 24 * self.min_train_days
            if fit.any():
                pen = self.ridge * np.maximum(np.einsum("kii->ki", A), 1e-12)
                pen[:, 0] = 0.0  # no penalty on the intercept
                beta[d] = np.linalg.solve(A + pen[:, :, None] * eye[None], B[..., None])[..., 0]
                good[d] = fit
            A = lam * A + xtx[d]
            B = lam * B + xty[d]
            seen = seen + rows_per_day[d]
        return beta, good

    @staticmethod
    def _features(y: FloatA, tables: dict[str, FloatA], hour: IntA, dow: IntA, issues: IntA,
                  k: IntA) -> tuple[FloatA, FloatA]:
        """``(len(issues), len(k), P)`` features and the seasonal-naive forecast (NaN before the data)."""
        n = len(y)
        t = issues[:, None] + k[None, :] - 1
        back = 24 * np.ceil(k / 24).astype(np.int64)[None, :]

        def take(a: FloatA, idx: IntA) -> FloatA:
            return np.where((idx >= 0) & (idx < n), a[np.clip(idx, 0, n - 1)], np.nan)

        def at_issue(a: FloatA) -> FloatA:
            return np.broadcast_to(take(a, issues - 1)[:, None], t.shape)

        d1 = take(y, t - back)
        wk = take(y, t - 168 * np.ceil(k / 168).astype(np.int64)[None, :])
        cols = [np.ones(t.shape), d1, take(y, t - back - 24), np.where(np.isnan(wk), d1, wk),
                take(tables["med7"], t - back), at_issue(y), at_issue(tables["mean24"]), at_issue(tables["min24"]),
                at_issue(tables["max24"]), at_issue(tables["mean168"]), at_issue(tables["prev24"])]
        h = hour[t]
        cols += [(h == j).astype(np.float64) for j in range(1, 24)]
        wd = dow[t]
        wd1 = dow[np.maximum(t - back, 0)]
        cols += [(wd == j).astype(np.float64) for j in (0, 5, 6)]
        cols += [(wd1 == j).astype(np.float64) for j in (5, 6)]
        return np.stack(cols, axis=-1), d1


def _lag_tables(y: FloatA) -> dict[str, FloatA]:
    """Per position ``p``: statistics of values up to and including ``p`` (read at ``p = T - 1``)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows at the start
        day = _lag_stack(y, list(range(24)))
        return {
            "mean24": np.nanmean(day, axis=0), "min24": np.nanmin(day, axis=0), "max24": np.nanmax(day, axis=0),
            "mean168": np.nanmean(_lag_stack(y, list(range(168))), axis=0),
            "prev24": _lag_stack(y, [24])[0],
            "med7": np.nanmedian(_lag_stack(y, [24 * j for j in range(7)]), axis=0),
        }


# When each day-ahead market publishes its prices for the next delivery day (local time), rounded
# up to the next full hour: CAISO IFM results about 13:00 Pacific; EPEX SPOT DE-LU auction (gate
# closure 12:00 CET) results from about 12:45; ERCOT DAM results about 13:30 Central.
DAY_AHEAD_PUBLICATION: dict[str, tuple[str, float]] = {
    "US-CAL-CISO": ("America/Los_Angeles", 13.0),
    "DE-LU": ("Europe/Berlin", 13.0),
    "US-TEX-ERCO": ("America/Chicago", 14.0),
}


@FORECASTERS.register("published-day-ahead", aliases=("dam",))
class PublishedDayAhead(Forecaster):
    """Day-ahead *market* prices as published: known up to the end of the next local day once the
    auction results are out, forecast beyond (by ``base``, issued where the published prices end,
    so its lags read the latest published day rather than the last hour already delivered).

    This reads values of the future, exactly those a market participant has at the issue time:
    day-ahead prices for delivery day ``D+1`` are public from ``publish_hour`` (local) on day ``D``.
    It applies to day-ahead price series only (never to carbon intensity).

    Args:
        base: Forecaster for the hours not yet published.
        publish_hour: Local hour after which the next day's prices are known (default: the
            region's entry in :data:`DAY_AHEAD_PUBLICATION`).
        timezone: The market's IANA timezone (default: likewise).
        calibration_days: Days of past errors behind the quantiles of ``base``.
        base_options: Options of the base forecaster.
    """

    name = "published-day-ahead"
    summary = "published day-ahead market prices where known, the base forecaster beyond"

    def __init__(self, base: str = "profile-ridge", publish_hour: float | None = None, timezone: str | None = None,
                 calibration_days: int = 28, base_options: dict[str, Any] | None = None) -> None:
        super().__init__(calibration_days)
        if base == self.name:
            raise InputError("base must be another forecaster", source="forecast.options")
        self.base = make_forecaster(base, calibration_days=calibration_days, **(base_options or {}))
        self.publish_hour = publish_hour
        self.timezone = timezone

    def point(self, y: FloatA, issues: IntA, horizon: int) -> FloatA:
        return self.base.point(y, issues, horizon)

    def predict(self, series: HourlySeries, issues: IntA, horizon: int) -> FloatA:
        return self.base.predict(series, issues, horizon)

    def known_until(self, series: HourlySeries, issues: IntA) -> IntA:
        """Per issue, the first position whose price is not yet published."""
        from zoneinfo import ZoneInfo

        zone, hour = DAY_AHEAD_PUBLICATION.get(series.region, (None, None))
        zone = self.timezone or zone
        hour = self.publish_hour if self.publish_hour is not None else hour
        if zone is None or hour is None:
            raise InputError(f"no day-ahead publication time known for region {series.region!r}; give "
                             "publish_hour and timezone in forecast.options", source="forecast.options")
        tz = ZoneInfo(zone)
        out = np.empty(len(issues), dtype=np.int64)
        memo: dict[tuple[object, bool], int] = {}
        from datetime import timedelta

        for i, T in enumerate((series.start + HOUR * issues).tolist()):
            local = datetime.fromtimestamp(T, tz=tz)
            day = local.date()
            published = local.hour + local.minute / 60 >= hour
            key = (day, published)
            if key not in memo:
                last = day + timedelta(days=2 if published else 1)  # exclusive end, local midnight
                end = datetime(last.year, last.month, last.day, tzinfo=tz).timestamp()
                memo[key] = int((end - series.start) // HOUR)
            out[i] = memo[key]
        return out

    def forecast(self, series: HourlySeries, issues: Sequence[int] | IntA, horizon: int,
                 quantiles: Sequence[float] = DEFAULT_QUANTILES) -> ForecastMatrix:
        from seedance.signals.series import PRICE

        if series.kind != PRICE:
            raise InputError(f"{self.name} applies to day-ahead price series only, not {series.kind}",
                             source="forecast")
        want = np.asarray(issues, dtype=np.int64)
        y = series.values
        until = self.known_until(series, want)
        # unpublished hours: the base forecast issued where the published prices end (it reads
        # every published price, none beyond), at the matching lead
        src = np.minimum(until, len(y))
        uniq, inv = np.unique(src, return_inverse=True)
        fm = self.base.forecast(series, uniq, horizon, quantiles)
        t = want[:, None] + np.arange(horizon)[None, :]
        lead = np.clip(t - src[:, None], 0, horizon - 1)
        rows = inv[:, None]
        point = fm.point[rows, lead]
        bands = np.moveaxis(fm.bands[rows, :, lead], -1, 1)
        known = (t < until[:, None]) & (t < len(y))
        actual = y[np.minimum(t, len(y) - 1)]
        point = np.where(known, actual, point)
        bands = np.where(known[:, None, :], actual[:, None, :], bands)
        return ForecastMatrix(series=series, issues=want, point=point, quantiles=fm.quantiles, bands=bands)


def make_forecaster(name: str, **options: Any) -> Forecaster:
    """Instantiate the forecaster registered as ``name`` (unknown names list the valid ones)."""
    cls = FORECASTERS.get(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise InputError(f"bad options for forecaster {name!r}: {exc}", source="forecast") from None


@dataclass(frozen=True, slots=True)
class ForecastScore:
    """Errors of one forecaster on one series over a set of months.

    Attributes:
        forecaster: Forecaster name.
        kind, region, unit: What was forecast.
        months: Month labels (``YYYY-MM``) scored.
        mae: Mean absolute error of the point forecast (unit of the series).
        mae_naive: The same for the seasonal-naive forecast (skill baseline).
        coverage: Share of truths inside the outer quantile band (nominal: ``q_hi - q_lo``).
        nominal: The nominal coverage of that band.
        n: Number of (issue, lead) pairs scored.
        by_month: Per month: ``{"month", "mae", "mae_naive", "coverage", "n"}``.
    """

    forecaster: str
    kind: str
    region: str
    unit: str
    months: tuple[str, ...]
    mae: float
    mae_naive: float
    coverage: float
    nominal: float
    n: int
    by_month: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"forecaster": self.forecaster, "kind": self.kind, "region": self.region, "unit": self.unit,
                "months": list(self.months), "mae": self.mae, "mae_naive": self.mae_naive,
                "skill_vs_naive": 1.0 - self.mae / self.mae_naive if self.mae_naive else None,
                "coverage": self.coverage, "nominal_coverage": self.nominal, "n": self.n,
                "by_month": list(self.by_month)}


def backtest(series: HourlySeries, forecaster: Forecaster, *, start: float, end: float, horizon: int = 24,
             quantiles: Sequence[float] = DEFAULT_QUANTILES) -> ForecastScore:
    """Score forecasts issued every hour in ``[start, end)`` at leads ``1..horizon``.

    Every forecast reads only the past of its issue hour; targets beyond the series are skipped.
    """
    i0 = max(0, int(np.ceil((start - series.start) / HOUR)))
    i1 = min(len(series), int((end - series.start) // HOUR))
    if i1 <= i0:
        raise InputError("no issue hours inside the series for this period", source=series.source)
    fm = forecaster.forecast(series, np.arange(i0, i1, dtype=np.int64), horizon, quantiles)
    return score_forecasts(fm, forecaster.name, horizon)


def score_forecasts(fm: ForecastMatrix, name: str, leads: int = 24) -> ForecastScore:
    """MAE (against seasonal naive) and band coverage of ``fm`` at leads ``1..leads``, by month."""
    series = fm.series
    h = min(leads, fm.horizon)
    issues = fm.issues
    naive = SeasonalNaive().point(series.values, issues, h)
    y = series.values
    t = issues[:, None] + np.arange(h)[None, :]
    inside = t < len(y)
    truth = np.where(inside, y[np.minimum(t, len(y) - 1)], np.nan)
    point = fm.point[:, :h]
    lo_band, hi_band = fm.bands[:, 0, :h], fm.bands[:, -1, :h]
    ok = inside & np.isfinite(point) & np.isfinite(naive) & np.isfinite(lo_band) & np.isfinite(hi_band)
    ae = np.abs(truth - point)
    ae_n = np.abs(truth - naive)
    cov = (truth >= lo_band) & (truth <= hi_band)
    month = np.array([datetime.fromtimestamp(int(x), tz=UTC).strftime("%Y-%m")
                      for x in fm.issue_times.tolist()])
    rows = []
    for m in sorted(set(month.tolist())):
        sel = ok & (month == m)[:, None]
        n = int(sel.sum())
        if n:
            rows.append({"month": m, "mae": float(ae[sel].mean()), "mae_naive": float(ae_n[sel].mean()),
                         "coverage": float(cov[sel].mean()), "n": n})
    n_all = int(ok.sum())
    if not n_all:
        raise InputError("no forecast could be scored (history too short?)", source=series.source)
    return ForecastScore(
        forecaster=name, kind=series.kind, region=series.region, unit=series.unit,
        months=tuple(r["month"] for r in rows), mae=float(ae[ok].mean()), mae_naive=float(ae_n[ok].mean()),
        coverage=float(cov[ok].mean()), nominal=float(fm.quantiles[-1] - fm.quantiles[0]), n=n_all,
        by_month=tuple(rows))

"""Hourly GPU demand: the file format, replayed pod traces, scenarios and a PAI-calibrated generator.

File format (``seedancectl reserve plan --demand FILE``): CSV with the header ``timestamp,gpus``,
one row per hour in ascending order without gaps; ``timestamp`` is the hour start in ISO 8601
UTC (``2024-01-01T00:00:00Z``, ``+00:00`` or no offset, read as UTC; another offset is an error);
``gpus`` is the number of GPUs (units) in use, >= 0, rounded *up* to a whole unit. Any error
raises :class:`~seedance.core.errors.InputError` naming the file, line and column.

Generators (each returns an :class:`HourlyDemand`):

* :func:`demand_from_pods`: a pod trace replayed at its own timing (every GPU pod holds
  ``num_gpu * gpu_milli / 1000`` GPUs from creation to deletion), folded onto its busy period
  as in :mod:`seedance.costmodel.workload` and repeated; the hourly mean concurrency, rounded up.
* :func:`scenario_demand`: a base level times a weekly profile, growth, yearly seasonality,
  bursts, level drops and noise (:class:`Scenario`).
* :func:`pai_calibrated_demand`: an M/G/infinity job stream matched to the published PAI 2020
  statistics (AcmeTrace ``cluster_summary.csv``, PAI row): GPU-job count over the trace's two
  months, mean and median run time, mean and median GPU request, maximum run time.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError

HOUR = 3600
DAY = 86400
WEEK = 7 * DAY
IntA = NDArray[np.int64]
FloatA = NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class HourlyDemand:
    """Units in use per hour from ``start`` (epoch seconds, an hour start, UTC)."""

    start: int
    values: IntA
    source: str = ""

    def __post_init__(self) -> None:
        if self.start % HOUR:
            raise InputError("demand must start on an hour", source=self.source)
        v = np.asarray(self.values)
        if v.ndim != 1 or (len(v) and v.min() < 0):
            raise InputError("demand is one non-negative value per hour", source=self.source)
        object.__setattr__(self, "values", v.astype(np.int64))

    def __len__(self) -> int:
        return len(self.values)

    @property
    def end(self) -> int:
        """Epoch seconds just after the last hour."""
        return self.start + HOUR * len(self.values)

    def index(self, t: float) -> int:
        """Hour index of epoch seconds ``t`` (floor)."""
        return int((t - self.start) // HOUR)

    def window(self, first: int, hours: int | None = None, label: str = "") -> DemandWindow:
        """Hours ``[first, first + hours)`` as a window, everything before it as its history."""
        last = len(self.values) if hours is None else first + hours
        if not 0 <= first < last <= len(self.values):
            raise InputError(f"window {first}..{last} outside the {len(self.values)} hours of demand",
                             source=self.source)
        return DemandWindow(history=self.values[:first], values=self.values[first:last],
                            start=self.start + HOUR * first, label=label or self.source)


@dataclass(frozen=True, slots=True, eq=False)
class DemandWindow:
    """The hours a plan is evaluated on, and the demand observed before them.

    Online policies read ``history`` and the hours of the window already past; only hindsight
    policies (``best-fixed``, ``hindsight-optimal``) read ``values`` ahead of time.
    """

    history: IntA
    values: IntA
    start: int
    label: str = ""
    _all: IntA = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_all", np.concatenate([np.asarray(self.history, dtype=np.int64),
                                                         np.asarray(self.values, dtype=np.int64)]))

    def __len__(self) -> int:
        return len(self.values)

    def observed(self, hour: int) -> IntA:
        """Everything known at window hour ``hour``: the history and the window's first ``hour`` hours."""
        return self._all[:len(self.history) + max(0, hour)]


# ---------------------------------------------------------------- file format


def _parse_ts(text: str, source: str, line: int) -> int:
    s = text.strip()
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"not an ISO 8601 timestamp: {s!r}", source=source, line=line, field="timestamp") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    elif dt.utcoffset() != UTC.utcoffset(None):
        raise InputError(f"timestamps must be UTC, got offset {dt.utcoffset()}", source=source, line=line,
                         field="timestamp")
    t = dt.timestamp()
    if t % HOUR:
        raise InputError(f"{s} is not the start of an hour", source=source, line=line, field="timestamp")
    return int(t)


def load_demand_csv(path: str | Path) -> HourlyDemand:
    """Read a ``timestamp,gpus`` CSV (see the module docstring)."""
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("demand file not found", source=src) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read demand file: {exc}", source=src) from None
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise InputError("empty demand file (expected the header timestamp,gpus)", source=src, line=1)
    header = [h.strip().lower() for h in rows[0]]
    for col in ("timestamp", "gpus"):
        if col not in header:
            raise InputError(f"missing column {col!r} (header must be timestamp,gpus)", source=src, line=1, field=col)
    it, ig = header.index("timestamp"), header.index("gpus")
    times: list[int] = []
    vals: list[int] = []
    for n, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(f"expected {len(header)} fields, got {len(row)}", source=src, line=n)
        t = _parse_ts(row[it], src, n)
        try:
            g = float(row[ig])
        except ValueError:
            raise InputError(f"not a number: {row[ig]!r}", source=src, line=n, field="gpus") from None
        if not math.isfinite(g) or g < 0:
            raise InputError(f"must be a finite number >= 0, got {row[ig].strip()}", source=src, line=n, field="gpus")
        if times:
            if t == times[-1]:
                raise InputError("the same hour twice", source=src, line=n, field="timestamp")
            if t < times[-1]:
                raise InputError("timestamps must ascend", source=src, line=n, field="timestamp")
            if t != times[-1] + HOUR:
                gap = (t - times[-1]) // HOUR - 1
                raise InputError(f"{gap} hour(s) missing before this row (the file must be hourly without gaps)",
                                 source=src, line=n, field="timestamp")
        times.append(t)
        vals.append(int(math.ceil(g - 1e-9)))
    if not times:
        raise InputError("no data rows", source=src, line=2)
    return HourlyDemand(start=times[0], values=np.array(vals, dtype=np.int64), source=src)


def write_demand_csv(demand: HourlyDemand, path: str | Path) -> None:
    """Write ``demand`` in the file format."""
    lines = ["timestamp,gpus"]
    for i, v in enumerate(demand.values.tolist()):
        t = datetime.fromtimestamp(demand.start + HOUR * i, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"{t},{v}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---------------------------------------------------------------- interval integration


def hourly_mean(starts: FloatA, ends: FloatA, weights: FloatA, hours: int) -> FloatA:
    """Mean concurrency per hour ``[k, k+1)`` (in seconds from 0) of weighted intervals ``[s, e)``.

    Exact: the integral ``G(x) = sum w * clip(x - s, 0, e - s)`` is evaluated at every hour edge
    from cumulative sums over the sorted starts and ends.
    """
    edges = np.arange(hours + 1, dtype=np.float64) * HOUR
    out = np.zeros(hours + 1)
    for pts, sign in ((starts, 1.0), (ends, -1.0)):
        order = np.argsort(pts)
        p, w = pts[order], weights[order]
        cw = np.concatenate([[0.0], np.cumsum(w)])
        cwp = np.concatenate([[0.0], np.cumsum(w * p)])
        k = np.searchsorted(p, edges, side="left")  # points strictly below each edge
        out += sign * (edges * cw[k] - cwp[k])
    return np.asarray(np.diff(out) / HOUR, dtype=np.float64)


# ---------------------------------------------------------------- pod traces


def demand_from_pods(path: str | Path, *, start: int, hours: int, busy_quantile: float = 0.01,
                     scale: float = 1.0) -> HourlyDemand:
    """Hourly GPU demand of a pod trace replayed at its own timing, folded and repeated.

    Args:
        path: Pod list CSV (Alibaba ``openb`` format).
        start: Epoch seconds of the first hour (the folded period's start is laid here).
        hours: Hours to produce (the period repeats).
        busy_quantile: The fold starts at this quantile of GPU-pod creation times.
        scale: Multiply the demand (e.g. to model a larger organisation).
    """
    from seedance.traces import load_pods

    trace = load_pods(path)
    g = np.asarray(trace.num_gpu * trace.gpu_milli / 1000.0, dtype=np.float64)
    c, e = np.asarray(trace.creation, dtype=np.float64), np.asarray(trace.deletion, dtype=np.float64)
    keep = (g > 0) & np.isfinite(c) & np.isfinite(e) & (e > c)
    g, c, e = g[keep], c[keep], e[keep]
    if not len(g):
        raise InputError("the trace has no GPU pods with a creation and deletion time", source=str(path))
    p0 = float(np.quantile(c, busy_quantile))
    period = max(WEEK, math.ceil((c.max() - p0 + 1) / WEEK) * WEEK)
    s = np.mod(c - p0, period)
    dur = e - c
    full = np.floor(dur / period)
    rem = dur - full * period
    level = float((g * full).sum())  # pods longer than a period hold their GPUs through whole periods
    # the remainder interval [s, s + rem) wraps around the period end
    a1, b1 = s, np.minimum(s + rem, period)
    wrap = s + rem > period
    a2, b2 = np.zeros(int(wrap.sum())), (s + rem - period)[wrap]
    ph = period // HOUR
    mean = level + hourly_mean(np.concatenate([a1, a2]), np.concatenate([b1, b2]),
                               np.concatenate([g, g[wrap]]), ph)
    reps = math.ceil(hours / ph)
    vals = np.ceil(np.tile(mean, reps)[:hours] * scale - 1e-9)
    return HourlyDemand(start=start, values=vals.astype(np.int64), source=f"{path} (replayed, period {ph // 24} d)")


# ---------------------------------------------------------------- scenarios


def weekly_profile(demand: Sequence[float] | IntA | FloatA, start: int) -> FloatA:
    """Mean of ``demand`` by hour of the week (168 values, Monday 00 UTC first), normalised to mean 1."""
    v = np.asarray(demand, dtype=np.float64)
    how = ((start // HOUR + np.arange(len(v)) + 72) % 168).astype(np.int64)  # 1970-01-01 was a Thursday
    sums = np.bincount(how, weights=v, minlength=168)
    cnt = np.bincount(how, minlength=168)
    prof = np.divide(sums, np.maximum(cnt, 1))
    if prof.mean() <= 0:
        return np.ones(168)
    prof = np.where(cnt > 0, prof, prof[cnt > 0].mean())
    return np.asarray(prof / prof.mean(), dtype=np.float64)


def diurnal_profile(night_dip: float = 0.3, weekend_dip: float = 0.15) -> FloatA:
    """A synthetic weekly profile (mean 1): lower at night (UTC 0-6 h) and at weekends."""
    h = np.arange(168)
    hod, dow = h % 24, h // 24
    p = 1.0 - night_dip * 0.5 * (1 + np.cos(2 * np.pi * (hod - 3) / 24)) * 0.9
    p = p * np.where(dow >= 5, 1.0 - weekend_dip, 1.0)
    return np.asarray(p / p.mean(), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Scenario:
    """A demand scenario (all rates per year).

    Attributes:
        base: Mean units in the first year (before growth).
        growth: Relative growth per year (0.5 = +50 %/year, compounded hourly; negative shrinks).
        seasonal: Amplitude of a yearly sine (0.1 = +/-10 %), peak at ``seasonal_peak_day``.
        seasonal_peak_day: Day of the year of the seasonal peak.
        bursts_per_year: Mean number of bursts (Poisson).
        burst_days: Mean burst length in days (exponential).
        burst_size: Mean burst height relative to the level (exponential).
        drop_at_year: Year (from the start) at which a share ``drop`` of the demand goes away
            (a project ends); ``None`` for none.
        drop: That share.
        noise: Relative hourly noise (log-normal sigma).
        profile: Weekly profile (168 values, mean 1); default :func:`diurnal_profile`.
        name: Label.
    """

    base: float = 100.0
    growth: float = 0.0
    seasonal: float = 0.0
    seasonal_peak_day: float = 330.0
    bursts_per_year: float = 0.0
    burst_days: float = 7.0
    burst_size: float = 0.3
    drop_at_year: float | None = None
    drop: float = 0.0
    noise: float = 0.05
    profile: tuple[float, ...] | None = field(default=None)
    name: str = "scenario"

    def __post_init__(self) -> None:
        if not self.base > 0:
            raise InputError("base must be > 0", field="base")
        if self.growth <= -1:
            raise InputError("growth must be > -1", field="growth")
        if not 0 <= self.drop < 1:
            raise InputError("drop must be within [0, 1)", field="drop")
        for name in ("seasonal", "bursts_per_year", "burst_days", "burst_size", "noise"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must be >= 0", field=name)
        if self.profile is not None and len(self.profile) != 168:
            raise InputError("profile needs 168 values (hours of the week)", field="profile")


def scenario_demand(sc: Scenario, *, start: int, hours: int, seed: int = 0) -> HourlyDemand:
    """Hourly demand of scenario ``sc`` (seeded, reproducible)."""
    rng = np.random.default_rng(seed)
    t = np.arange(hours, dtype=np.float64)
    years = t / 8760.0
    prof = np.asarray(sc.profile if sc.profile is not None else diurnal_profile(), dtype=np.float64)
    how = ((start // HOUR + np.arange(hours) + 72) % 168).astype(np.int64)
    level = sc.base * np.power(1.0 + sc.growth, years)
    day_of_year = ((start / DAY) + t / 24.0) % 365.25
    level = level * (1.0 + sc.seasonal * np.cos(2 * np.pi * (day_of_year - sc.seasonal_peak_day) / 365.25))
    if sc.drop_at_year is not None:
        level = level * np.where(years >= sc.drop_at_year, 1.0 - sc.drop, 1.0)
    burst = np.zeros(hours)
    n = rng.poisson(sc.bursts_per_year * hours / 8760.0)
    for _ in range(int(n)):
        b0 = int(rng.integers(0, hours))
        length = max(1, int(rng.exponential(sc.burst_days) * 24))
        burst[b0:b0 + length] += rng.exponential(sc.burst_size)
    noise = rng.lognormal(0.0, sc.noise, hours) if sc.noise > 0 else np.ones(hours)
    vals = np.ceil(level * prof[how] * (1.0 + burst) * noise - 1e-9)
    return HourlyDemand(start=start, values=np.maximum(vals, 0).astype(np.int64),
                        source=f"scenario {sc.name} (seed {seed})")


def random_scenario(rng: np.random.Generator, *, profile: FloatA | None = None, name: str = "random") -> Scenario:
    """A scenario drawn from the family used to train and test the reservation engine."""
    return Scenario(
        base=float(rng.uniform(20, 400)),
        growth=float(rng.choice([0.0, rng.uniform(-0.2, 0.0), rng.uniform(0.0, 0.8)], p=[0.3, 0.2, 0.5])),
        seasonal=float(rng.uniform(0.0, 0.25)), seasonal_peak_day=float(rng.uniform(0, 365)),
        bursts_per_year=float(rng.uniform(0, 8)), burst_days=float(rng.uniform(2, 21)),
        burst_size=float(rng.uniform(0.1, 1.0)),
        drop_at_year=float(rng.uniform(0.5, 2.5)) if rng.random() < 0.25 else None,
        drop=float(rng.uniform(0.2, 0.6)), noise=float(rng.uniform(0.02, 0.12)),
        profile=tuple(profile.tolist()) if profile is not None else tuple(
            diurnal_profile(float(rng.uniform(0.0, 0.6)), float(rng.uniform(0.0, 0.3))).tolist()),
        name=name)


def modulate(demand: HourlyDemand, sc: Scenario, *, seed: int = 0) -> HourlyDemand:
    """``demand`` times the scenario's growth, seasonality, bursts and drop (its base and profile unused)."""
    flat = Scenario(base=1.0, growth=sc.growth, seasonal=sc.seasonal, seasonal_peak_day=sc.seasonal_peak_day,
                    bursts_per_year=sc.bursts_per_year, burst_days=sc.burst_days, burst_size=sc.burst_size,
                    drop_at_year=sc.drop_at_year, drop=sc.drop, noise=0.0, profile=(1.0,) * 168, name=sc.name)
    rng = np.random.default_rng(seed)
    t = np.arange(len(demand), dtype=np.float64)
    years = t / 8760.0
    level = np.power(1.0 + flat.growth, years)
    doy = ((demand.start / DAY) + t / 24.0) % 365.25
    level = level * (1.0 + flat.seasonal * np.cos(2 * np.pi * (doy - flat.seasonal_peak_day) / 365.25))
    if flat.drop_at_year is not None:
        level = level * np.where(years >= flat.drop_at_year, 1.0 - flat.drop, 1.0)
    burst = np.zeros(len(demand))
    for _ in range(int(rng.poisson(flat.bursts_per_year * len(demand) / 8760.0))):
        b0 = int(rng.integers(0, len(demand)))
        burst[b0:b0 + max(1, int(rng.exponential(flat.burst_days) * 24))] += rng.exponential(flat.burst_size)
    vals = np.ceil(demand.values * level * (1.0 + burst) - 1e-9)
    return HourlyDemand(start=demand.start, values=vals.astype(np.int64), source=f"{demand.source} x {sc.name}")


# ---------------------------------------------------------------- PAI 2020 calibration

# Published statistics of the PAI 2020 trace (Weng et al., NSDI '22), as tabulated by the AcmeTrace
# authors in data/cluster_summary.csv (InternLM/AcmeTrace, PAI row): GPU jobs, run time (s) mean /
# median / max, GPU request mean / median. The trace covers July and August 2020 (two months, 62 days).
PAI_2020 = {"gpu_job_num": 1037085, "days": 62.0, "avg_run_time_gpu": 4787.109, "med_run_time_gpu": 480.667,
            "max_run_time_gpu": 626371.0, "avg_gpu_num": 0.683, "med_gpu_num": 0.5, "max_gpu": 8.0}
# GPU request sizes and probabilities: an assumption (the summary gives no distribution) chosen to match
# the published median (0.5) and mean (0.6925 vs 0.683) with the published maximum (8).
PAI_GPU_SIZES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
PAI_GPU_PROBS = (0.25, 0.42, 0.29, 0.025, 0.01, 0.005)


def pai_calibrated_demand(*, start: int, hours: int, seed: int = 0, scale: float = 1.0,
                          stats: dict[str, float] | None = None, chunk_days: float = 30.0) -> HourlyDemand:
    """Hourly GPU demand of a Poisson job stream matched to the PAI 2020 statistics.

    Arrivals: Poisson at ``scale * gpu_job_num / days`` per day. Run times: log-normal with the
    published median and mean (``sigma = sqrt(2 ln(mean / median))``), capped at the published
    maximum. GPU requests: :data:`PAI_GPU_SIZES` with :data:`PAI_GPU_PROBS`. Jobs run on arrival
    (no queueing), so this is the demand, not a schedule. Hourly mean concurrency, rounded up.
    """
    st = dict(PAI_2020 if stats is None else stats)
    rng = np.random.default_rng(seed)
    rate = scale * st["gpu_job_num"] / (st["days"] * DAY)  # jobs per second
    mu = math.log(st["med_run_time_gpu"])
    sigma = math.sqrt(2.0 * math.log(st["avg_run_time_gpu"] / st["med_run_time_gpu"]))
    warm = st["max_run_time_gpu"]  # start the stream early enough that the first hour is stationary
    total = np.zeros(hours)
    t0 = -warm
    span = hours * HOUR
    step = chunk_days * DAY
    while t0 < span:
        t1 = min(span, t0 + step)
        n = int(rng.poisson(rate * (t1 - t0)))
        arr = rng.uniform(t0, t1, n)
        dur = np.minimum(rng.lognormal(mu, sigma, n), st["max_run_time_gpu"])
        g = rng.choice(np.asarray(PAI_GPU_SIZES), size=n, p=np.asarray(PAI_GPU_PROBS))
        total += hourly_mean(arr, arr + dur, g, hours)
        t0 = t1
    vals = np.ceil(total - 1e-9)
    return HourlyDemand(start=start, values=np.maximum(vals, 0).astype(np.int64),
                        source=f"PAI-2020-calibrated stream (seed {seed}, scale {scale:g})")

"""``cost_score``: what a training job costs if started now, and in its best window.

NOTE(seedance): the formula, once.
  For a job drawing ``P`` kW at the meter (see :mod:`seedance.costmodel.energy`) and running
  ``d`` seconds from start ``s``, with hourly price ``p(t)`` (currency/MWh) and accounted carbon
  intensity ``c(t)`` (gCO2eq/kWh), integrated exactly over the run window (not the start hour):

      cost(s)  = P / 1000 * ∫_s^{s+d} p(t) dt            [currency]
      co2(s)   = P / 1000 * ∫_s^{s+d} c(t) dt            [kg]
      wait(s)  = (s - submitted) / 3600                  [hours waited]
      delay(s) = wait(s) * (gpus * delay_per_gpu_hour + P * d / 3600 / 1000 * delay_per_mwh_hour)
      score(s) = w_price * cost(s) + w_carbon * co2(s) / 1000 * carbon_price_per_tonne + w_delay * delay(s)

  A job may be deferred only when it is flexible and its SLA tier is ``deferrable``; its start
  then ranges over ``[now, latest]`` with ``latest = min(deadline - d, submitted + max_delay,
  end of signals - d)``. ``score`` is piecewise linear in ``s`` with breaks only where ``s`` or
  ``s + d`` crosses an hour boundary, so the minimum over the finite set of such breakpoints (plus
  both ends) is the exact minimum over every real start time. The job's ``cost_score`` is the
  score of starting now; ``regret = score(now) - min score`` is what running now costs extra
  and orders the global queue (see :mod:`seedance.costmodel.deferral`).

The functions here are pure: signals, weights and the clock are arguments, so the simulator and
the control plane call the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from seedance.core.errors import InputError
from seedance.costmodel.energy import CarbonAccounting, EnergyModel
from seedance.signals.series import HOUR, Integrator, iso
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig

FloatA = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class JobFeatures:
    """What the cost model needs to know about a training job.

    Attributes:
        duration_s: Predicted run time in seconds (> 0).
        gpu_model: Catalog name of the GPU model (aliases accepted, e.g. ``"A100"``, ``"G2"``).
        gpus: GPUs held: a count, or a fraction for a shared GPU (0.25 = a quarter of one GPU).
        deadline: Epoch seconds (UTC) by which the job must have finished; ``None`` = no deadline
            (only the policy's ``max_delay_h`` bounds deferral).
        tier: SLA tier name (``gold``, ``silver``, ``bronze`` by default); only ``deferrable``
            tiers are deferred.
        flexible: Whether the submitter allows deferral at all.
        submitted: Epoch seconds when the job was submitted (delay is counted from here;
            default: the ``now`` of the call).
        gpu_util: GPU utilisation 0..1 for the energy model (default: the model's).

    >>> JobFeatures(duration_s=3600, gpus=0.5).gpu_hours
    0.5
    """

    duration_s: float
    gpu_model: str = "A100-80GB"
    gpus: float = 1.0
    deadline: float | None = None
    tier: str = "bronze"
    flexible: bool = True
    submitted: float | None = None
    gpu_util: float | None = None

    def __post_init__(self) -> None:
        if not self.duration_s > 0:
            raise InputError(f"predicted duration must be > 0 s, got {self.duration_s}", field="duration_s")
        if not self.gpus > 0:
            raise InputError(f"GPU count must be > 0, got {self.gpus}", field="gpus")

    @property
    def gpu_hours(self) -> float:
        """GPU-hours of the run."""
        return self.gpus * self.duration_s / HOUR


@dataclass(frozen=True, slots=True, eq=False)
class Signals:
    """Hourly price and (grid) carbon intensity on one UTC grid: actual values or a forecast.

    Attributes:
        start: Epoch seconds of the first hour (a whole hour).
        price: Price per hour, currency/MWh.
        carbon: Grid carbon intensity per hour, gCO2eq/kWh (accounting is applied by the weights).
        currency: Currency of ``price``.
        label: What these values are (``"actual"``, ``"forecast issued 2023-...``).
    """

    start: int
    price: FloatA
    carbon: FloatA
    currency: str
    label: str = "actual"
    both: Integrator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.start % HOUR:
            raise InputError("signals must start on a whole UTC hour", field="start")
        if len(self.price) != len(self.carbon) or not len(self.price):
            raise InputError("price and carbon must have the same, non-zero number of hours", field="signals")
        object.__setattr__(self, "both", Integrator(self.start, np.column_stack([self.price, self.carbon])))

    @property
    def end(self) -> int:
        """Epoch seconds just after the last hour."""
        return self.start + HOUR * len(self.price)

    def integrals(self, a: ArrayLike, b: ArrayLike) -> tuple[FloatA, FloatA]:
        """Price (currency/MWh x h) and grid carbon (g/kWh x h) integrated over ``[a, b)``."""
        out = self.both.integral(a, b)
        return out[..., 0], out[..., 1]

    @classmethod
    def constant(cls, start: int, hours: int, price: float, carbon: float, currency: str = "USD") -> Signals:
        """Flat signals (for tests and defaults)."""
        return cls(start, np.full(hours, float(price)), np.full(hours, float(carbon)), currency, "constant")


@dataclass(frozen=True, slots=True)
class Weights:
    """A cost policy's weights and the models behind them.

    Attributes:
        price: Weight of the energy cost.
        carbon: Weight of the carbon cost (emissions times ``carbon_price_per_tonne``).
        delay: Weight of the delay penalty.
        carbon_price_per_tonne: Shadow price of CO2, in the signals' currency per tonne.
        delay_per_gpu_hour: Delay penalty, in the signals' currency per GPU-hour waited.
        delay_per_mwh_hour: Delay penalty, in the signals' currency per MWh of the job's energy
            per hour waited (scale-free: a deferral must save more than this per MWh and hour).
        max_delay_h: Longest deferral in hours after submission, whatever the deadline.
        min_gain: Defer only when the best window beats "now" by at least this fraction of the
            score of "now" (0 = any gain).
        energy: The energy model.
        accounting: Carbon accounting (location- or market-based).
    """

    price: float = 1.0
    carbon: float = 1.0
    delay: float = 1.0
    carbon_price_per_tonne: float = 0.0
    delay_per_gpu_hour: float = 0.0
    delay_per_mwh_hour: float = 0.0
    max_delay_h: float = 24.0
    min_gain: float = 0.0
    energy: EnergyModel = field(default_factory=EnergyModel)
    accounting: CarbonAccounting = field(default_factory=CarbonAccounting)

    def __post_init__(self) -> None:
        for name in ("price", "carbon", "delay", "carbon_price_per_tonne", "delay_per_gpu_hour",
                     "delay_per_mwh_hour", "max_delay_h", "min_gain"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must be >= 0, got {getattr(self, name)}", field=name)


@dataclass(frozen=True, slots=True)
class WindowCosts:
    """Costs of one job for an array of start times (all arrays of the same length).

    Attributes:
        starts: Start times (epoch seconds).
        cost: Energy cost (currency).
        co2_kg: Accounted emissions (kg CO2eq).
        wait_h: Hours waited since submission.
        delay: The delay penalty (currency).
        score: The weighted score (currency).
    """

    starts: FloatA
    cost: FloatA
    co2_kg: FloatA
    wait_h: FloatA
    delay: FloatA
    score: FloatA


def account(accounting: CarbonAccounting, grid: FloatA, a: ArrayLike, b: ArrayLike) -> FloatA:
    """Accounted carbon integral over ``[a, b)`` from the grid-intensity integral ``grid``."""
    if accounting.method == "location":
        return grid
    hours = (np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)) / HOUR
    rest = grid if accounting.residual_g_per_kwh is None else accounting.residual_g_per_kwh * hours
    return np.asarray(accounting.contract_share * accounting.contract_g_per_kwh * hours
                      + (1.0 - accounting.contract_share) * rest, dtype=np.float64)


def window_costs(starts: ArrayLike, duration_s: ArrayLike, power_kw: ArrayLike, gpus: ArrayLike,
                 submitted: ArrayLike, signals: Signals, weights: Weights) -> WindowCosts:
    """Cost, emissions, delay and score of running jobs from each of ``starts``.

    Vectorised: ``starts`` is ``(n,)`` for one job or ``(jobs, n)`` with the other arguments of
    shape ``(jobs, 1)`` (numpy broadcasting). The windows must lie inside ``signals``.
    """
    s = np.asarray(starts, dtype=np.float64)
    d = np.asarray(duration_s, dtype=np.float64)
    p = np.asarray(power_kw, dtype=np.float64)
    e = s + d
    p_int, c_int = signals.integrals(s, e)
    cost = p / 1000.0 * p_int
    co2 = p / 1000.0 * account(weights.accounting, c_int, s, e)
    wait = np.maximum(s - np.asarray(submitted, dtype=np.float64), 0.0) / HOUR
    energy_mwh = p * d / HOUR / 1000.0
    delay = wait * (np.asarray(gpus, dtype=np.float64) * weights.delay_per_gpu_hour
                    + energy_mwh * weights.delay_per_mwh_hour)
    score = (weights.price * cost + weights.carbon * co2 / 1000.0 * weights.carbon_price_per_tonne
             + weights.delay * delay)
    return WindowCosts(s, cost, co2, wait, delay, score)


def candidate_matrix(now: ArrayLike, latest: ArrayLike, duration_s: ArrayLike) -> tuple[FloatA, NDArray[np.bool_]]:
    """Candidate starts of many jobs: ``(starts, valid)``, both ``(jobs, width)``, rows ascending.

    Row ``j`` holds every start in ``[now_j, latest_j]`` where the score can change slope (an
    hour boundary, or an hour boundary minus the duration) plus both ends; column 0 is ``now``.
    Entries beyond a row's candidates repeat ``now`` and are marked invalid, as are duplicates.
    """
    n0 = np.atleast_1d(np.asarray(now, dtype=np.float64))
    n1 = np.maximum(np.atleast_1d(np.asarray(latest, dtype=np.float64)), n0)
    d = np.broadcast_to(np.asarray(duration_s, dtype=np.float64), n0.shape)
    k0 = np.ceil(n0 / HOUR)
    nb = np.maximum(np.floor(n1 / HOUR) - k0 + 1, 0).astype(np.int64)
    e0 = np.ceil((n0 + d) / HOUR)
    ne = np.maximum(np.floor((n1 + d) / HOUR) - e0 + 1, 0).astype(np.int64)
    width = int(max(nb.max(initial=0), ne.max(initial=0)))
    j = np.arange(width)
    bounds = (k0[:, None] + j) * HOUR
    ends = (e0[:, None] + j) * HOUR - d[:, None]
    c = np.concatenate([n0[:, None], n1[:, None], bounds, ends], axis=1)
    ok = np.concatenate([np.ones((len(n0), 2), dtype=bool), j < nb[:, None], j < ne[:, None]], axis=1)
    c = np.where(ok, np.clip(c, n0[:, None], n1[:, None]), n0[:, None])
    c.sort(axis=1)
    valid = np.concatenate([np.ones((len(n0), 1), dtype=bool), np.diff(c, axis=1) > 1e-6], axis=1)
    return c, valid


def candidate_starts(now: float, latest: float, duration_s: float) -> FloatA:
    """Every start in ``[now, latest]`` where the score can change slope, plus both ends.

    >>> candidate_starts(1800.0, 9000.0, 1800.0).tolist()
    [1800.0, 3600.0, 5400.0, 7200.0, 9000.0]
    """
    c, valid = candidate_matrix(now, latest, duration_s)
    return np.asarray(c[0][valid[0]], dtype=np.float64)


@dataclass(frozen=True, slots=True)
class BestWindows:
    """The best start of many jobs (arrays of one value per job).

    Attributes:
        best_start: Start of the lowest-score window (the earliest among equal scores; ``now``
            when the gain is below ``min_gain``).
        score_now, best_score: Scores of starting now / at ``best_start``.
        cost_now, cost_best: Energy costs (currency).
        co2_now, co2_best: Emissions (kg).
    """

    best_start: FloatA
    score_now: FloatA
    best_score: FloatA
    cost_now: FloatA
    cost_best: FloatA
    co2_now: FloatA
    co2_best: FloatA


def best_windows(now: ArrayLike, latest: ArrayLike, duration_s: ArrayLike, power_kw: ArrayLike, gpus: ArrayLike,
                 submitted: ArrayLike, signals: Signals, weights: Weights) -> BestWindows:
    """The best window of each job among its candidate starts (all arguments one value per job)."""
    c, valid = candidate_matrix(now, latest, duration_s)

    def col(x: ArrayLike) -> FloatA:
        return np.broadcast_to(np.asarray(x, dtype=np.float64), (len(c),))[:, None]

    wc = window_costs(c, col(duration_s), col(power_kw), col(gpus), col(submitted), signals, weights)
    score = np.where(valid, wc.score, np.inf)
    low = score.min(axis=1)
    tie = score <= low[:, None] + 1e-12 * np.maximum(1.0, np.abs(low))[:, None]
    best = np.argmax(tie, axis=1)  # rows are ascending in time: the first tie is the earliest start
    now_score = wc.score[:, 0]
    keep = now_score - low <= weights.min_gain * np.abs(now_score)
    best = np.where(keep, 0, best)
    rows = np.arange(len(c))
    return BestWindows(best_start=c[rows, best], score_now=now_score, best_score=wc.score[rows, best],
                       cost_now=wc.cost[:, 0], cost_best=wc.cost[rows, best], co2_now=wc.co2_kg[:, 0],
                       co2_best=wc.co2_kg[rows, best])


@dataclass(frozen=True, slots=True)
class CostScore:
    """The cost model's verdict on one job at one moment.

    Attributes:
        score: The score of starting now (the job's ``cost_score``).
        best_score: The lowest score over the allowed windows.
        best_start: Start time (epoch seconds) of the best window (``now`` when not deferrable).
        regret: ``score - best_score`` (>= 0): what starting now costs extra.
        now: The time of the evaluation.
        latest_start: The latest allowed start.
        deferrable: Flexible and in a deferrable tier, with room before the deadline.
        deadline_feasible: The deadline can still be met by starting now.
        power_kw: Facility power of the job.
        energy_kwh: Energy of the run.
        cost_now, cost_best: Energy cost now / in the best window (currency).
        co2_now_kg, co2_best_kg: Emissions now / in the best window.
        delay_h: Hours between now and the best start.
        currency: Currency of every money figure.
        signals: Label of the signals used (actual or forecast).
    """

    score: float
    best_score: float
    best_start: float
    regret: float
    now: float
    latest_start: float
    deferrable: bool
    deadline_feasible: bool
    power_kw: float
    energy_kwh: float
    cost_now: float
    cost_best: float
    co2_now_kg: float
    co2_best_kg: float
    delay_h: float
    currency: str
    signals: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (times in ISO-8601 UTC)."""
        return {"cost_score": self.score, "best_score": self.best_score, "regret": self.regret,
                "best_start": iso(self.best_start), "now": iso(self.now), "latest_start": iso(self.latest_start),
                "deferrable": self.deferrable, "deadline_feasible": self.deadline_feasible,
                "power_kw": self.power_kw, "energy_kwh": self.energy_kwh, "currency": self.currency,
                "cost_now": self.cost_now, "cost_best": self.cost_best, "co2_now_kg": self.co2_now_kg,
                "co2_best_kg": self.co2_best_kg, "delay_h": self.delay_h, "signals": self.signals}


def is_deferrable(job: JobFeatures, tiers: TierConfig = DEFAULT_TIER_CONFIG) -> bool:
    """Flexible and in a tier that allows deferral (unknown tiers raise ``InputError``)."""
    spec = tiers.tiers.get(job.tier)
    if spec is None:
        raise InputError(f"unknown tier {job.tier!r}; tiers: {', '.join(tiers.names())}", field="tier")
    return job.flexible and spec.deferrable


def latest_starts(submitted: ArrayLike, now: ArrayLike, deadline: ArrayLike, duration_s: ArrayLike,
                  max_delay_h: float, horizon_end: float = np.inf) -> FloatA:
    """``min(submitted + max_delay, deadline - duration, horizon_end - duration)``, never before ``now``."""
    d = np.asarray(duration_s, dtype=np.float64)
    latest = np.minimum(np.asarray(submitted, dtype=np.float64) + max_delay_h * HOUR,
                        np.minimum(np.asarray(deadline, dtype=np.float64), horizon_end) - d)
    return np.asarray(np.maximum(latest, np.asarray(now, dtype=np.float64)), dtype=np.float64)


def latest_start(job: JobFeatures, now: float, weights: Weights, horizon_end: float,
                 tiers: TierConfig = DEFAULT_TIER_CONFIG) -> float:
    """The latest start the policy may choose (``now`` when the job may not wait)."""
    if not is_deferrable(job, tiers):
        return now
    since = now if job.submitted is None else min(job.submitted, now)
    deadline = np.inf if job.deadline is None else job.deadline
    return float(latest_starts(since, now, deadline, job.duration_s, weights.max_delay_h, horizon_end))


def cost_score(job: JobFeatures, signals: Signals, weights: Weights, now: float, *,
               tiers: TierConfig = DEFAULT_TIER_CONFIG) -> CostScore:
    """Score ``job`` at time ``now`` against ``signals`` (actual values or a forecast).

    Args:
        job: The job's features.
        signals: Hourly price and carbon covering at least ``[now, now + duration)``.
        weights: The active policy's weights and models.
        now: Epoch seconds of the evaluation.
        tiers: SLA tiers (which are deferrable).

    Returns:
        The score now, the best window within the tier's and deadline's limits, and the
        components of both.

    Raises:
        InputError: signals that do not cover the run, an unknown tier or GPU model.
    """
    d = job.duration_s
    if now < signals.start or now + d > signals.end:
        raise InputError(f"signals cover {iso(signals.start)} .. {iso(signals.end)}, not the job's run "
                         f"{iso(now)} .. {iso(now + d)}", field="signals")
    power = weights.energy.job_power_kw(job.gpu_model, job.gpus, job.gpu_util)
    latest = latest_start(job, now, weights, signals.end, tiers)
    submitted = now if job.submitted is None else min(job.submitted, now)
    bw = best_windows(now, latest, d, power, job.gpus, submitted, signals, weights)
    start = float(bw.best_start[0])
    feasible = job.deadline is None or now + d <= job.deadline + 1e-6
    return CostScore(
        score=float(bw.score_now[0]), best_score=float(bw.best_score[0]), best_start=start,
        regret=float(bw.score_now[0] - bw.best_score[0]), now=float(now), latest_start=float(latest),
        deferrable=bool(latest > now), deadline_feasible=feasible, power_kw=power,
        energy_kwh=power * d / HOUR, cost_now=float(bw.cost_now[0]), cost_best=float(bw.cost_best[0]),
        co2_now_kg=float(bw.co2_now[0]), co2_best_kg=float(bw.co2_best[0]),
        delay_h=(start - now) / HOUR, currency=signals.currency, signals=signals.label)

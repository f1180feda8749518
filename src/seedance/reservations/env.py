"""The reservation environment (gymnasium) and the hybrid action it exposes to PPO.

The whitepaper's action is hybrid: a reservation *type* in {none, 1 year, 3 years} and a
*capacity ratio* in [0, 1] of the forecast peak. Stable-Baselines3 has no Dict/Tuple action
spaces (its maintainers declined them: DLR-RM/stable-baselines3#731, #1687), so the action is
encoded as ``MultiDiscrete([3, 21])``: the type, and the ratio on a grid of 0, 0.05, ..., 1.0.
sb3-contrib's ``MaskablePPO`` masks the types that cannot be bought now (a term that would end
after the window). A type with a ratio buys ``max(0, round(ratio * forecast_peak) - in_force)``
units of that term: the ratio is the committed level the policy wants, as a share of the
forecast peak, so the two parts are decided jointly.

*Forecast peak* (past data only): the highest hourly demand of the last 30 days times the growth
of the last 6 months extrapolated over the next 12 (clipped to [1, 3]).

One step is one decision epoch (730 h by default). The reward of a step is the epoch's savings
(baseline cost minus cost, from the hourly attribution vector of
:mod:`seedance.reservations.accounting`) minus the savings the cloud advisor's rule
(:class:`~seedance.reservations.policies.Percentile`, 60-day lookback) realises in the same epoch of
the same window, divided by ``overflow price * epoch_hours * scale`` (``scale``: the episode's first
forecast peak). The subtracted term does not depend on the agent's actions (the advisor decides
from the past only, on its own plan), so the optimal policy is unchanged; it is a control variate:
both face the same future demand, so most of the noise a window's unknown future puts into the
return cancels (``advisor_baseline=False`` gives the raw savings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from numpy.typing import NDArray

from seedance.reservations.accounting import EPOCH_HOURS, Plan, attribute, n_epochs
from seedance.reservations.demand import DemandWindow
from seedance.reservations.policies import EpochView, epoch_view
from seedance.reservations.pricing import TERM_HOURS, TERMS, ReservationPrices

RATIO_STEPS = 21
N_TYPES = 1 + len(TERMS)  # none, 1y, 3y
OBS_SIZE = 30
YEAR_H = 8760
FloatA = NDArray[np.float64]


def forecast_peak(view: EpochView) -> float:
    """Peak of the last 30 days times the extrapolated 6-month growth (see the module docstring)."""
    last = view.recent(30)
    if not len(last):
        return 0.0
    peak = float(last.max())
    return peak * _growth_factor(view)


def _growth_factor(view: EpochView) -> float:
    obs = view.observed
    if len(obs) < 24 * 210:
        return 1.0
    now = float(obs[-24 * 30:].mean())
    before = float(obs[-24 * 210:-24 * 180].mean())
    if now <= 0 or before <= 0:
        return 1.0
    monthly = np.log(now / before) / 6.0
    return float(np.clip(np.exp(12.0 * monthly), 1.0, 3.0))


def _growth(obs: NDArray[np.int64]) -> float:
    """Least-squares growth per year of the log daily mean over the last year (0 with < 120 days)."""
    n = min(len(obs) // 24, 365)
    if n < 120:
        return 0.0
    daily = obs[-n * 24:].reshape(n, 24).mean(axis=1)
    x = np.arange(n) / 365.0
    y = np.log(np.maximum(daily, 1e-3))
    slope = float(np.polyfit(x, y, 1)[0])
    return float(np.clip(slope, -2.0, 2.0))


def features(view: EpochView) -> NDArray[np.float32]:
    """The observation of ``view`` (scale-free: units are divided by the last 30 days' peak).

    In force (total, 1 y, 3 y, 1-y units expiring within three epochs); quantiles of the last 30,
    90 and 365 days; the level that would have been cheapest for each term over the last 30, 60
    and 365 days (the cloud advisors' recommendation); growth over 1 and 6 months and the fitted
    yearly growth; time left; which terms are on sale; each term's rate over the overflow price.
    """
    p = view.prices
    levels_q = [min(1.0, max(0.0, 1.0 - p.commitments.get(t, p.overflow) / p.overflow)) for t in TERMS]
    last30 = view.recent(30)
    scale = max(1.0, float(last30.max(initial=0)))

    def qs(d: NDArray[np.int64], q: list[float]) -> NDArray[np.float64]:
        # one partition per window: the feature quantiles and the advisor's levels (inverted CDF)
        if not len(d):
            return np.zeros(len(q))
        return np.asarray(np.quantile(d, q, method="inverted_cdf"), dtype=np.float64) / scale

    a30 = qs(last30, [0.1, 0.25, 0.5, 0.75, 0.9, 1.0, *levels_q])
    a60 = qs(view.recent(60), levels_q)
    q90 = qs(view.recent(90), [0.25, 0.5, 0.75])
    a365 = qs(view.recent(365), [0.25, 0.5, 0.75, *levels_q])
    q30, q365 = a30[:6], a365[:3]
    # the advisor's level per term over 30, 60 and 365 days (lookback_optimal_level, scaled)
    levels = [a30[6], a60[0], a365[3], a30[7], a60[1], a365[4]]
    obs = view.observed
    trend1 = trend6 = 0.0
    if len(obs) >= 24 * 90:
        a, b = float(obs[-24 * 30:].mean()), float(obs[-24 * 90:-24 * 60].mean())
        trend1 = float(np.log(max(a, 1e-3) / max(b, 1e-3)))
    if len(obs) >= 24 * 210:
        a, b = float(obs[-24 * 30:].mean()), float(obs[-24 * 210:-24 * 180].mean())
        trend6 = float(np.log(max(a, 1e-3) / max(b, 1e-3)))
    rates = [p.commitments.get(t, p.overflow) / p.overflow for t in TERMS]
    v = np.array([
        view.in_force / scale, view.force[0] / scale, view.force[1] / scale, view.expiring[0] / scale,
        *q30, *q90, *q365, *levels, np.clip(trend1, -2, 2), np.clip(trend6, -2, 2), _growth(obs),
        view.hours_left / (4 * YEAR_H), float(view.allowed[0]), float(view.allowed[1]), *rates,
    ], dtype=np.float32)
    return v


def action_units(view: EpochView, action: NDArray[np.int64] | list[int] | tuple[int, int]) -> NDArray[np.int64]:
    """Units to buy, by term, for a ``(type, ratio bucket)`` action."""
    kind, bucket = int(action[0]), int(action[1])
    out = np.zeros(len(TERMS), dtype=np.int64)
    if kind == 0 or not view.allowed[kind - 1]:
        return out
    target = int(round(bucket / (RATIO_STEPS - 1) * forecast_peak(view)))
    out[kind - 1] = max(0, target - view.in_force)
    return out


def action_mask(view: EpochView) -> NDArray[np.bool_]:
    """Mask of the ``MultiDiscrete([3, 21])`` action (types not on sale now are masked)."""
    return np.array([True, *view.allowed] + [True] * RATIO_STEPS, dtype=bool)


Sampler = Callable[[np.random.Generator], tuple[DemandWindow, ReservationPrices]]


class ReservationEnv(gym.Env[NDArray[np.float32], NDArray[np.int64]]):
    """One episode = one demand window; one step = one decision epoch.

    Args:
        sampler: Draws a ``(window, prices)`` pair for each episode.
        epoch_hours: Hours per decision epoch.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, sampler: Sampler, epoch_hours: int = EPOCH_HOURS, advisor_baseline: bool = True) -> None:
        super().__init__()
        self.sampler = sampler
        self.epoch_hours = epoch_hours
        self.advisor_baseline = advisor_baseline
        self._advisor = np.zeros(0)
        self.observation_space = gym.spaces.Box(low=-10.0, high=10.0, shape=(OBS_SIZE,), dtype=np.float32)
        self.action_space = gym.spaces.MultiDiscrete([N_TYPES, RATIO_STEPS])
        self._rng = np.random.default_rng()
        self.window: DemandWindow | None = None
        self.prices: ReservationPrices | None = None
        self.buys = np.zeros((0, len(TERMS)), dtype=np.int64)
        self.epoch = 0
        self.scale = 1.0
        self._view: EpochView | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.window, self.prices = self.sampler(self._rng)
        self.buys = np.zeros((n_epochs(len(self.window), self.epoch_hours), len(TERMS)), dtype=np.int64)
        self.force = np.zeros((len(self.window), len(TERMS)), dtype=np.int64)
        self.epoch = 0
        self._view = epoch_view(self.window, self.buys, 0, self.prices, self.epoch_hours, self.force)
        self.scale = max(1.0, forecast_peak(self._view))
        self._advisor = np.zeros(len(self.buys))
        if self.advisor_baseline:
            from seedance.reservations.accounting import simulate_plan
            from seedance.reservations.policies import Percentile

            sav = simulate_plan(Percentile(60.0).plan(self.window, self.prices, self.epoch_hours), self.window,
                                self.prices).savings
            self._advisor = np.add.reduceat(sav, np.arange(0, len(sav), self.epoch_hours))
        return np.clip(features(self._view), -10, 10), {}

    def action_masks(self) -> NDArray[np.bool_]:
        """For ``MaskablePPO``."""
        assert self._view is not None
        return action_mask(self._view)

    def step(self, action: NDArray[np.int64]) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        assert self.window is not None and self.prices is not None and self._view is not None
        units = action_units(self._view, action)
        self.buys[self.epoch] = units
        a = self.epoch * self.epoch_hours
        b = min(len(self.window), a + self.epoch_hours)
        for k, n in enumerate(units.tolist()):
            if n:
                self.force[a:a + TERM_HOURS[TERMS[k]], k] += n  # the mask keeps the term inside the window
        # the epoch's hours, costed with every unit bought so far (later purchases cannot cover it)
        att = attribute(self.window.values[a:b], self.force[a:b], self.prices, self.window.start)
        saving = float(att.savings.sum())
        reward = (saving - float(self._advisor[self.epoch])) / (self.prices.overflow * self.epoch_hours * self.scale)
        self.epoch += 1
        done = self.epoch >= len(self.buys)
        info: dict[str, Any] = {"saving": saving}
        if done:
            info["plan"] = Plan(self.buys.copy(), self.epoch_hours)
            obs = np.zeros(OBS_SIZE, dtype=np.float32)
        else:
            self._view = epoch_view(self.window, self.buys, self.epoch, self.prices, self.epoch_hours, self.force)
            obs = np.clip(features(self._view), -10, 10)
        return obs, reward, done, False, info

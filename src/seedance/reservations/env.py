"""The reservation environment (gymnasium) and the hybrid action it exposes to PPO.

The whitepaper's action is hybrid: a reservation *type* in {none, 1 year, 3 years} and a
*capacity level*. Stable-Baselines3 has no Dict/Tuple action spaces (its maintainers declined
them: DLR-RM/stable-baselines3#731, #1687), so the action is encoded as ``MultiDiscrete([3, 21])``:
the type, and a level bucket. sb3-contrib's ``MaskablePPO`` masks the types that cannot be bought
now (a term that would end after the window). A type with a bucket buys
``max(0, target - in_force)`` units of that term: the bucket is the committed level the policy
wants, so the two parts are decided jointly.

*Level buckets* (past data only, :func:`target_level`): on the scale of the last 60 days' hourly
demand: buckets 0..16 are its quantiles 0, 1/16, ..., 1 (the 60-day peak), buckets 17..20 the peak
times 1.125, 1.25, 1.375 and 1.5 (for growing demand). The cloud advisor's tuned rule (the 25th
percentile of 60 days) is bucket 4 with the longest term. An earlier version took a ratio in
[0, 1] of a *forecast peak* (the 30-day peak times the extrapolated growth); on that scale the good
levels moved with the peak-to-mean ratio of each demand and PPO learnt them slowly (and a fixed
ratio of the 30-day mean does worse than a fixed 60-day quantile on the tune windows: 1.169 vs 1.110
of the MILP's cost for the best of each).

One step is one decision epoch (730 h by default). The reward of a step is the *marginal saving
of the units it buys, over their whole term*: the cost of the window under the purchases made
before this step minus its cost with this step's purchases added (both from the hourly attribution
vector of :mod:`seedance.reservations.accounting`), divided by ``overflow price * 8760 h * scale``
(``scale``: the episode's first reference level). The rewards telescope: their sum over an episode
is the plan's total saving against buying nothing, the same return as paying each epoch's saving
as it is realised, so the optimal policy is unchanged; what changes is that the consequence of a
purchase arrives with the step that made it, not spread over the 12 or 36 epochs of its term
(credit assignment). The reward is computed by the simulator from the window's future, as every
reward is; the *observation* holds the past only (:func:`features`), so the policy sees no future.

**Two encodings of the capacity part** (:data:`ACTIONS`; the type part and the mask are the same):

* ``levels`` (the environment's default; :class:`~seedance.reservations.ppo.TrainConfig` trains
  with ``planner``): the bucket is a committed level on the 60-day quantile scale (above).
* ``planner``: the bucket is a capacity *ratio* of the receding-horizon planner's forecast
  (:class:`~seedance.reservations.forecast.ForecastPlanner`): ratio ``0.5 + 0.05 x bucket`` in
  [0.5, 1.5] scales the forecast, the layered program plans the rest of the window on it, and the
  type says which terms that plan may use (1 = 1-year units only, 2 = every term on sale); the
  step buys what the plan buys now. The planner's own tuned decision is the action
  ``(2, its scale's bucket)`` every epoch, so PPO starts from a policy space that contains it and
  learns when to hedge above or below it. The observation gains the planner's units at its
  tuned scale, by term (2 more features).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.reservations.accounting import EPOCH_HOURS, Plan, attribute, n_epochs
from seedance.reservations.demand import DemandWindow
from seedance.reservations.forecast import ForecastPlanner, past_growth
from seedance.reservations.policies import EpochView, epoch_view
from seedance.reservations.pricing import TERM_HOURS, TERMS, ReservationPrices

RATIO_STEPS = 21
N_TYPES = 1 + len(TERMS)  # none, 1y, 3y
OBS_SIZE = 37
ACTIONS = ("levels", "planner")
PLANNER_OBS_SIZE = OBS_SIZE + len(TERMS)
PLANNER_RATIO0, PLANNER_RATIO_STEP = 0.5, 0.05  # planner buckets: forecast scale 0.5 + 0.05 x bucket
YEAR_H = 8760
FloatA = NDArray[np.float64]


LOOKBACK_DAYS = 60
QUANTILE_BUCKETS = 16  # buckets 0..16: quantiles k / 16 of the lookback
ABOVE_PEAK = (1.125, 1.25, 1.375, 1.5)  # buckets 17..20: the lookback's peak times these


def reference_level(view: EpochView) -> float:
    """Mean hourly demand of the last 30 days (the observation's scale)."""
    last = view.recent(30)
    return float(last.mean()) if len(last) else 0.0


def target_level(view: EpochView, bucket: int) -> int:
    """The committed level of a bucket (see the module docstring)."""
    rec = view.recent(LOOKBACK_DAYS)
    if not len(rec) or not 0 <= bucket < RATIO_STEPS:
        return 0
    if bucket <= QUANTILE_BUCKETS:
        return int(np.quantile(rec, bucket / QUANTILE_BUCKETS, method="inverted_cdf"))
    return int(round(float(rec.max()) * ABOVE_PEAK[bucket - QUANTILE_BUCKETS - 1]))


def _log_ratio(a: float, b: float) -> float:
    return float(np.clip(np.log(max(a, 1e-3) / max(b, 1e-3)), -2.0, 2.0))


def features(view: EpochView) -> NDArray[np.float32]:
    """The observation of ``view``: past demand and own commitments, scale-free (over the reference level).

    Units in force (total, 1 y, 3 y) and the expiry schedule (units whose term ends within 1, 3, 6
    and 12 epochs); quantiles of the last 30, 60 and 365 days; the level that would have been
    cheapest for each term over the last 30, 60 and 365 days (the cloud advisors' recommendation);
    growth over 1 and 6 months, the fitted yearly growth, and the last 30 days' mean over the
    highest monthly mean of the last year (a project end shows there); time left; which terms are
    on sale; each term's rate over the overflow price.
    """
    p = view.prices
    levels_q = [min(1.0, max(0.0, 1.0 - p.commitments.get(t, p.overflow) / p.overflow)) for t in TERMS]
    last30 = view.recent(30)
    scale = max(1.0, float(last30.mean()) if len(last30) else 0.0)

    def qs(d: NDArray[np.int64], q: list[float]) -> NDArray[np.float64]:
        # one partition per window: the feature quantiles and the advisor's levels (inverted CDF)
        if not len(d):
            return np.zeros(len(q))
        return np.asarray(np.quantile(d, q, method="inverted_cdf"), dtype=np.float64) / scale

    a30 = qs(last30, [0.1, 0.25, 0.5, 0.75, 0.9, 1.0, *levels_q])
    a60 = qs(view.recent(60), [*levels_q, 0.25, 0.5, 0.75, 1.0])
    q60 = a60[2:]
    a365 = qs(view.recent(365), [0.1, 0.25, 0.5, 0.75, 0.9, *levels_q])
    levels = [a30[6], a60[0], a365[5], a30[7], a60[1], a365[6]]
    obs = view.observed
    m30 = float(obs[-24 * 30:].mean()) if len(obs) else 0.0
    trend1 = _log_ratio(m30, float(obs[-24 * 90:-24 * 60].mean())) if len(obs) >= 24 * 90 else 0.0
    trend6 = _log_ratio(m30, float(obs[-24 * 210:-24 * 180].mean())) if len(obs) >= 24 * 210 else 0.0
    n_m = min(len(obs) // 730, 12)
    top_month = float(obs[-n_m * 730:].reshape(n_m, 730).mean(axis=1).max()) if n_m else m30
    # the expiry schedule: units in force now whose term ends within 1, 3, 6, 12 epochs
    now = view.epoch * view.epoch_hours
    hours = len(view.force_all)
    expiring = []
    for k in (1, 3, 6, 12):
        later = now + k * view.epoch_hours
        soon = view.force_all[later].sum() if later < hours else 0
        expiring.append(max(0.0, float(view.in_force - soon)) / scale)
    rates = [p.commitments.get(t, p.overflow) / p.overflow for t in TERMS]
    v = np.array([
        view.in_force / scale, view.force[0] / scale, view.force[1] / scale, *expiring,
        *a30[:6], *q60, *a365[:5], *levels, trend1, trend6, past_growth(obs), _log_ratio(m30, top_month),
        view.hours_left / (4 * YEAR_H), float(view.allowed[0]), float(view.allowed[1]), *rates,
    ], dtype=np.float32)
    return v


def obs_size(action: str = "levels") -> int:
    """Observation length of an action encoding."""
    return PLANNER_OBS_SIZE if action == "planner" else OBS_SIZE


def check_action(action: str) -> str:
    """``action`` if it is a known encoding, else ``InputError`` listing them."""
    if action not in ACTIONS:
        raise InputError(f"unknown action encoding {action!r}; valid: {', '.join(ACTIONS)}", field="action")
    return action


def planner_scale(bucket: int) -> float:
    """The forecast scale of a planner bucket."""
    return PLANNER_RATIO0 + PLANNER_RATIO_STEP * bucket


def observe(view: EpochView, action: str = "levels", planner: ForecastPlanner | None = None) -> NDArray[np.float32]:
    """The observation of ``view`` for an action encoding, clipped to the observation space."""
    f = features(view)
    if action == "planner":
        scale = max(1.0, reference_level(view))
        units = (planner or ForecastPlanner()).units(view)
        f = np.concatenate([f, (units / scale).astype(np.float32)])
    return np.clip(f, -10, 10)


def action_units(view: EpochView, action: NDArray[np.int64] | list[int] | tuple[int, int],
                 encoding: str = "levels", planner: ForecastPlanner | None = None) -> NDArray[np.int64]:
    """Units to buy, by term, for a ``(type, ratio bucket)`` action."""
    kind, bucket = int(action[0]), int(action[1])
    out = np.zeros(len(TERMS), dtype=np.int64)
    if encoding == "planner":
        if kind == 0 or not (view.allowed[0] if kind == 1 else any(view.allowed)):
            return out
        terms = tuple(k == 0 if kind == 1 else True for k in range(len(TERMS)))
        return (planner or ForecastPlanner()).units(view, scale=planner_scale(bucket), terms=terms)
    if kind == 0 or not view.allowed[kind - 1]:
        return out
    target = target_level(view, bucket)
    out[kind - 1] = max(0, target - view.in_force)
    return out


def action_mask(view: EpochView, encoding: str = "levels") -> NDArray[np.bool_]:
    """Mask of the ``MultiDiscrete([3, 21])`` action (types not on sale now are masked).

    With the ``planner`` encoding type 2 (every term on sale) stays open while any term is on sale.
    """
    types = list(view.allowed)
    if encoding == "planner":
        types[-1] = any(view.allowed)
    return np.array([True, *types] + [True] * RATIO_STEPS, dtype=bool)


Sampler = Callable[[np.random.Generator], tuple[DemandWindow, ReservationPrices]]


class ReservationEnv(gym.Env[NDArray[np.float32], NDArray[np.int64]]):
    """One episode = one demand window; one step = one decision epoch.

    Args:
        sampler: Draws a ``(window, prices)`` pair for each episode.
        epoch_hours: Hours per decision epoch.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, sampler: Sampler, epoch_hours: int = EPOCH_HOURS, action: str = "levels",
                 planner: ForecastPlanner | None = None) -> None:
        super().__init__()
        self.sampler = sampler
        self.epoch_hours = epoch_hours
        self.encoding = check_action(action)
        self.planner = planner or ForecastPlanner()
        self.observation_space = gym.spaces.Box(low=-10.0, high=10.0, shape=(obs_size(action),), dtype=np.float32)
        self.action_space = gym.spaces.MultiDiscrete([N_TYPES, RATIO_STEPS])
        self._rng = np.random.default_rng()
        self.window: DemandWindow | None = None
        self.prices: ReservationPrices | None = None
        self.buys = np.zeros((0, len(TERMS)), dtype=np.int64)
        self.force = np.zeros((0, len(TERMS)), dtype=np.int64)
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
        self.scale = max(1.0, reference_level(self._view))
        return observe(self._view, self.encoding, self.planner), {}

    def action_masks(self) -> NDArray[np.bool_]:
        """For ``MaskablePPO``."""
        assert self._view is not None
        return action_mask(self._view, self.encoding)

    def step(self, action: NDArray[np.int64]) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        assert self.window is not None and self.prices is not None and self._view is not None
        units = action_units(self._view, action, self.encoding, self.planner)
        self.buys[self.epoch] = units
        a = self.epoch * self.epoch_hours
        saving = 0.0
        if units.any():
            # the marginal saving of this step's units over their term, given every earlier purchase
            b = min(len(self.window), a + max(TERM_HOURS[TERMS[k]] for k in np.flatnonzero(units)))
            d = self.window.values[a:b]
            before = float(attribute(d, self.force[a:b], self.prices, self.window.start).cost.sum())
            for k, n in enumerate(units.tolist()):
                if n:
                    self.force[a:a + TERM_HOURS[TERMS[k]], k] += n  # the mask keeps the term inside the window
            saving = before - float(attribute(d, self.force[a:b], self.prices, self.window.start).cost.sum())
        reward = saving / (self.prices.overflow * YEAR_H * self.scale)
        self.epoch += 1
        done = self.epoch >= len(self.buys)
        info: dict[str, Any] = {"saving": saving}
        if done:
            info["plan"] = Plan(self.buys.copy(), self.epoch_hours)
            obs = np.zeros(obs_size(self.encoding), dtype=np.float32)
        else:
            self._view = epoch_view(self.window, self.buys, self.epoch, self.prices, self.epoch_hours, self.force)
            obs = observe(self._view, self.encoding, self.planner)
        return obs, reward, done, False, info

"""Reservation policies, all deciding in the same space (units per term per decision epoch).

Online policies (``none``, ``percentile``, ``online``, ``ppo``) decide at each epoch from an
:class:`EpochView`: the demand observed so far (history before the window and the window's
past hours) and the units in force; they never see the window's future. Hindsight policies
(``best-fixed``, ``hindsight-optimal``) read the whole window and are bounds, not strategies.

* ``none``: everything on demand (and spot, where the prices have a spot share).
* ``percentile``: the cloud advisors' rule. AWS Cost Explorer / Azure Advisor recommend the
  commitment that would have been cheapest over a lookback of 7, 30 or 60 days; ``percentile=None``
  does exactly that (the level minimising the lookback's cost at the term's rate), a number
  ``p`` reserves the p-th percentile of the lookback instead. Each epoch tops the units in force
  up to that level with the chosen term.
* ``online``: the deterministic online algorithm of Wang, Li and Liang, "To Reserve or Not to
  Reserve: Optimal Online Multi-Instance Acquisition in IaaS Clouds" (ICAC 2013,
  arXiv:1305.5608): reserve one more unit whenever the on-demand cost paid over the last term
  for the level that unit would serve reaches its reservation fee (a ski-rental break-even per
  level). With fee ``F`` and usage discount ``alpha`` its cost is at most ``(2 - alpha)`` times the
  offline optimum in the paper's model (randomised variant: ``e / (e - 1 + alpha)``); a no-upfront
  commitment is a fee of ``rate * term`` with ``alpha = 0``, so the bound is 2. Applied here at the
  epoch starts (the paper decides every hour) with one term.
* ``best-fixed``: the best single commitment level held through the window (one term; 1-year
  units renewed every year while a renewal still ends inside the window), found exactly by
  enumerating every level with the true demand.
* ``hindsight-optimal``: the exact MILP (:mod:`seedance.reservations.milp`).
* ``ppo``: the trained PPO policy (:mod:`seedance.reservations.ppo`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.reservations.accounting import EPOCH_HOURS, Plan, allowed_terms, n_epochs
from seedance.reservations.demand import DemandWindow
from seedance.reservations.pricing import TERM_HOURS, TERMS, ReservationPrices

IntA = NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class EpochView:
    """What an online policy may see at the start of decision epoch ``epoch``.

    Attributes:
        observed: Demand of every hour before now (the window's history, then its past hours).
        force_all: Units in force per window hour and term of the purchases made so far (only its
            past hours may be read: :attr:`observed_force`).
        epoch, epochs: This epoch and the number of epochs of the window.
        hours_left: Hours from now to the end of the window.
        force: Units in force now, by term.
        expiring: Units that expire within the next three epochs, by term.
        allowed: Per term, whether a unit bought now ends inside the window.
        prices: The prices.
        epoch_hours: Hours per epoch.
    """

    observed: IntA
    force_all: IntA
    epoch: int
    epochs: int
    hours_left: int
    force: IntA
    expiring: IntA
    allowed: list[bool]
    prices: ReservationPrices
    epoch_hours: int = EPOCH_HOURS

    @property
    def observed_force(self) -> IntA:
        """Units in force (all terms) in the window's past hours."""
        return np.asarray(self.force_all[:self.epoch * self.epoch_hours].sum(axis=1), dtype=np.int64)

    @property
    def in_force(self) -> int:
        """Units in force now, all terms."""
        return int(self.force.sum())

    def recent(self, days: float) -> IntA:
        """Observed demand of the last ``days`` days (fewer when less is known)."""
        n = int(days * 24)
        return self.observed[-n:] if n < len(self.observed) else self.observed


class ReservationPolicy(ABC):
    """Turns a demand window into a purchase plan."""

    name: ClassVar[str]
    summary: ClassVar[str]
    hindsight: ClassVar[bool] = False

    @abstractmethod
    def plan(self, window: DemandWindow, prices: ReservationPrices, epoch_hours: int = EPOCH_HOURS) -> Plan:
        """The purchases for ``window``."""

    def describe(self) -> dict[str, Any]:
        """Name and settings, for reports."""
        return {"policy": self.name, "hindsight": self.hindsight}


class OnlinePolicy(ReservationPolicy):
    """A policy deciding epoch by epoch from an :class:`EpochView`."""

    @abstractmethod
    def decide(self, view: EpochView) -> IntA:
        """Units to buy now, by term (0 where a term is not allowed)."""

    def plan(self, window: DemandWindow, prices: ReservationPrices, epoch_hours: int = EPOCH_HOURS) -> Plan:
        return run_online(self, window, prices, epoch_hours)


def run_online(policy: OnlinePolicy, window: DemandWindow, prices: ReservationPrices,
               epoch_hours: int = EPOCH_HOURS) -> Plan:
    """Drive ``policy`` through the epochs of ``window``, showing it only the past."""
    hours = len(window)
    ne = n_epochs(hours, epoch_hours)
    buys = np.zeros((ne, len(TERMS)), dtype=np.int64)
    force = np.zeros((hours, len(TERMS)), dtype=np.int64)  # units in force of the purchases so far
    for e in range(ne):
        view = epoch_view(window, buys, e, prices, epoch_hours, force)
        got = np.asarray(policy.decide(view), dtype=np.int64)
        if got.shape != (len(TERMS),) or got.min() < 0:
            raise ValueError(f"{policy.name} returned {got!r}; expected {len(TERMS)} non-negative unit counts")
        buys[e] = np.where(view.allowed, got, 0)
        a = e * epoch_hours
        for k, n in enumerate(buys[e].tolist()):
            if n:
                force[a:a + TERM_HOURS[TERMS[k]], k] += n  # allowed: the term ends inside the window
    return Plan(buys, epoch_hours)


def epoch_view(window: DemandWindow, buys: IntA, epoch: int, prices: ReservationPrices,
               epoch_hours: int = EPOCH_HOURS, force_all: IntA | None = None) -> EpochView:
    """The :class:`EpochView` at ``epoch`` given the purchases of earlier epochs.

    ``force_all`` (hours, terms): the units in force of those purchases, when the caller keeps them.
    """
    hours = len(window)
    now = epoch * epoch_hours
    if force_all is None:
        past = Plan(np.where(np.arange(len(buys))[:, None] < epoch, buys, 0), epoch_hours)
        force_all = past.in_force(hours)
    force_now = force_all[now] if now < hours else np.zeros(len(TERMS), dtype=np.int64)
    soon = min(hours, now + 3 * epoch_hours)
    force_soon = force_all[soon] if soon < hours else np.zeros(len(TERMS), dtype=np.int64)
    return EpochView(observed=window.observed(now), force_all=force_all,
                     epoch=epoch, epochs=n_epochs(hours, epoch_hours), hours_left=hours - now,
                     force=force_now.astype(np.int64), expiring=np.maximum(force_now - force_soon, 0),
                     allowed=allowed_terms(epoch, hours, prices, epoch_hours), prices=prices,
                     epoch_hours=epoch_hours)


RESERVATION_POLICIES: Registry[type[ReservationPolicy]] = Registry("reservation policy")


def _term_index(term: str) -> int:
    if term not in TERMS:
        raise InputError(f"unknown term {term!r}; valid: {', '.join(TERMS)}", field="term")
    return TERMS.index(term)


def _pick_term(view: EpochView, term: str) -> int | None:
    """Index of the term to buy: ``term``, or for ``auto`` the longest one allowed now."""
    if term == "auto":
        ok = [k for k, a in enumerate(view.allowed) if a]
        return ok[-1] if ok else None
    k = _term_index(term)
    return k if view.allowed[k] else None


def lookback_optimal_level(demand: IntA, rate: float, overflow: float) -> int:
    """The level ``L`` minimising ``L * rate + overflow * mean(max(0, d - L))`` over ``demand``.

    The cost is convex in ``L`` and its slope is ``rate - overflow * P(d > L)``: the optimum is the
    smallest ``L`` with ``P(d > L) <= rate / overflow``, i.e. the ``1 - rate / overflow`` quantile.
    """
    if not len(demand):
        return 0
    q = min(1.0, max(0.0, 1.0 - rate / overflow))
    return int(np.quantile(np.asarray(demand), q, method="inverted_cdf"))  # smallest L with F(L) >= q


@RESERVATION_POLICIES.register("none", aliases=("on-demand",))
class NoReservation(OnlinePolicy):
    """Never commit."""

    name = "none"
    summary = "everything on demand (and spot where configured)"

    def decide(self, view: EpochView) -> IntA:
        return np.zeros(len(TERMS), dtype=np.int64)


@RESERVATION_POLICIES.register("percentile", aliases=("advisor", "cloud-advisor"))
class Percentile(OnlinePolicy):
    """Top up to the lookback-optimal level (``percentile=None``) or to a lookback percentile."""

    name = "percentile"
    summary = "cloud advisor: reserve the level that was cheapest (or the p-th percentile) over the last N days"

    def __init__(self, lookback_days: float = 30.0, percentile: float | None = None, term: str = "auto") -> None:
        if lookback_days <= 0:
            raise InputError("lookback_days must be > 0", field="lookback_days")
        if percentile is not None and not 0 <= percentile <= 100:
            raise InputError("percentile must be within [0, 100]", field="percentile")
        if term != "auto":
            _term_index(term)
        self.lookback_days = lookback_days
        self.percentile = percentile
        self.term = term

    def decide(self, view: EpochView) -> IntA:
        out = np.zeros(len(TERMS), dtype=np.int64)
        k = _pick_term(view, self.term)
        recent = view.recent(self.lookback_days)
        if k is None or not len(recent):
            return out
        if self.percentile is None:
            level = lookback_optimal_level(recent, view.prices.commitments[TERMS[k]], view.prices.overflow)
        else:
            level = int(np.ceil(np.percentile(recent, self.percentile)))
        out[k] = max(0, level - view.in_force)
        return out

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"lookback_days": self.lookback_days, "percentile": self.percentile,
                                     "term": self.term}


@RESERVATION_POLICIES.register("online", aliases=("wang-online", "ski-rental"))
class OnlineBreakEven(OnlinePolicy):
    """Wang, Li and Liang's deterministic online algorithm (break-even per level over the last term)."""

    name = "online"
    summary = "Wang et al. (ICAC 2013) deterministic online reservation, competitive ratio 2 - alpha"

    def __init__(self, term: str = "1y") -> None:
        self.term = term
        self.k = _term_index(term)

    def decide(self, view: EpochView) -> IntA:
        out = np.zeros(len(TERMS), dtype=np.int64)
        if not view.allowed[self.k]:
            return out
        tau = TERM_HOURS[self.term]
        rate = view.prices.commitments[self.term]
        fee = rate * tau  # no-upfront commitment = fee rate*term, usage discount alpha = 0
        d = view.observed[-tau:]
        past_force = np.concatenate([np.zeros(max(0, len(view.observed) - len(view.observed_force)), dtype=np.int64),
                                     view.observed_force])[-tau:]
        r = view.in_force
        while True:
            level = r + 1
            # hours in the last term where this level had demand and was paid on demand
            paid = int(((d >= level) & (past_force < level)).sum())
            if paid * view.prices.overflow < fee:
                break
            r += 1
        out[self.k] = r - view.in_force
        return out

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"term": self.term, "competitive_ratio_bound": 2.0,
                                     "reference": "Wang, Li, Liang, ICAC 2013, arXiv:1305.5608"}


@RESERVATION_POLICIES.register("best-fixed", aliases=("best-fixed-hindsight",))
class BestFixed(ReservationPolicy):
    """The best constant commitment level in hindsight (exhaustive over levels and terms)."""

    name = "best-fixed"
    summary = "best single commitment level held through the window, in hindsight"
    hindsight = True

    def plan(self, window: DemandWindow, prices: ReservationPrices, epoch_hours: int = EPOCH_HOURS) -> Plan:
        hours = len(window)
        ne = n_epochs(hours, epoch_hours)
        d = np.asarray(window.values, dtype=np.int64)
        best = (float(d.sum() * prices.overflow), Plan.empty(hours, epoch_hours))
        for k, term in enumerate(TERMS):
            if term not in prices.commitments:
                continue
            span = TERM_HOURS[term] // epoch_hours
            epochs = [e for e in range(0, ne, span) if allowed_terms(e, hours, prices, epoch_hours)[k]]
            if not epochs:
                continue
            covered = np.zeros(hours, dtype=bool)
            for e in epochs:
                covered[e * epoch_hours:e * epoch_hours + TERM_HOURS[term]] = True
            dc = np.sort(d[covered])
            rest = float(d[~covered].sum()) * prices.overflow
            csum = np.concatenate([[0], np.cumsum(dc[::-1])])[::-1]  # csum[i] = sum of dc[i:]
            n = len(dc)
            for level in range(int(dc.max(initial=0)) + 1):
                i = int(np.searchsorted(dc, level, side="right"))  # dc[i:] > level
                over = float(csum[i]) - level * (n - i)
                cost = level * n * prices.commitments[term] + over * prices.overflow + rest
                if cost < best[0] - 1e-9:
                    buys = np.zeros((ne, len(TERMS)), dtype=np.int64)
                    buys[epochs, k] = level
                    best = (cost, Plan(buys, epoch_hours))
        return best[1]


@RESERVATION_POLICIES.register("hindsight-optimal", aliases=("milp", "optimal"))
class HindsightOptimal(ReservationPolicy):
    """The exact hindsight MILP."""

    name = "hindsight-optimal"
    summary = "exact MILP with the true demand (the bound)"
    hindsight = True

    def plan(self, window: DemandWindow, prices: ReservationPrices, epoch_hours: int = EPOCH_HOURS) -> Plan:
        from seedance.reservations.milp import hindsight_optimal

        return hindsight_optimal(window, prices, epoch_hours=epoch_hours).plan

"""The hourly cost of a purchase plan, and its attribution vector.

A plan buys whole units of each term at the start of decision epochs (every ``epoch_hours``,
730 h = one month by default). A unit bought at epoch ``e`` is *in force* for exactly its term,
``[e * epoch_hours, e * epoch_hours + term)``, and nowhere else; a plan may not buy a unit
whose term would run past the end of the window (it could not be used there, yet it would be
paid for). Every hour ``t``:

* demand ``d`` is served by the units in force ``R`` first: ``used = min(d, R)``, ``idle = R - used``;
* the rest, ``o = d - used``, runs on demand, except a share ``spot_share`` on spot, which
  also pays ``spot_rework`` extra hours for work lost to interruptions;
* commitments cost their rate in every hour of their term, used or not.

The attribution vector of an hour sums exactly to its cost::

    cost = committed_used + committed_idle + on_demand + spot + spot_interruption

``baseline`` is what the hour would cost with no commitment at all, ``savings = baseline - cost``
(negative when idle commitments outweigh what the used ones save). The *main cause* of an hour is
the largest of its three excess components: ``low-load`` (idle commitments), ``burst`` (demand
above the commitments paid at the on-demand price, counted as the premium over the cheapest
commitment rate) and ``spot-interruption`` (rework); ``covered`` when all are zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.reservations.demand import HOUR, DemandWindow
from seedance.reservations.pricing import TERM_HOURS, TERMS, ReservationPrices

EPOCH_HOURS = 730
CAUSES: tuple[str, ...] = ("covered", "low-load", "burst", "spot-interruption")
IntA = NDArray[np.int64]
FloatA = NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class Plan:
    """Units bought per decision epoch and term: ``buys[e, k]`` for term ``TERMS[k]``."""

    buys: IntA
    epoch_hours: int = EPOCH_HOURS

    def __post_init__(self) -> None:
        b = np.asarray(self.buys)
        if b.ndim != 2 or b.shape[1] != len(TERMS):
            raise ValueError(f"buys must be (epochs, {len(TERMS)})")
        if b.size and b.min() < 0:
            raise ValueError("a plan cannot sell units")
        object.__setattr__(self, "buys", b.astype(np.int64))

    @staticmethod
    def empty(hours: int, epoch_hours: int = EPOCH_HOURS) -> Plan:
        """A plan that buys nothing over ``hours``."""
        return Plan(np.zeros((n_epochs(hours, epoch_hours), len(TERMS)), dtype=np.int64), epoch_hours)

    def in_force(self, hours: int) -> IntA:
        """Units in force per hour, ``(hours, terms)``.

        Raises:
            InputError: a unit whose term runs past ``hours``.
        """
        diff = np.zeros((hours + 1, len(TERMS)), dtype=np.int64)
        for e, k in zip(*np.nonzero(self.buys), strict=True):
            a = int(e) * self.epoch_hours
            b = a + TERM_HOURS[TERMS[int(k)]]
            if b > hours:
                raise InputError(f"epoch {int(e)} buys {TERMS[int(k)]} units whose term ends after the window "
                                 f"({b} > {hours} h)", field="plan")
            diff[a, k] += self.buys[e, k]
            diff[b, k] -= self.buys[e, k]
        return np.cumsum(diff[:-1], axis=0)

    def to_json(self, start: int) -> list[dict[str, Any]]:
        """The purchases as ``[{"epoch", "at", "term", "units"}]``."""
        out = []
        for e, k in zip(*np.nonzero(self.buys), strict=True):
            at = datetime.fromtimestamp(start + int(e) * self.epoch_hours * HOUR, tz=UTC)
            out.append({"epoch": int(e), "at": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "term": TERMS[int(k)],
                        "units": int(self.buys[e, k])})
        return out


def n_epochs(hours: int, epoch_hours: int = EPOCH_HOURS) -> int:
    """Decision epochs in ``hours`` (the last one may be partial)."""
    return max(1, -(-hours // epoch_hours))


def allowed_terms(epoch: int, hours: int, prices: ReservationPrices, epoch_hours: int = EPOCH_HOURS) -> list[bool]:
    """Per term, whether a unit bought at ``epoch`` ends inside the window and is on sale."""
    a = epoch * epoch_hours
    return [t in prices.commitments and a + TERM_HOURS[t] <= hours for t in TERMS]


@dataclass(frozen=True, slots=True, eq=False)
class Attribution:
    """Hourly cost of a plan and its attribution vector (columnar, one value per hour)."""

    start: int
    demand: IntA
    in_force: IntA
    baseline: FloatA
    committed_used: FloatA
    committed_idle: FloatA
    on_demand: FloatA
    spot: FloatA
    spot_interruption: FloatA
    cause: NDArray[np.int8]
    premium_share: float = 1.0

    @property
    def cost(self) -> FloatA:
        """Hourly cost (the sum of the attribution vector)."""
        return np.asarray(self.committed_used + self.committed_idle + self.on_demand + self.spot
                          + self.spot_interruption, dtype=np.float64)

    @property
    def savings(self) -> FloatA:
        """Hourly savings against no commitment."""
        return np.asarray(self.baseline - self.cost, dtype=np.float64)

    def totals(self) -> dict[str, float]:
        """Sums over the window."""
        out = {name: float(getattr(self, name).sum()) for name in
               ("baseline", "committed_used", "committed_idle", "on_demand", "spot", "spot_interruption")}
        out["total_cost"] = float(self.cost.sum())
        out["savings"] = out["baseline"] - out["total_cost"]
        out["savings_pct"] = 100.0 * out["savings"] / out["baseline"] if out["baseline"] else 0.0
        out["utilisation_of_commitments"] = (float(np.minimum(self.demand, self.in_force).sum())
                                             / max(1.0, float(self.in_force.sum())))
        return out

    def by_slot(self, slot_hours: int = 2) -> list[dict[str, Any]]:
        """The whitepaper's table: per slot of the UTC day, baseline cost, savings and main cause."""
        hod = ((self.start // HOUR + np.arange(len(self.demand))) % 24) // slot_hours
        rows = []
        excess = np.stack([self.committed_idle, self._premium(), self.spot_interruption])
        for s in range(24 // slot_hours):
            m = hod == s
            ex = excess[:, m].sum(axis=1)
            cause = CAUSES[1 + int(np.argmax(ex))] if ex.max() > 1e-9 else CAUSES[0]
            rows.append({"slot": f"{s * slot_hours:02d}:00-{(s + 1) * slot_hours:02d}:00",
                         "baseline_cost": float(self.baseline[m].sum()), "savings": float(self.savings[m].sum()),
                         "main_cause": cause, "low_load": float(ex[0]), "burst": float(ex[1]),
                         "spot_interruption": float(ex[2])})
        return rows

    def _premium(self) -> FloatA:
        return np.asarray(self.on_demand * self.premium_share, dtype=np.float64)

    def write_csv(self, path: str | Path) -> None:
        """Every hour's attribution vector as CSV."""
        cost, sav = self.cost, self.savings
        lines = ["timestamp,demand,in_force,baseline,committed_used,committed_idle,on_demand,spot,"
                 "spot_interruption,cost,savings,main_cause"]
        for i in range(len(self.demand)):
            t = datetime.fromtimestamp(self.start + i * HOUR, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            lines.append(f"{t},{self.demand[i]},{self.in_force[i]},{self.baseline[i]:.6f},"
                         f"{self.committed_used[i]:.6f},{self.committed_idle[i]:.6f},{self.on_demand[i]:.6f},"
                         f"{self.spot[i]:.6f},{self.spot_interruption[i]:.6f},{cost[i]:.6f},{sav[i]:.6f},"
                         f"{CAUSES[int(self.cause[i])]}")
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def simulate_plan(plan: Plan, window: DemandWindow, prices: ReservationPrices) -> Attribution:
    """Cost ``plan`` hour by hour on ``window`` (see the module docstring)."""
    for k, term in enumerate(TERMS):
        if term not in prices.commitments and plan.buys[:, k].any():
            raise InputError(f"the plan buys {term} units but the prices have no {term} commitment", field="plan")
    return attribute(np.asarray(window.values, dtype=np.int64), plan.in_force(len(window)), prices, window.start)


def attribute(d: IntA, force: IntA, prices: ReservationPrices, start: int) -> Attribution:
    """The attribution vector of hours with demand ``d`` and units in force ``force`` (hours, terms)."""
    hours = len(d)
    rates = np.array([prices.commitments.get(t, 0.0) for t in TERMS])
    pay = force @ rates
    r = force.sum(axis=1)
    used = np.minimum(d, r)
    share_used = np.divide(used, r, out=np.zeros(hours), where=r > 0)
    over = (d - used).astype(np.float64)
    sigma = prices.spot_share
    spot_p = prices.spot or 0.0
    on_demand = over * (1.0 - sigma) * prices.on_demand
    spot = over * sigma * spot_p
    rework = spot * prices.spot_rework
    committed_used = pay * share_used
    committed_idle = pay - committed_used
    baseline = np.asarray(d * prices.overflow, dtype=np.float64)
    cheapest = min(prices.commitments.values()) if prices.commitments else prices.on_demand
    premium_share = max(0.0, 1.0 - cheapest / prices.on_demand)
    excess = np.stack([committed_idle, on_demand * premium_share, rework])
    cause = np.where(excess.max(axis=0) > 1e-12, 1 + np.argmax(excess, axis=0), 0).astype(np.int8)
    return Attribution(start=start, demand=d, in_force=r.astype(np.int64), baseline=baseline,
                       committed_used=committed_used, committed_idle=committed_idle, on_demand=on_demand, spot=spot,
                       spot_interruption=rework, cause=cause, premium_share=premium_share)

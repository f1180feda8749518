"""Prices one reservation plan is costed with: on-demand, spot and the commitment terms.

All prices are per *unit-hour*, where a unit is what demand counts (one GPU by default: an
8-GPU instance's prices are divided by 8). A commitment of term ``T`` hours costs its hourly
rate in every hour of the term, used or not (no-upfront / monthly-billed commitments such as
GCP committed-use discounts; an all-upfront fee is the same total paid at once, and with no
discounting of money over time the plans are the same).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from seedance.core.errors import InputError

HOURS_PER_YEAR = 8760
TERMS: tuple[str, ...] = ("1y", "3y")
TERM_HOURS: dict[str, int] = {"1y": HOURS_PER_YEAR, "3y": 3 * HOURS_PER_YEAR}


@dataclass(frozen=True, slots=True)
class ReservationPrices:
    """Unit-hour prices of one offer.

    Attributes:
        on_demand: On-demand price per unit-hour.
        commitments: Hourly rate per committed unit, by term (``"1y"``, ``"3y"``); a term that is
            missing cannot be bought.
        spot: Spot price per unit-hour (``None``: no spot market).
        spot_share: Share of the demand that is interruptible and runs on spot when it is not
            covered by commitments (0 = none).
        spot_rework: Extra spot hours per spot hour, lost to interruptions (interruptions per
            hour times the work lost per interruption plus the restart time).
        label: What the prices are (instance, region, source) for reports.
        sources: Where each figure comes from.
    """

    on_demand: float
    commitments: dict[str, float]
    spot: float | None = None
    spot_share: float = 0.0
    spot_rework: float = 0.0
    label: str = ""
    sources: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.on_demand > 0:
            raise InputError(f"on-demand price must be > 0, got {self.on_demand}", field="on_demand")
        for term, rate in self.commitments.items():
            if term not in TERM_HOURS:
                raise InputError(f"unknown term {term!r}; valid: {', '.join(TERMS)}", field="commitments")
            if not 0 < rate < self.on_demand:
                raise InputError(f"{term} rate must be within (0, on-demand), got {rate}", field="commitments")
        if not 0 <= self.spot_share <= 1:
            raise InputError(f"spot_share must be within [0, 1], got {self.spot_share}", field="spot_share")
        if self.spot_share > 0 and (self.spot is None or not self.spot > 0):
            raise InputError("a spot share needs a spot price > 0", field="spot")
        if self.spot_rework < 0:
            raise InputError(f"spot_rework must be >= 0, got {self.spot_rework}", field="spot_rework")

    @property
    def terms(self) -> tuple[str, ...]:
        """Terms that can be bought, shortest first."""
        return tuple(t for t in TERMS if t in self.commitments)

    @property
    def overflow(self) -> float:
        """Cost of one unit-hour of demand not covered by commitments (on-demand and spot mix)."""
        spot = (self.spot or 0.0) * (1.0 + self.spot_rework)
        return (1.0 - self.spot_share) * self.on_demand + self.spot_share * spot

    def discount(self, term: str) -> float:
        """``1 - rate / overflow``: the share of hours a committed unit must be used to pay off."""
        return 1.0 - self.commitments[term] / self.overflow

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"label": self.label, "on_demand": self.on_demand, "commitments": dict(self.commitments),
                "spot": self.spot, "spot_share": self.spot_share, "spot_rework": self.spot_rework,
                "overflow_unit_hour": self.overflow, "sources": dict(self.sources)}

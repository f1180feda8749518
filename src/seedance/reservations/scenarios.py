"""Demand windows to train, tune and test the reservation engine on, kept apart by construction.

Three families, each with disjoint train / tune / test members:

* ``synthetic``: :func:`~seedance.reservations.demand.random_scenario` (growth, seasonality,
  bursts, drops, noise, a synthetic weekly profile); seeds drawn from disjoint ranges.
* ``trace``: an Alibaba ``openb`` pod list replayed (:func:`~seedance.reservations.demand.demand_from_pods`),
  scaled and modulated by a random scenario. Only the ``default`` and ``gpushare*`` lists have
  distinct GPU demand (the ``cpu*`` and ``gpuspec*`` lists hold the same GPU pods as ``default``, the
  ``multigpu*`` lists have no creation or deletion times). Training and tuning draw from
  ``default``, ``cpu050``, ``cpu200``, ``gpushare20/40/60``, ``gpuspec10/33``; the test split from
  ``gpushare100``, the one distinct demand shape no training window came from.
* ``pai``: the PAI-2020-calibrated job stream (:func:`~seedance.reservations.demand.pai_calibrated_demand`),
  scaled and modulated; streams of disjoint seeds for each split.

Every window has one year of history before it (for the online policies' look-backs) and lasts
``window_years`` (4 by default: 3-year units can be bought in its first year, 1-year units in its
first three). Prices are the catalog's GCP committed-use discounts (A2, A3, G2 in us-central1,
``../shared/data/cloud-gpu-prices/commitments.csv``), one drawn per window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from seedance.reservations.demand import (
    DemandWindow,
    HourlyDemand,
    demand_from_pods,
    modulate,
    pai_calibrated_demand,
    random_scenario,
    scenario_demand,
)
from seedance.reservations.pricing import ReservationPrices

YEAR_H = 8760
START = 1672531200  # 2023-01-01T00:00:00Z: the calendar the scenarios are laid on
SPLITS = ("train", "tune", "test")
SEED_BASE = {"train": 0, "tune": 500_000_000, "test": 1_000_000_000}
TRAIN_TRACES = ("openb_pod_list_default.csv", "openb_pod_list_cpu050.csv", "openb_pod_list_cpu200.csv",
                "openb_pod_list_gpushare20.csv", "openb_pod_list_gpushare40.csv", "openb_pod_list_gpushare60.csv",
                "openb_pod_list_gpuspec10.csv", "openb_pod_list_gpuspec33.csv")
TEST_TRACES = ("openb_pod_list_gpushare100.csv",)


def catalog_price_points() -> list[ReservationPrices]:
    """Per-GPU prices of the GCP machines with committed-use rates in the shared catalog."""
    from seedance.markets.book import load_catalog

    book = load_catalog()
    out = []
    for it in ("a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4"):
        o = book.find(cloud="gcp", instance_type=it, region="us-central1")
        out.append(o.reservation_prices())
    return out


@dataclass(slots=True)
class WindowFactory:
    """Draws demand windows of one split.

    Attributes:
        split: ``train``, ``tune`` or ``test``.
        window_years: Years per window (after one year of history).
        families: Which families to draw from, with weights.
        prices: Price points (default: :func:`catalog_price_points`).
        data_dir: Folder of the pod lists (default: the shared Alibaba folder).
    """

    split: str = "train"
    window_years: int = 4
    families: dict[str, float] = field(default_factory=lambda: {"synthetic": 0.5, "trace": 0.3, "pai": 0.2})
    prices: list[ReservationPrices] = field(default_factory=list)
    data_dir: Path | None = None
    _trace_cache: dict[str, HourlyDemand] = field(default_factory=dict)
    _pai_cache: dict[int, HourlyDemand] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}")
        if not self.prices:
            self.prices = catalog_price_points()

    @property
    def hours(self) -> int:
        """History plus window."""
        return (1 + self.window_years) * YEAR_H

    def traces(self) -> Sequence[str]:
        """The pod lists of this split."""
        return TEST_TRACES if self.split == "test" else TRAIN_TRACES

    def _trace(self, name: str) -> HourlyDemand:
        if name not in self._trace_cache:
            from seedance.traces.paths import data_file

            path = (self.data_dir / name) if self.data_dir else data_file(f"alibaba-gpu-v2023/{name}")
            self._trace_cache[name] = demand_from_pods(path, start=START, hours=self.hours)
        return self._trace_cache[name]

    def _pai(self, k: int) -> HourlyDemand:
        if k not in self._pai_cache:
            seed = SEED_BASE[self.split] + 7919 * k + 1
            self._pai_cache[k] = pai_calibrated_demand(start=START, hours=self.hours, seed=seed, scale=0.1)
        return self._pai_cache[k]

    def draw(self, rng: np.random.Generator, family: str | None = None) -> tuple[DemandWindow, ReservationPrices]:
        """One ``(window, prices)``; ``rng`` decides everything (seeds come from this split's range)."""
        fams = list(self.families)
        weights = np.array([self.families[f] for f in fams])
        fam = family or str(rng.choice(fams, p=weights / weights.sum()))
        seed = SEED_BASE[self.split] + int(rng.integers(0, 400_000_000))
        sc_rng = np.random.default_rng(seed)
        sc = random_scenario(sc_rng, name=f"{self.split}-{fam}")
        if fam == "synthetic":
            d = scenario_demand(sc, start=START, hours=self.hours, seed=seed)
        elif fam == "trace":
            tr = self.traces()
            base = self._trace(tr[int(sc_rng.integers(0, len(tr)))])
            scale = float(sc_rng.uniform(0.3, 5.0))
            scaled = HourlyDemand(base.start, np.ceil(base.values * scale).astype(np.int64), base.source)
            d = modulate(scaled, sc, seed=seed)
        elif fam == "pai":
            base = self._pai(int(sc_rng.integers(0, 3)))
            scale = float(sc_rng.uniform(0.3, 3.0))
            scaled = HourlyDemand(base.start, np.ceil(base.values * scale).astype(np.int64), base.source)
            d = modulate(scaled, sc, seed=seed)
        else:
            raise ValueError(f"unknown family {fam!r}")
        window = d.window(YEAR_H, self.window_years * YEAR_H, label=f"{fam}: {d.source}")
        return window, self.prices[int(rng.integers(0, len(self.prices)))]

    def fixed(self, n: int, *, seed: int = 0) -> list[tuple[DemandWindow, ReservationPrices]]:
        """``n`` windows drawn deterministically (families in turn)."""
        rng = np.random.default_rng(SEED_BASE[self.split] + seed)
        fams = list(self.families)
        return [self.draw(rng, fams[i % len(fams)]) for i in range(n)]

"""GPU instance offers by market (on-demand, spot, 1-/3-year commitments) and the price-book format.

Catalog: the three CSV files of ``../shared/data/cloud-gpu-prices`` (see its ``SOURCE.md``):
``instances.csv`` (on-demand and spot per instance-hour, specs, source and date of every row),
``commitments.csv`` (GCP 1- and 3-year committed-use rates) and ``spot-interruption.csv`` (AWS Spot
Instance Advisor bands). Any files of those formats load (``load_catalog(instances=..., ...)``).
What the sources did not give is absent, never filled in: AWS and Azure 1-/3-year rates, Azure spot
prices, GCP and Azure interruption rates. Users add them with a price book.

Price book (YAML)::

    apiVersion: seedance.io/v1
    kind: PriceBook
    metadata: {name: our-contract}
    offers:
      - cloud: aws
        instance_type: p4d.24xlarge
        region: us-east-1
        gpu_model: A100-40GB          # catalog name (or alias)
        gpu_count: 8
        on_demand_usd_per_hour: 21.957642
        spot_usd_per_hour: 8.19       # optional
        spot_interruption_per_month: 0.12   # optional: share of instances reclaimed per month
        commitments: {1y: 14.1, 3y: 9.3}    # optional, USD per instance-hour over the term
        source: "EDP contract 2026-05"      # required: where the figures come from
        date: "2026-05-01"

An offer with the same ``(cloud, instance_type, region)`` as a catalog offer replaces the fields it
gives and keeps the others. Errors name the file, line and field (``InputError``).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seedance.core.catalog import CATALOG
from seedance.core.errors import InputError, UnknownNameError
from seedance.core.yamldoc import compose, validate

HOURS_PER_MONTH = 730.0
TERMS = ("1y", "3y")

# AWS Spot Instance Advisor bands ("frequency of interruption": the rate at which Spot reclaimed
# capacity during the trailing month) -> (low, high) share per month; ">20%" has no upper bound.
INTERRUPTION_BANDS: dict[str, tuple[float, float | None]] = {
    "<5%": (0.0, 0.05), "5-10%": (0.05, 0.10), "10-15%": (0.10, 0.15), "15-20%": (0.15, 0.20), ">20%": (0.20, None)}

# GPU names of the shared price files -> catalog names (None: not in the GPU catalog)
DATA_GPU_NAMES: dict[str, str | None] = {"A100": "A100-40GB", "A100-80GB": "A100-80GB", "H100": "H100-80GB",
                                         "V100": "V100-16GB", "L40S": "L40S", "T4": "T4", "A10G": None, "L4": None}


def band_rate(band: str) -> tuple[float, bool]:
    """Representative monthly interruption share of an advisor band, and whether it is a lower bound.

    The midpoint of a bounded band; for ``>20%`` the bound itself (so the expected cost of spot
    with such a band is a lower bound, and reports say so).
    """
    if band not in INTERRUPTION_BANDS:
        raise InputError(f"unknown interruption band {band!r}; valid: {', '.join(INTERRUPTION_BANDS)}",
                         field="interruption_band")
    lo, hi = INTERRUPTION_BANDS[band]
    return ((lo + hi) / 2, False) if hi is not None else (lo, True)


@dataclass(frozen=True, slots=True)
class InstanceOffer:
    """One instance type in one region, with its prices per instance-hour in each market.

    Attributes:
        cloud, instance_type, region: Identity.
        gpu_model: Catalog GPU name (``None`` when the GPU is not in the catalog); ``gpu_name`` is
            the name in the source.
        gpu_count, gpu_memory_gib, vcpus, memory_gib: Specs.
        on_demand: On-demand USD per instance-hour.
        spot: Spot USD per instance-hour (``None``: no figure).
        spot_interruption_per_month: Share of spot instances reclaimed per month (``None``: unknown).
        spot_interruption_lower_bound: The rate is a lower bound (an open-ended advisor band).
        interruption_band: The advisor band it came from, if any.
        commitments: Committed USD per instance-hour by term (``"1y"``, ``"3y"``).
        sources: Where each group of figures comes from (``on_demand``, ``spot``, ``commitments``,
            ``interruption``, ``specs``).
        dates: Data date of each group.
    """

    cloud: str
    instance_type: str
    region: str
    gpu_model: str | None
    gpu_name: str
    gpu_count: int
    gpu_memory_gib: float
    vcpus: float | None
    memory_gib: float | None
    on_demand: float
    spot: float | None = None
    spot_interruption_per_month: float | None = None
    spot_interruption_lower_bound: bool = False
    interruption_band: str | None = None
    commitments: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    dates: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        """``(cloud, instance_type, region)``, case-folded."""
        return (self.cloud.lower(), self.instance_type.lower(), self.region.lower())

    def spot_hazard_per_hour(self) -> float | None:
        """Interruptions per instance-hour: ``-ln(1 - monthly share) / 730`` (a constant hazard)."""
        m = self.spot_interruption_per_month
        if m is None:
            return None
        return -math.log(max(1e-12, 1.0 - m)) / HOURS_PER_MONTH

    def reservation_prices(self, *, spot_share: float = 0.0, spot_rework: float = 0.0) -> Any:
        """Per-GPU :class:`~seedance.reservations.pricing.ReservationPrices` of this offer."""
        from seedance.reservations.pricing import ReservationPrices

        g = float(self.gpu_count)
        return ReservationPrices(
            on_demand=self.on_demand / g, commitments={t: r / g for t, r in self.commitments.items()},
            spot=None if self.spot is None else self.spot / g, spot_share=spot_share, spot_rework=spot_rework,
            label=f"{self.cloud} {self.instance_type} {self.region} (per GPU)",
            sources={k: v for k, v in self.sources.items() if k in ("on_demand", "commitments", "spot")})

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"cloud": self.cloud, "instance_type": self.instance_type, "region": self.region,
                "gpu_model": self.gpu_model, "gpu_name": self.gpu_name, "gpu_count": self.gpu_count,
                "gpu_memory_gib": self.gpu_memory_gib, "vcpus": self.vcpus, "memory_gib": self.memory_gib,
                "on_demand_usd_per_hour": self.on_demand, "spot_usd_per_hour": self.spot,
                "spot_interruption_per_month": self.spot_interruption_per_month,
                "spot_interruption_lower_bound": self.spot_interruption_lower_bound,
                "interruption_band": self.interruption_band,
                "commitments_usd_per_hour": dict(self.commitments), "sources": dict(self.sources),
                "dates": dict(self.dates)}


@dataclass(frozen=True, slots=True)
class MarketBook:
    """Offers by ``(cloud, instance_type, region)``."""

    offers: tuple[InstanceOffer, ...]
    sources: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[InstanceOffer]:
        return iter(self.offers)

    def __len__(self) -> int:
        return len(self.offers)

    def find(self, *, cloud: str, instance_type: str, region: str) -> InstanceOffer:
        """The offer with this identity; unknown ones list what exists."""
        key = (cloud.lower(), instance_type.lower(), region.lower())
        for o in self.offers:
            if o.key == key:
                return o
        known = ", ".join(sorted({f"{o.cloud}/{o.instance_type}/{o.region}" for o in self.offers}))
        raise UnknownNameError(f"no offer {cloud}/{instance_type}/{region}; known: {known}")

    def select(self, *, clouds: Iterable[str] | None = None, gpus: Iterable[str] | None = None,
               regions: Iterable[str] | None = None) -> MarketBook:
        """The offers of the given clouds / catalog GPU models / regions (``None``: all)."""
        cs = {c.lower() for c in clouds} if clouds else None
        gs = {CATALOG.resolve(g).name for g in gpus} if gpus else None
        rs = {r.lower() for r in regions} if regions else None
        keep = tuple(o for o in self.offers if (cs is None or o.cloud.lower() in cs)
                     and (gs is None or o.gpu_model in gs) and (rs is None or o.region.lower() in rs))
        return MarketBook(keep, self.sources)

    def merged(self, other: MarketBook) -> MarketBook:
        """This book with ``other``'s offers added or overriding (field by field, see the module doc)."""
        by = {o.key: o for o in self.offers}
        for o in other.offers:
            by[o.key] = o if o.key not in by else _override(by[o.key], o)
        return MarketBook(tuple(by.values()), self.sources + other.sources)


def _override(base: InstanceOffer, new: InstanceOffer) -> InstanceOffer:
    kw: dict[str, Any] = {"on_demand": new.on_demand, "sources": base.sources | new.sources,
                          "dates": base.dates | new.dates, "commitments": base.commitments | new.commitments}
    for name in ("spot", "spot_interruption_per_month", "interruption_band"):
        if getattr(new, name) is not None:
            kw[name] = getattr(new, name)
    if new.spot_interruption_per_month is not None:
        kw["spot_interruption_lower_bound"] = new.spot_interruption_lower_bound
    return replace(base, **kw)


# ---------------------------------------------------------------- shared catalog (CSV)


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    src = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("price file not found", source=src) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read price file: {exc}", source=src) from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", source=src, line=1, field=missing[0])
    yield from enumerate(reader, start=2)


def _num(row: dict[str, str], col: str, src: str, line: int, *, optional: bool = False,
         positive: bool = True) -> float | None:
    raw = (row.get(col) or "").strip()
    if not raw:
        if optional:
            return None
        raise InputError("value missing", source=src, line=line, field=col)
    try:
        v = float(raw)
    except ValueError:
        raise InputError(f"not a number: {raw!r}", source=src, line=line, field=col) from None
    if not math.isfinite(v) or (positive and v <= 0) or v < 0:
        raise InputError(f"must be {'> 0' if positive else '>= 0'}, got {raw}", source=src, line=line, field=col)
    return v


def _catalog_gpu(name: str) -> str | None:
    if name in DATA_GPU_NAMES:
        return DATA_GPU_NAMES[name]
    return CATALOG.resolve(name).name if name in CATALOG else None


def load_catalog(*, instances: str | Path | None = None, commitments: str | Path | None = None,
                 interruption: str | Path | None = None) -> MarketBook:
    """The shared price catalog (or files of the same formats)."""
    from seedance.traces.paths import data_file

    ip = Path(instances) if instances else data_file("cloud-gpu-prices/instances.csv")
    cp = Path(commitments) if commitments else data_file("cloud-gpu-prices/commitments.csv")
    sp = Path(interruption) if interruption else data_file("cloud-gpu-prices/spot-interruption.csv")
    offers: dict[tuple[str, str, str], InstanceOffer] = {}
    src = str(ip)
    for n, row in _rows(ip, ("cloud", "instance_type", "gpu_model", "gpu_count", "region",
                             "on_demand_usd_per_hour", "spot_usd_per_hour", "source", "data_date")):
        gcount = _num(row, "gpu_count", src, n)
        assert gcount is not None
        if gcount != int(gcount):
            raise InputError(f"must be a whole number, got {row['gpu_count']}", source=src, line=n, field="gpu_count")
        od = _num(row, "on_demand_usd_per_hour", src, n)
        assert od is not None
        gname = row["gpu_model"].strip()
        o = InstanceOffer(
            cloud=row["cloud"].strip(), instance_type=row["instance_type"].strip(), region=row["region"].strip(),
            gpu_model=_catalog_gpu(gname), gpu_name=gname, gpu_count=int(gcount),
            gpu_memory_gib=_num(row, "gpu_memory_gib", src, n, optional=True) or 0.0,
            vcpus=_num(row, "vcpus", src, n, optional=True), memory_gib=_num(row, "memory_gib", src, n, optional=True),
            on_demand=od, spot=_num(row, "spot_usd_per_hour", src, n, optional=True),
            sources={"on_demand": row["source"].strip(), "spot": row["source"].strip(), "specs": row["source"].strip()},
            dates={"on_demand": row["data_date"].strip(), "spot": row["data_date"].strip()})
        if o.key in offers:
            raise InputError(f"{o.cloud}/{o.instance_type}/{o.region} listed twice", source=src, line=n,
                             field="instance_type")
        offers[o.key] = o
    src = str(cp)
    for n, row in _rows(cp, ("cloud", "instance_type", "region", "term_years", "effective_usd_per_hour", "source",
                             "data_date")):
        key = (row["cloud"].strip().lower(), row["instance_type"].strip().lower(), row["region"].strip().lower())
        if key not in offers:
            raise InputError(f"commitment for {'/'.join(key)}, which instances.csv does not list", source=src,
                             line=n, field="instance_type")
        term = {"1": "1y", "3": "3y"}.get(row["term_years"].strip())
        if term is None:
            raise InputError(f"term_years must be 1 or 3, got {row['term_years']!r}", source=src, line=n,
                             field="term_years")
        rate = _num(row, "effective_usd_per_hour", src, n)
        assert rate is not None
        o = offers[key]
        if rate >= o.on_demand:
            raise InputError(f"committed rate {rate} is not below on-demand {o.on_demand}", source=src, line=n,
                             field="effective_usd_per_hour")
        offers[key] = replace(o, commitments=o.commitments | {term: rate},
                              sources=o.sources | {"commitments": row["source"].strip()},
                              dates=o.dates | {"commitments": row["data_date"].strip()})
    src = str(sp)
    for n, row in _rows(sp, ("cloud", "instance_type", "region", "interruption_band", "source", "data_date")):
        key = (row["cloud"].strip().lower(), row["instance_type"].strip().lower(), row["region"].strip().lower())
        band = row["interruption_band"].strip()
        try:
            rate, lower = band_rate(band)
        except InputError as exc:
            raise InputError(exc.message, source=src, line=n, field="interruption_band") from None
        if key not in offers:
            continue  # a band for an instance without prices: nothing to attach it to
        o = offers[key]
        offers[key] = replace(o, spot_interruption_per_month=rate, spot_interruption_lower_bound=lower,
                              interruption_band=band, sources=o.sources | {"interruption": row["source"].strip()},
                              dates=o.dates | {"interruption": row["data_date"].strip()})
    return MarketBook(tuple(offers.values()), (str(ip), str(cp), str(sp)))


# ---------------------------------------------------------------- user price books (YAML)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OfferSpec(_Model):
    """One offer of a price book."""

    cloud: str = Field(min_length=1)
    instance_type: str = Field(min_length=1)
    region: str = Field(min_length=1)
    gpu_model: str | None = Field(default=None, description="Catalog GPU name (required for a new offer).")
    gpu_count: int | None = Field(default=None, ge=1)
    gpu_memory_gib: float | None = Field(default=None, gt=0)
    on_demand_usd_per_hour: float = Field(gt=0)
    spot_usd_per_hour: float | None = Field(default=None, gt=0)
    spot_interruption_per_month: float | None = Field(default=None, ge=0, lt=1)
    spot_interruption_band: str | None = None
    commitments: dict[Literal["1y", "3y"], float] = Field(default_factory=dict)
    source: str = Field(min_length=1, description="Where the figures come from (required).")
    date: str | None = None

    @field_validator("gpu_model")
    @classmethod
    def _gpu(cls, v: str | None) -> str | None:
        if v is not None and v not in CATALOG:
            raise ValueError(f"unknown GPU model {v!r}; valid names: {', '.join(CATALOG.known_names())}")
        return None if v is None else CATALOG.resolve(v).name

    @field_validator("spot_interruption_band")
    @classmethod
    def _band(cls, v: str | None) -> str | None:
        if v is not None and v not in INTERRUPTION_BANDS:
            raise ValueError(f"unknown band {v!r}; valid: {', '.join(INTERRUPTION_BANDS)}")
        return v

    @field_validator("commitments")
    @classmethod
    def _rates(cls, v: dict[str, float]) -> dict[str, float]:
        for term, rate in v.items():
            if not rate > 0:
                raise ValueError(f"{term}: must be > 0, got {rate}")
        return v


class PriceBookDoc(_Model):
    """A price book document."""

    apiVersion: Literal["seedance.io/v1"] = "seedance.io/v1"  # noqa: N815 - the document's key
    kind: Literal["PriceBook"] = "PriceBook"
    metadata: dict[str, str] = Field(default_factory=dict)
    offers: list[OfferSpec] = Field(min_length=1)


def parse_price_book(text: str, *, source: str = "price book", base: MarketBook | None = None) -> MarketBook:
    """Parse a price-book YAML document; offers not in ``base`` must give ``gpu_model`` and ``gpu_count``."""
    node, data = compose(text, source=source, what="price book")
    if not isinstance(data, dict):
        raise InputError("a price book is a mapping with apiVersion, kind, metadata and offers", source=source, line=1)
    doc: PriceBookDoc = validate(PriceBookDoc, data, node, source=source, schema="PriceBook")
    known = {o.key: o for o in base} if base is not None else {}
    offers = []
    from seedance.core.yamldoc import line_of

    for i, spec in enumerate(doc.offers):
        key = (spec.cloud.lower(), spec.instance_type.lower(), spec.region.lower())
        old = known.get(key)
        for name in ("gpu_model", "gpu_count"):
            if getattr(spec, name) is None and old is None:
                raise InputError(f"required for an offer the catalog does not have ({'/'.join(key)})", source=source,
                                 line=line_of(node, ("offers", i)), field=f"offers.{i}.{name}")
        rate, lower = (spec.spot_interruption_per_month, False)
        if spec.spot_interruption_band is not None:
            if rate is not None:
                raise InputError("give spot_interruption_per_month or spot_interruption_band, not both", source=source,
                                 line=line_of(node, ("offers", i, "spot_interruption_band")),
                                 field=f"offers.{i}.spot_interruption_band")
            rate, lower = band_rate(spec.spot_interruption_band)
        for term, r in spec.commitments.items():
            if r >= spec.on_demand_usd_per_hour:
                raise InputError(f"committed rate {r} is not below on-demand {spec.on_demand_usd_per_hour}",
                                 source=source, line=line_of(node, ("offers", i, "commitments", term)),
                                 field=f"offers.{i}.commitments.{term}")
        label = f"{source}: {spec.source}"
        date = spec.date or ""
        groups = ["on_demand"] + (["spot"] if spec.spot_usd_per_hour else []) + (
            ["commitments"] if spec.commitments else []) + (["interruption"] if rate is not None else [])
        offers.append(InstanceOffer(
            cloud=spec.cloud, instance_type=spec.instance_type, region=spec.region,
            gpu_model=spec.gpu_model or (old.gpu_model if old else None),
            gpu_name=spec.gpu_model or (old.gpu_name if old else ""),
            gpu_count=spec.gpu_count or (old.gpu_count if old else 1),
            gpu_memory_gib=spec.gpu_memory_gib or (old.gpu_memory_gib if old else 0.0),
            vcpus=old.vcpus if old else None, memory_gib=old.memory_gib if old else None,
            on_demand=spec.on_demand_usd_per_hour, spot=spec.spot_usd_per_hour, spot_interruption_per_month=rate,
            spot_interruption_lower_bound=lower, interruption_band=spec.spot_interruption_band,
            commitments={str(k): float(v) for k, v in spec.commitments.items()}, sources=dict.fromkeys(groups, label),
            dates=dict.fromkeys(groups, date)))
    return MarketBook(tuple(offers), (source,))


def load_price_book(path: str | Path, *, base: MarketBook | None = None) -> MarketBook:
    """Load a price-book YAML file (see :func:`parse_price_book`)."""
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("price book not found", source=src) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read price book: {exc}", source=src) from None
    return parse_price_book(text, source=src, base=base)


def market_book(price_book: str | Path | None = None) -> MarketBook:
    """The shared catalog, with ``price_book`` merged over it when given."""
    cat = load_catalog()
    return cat.merged(load_price_book(price_book, base=cat)) if price_book else cat


_SAFE = re.compile(r"^[A-Za-z0-9._+-]+$")

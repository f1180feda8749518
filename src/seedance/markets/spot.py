"""Spot price history: the ``aws ec2 describe-spot-price-history`` JSON, summarised per offer.

Format (as the AWS CLI prints it)::

    {"SpotPriceHistory": [{"AvailabilityZone": "us-east-1a", "InstanceType": "p4d.24xlarge",
                           "ProductDescription": "Linux/UNIX", "SpotPrice": "8.191500",
                           "Timestamp": "2026-07-01T00:00:00+00:00"}, ...]}

Each record is a price change: the price holds from its timestamp until the next record of the
same zone and type. :func:`summarise` weights prices by the hours they held inside ``[start, end)``
and gives, per ``(instance_type, region)``, the time-weighted mean, the 90th percentile and the
minimum and maximum over all zones; :func:`apply_history` writes one statistic into a market book
as the spot price, with the file as its source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.markets.book import MarketBook
from seedance.signals.series import iso

STATS = ("mean", "p90", "min", "max")


@dataclass(frozen=True, slots=True)
class SpotSummary:
    """Spot prices of one instance type in one region over a span."""

    instance_type: str
    region: str
    zones: tuple[str, ...]
    mean: float
    p90: float
    min: float
    max: float
    hours: float
    first: str
    last: str

    def stat(self, name: str) -> float:
        """One statistic by name."""
        if name not in STATS:
            raise InputError(f"unknown statistic {name!r}; valid: {', '.join(STATS)}", field="spot_stat")
        return float(getattr(self, name))


def _ts(text: Any, src: str, i: int) -> float:
    try:
        dt = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"record {i}: bad Timestamp {text!r}", source=src, field=f"SpotPriceHistory.{i}.Timestamp"
                         ) from None
    if dt.tzinfo is None:
        raise InputError(f"record {i}: Timestamp without a UTC offset", source=src,
                         field=f"SpotPriceHistory.{i}.Timestamp")
    return dt.timestamp()


def load_history(path: str | Path) -> list[tuple[str, str, float, float]]:
    """Records ``(instance_type, availability_zone, epoch seconds, price)`` of a history file."""
    src = str(path)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("spot history not found", source=src) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not a JSON spot history: {exc}", source=src) from None
    recs = doc.get("SpotPriceHistory") if isinstance(doc, dict) else None
    if not isinstance(recs, list) or not recs:
        raise InputError("expected a non-empty 'SpotPriceHistory' list", source=src, field="SpotPriceHistory")
    out = []
    for i, r in enumerate(recs):
        if not isinstance(r, dict):
            raise InputError(f"record {i} is not an object", source=src, field=f"SpotPriceHistory.{i}")
        for key in ("AvailabilityZone", "InstanceType", "SpotPrice", "Timestamp"):
            if key not in r:
                raise InputError(f"record {i} has no {key}", source=src, field=f"SpotPriceHistory.{i}.{key}")
        try:
            price = float(r["SpotPrice"])
        except (TypeError, ValueError):
            raise InputError(f"record {i}: SpotPrice {r['SpotPrice']!r} is not a number", source=src,
                             field=f"SpotPriceHistory.{i}.SpotPrice") from None
        if not price > 0:
            raise InputError(f"record {i}: SpotPrice must be > 0", source=src, field=f"SpotPriceHistory.{i}.SpotPrice")
        out.append((str(r["InstanceType"]), str(r["AvailabilityZone"]), _ts(r["Timestamp"], src, i), price))
    return out


def summarise(records: list[tuple[str, str, float, float]], *, start: float, end: float) -> dict[tuple[str, str],
                                                                                               SpotSummary]:
    """Time-weighted statistics per ``(instance_type, region)`` over ``[start, end)``.

    The region is the zone without its trailing letter (``us-east-1a`` -> ``us-east-1``). A price
    recorded before ``start`` holds into the span until the zone's next record.
    """
    if not end > start:
        raise InputError("the span is empty", field="end")
    by_zone: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for it, az, t, p in records:
        by_zone.setdefault((it, az), []).append((t, p))
    pieces: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    for (it, az), pts in by_zone.items():
        pts.sort()
        region = az[:-1] if az and az[-1].isalpha() else az
        for k, (t, p) in enumerate(pts):
            a = max(t, start)
            b = min(pts[k + 1][0] if k + 1 < len(pts) else end, end)
            if b > a:
                pieces.setdefault((it, region), []).append(((b - a) / 3600.0, p, az))
    out = {}
    for (it, region), ps in pieces.items():
        w = np.array([x[0] for x in ps])
        v = np.array([x[1] for x in ps])
        order = np.argsort(v)
        cw = np.cumsum(w[order]) / w.sum()
        p90 = float(v[order][np.searchsorted(cw, 0.9)])
        out[(it.lower(), region.lower())] = SpotSummary(
            instance_type=it, region=region, zones=tuple(sorted({x[2] for x in ps})),
            mean=float((w * v).sum() / w.sum()), p90=p90, min=float(v.min()), max=float(v.max()), hours=float(w.sum()),
            first=iso(start), last=iso(end))
    return out


def apply_history(book: MarketBook, summaries: dict[tuple[str, str], SpotSummary], *, stat: str = "mean",
                  source: str = "spot history") -> MarketBook:
    """``book`` with the spot price of every summarised offer set to ``stat``."""
    offers = []
    for o in book:
        s = summaries.get((o.instance_type.lower(), o.region.lower()))
        if s is None:
            offers.append(o)
            continue
        offers.append(replace(o, spot=s.stat(stat), sources=o.sources | {
            "spot": f"{source}: {stat} over {s.hours:.0f} zone-hours in {', '.join(s.zones)}"}))
    return MarketBook(tuple(offers), book.sources + (source,))


def with_history(book: MarketBook, path: str | Path | None, *, stat: str = "mean", days: float = 30.0) -> MarketBook:
    """``book`` with the spot prices of a history file's last ``days`` (``path=None``: unchanged)."""
    if path is None:
        return book
    recs = load_history(path)
    end = max(r[2] for r in recs)
    return apply_history(book, summarise(recs, start=end - days * 86400.0, end=end + 1.0), stat=stat, source=str(path))

"""Loaders for hourly electricity-price and carbon-intensity CSV files, normalised to UTC.

Formats (any file of these shapes loads, whatever the region or year):

* Prices (``../shared/data/electricity-prices/<REGION>_electricity_prices_<YEAR>.csv``):
  ``Datetime,Price (<CUR>/<Wh-unit>)``. The currency and energy unit come from the header
  (``Price (EUR/MWh)``); prices are stored per MWh.
* Carbon (``../shared/data/carbon-intensity-electricitymaps/<ZONE>_<YEAR>_hourly.csv``): the
  Electricity Maps hourly export, ``Datetime (UTC),...,Carbon Intensity gCO₂eq/kWh (direct),
  Carbon Intensity gCO₂eq/kWh (LCA),...``. ``column`` picks ``direct`` (default) or ``lca``.

Timestamps (hour starts). A timestamp with an explicit UTC offset (``2023-01-01 00:00:00-06:00``)
is honoured. A naive one is read in, by priority: the ``tz`` argument; the time column's header
(``Datetime (UTC)``); the documented convention of the file's region
(:data:`NAIVE_PRICE_TIMEZONES`, from each data set's SOURCE.md). Naive local times are mapped
through the IANA zone: a local time that does not exist (the spring-forward gap) is dropped; an
ambiguous local time (the repeated autumn hour) is the first occurrence, and a second row with
the same text is the second occurrence. Hours then missing from the UTC grid (a file with 24 rows
on a 25-hour day) are filled by linear interpolation, up to ``max_gap_hours`` in a row; longer
gaps, duplicates, unparsable values and missing columns raise :class:`InputError` naming the
file, line and column.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from seedance.core.errors import InputError
from seedance.signals.series import CARBON, HOUR, PRICE, HourlySeries, iso
from seedance.traces.csvio import csv_rows

PRICE_DIR = "electricity-prices"
CARBON_DIR = "carbon-intensity-electricitymaps"
DEFAULT_YEAR = 2023

# How naive timestamps of each region's *price* file are to be read (SOURCE.md of
# ../shared/data/electricity-prices): CAISO OASIS gives INTERVALSTARTTIME_GMT (UTC); the DE-LU
# day-ahead file is local market time (calendar date + hour); ERCOT carries explicit offsets,
# its zone is listed for naive variants of the same series.
NAIVE_PRICE_TIMEZONES: dict[str, str] = {
    "US-CAL-CISO": "UTC",
    "DE-LU": "Europe/Berlin",
    "US-TEX-ERCO": "America/Chicago",
}

_PRICE_HEADER = re.compile(r"\(\s*([A-Za-z]{3})\s*/\s*([kKMG]?)Wh\s*\)")
_CARBON_UNIT = re.compile(r"(k?g)\s*CO(?:2|₂)\s*(?:eq|e)?\s*/\s*([kM]?)Wh", re.IGNORECASE)
_TIME_NAMES = ("datetime", "timestamp", "time", "date")
_PER_MWH = {"": 1e6, "k": 1e3, "K": 1e3, "M": 1.0, "G": 1e-3}  # multiply a price per <unit>Wh by this


def price_path(region: str, year: int = DEFAULT_YEAR) -> Path:
    """Default price file of ``region`` in the shared data folder."""
    from seedance.traces.paths import data_file

    return data_file(f"{PRICE_DIR}/{region}_electricity_prices_{year}.csv")


def carbon_path(region: str, year: int = DEFAULT_YEAR) -> Path:
    """Default carbon-intensity file of ``region`` in the shared data folder."""
    from seedance.traces.paths import data_file

    return data_file(f"{CARBON_DIR}/{region}_{year}_hourly.csv")


def known_regions(year: int = DEFAULT_YEAR) -> list[str]:
    """Regions with both a price and a carbon file for ``year`` in the shared data folder."""
    from seedance.traces.paths import data_file

    prices = {p.name[: -len(f"_electricity_prices_{year}.csv")]
              for p in data_file(PRICE_DIR).glob(f"*_electricity_prices_{year}.csv")}
    carbon = {p.name[: -len(f"_{year}_hourly.csv")] for p in data_file(CARBON_DIR).glob(f"*_{year}_hourly.csv")}
    return sorted(prices & carbon)


def resolve_region(region: str, year: int = DEFAULT_YEAR) -> str:
    """Canonical spelling of ``region`` among the known regions (case-insensitive).

    Raises:
        InputError: the region has no price and carbon files; the message lists the known ones.
    """
    known = known_regions(year)
    for name in known:
        if name.lower() == region.strip().lower():
            return name
    hint = ""
    if region.strip().lower().startswith(("us-west", "us-east", "eu-", "ap-")):
        hint = " (cloud region names are not grid zones; US-CAL-CISO is California's grid)"
    raise InputError(
        f"unknown region {region!r}{hint}; known regions with {year} price and carbon data: "
        f"{', '.join(known) or '(none found)'}",
        source="--region",
    )


def _zone(name: str, source: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(f"unknown IANA timezone {name!r}", source=source) from None


def _time_column(header: list[str], src: str) -> int:
    for i, h in enumerate(header):
        if h.strip().lower().split(" ")[0].split("(")[0] in _TIME_NAMES:
            return i
    raise InputError(f"no time column (header has: {', '.join(header)})", source=src, line=1, field="Datetime")


def _header_tz(name: str) -> str | None:
    m = re.search(r"\(([^)]+)\)", name)
    if m and m.group(1).strip().upper() in {"UTC", "GMT", "Z"}:
        return "UTC"
    return None


def _region_of(path: Path) -> str | None:
    stem = path.name
    for region in sorted(NAIVE_PRICE_TIMEZONES, key=len, reverse=True):
        if stem.upper().startswith(region.upper() + "_"):
            return region
    return None


class _UtcMapper:
    """Maps the text timestamps of one file to UTC hour starts (state: ambiguous-hour occurrences)."""

    def __init__(self, zone: ZoneInfo | None, src: str, column: str) -> None:
        self.zone = zone
        self.src = src
        self.column = column
        self.seen: dict[datetime, int] = {}
        self.dropped = 0

    def __call__(self, text: str, line: int) -> int | None:
        try:
            dt = datetime.fromisoformat(text.strip())
        except ValueError:
            raise InputError(f"not a date-time: {text!r}", source=self.src, line=line, field=self.column) from None
        if dt.tzinfo is None:
            if self.zone is None:
                raise InputError(
                    "naive timestamp and no timezone known for this file: pass its IANA timezone "
                    "(e.g. --price-tz Europe/Berlin)", source=self.src, line=line, field=self.column)
            local = self._localize(dt)
            if local is None:
                self.dropped += 1
                return None
            dt = local
        t = dt.timestamp()
        if t % HOUR:
            raise InputError(f"{text!r} is not the start of an hour (hourly data expected)",
                             source=self.src, line=line, field=self.column)
        return int(t)

    def _localize(self, naive: datetime) -> datetime | None:
        zone = self.zone
        assert zone is not None
        first = naive.replace(tzinfo=zone, fold=0)
        second = naive.replace(tzinfo=zone, fold=1)
        # a local time in the spring-forward gap does not round-trip through UTC
        back = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
        if back != naive:
            return None
        if first.utcoffset() != second.utcoffset():  # the repeated autumn hour
            k = self.seen.get(naive, 0)
            self.seen[naive] = k + 1
            return second if k else first
        return first


def _load(path: str | Path, *, kind: str, region: str | None, tz: str | None, column: str,
          max_gap_hours: int) -> HourlySeries:
    p = Path(path)
    src = str(p)
    rows = csv_rows(p)
    first = next(rows, None)
    if first is None or not any(c.strip() for c in first[1]):
        raise InputError("empty file (no header line)", source=src, line=1)
    header = [h.strip() for h in first[1]]
    tcol = _time_column(header, src)
    notes: list[str] = []
    if kind == PRICE:
        vcol, currency, scale, unit = _price_column(header, src)
    else:
        vcol, scale = _carbon_column(header, column, src)
        currency, unit = None, "gCO2eq/kWh"
    zone_name = tz or _header_tz(header[tcol]) or (
        NAIVE_PRICE_TIMEZONES.get(region or _region_of(p) or "") if kind == PRICE else None)
    zone = _zone(zone_name, src) if zone_name else None
    mapper = _UtcMapper(zone, src, header[tcol])
    est_col = next((i for i, h in enumerate(header) if h.lower() == "data estimated"), None)
    times: list[int] = []
    values: list[float] = []
    lines: list[int] = []
    estimated = 0
    width = len(header)
    for line, row in rows:
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != width:
            raise InputError(f"expected {width} fields, found {len(row)}", source=src, line=line)
        raw = row[vcol].strip()
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"not a number: {raw!r}", source=src, line=line, field=header[vcol]) from None
        if not math.isfinite(value):
            raise InputError(f"not a finite number: {raw!r}", source=src, line=line, field=header[vcol])
        if kind == CARBON and value < 0:
            raise InputError(f"carbon intensity must be >= 0, got {raw}", source=src, line=line, field=header[vcol])
        t = mapper(row[tcol], line)
        if t is None:
            continue
        times.append(t)
        values.append(value * scale)
        lines.append(line)
        if est_col is not None and row[est_col].strip().lower() == "true":
            estimated += 1
    if not times:
        raise InputError("no data rows", source=src, line=2)
    t_arr = np.array(times, dtype=np.int64)
    v_arr = np.array(values, dtype=np.float64)
    order = np.argsort(t_arr, kind="stable")
    t_arr, v_arr = t_arr[order], v_arr[order]
    dup = np.flatnonzero(np.diff(t_arr) == 0)
    if len(dup):
        i = int(order[dup[0]])
        j = int(order[dup[0] + 1])
        raise InputError(f"hour {iso(int(t_arr[dup[0]]))} appears twice (also on line {lines[i]})",
                         source=src, line=lines[j], field=header[tcol])
    steps = np.diff(t_arr) // HOUR
    big = np.flatnonzero(steps - 1 > max_gap_hours)
    if len(big):
        k = int(big[0])
        raise InputError(
            f"{int(steps[k]) - 1} hours missing after {iso(int(t_arr[k]))} "
            f"(at most {max_gap_hours} are filled; check the file or raise the gap limit)",
            source=src, line=lines[int(order[k + 1])], field=header[tcol])
    start = int(t_arr[0])
    grid = start + HOUR * np.arange((int(t_arr[-1]) - start) // HOUR + 1, dtype=np.int64)
    filled = len(grid) - len(t_arr)
    full = np.interp(grid.astype(np.float64), t_arr.astype(np.float64), v_arr) if filled else v_arr
    if zone_name:
        notes.append(f"naive timestamps read as {zone_name}")
    if mapper.dropped:
        notes.append(f"{mapper.dropped} row(s) with non-existent local times (DST gap) dropped")
    if filled:
        notes.append(f"{filled} missing hour(s) filled by linear interpolation")
    if estimated:
        notes.append(f"{estimated} row(s) flagged estimated by the source")
    name = region or _region_of(p) or _zone_id(p) or p.stem
    return HourlySeries(kind=kind, region=name, start=start, values=np.ascontiguousarray(full), unit=unit,
                        currency=currency, source=src, filled_hours=filled, dropped_rows=mapper.dropped,
                        notes=tuple(notes))


def _zone_id(p: Path) -> str | None:
    m = re.match(r"(.+?)_\d{4}_hourly\.csv$", p.name)
    return m.group(1) if m else None


def _price_column(header: list[str], src: str) -> tuple[int, str, float, str]:
    for i, h in enumerate(header):
        m = _PRICE_HEADER.search(h)
        if m and "price" in h.lower():
            cur = m.group(1).upper()
            return i, cur, _PER_MWH[m.group(2)], f"{cur}/MWh"
    raise InputError(
        f"no price column with a currency and unit such as 'Price (EUR/MWh)' (header has: {', '.join(header)})",
        source=src, line=1, field="Price")


def _carbon_column(header: list[str], column: str, src: str) -> tuple[int, float]:
    want = column.strip().lower()
    if want not in {"direct", "lca"}:
        raise InputError(f"carbon column must be 'direct' or 'lca', got {column!r}", source="--carbon-column")
    for i, h in enumerate(header):
        low = h.lower()
        if "carbon intensity" in low and f"({want})" in low:
            m = _CARBON_UNIT.search(h)
            if m is None:
                raise InputError(f"no unit such as gCO2eq/kWh in {h!r}", source=src, line=1, field=h)
            grams = 1000.0 if m.group(1).lower() == "kg" else 1.0
            per = {"": 1000.0, "k": 1.0, "m": 1e-3}[m.group(2).lower()]  # → per kWh
            return i, grams * per
    raise InputError(
        f"no 'Carbon Intensity gCO2eq/kWh ({want})' column (header has: {', '.join(header)})",
        source=src, line=1, field=f"Carbon Intensity ({want})")


def load_price_file(path: str | Path, *, region: str | None = None, tz: str | None = None,
                    max_gap_hours: int = 3) -> HourlySeries:
    """Load an hourly price file (see the module docstring) as a UTC series in currency/MWh.

    Args:
        path: The CSV file.
        region: Region code; names the series and picks the documented timezone of naive times
            (default: inferred from the file name).
        tz: IANA timezone of naive timestamps; overrides the header and the region default.
        max_gap_hours: Longest run of missing hours that is filled by interpolation.

    Raises:
        InputError: unreadable or malformed file, unknown timezone, duplicates, long gaps.
    """
    return _load(path, kind=PRICE, region=region, tz=tz, column="", max_gap_hours=max_gap_hours)


def load_carbon_file(path: str | Path, *, region: str | None = None, column: str = "direct",
                     tz: str | None = None, max_gap_hours: int = 3) -> HourlySeries:
    """Load an Electricity Maps hourly CSV as a UTC series in gCO2eq/kWh.

    Args:
        path: The CSV file.
        region: Zone code naming the series (default: from the file name).
        column: ``"direct"`` (operational, location-based) or ``"lca"`` (life-cycle).
        tz: IANA timezone of naive timestamps (default: UTC, as the header says).
        max_gap_hours: Longest run of missing hours that is filled by interpolation.

    Raises:
        InputError: unreadable or malformed file, negative intensities, duplicates, long gaps.
    """
    return _load(path, kind=CARBON, region=region, tz=tz, column=column, max_gap_hours=max_gap_hours)


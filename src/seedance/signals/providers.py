"""Signal providers: where a region's hourly price and carbon series come from.

A provider is registered by name in :data:`SIGNAL_PROVIDERS` and answers
``series(kind, region, start, end)`` with an :class:`HourlySeries` in canonical units. The cost
model never knows which provider it talks to.

* ``files``: the CSV formats of ``../shared/data`` (any file of those formats, see
  :mod:`seedance.signals.files`); paths default by region.
* ``electricitymaps-api``: an Electricity Maps shaped HTTP API (``/v3/carbon-intensity/past-range``,
  JSON ``{"zone", "data": [{"datetime", "carbonIntensity"}]}``); carbon only.
* ``watttime-api``: a WattTime v3 shaped API (``/v3/historical``, JSON ``{"data": [{"point_time",
  "value"}], "meta": {"units": "lbs_co2_per_mwh"}}``); carbon only.

The HTTP providers use only the standard library and take the base URL and token as arguments,
so a test (or an on-premises mirror) serves the same JSON from anywhere.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.signals.files import (
    DEFAULT_YEAR,
    carbon_path,
    load_carbon_file,
    load_price_file,
    price_path,
    resolve_region,
)
from seedance.signals.series import CARBON, HOUR, PRICE, HourlySeries, iso

LBS_PER_MWH_TO_G_PER_KWH = 0.45359237  # 1 lb = 453.59237 g; per MWh → per kWh divides by 1000


class SignalProvider(ABC):
    """Supplies hourly series of one or more signal kinds.

    ``series`` is called when a policy is enabled, described or evaluated (not per job): the
    caller keeps the returned series and integrates it per job.
    """

    name: ClassVar[str]
    kinds: ClassVar[frozenset[str]]

    @abstractmethod
    def series(self, kind: str, region: str, start: float | None = None, end: float | None = None) -> HourlySeries:
        """The ``kind`` series of ``region``, covering at least ``[start, end)`` when given."""

    def _check_kind(self, kind: str) -> None:
        if kind not in self.kinds:
            raise InputError(
                f"provider {self.name!r} has no {kind} signal (it serves: {', '.join(sorted(self.kinds))})",
                source="signals")


SIGNAL_PROVIDERS: Registry[type[SignalProvider]] = Registry("signal provider")


@SIGNAL_PROVIDERS.register("files", aliases=("csv",))
class FileProvider(SignalProvider):
    """Prices and carbon from CSV files; paths default to the shared data folder by region.

    Args:
        prices: Price file (default: ``electricity-prices/<REGION>_electricity_prices_<year>.csv``).
        carbon: Carbon file (default: ``carbon-intensity-electricitymaps/<REGION>_<year>_hourly.csv``).
        year: Year of the default files.
        price_tz: IANA timezone of naive price timestamps (default: the region's documented one).
        carbon_tz: IANA timezone of naive carbon timestamps (default: UTC per the header).
        carbon_column: ``direct`` or ``lca``.
    """

    name = "files"
    kinds = frozenset({PRICE, CARBON})

    def __init__(self, prices: str | Path | None = None, carbon: str | Path | None = None, *,
                 year: int = DEFAULT_YEAR, price_tz: str | None = None, carbon_tz: str | None = None,
                 carbon_column: str = "direct") -> None:
        self.prices = Path(prices) if prices else None
        self.carbon = Path(carbon) if carbon else None
        self.year = year
        self.price_tz = price_tz
        self.carbon_tz = carbon_tz
        self.carbon_column = carbon_column

    def series(self, kind: str, region: str, start: float | None = None, end: float | None = None) -> HourlySeries:
        self._check_kind(kind)
        if kind == PRICE:
            path = self.prices
            if path is None:
                region = resolve_region(region, self.year)
                path = price_path(region, self.year)
            s = load_price_file(path, region=region, tz=self.price_tz)
        else:
            path = self.carbon
            if path is None:
                region = resolve_region(region, self.year)
                path = carbon_path(region, self.year)
            s = load_carbon_file(path, region=region, column=self.carbon_column, tz=self.carbon_tz)
        _check_cover(s, start, end)
        return s


def _check_cover(s: HourlySeries, start: float | None, end: float | None) -> None:
    lo = s.start if start is None else start
    hi = s.end if end is None else end
    if not s.covers(lo, hi):
        raise InputError(f"{s.kind} series covers {iso(s.start)} .. {iso(s.end)}, "
                         f"not the requested {iso(lo)} .. {iso(hi)}", source=s.source)


def _points_to_series(points: Sequence[tuple[float, float]], *, kind: str, region: str, unit: str,
                      currency: str | None, source: str, max_gap_hours: int = 3) -> HourlySeries:
    """Hourly series from (epoch seconds, value) points (sorted or not); interpolates short gaps."""
    if not points:
        raise InputError("the API returned no data points", source=source)
    arr = np.array(sorted(points), dtype=np.float64)
    t = arr[:, 0]
    if np.any(t % HOUR):
        raise InputError("the API returned points that are not hour starts", source=source)
    if np.any(np.diff(t) == 0):
        raise InputError("the API returned the same hour twice", source=source)
    if np.any(np.diff(t) > HOUR * (max_gap_hours + 1)):
        raise InputError(f"the API returned gaps of more than {max_gap_hours} hours", source=source)
    grid = np.arange(t[0], t[-1] + 1, HOUR)
    vals = np.interp(grid, t, arr[:, 1])
    return HourlySeries(kind=kind, region=region, start=int(t[0]), values=vals, unit=unit, currency=currency,
                        source=source, filled_hours=len(grid) - len(t))


@dataclass(frozen=True, slots=True)
class HttpJson:
    """A tiny JSON-over-HTTP GET client (standard library only)."""

    base_url: str
    headers: Mapping[str, str]
    timeout_s: float = 30.0

    def get(self, path: str, params: Mapping[str, str]) -> Any:
        url = f"{self.base_url.rstrip('/')}/{path.lstrip('/')}?{urllib.parse.urlencode(params)}"
        req = urllib.request.Request(url, headers=dict(self.headers))
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            raise InputError(f"HTTP {exc.code} from the signal API", source=url) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise InputError(f"signal API unreachable: {getattr(exc, 'reason', exc)}", source=url) from None
        try:
            return json.loads(body)
        except ValueError:
            raise InputError("signal API answered with something that is not JSON", source=url) from None


def _iso_z(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(text: Any, source: str) -> float:
    try:
        dt = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"bad timestamp {text!r} in API answer", source=source) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


@SIGNAL_PROVIDERS.register("electricitymaps-api", aliases=("electricitymaps",))
class ElectricityMapsApi(SignalProvider):
    """Carbon intensity from an Electricity Maps shaped API (``auth-token`` header).

    Args:
        base_url: API root, e.g. ``https://api.electricitymap.org``.
        token: API token (sent as the ``auth-token`` header).
        lifecycle: Ask for life-cycle (``emissionFactorType=lifecycle``) instead of direct values.
    """

    name = "electricitymaps-api"
    kinds = frozenset({CARBON})

    def __init__(self, base_url: str, token: str = "", *, lifecycle: bool = False, timeout_s: float = 30.0) -> None:
        self.http = HttpJson(base_url, {"auth-token": token} if token else {}, timeout_s)
        self.lifecycle = lifecycle

    def series(self, kind: str, region: str, start: float | None = None, end: float | None = None) -> HourlySeries:
        self._check_kind(kind)
        if start is None or end is None:
            raise InputError("the Electricity Maps API needs a start and an end", source=self.name)
        params = {"zone": region, "start": _iso_z(start), "end": _iso_z(end),
                  "emissionFactorType": "lifecycle" if self.lifecycle else "direct"}
        body = self.http.get("/v3/carbon-intensity/past-range", params)
        src = f"{self.http.base_url} (electricitymaps, zone {region})"
        rows = body.get("data", body.get("history")) if isinstance(body, dict) else None
        if not isinstance(rows, list):
            raise InputError("answer has no 'data' list", source=src)
        pts: list[tuple[float, float]] = []
        for i, r in enumerate(rows):
            try:
                v = float(r["carbonIntensity"])
            except (KeyError, TypeError, ValueError):
                raise InputError(f"item {i} has no numeric carbonIntensity", source=src,
                                 field="carbonIntensity") from None
            pts.append((_epoch(r.get("datetime"), src), v))
        s = _points_to_series(pts, kind=CARBON, region=region, unit="gCO2eq/kWh", currency=None, source=src)
        _check_cover(s, start, end)
        return s


@SIGNAL_PROVIDERS.register("watttime-api", aliases=("watttime",))
class WattTimeApi(SignalProvider):
    """Marginal carbon intensity from a WattTime v3 shaped API (bearer token).

    The answer's ``meta.units`` must be ``lbs_co2_per_mwh`` (converted to gCO2/kWh) or
    ``g_co2_per_kwh``. Five-minute points are averaged into hours.
    """

    name = "watttime-api"
    kinds = frozenset({CARBON})

    def __init__(self, base_url: str, token: str = "", *, signal_type: str = "co2_moer",
                 timeout_s: float = 30.0) -> None:
        self.http = HttpJson(base_url, {"Authorization": f"Bearer {token}"} if token else {}, timeout_s)
        self.signal_type = signal_type

    def series(self, kind: str, region: str, start: float | None = None, end: float | None = None) -> HourlySeries:
        self._check_kind(kind)
        if start is None or end is None:
            raise InputError("the WattTime API needs a start and an end", source=self.name)
        body = self.http.get("/v3/historical", {"region": region, "start": _iso_z(start), "end": _iso_z(end),
                                                "signal_type": self.signal_type})
        src = f"{self.http.base_url} (watttime, region {region})"
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise InputError("answer has no 'data' list", source=src)
        units = str((body.get("meta") or {}).get("units", "")).lower()
        scale = {"lbs_co2_per_mwh": LBS_PER_MWH_TO_G_PER_KWH, "g_co2_per_kwh": 1.0}.get(units)
        if scale is None:
            raise InputError(f"unsupported units {units!r} (expected lbs_co2_per_mwh or g_co2_per_kwh)",
                             source=src, field="meta.units")
        sums: dict[float, list[float]] = {}
        for i, r in enumerate(body["data"]):
            try:
                v = float(r["value"])
            except (KeyError, TypeError, ValueError):
                raise InputError(f"item {i} has no numeric value", source=src, field="value") from None
            t = _epoch(r.get("point_time"), src)
            sums.setdefault(t - t % HOUR, []).append(v * scale)
        pts = [(t, float(np.mean(v))) for t, v in sums.items()]
        s = _points_to_series(pts, kind=CARBON, region=region, unit="gCO2eq/kWh", currency=None, source=src)
        _check_cover(s, start, end)
        return s


@dataclass(frozen=True, slots=True)
class RegionSignals:
    """The two aligned series of one region over their common hours.

    Attributes:
        region: Region code.
        price: Price series (currency/MWh), full length (history before ``start`` included).
        carbon: Carbon series (gCO2eq/kWh), full length.
        start, end: The common UTC span of both series (epoch seconds).
    """

    region: str
    price: HourlySeries
    carbon: HourlySeries
    start: int
    end: int

    @property
    def currency(self) -> str:
        """Currency of the prices."""
        return self.price.currency or "?"


def region_signals(region: str, *, price_provider: SignalProvider | None = None,
                   carbon_provider: SignalProvider | None = None, start: float | None = None,
                   end: float | None = None) -> RegionSignals:
    """Load both series of ``region`` and check that they overlap.

    Raises:
        InputError: no common hours, or a provider lacks the signal.
    """
    pp = price_provider or FileProvider()
    cp = carbon_provider or pp
    price = pp.series(PRICE, region, start, end)
    carbon = cp.series(CARBON, region, start, end)
    lo = max(price.start, carbon.start)
    hi = min(price.end, carbon.end)
    if hi <= lo:
        raise InputError(f"price ({iso(price.start)} .. {iso(price.end)}) and carbon ({iso(carbon.start)} .. "
                         f"{iso(carbon.end)}) series do not overlap", source=price.source)
    return RegionSignals(region=price.region, price=price, carbon=carbon, start=lo, end=hi)

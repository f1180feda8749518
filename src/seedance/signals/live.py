"""Live signals for the control plane: published day-ahead prices and carbon, now and ahead.

Two API formats, read over HTTP with the standard library (tests serve recorded answers from a
local server):

* ISO style, CAISO OASIS: ``GET {base}/oasisapi/SingleZip?queryname=PRC_LMP&market_run_id=DAM&
  version=12&resultformat=6&node=NODE&startdatetime=YYYYMMDDTHH:MM-0000&enddatetime=...``. The
  answer is a ZIP holding one CSV (``INTERVALSTARTTIME_GMT, ..., LMP_TYPE, ..., MW, ...``; the
  ``LMP_TYPE == "LMP"`` rows are the day-ahead prices in USD/MWh, one per hour) or, on a bad
  request, an XML file with ``ERR_CODE`` / ``ERR_DESC``. Requests are split into 31-day pieces
  (OASIS's limit).
* Electricity Maps v3 style: ``/v3/carbon-intensity/past-range`` (history, see
  :class:`~seedance.signals.providers.ElectricityMapsApi`) and ``/v3/carbon-intensity/forecast``
  (``{"zone", "forecast": [{"datetime", "carbonIntensity"}]}``; a paid feature: a 401/403 or an
  empty answer falls back to a forecast from the history).

:class:`LiveSignalProvider` assembles :class:`~seedance.costmodel.score.Signals` for ``[now,
now + horizon)``: the published prices as they are, the forecaster (past data only) for hours not
yet published; the carbon forecast where the API gives one, the forecaster beyond. Each answer
says which hours are published, forecast by the API, or forecast by Seedance.
"""

from __future__ import annotations

import csv
import io
import re
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.signals.providers import ElectricityMapsApi, HttpJson, _epoch, _points_to_series
from seedance.signals.series import CARBON, HOUR, PRICE, HourlySeries, iso

OASIS_MAX_DAYS = 31


def _oasis_time(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y%m%dT%H:%M-0000")


@dataclass(frozen=True, slots=True)
class CaisoOasisPrices:
    """Day-ahead LMPs of one node from a CAISO OASIS shaped API (``SingleZip``, CSV result format).

    Args:
        base_url: API root (``http://oasis.caiso.com`` or a mirror); ``/oasisapi/SingleZip`` is appended.
        node: Pricing node, e.g. ``TH_NP15_GEN-APND`` (the node of the shared 2023 CAISO file).
        timeout_s: HTTP timeout.
    """

    base_url: str
    node: str = "TH_NP15_GEN-APND"
    timeout_s: float = 30.0

    def fetch(self, start: float, end: float) -> HourlySeries:
        """Published day-ahead prices over ``[start, end)`` (only the hours the market has published)."""
        pts: list[tuple[float, float]] = []
        a = start
        while a < end:
            b = min(end, a + OASIS_MAX_DAYS * 86400)
            pts.extend(self._fetch_piece(a, b))
            a = b
        src = f"{self.base_url} (CAISO OASIS PRC_LMP DAM, node {self.node})"
        if not pts:
            raise InputError("OASIS returned no day-ahead prices for the requested hours", source=src)
        return _points_to_series(pts, kind=PRICE, region="US-CAL-CISO", unit="USD/MWh", currency="USD", source=src,
                                 max_gap_hours=0)

    def _fetch_piece(self, a: float, b: float) -> list[tuple[float, float]]:
        params = {"queryname": "PRC_LMP", "market_run_id": "DAM", "version": "12", "resultformat": "6",
                  "node": self.node, "startdatetime": _oasis_time(a), "enddatetime": _oasis_time(b)}
        url = f"{self.base_url.rstrip('/')}/oasisapi/SingleZip?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            raise InputError(f"HTTP {exc.code} from OASIS", source=url) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise InputError(f"OASIS unreachable: {getattr(exc, 'reason', exc)}", source=url) from None
        return parse_oasis_zip(body, source=url, node=self.node)


def parse_oasis_zip(body: bytes, *, source: str, node: str | None = None) -> list[tuple[float, float]]:
    """``(hour start, USD/MWh)`` of the ``LMP`` rows of an OASIS ``SingleZip`` answer.

    Raises:
        InputError: not a ZIP, an OASIS error document, a CSV without the expected columns or with
            a bad row (line and column named).
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(body))
    except zipfile.BadZipFile:
        raise InputError("OASIS answered with something that is not a ZIP archive", source=source) from None
    names = zf.namelist()
    if not names:
        raise InputError("OASIS answered with an empty ZIP archive", source=source)
    member = names[0]
    text = zf.read(member).decode("utf-8", errors="replace")
    if member.lower().endswith(".xml") or text.lstrip().startswith("<"):
        code = re.search(r"<(?:\w+:)?ERR_CODE>([^<]*)<", text)
        desc = re.search(r"<(?:\w+:)?ERR_DESC>([^<]*)<", text)
        raise InputError(f"OASIS error {code.group(1) if code else '?'}: {desc.group(1) if desc else text[:120]}",
                         source=f"{source} ({member})")
    reader = csv.DictReader(io.StringIO(text))
    need = ("INTERVALSTARTTIME_GMT", "LMP_TYPE", "MW")
    missing = [c for c in need if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", source=f"{source} ({member})", line=1,
                         field=missing[0])
    out = []
    for n, row in enumerate(reader, start=2):
        if row["LMP_TYPE"].strip() != "LMP":
            continue
        if node and row.get("NODE") and row["NODE"].strip() not in (node, ""):
            continue
        try:
            t = _epoch(row["INTERVALSTARTTIME_GMT"].strip().replace("-00:00", "+00:00"), source)
        except InputError:
            raise InputError(f"bad timestamp {row['INTERVALSTARTTIME_GMT']!r}", source=f"{source} ({member})", line=n,
                             field="INTERVALSTARTTIME_GMT") from None
        try:
            v = float(row["MW"])
        except ValueError:
            raise InputError(f"not a number: {row['MW']!r}", source=f"{source} ({member})", line=n,
                             field="MW") from None
        out.append((t, v))
    return out


@dataclass(frozen=True, slots=True)
class ElectricityMapsLive:
    """Carbon intensity history and forecast from an Electricity Maps v3 shaped API."""

    base_url: str
    token: str = ""
    lifecycle: bool = False
    timeout_s: float = 30.0

    def history(self, zone: str, start: float, end: float) -> HourlySeries:
        """Hourly intensity over ``[start, end)`` (``/v3/carbon-intensity/past-range``)."""
        return ElectricityMapsApi(self.base_url, self.token, lifecycle=self.lifecycle,
                                  timeout_s=self.timeout_s).series(CARBON, zone, start, end)

    def forecast(self, zone: str, horizon_hours: int) -> HourlySeries | None:
        """The API's forecast (``/v3/carbon-intensity/forecast``); ``None`` when the plan has none (401/403/404)."""
        http = HttpJson(self.base_url, {"auth-token": self.token} if self.token else {}, self.timeout_s)
        try:
            body = http.get("/v3/carbon-intensity/forecast", {"zone": zone, "horizonHours": str(horizon_hours)})
        except InputError as exc:
            if re.match(r"HTTP (401|403|404)", exc.message):
                return None
            raise
        src = f"{self.base_url} (electricitymaps forecast, zone {zone})"
        rows = body.get("forecast") if isinstance(body, dict) else None
        if not isinstance(rows, list):
            raise InputError("answer has no 'forecast' list", source=src, field="forecast")
        if not rows:
            return None
        pts = []
        for i, r in enumerate(rows):
            try:
                v = float(r["carbonIntensity"])
            except (KeyError, TypeError, ValueError):
                raise InputError(f"item {i} has no numeric carbonIntensity", source=src,
                                 field="carbonIntensity") from None
            pts.append((_epoch(r.get("datetime"), src), v))
        return _points_to_series(pts, kind=CARBON, region=zone, unit="gCO2eq/kWh", currency=None, source=src)


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    """Signals for ``[now, now + horizon)`` and where each hour comes from.

    Attributes:
        signals: The planning signals (``seedance.costmodel.score.Signals``).
        price_published_until: First hour whose price is not published (epoch seconds).
        carbon_api_until: First hour the carbon API gave no forecast for.
        notes: What was fetched and what was forecast.
    """

    signals: Any
    price_published_until: float
    carbon_api_until: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary."""
        s = self.signals
        return {"start": iso(s.start), "end": iso(s.end), "currency": s.currency,
                "price_published_until": iso(self.price_published_until),
                "carbon_api_until": iso(self.carbon_api_until), "notes": list(self.notes),
                "price": s.price.tolist(), "carbon": s.carbon.tolist()}


@dataclass(slots=True)
class LiveSignalProvider:
    """Published prices plus carbon, forecast where unknown, for the live deferral decision.

    Args:
        prices: A day-ahead price API (e.g. :class:`CaisoOasisPrices`).
        carbon: A carbon API (e.g. :class:`ElectricityMapsLive`).
        zone: Carbon zone (Electricity Maps) of the prices' region.
        history_days: Days of history fetched for the forecasters.
        forecaster: Past-only forecaster for unpublished prices and missing carbon.
    """

    prices: CaisoOasisPrices
    carbon: ElectricityMapsLive
    zone: str = "US-CAL-CISO"
    history_days: int = 14
    forecaster: str = "seasonal-naive"
    options: Mapping[str, Any] = field(default_factory=dict)

    def snapshot(self, now: float, horizon_hours: int = 48) -> LiveSnapshot:
        """Signals from the hour of ``now`` for ``horizon_hours``."""
        from seedance.costmodel.score import Signals
        from seedance.signals.forecast import make_forecaster

        t0 = int(now // HOUR * HOUR)
        t1 = t0 + horizon_hours * HOUR
        hist0 = t0 - self.history_days * 86400
        notes = []
        price = self.prices.fetch(hist0, t1)  # OASIS returns only what is published
        pub_until = float(price.end)
        notes.append(f"prices: {price.source}, published through {iso(pub_until)}")
        p = self._extend(price, t0, t1, make_forecaster(self.forecaster, **dict(self.options)))
        carbon_hist = self.carbon.history(self.zone, hist0, t0)
        fc = self.carbon.forecast(self.zone, horizon_hours)
        c_api_until = float(t0)
        if fc is not None and fc.start <= t0 < fc.end:
            merged = np.concatenate([carbon_hist.values, fc.values[(t0 - fc.start) // HOUR:]])
            carbon = HourlySeries(kind=CARBON, region=self.zone, start=carbon_hist.start, values=merged,
                                  unit="gCO2eq/kWh", currency=None, source=f"{carbon_hist.source} + {fc.source}")
            c_api_until = float(fc.end)
            notes.append(f"carbon: API forecast through {iso(fc.end)}")
        else:
            carbon = carbon_hist
            notes.append("carbon: no API forecast (plan without forecasts); forecast from the history")
        c = self._extend(carbon, t0, t1, make_forecaster(self.forecaster, **dict(self.options)))
        sig = Signals(t0, p, c, price.currency or "USD", f"live at {iso(now)}")
        return LiveSnapshot(sig, pub_until, max(c_api_until, float(t0)), tuple(notes))

    @staticmethod
    def _extend(series: HourlySeries, t0: int, t1: int, forecaster: Any) -> np.ndarray:
        """Values over ``[t0, t1)``: the series where it has them, the forecaster (issued at its end) beyond."""
        hours = (t1 - t0) // HOUR
        out = np.full(hours, np.nan)
        have_until = min(series.end, t1)
        if have_until > t0:
            a = (t0 - series.start) // HOUR
            b = (have_until - series.start) // HOUR
            out[: b - a] = series.values[a:b]
        if have_until < t1:
            issue = len(series.values)
            lead_needed = (t1 - series.end) // HOUR
            fm = forecaster.forecast(series, np.array([issue], dtype=np.int64), max(1, int(lead_needed)))
            vals = fm.point[0]
            first = max(0, (series.end - t0) // HOUR)
            skip = max(0, (t0 - series.end) // HOUR)
            out[first:] = vals[skip:skip + hours - first]
        if np.isnan(out).any():
            raise InputError(f"{series.kind}: not enough history to forecast the unknown hours", source=series.source)
        return out

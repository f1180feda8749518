"""Live signals over real HTTP: a CAISO-OASIS-shaped and an Electricity-Maps-shaped API, and the deferral decision.

The server answers in the documented formats (OASIS ``SingleZip``: a ZIP holding the PRC_LMP CSV
with the 16 published columns, ``LMP_TYPE`` rows LMP/MCE/MCC/MCL; Electricity Maps v3 JSON) with
the 2023 values of the shared data files: there is no network here to record live answers, so
the recorded answers are rebuilt from the same market data the files hold.
"""

from __future__ import annotations

import io
import json
import threading
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from seedance.core.errors import InputError
from seedance.costmodel.live_deferral import decide_deferral
from seedance.costmodel.policy import CostPolicy
from seedance.costmodel.score import JobFeatures
from seedance.signals.files import load_carbon_file, load_price_file
from seedance.signals.live import CaisoOasisPrices, ElectricityMapsLive, LiveSignalProvider, parse_oasis_zip
from seedance.signals.series import HOUR, iso, parse_utc

HEADER = ("INTERVALSTARTTIME_GMT,INTERVALENDTIME_GMT,OPR_DT,OPR_HR,OPR_INTERVAL,NODE_ID_XML,NODE_ID,NODE,"
          "MARKET_RUN_ID,LMP_TYPE,XML_DATA_ITEM,PNODE_RESMRID,GRP_TYPE,POS,MW,GROUP")
NOW = parse_utc("2023-07-18T15:30:00Z")  # 08:30 in California: prices published through the end of today (PDT)


class State:
    price: Any = None
    carbon: Any = None
    published_until: float = 0.0
    forecast_status: int = 200
    oasis_error: bool = False
    calls: list[str] = []


def _oasis_zip(start: float, end: float) -> bytes:
    s = State.price
    lines = [HEADER]
    t = max(start, s.start)
    while t < min(end, State.published_until, s.end):
        v = float(s.values[(int(t) - s.start) // HOUR])
        a = datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S-00:00")
        b = datetime.fromtimestamp(t + HOUR, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S-00:00")
        for kind, item, val in (("LMP", "LMP_PRC", v), ("MCE", "LMP_ENE_PRC", v - 1.0), ("MCC", "LMP_CONG_PRC", 0.5),
                                ("MCL", "LMP_LOSS_PRC", 0.5)):
            lines.append(f"{a},{b},2023-07-18,1,0,TH_NP15_GEN-APND,TH_NP15_GEN-APND,TH_NP15_GEN-APND,DAM,{kind},"
                         f"{item},TH_NP15_GEN-APND,ALL,1,{val:.5f},1")
        t += HOUR
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        if State.oasis_error:
            zf.writestr("INVALID_REQUEST.xml", "<m:OASISReport><m:ERR_CODE>1002</m:ERR_CODE>"
                        "<m:ERR_DESC>No data returned for the specified selection</m:ERR_DESC></m:OASISReport>")
        else:
            zf.writestr("20230718_PRC_LMP_DAM_LMP_v12.csv", "\n".join(lines) + "\n")
    return buf.getvalue()


def _oasis_t(text: str) -> float:
    return datetime.strptime(text, "%Y%m%dT%H:%M-0000").replace(tzinfo=UTC).timestamp()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        url = urlparse(self.path)
        q = parse_qs(url.query)
        State.calls.append(url.path)
        status, ctype, raw = 404, "application/json", b'{"error": "no route"}'
        if url.path == "/oasisapi/SingleZip":
            assert q["queryname"] == ["PRC_LMP"] and q["market_run_id"] == ["DAM"] and q["resultformat"] == ["6"]
            assert q["node"] == ["TH_NP15_GEN-APND"]
            status, ctype = 200, "application/x-zip-compressed"
            raw = _oasis_zip(_oasis_t(q["startdatetime"][0]), _oasis_t(q["enddatetime"][0]))
        elif url.path == "/v3/carbon-intensity/past-range":
            c = State.carbon
            a, b = parse_utc(q["start"][0]), parse_utc(q["end"][0])
            rows = [{"datetime": iso(t), "carbonIntensity": float(c.values[(int(t) - c.start) // HOUR])}
                    for t in np.arange(a, b, HOUR)]
            status, raw = 200, json.dumps({"zone": q["zone"][0], "data": rows}).encode()
        elif url.path == "/v3/carbon-intensity/forecast":
            c = State.carbon
            t0 = int(NOW // HOUR * HOUR)
            rows = [{"datetime": iso(t), "carbonIntensity": float(c.values[(int(t) - c.start) // HOUR]) + 5.0}
                    for t in range(t0, t0 + 24 * HOUR, HOUR)]
            status = State.forecast_status
            raw = json.dumps({"zone": q["zone"][0], "forecast": rows} if status == 200 else {"error": "plan"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def api(shared_data: Path) -> Iterator[str]:
    State.price = load_price_file(shared_data / "electricity-prices" / "US-CAL-CISO_electricity_prices_2023.csv",
                                  region="US-CAL-CISO")
    State.carbon = load_carbon_file(shared_data / "carbon-intensity-electricitymaps" / "US-CAL-CISO_2023_hourly.csv",
                                    region="US-CAL-CISO")
    # day-ahead prices for delivery day 2023-07-18 (PDT) were published on 07-17: known through 07-19 07:00Z
    State.published_until = parse_utc("2023-07-19T07:00:00Z")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _reset() -> None:
    State.forecast_status = 200
    State.oasis_error = False
    State.calls = []


def provider(api: str) -> LiveSignalProvider:
    return LiveSignalProvider(CaisoOasisPrices(api), ElectricityMapsLive(api, "token"), zone="US-CAL-CISO")


def test_snapshot_uses_published_prices_as_they_are_and_forecasts_only_the_rest(api: str) -> None:
    snap = provider(api).snapshot(NOW, horizon_hours=48)
    s = snap.signals
    t0 = int(NOW // HOUR * HOUR)
    assert s.start == t0 and len(s.price) == 48 and s.currency == "USD"
    pub = int((snap.price_published_until - t0) // HOUR)
    assert snap.price_published_until == State.published_until and pub == 16
    truth = State.price.values[(t0 - State.price.start) // HOUR:][:48]
    np.testing.assert_allclose(s.price[:pub], truth[:pub])  # the LMP rows, not MCE/MCC/MCL
    # beyond: seasonal naive issued where publication ends = the same hour of the last published day
    i_pub = (int(State.published_until) - State.price.start) // HOUR
    np.testing.assert_allclose(s.price[pub:pub + 24], State.price.values[i_pub - 24:i_pub])
    # carbon: the API's forecast for 24 h (+5 g in the fixture), the forecaster beyond it
    ctruth = State.carbon.values[(t0 - State.carbon.start) // HOUR:][:48]
    np.testing.assert_allclose(s.carbon[:24], ctruth[:24] + 5.0)
    assert snap.carbon_api_until == t0 + 24 * HOUR
    assert {"/oasisapi/SingleZip", "/v3/carbon-intensity/past-range", "/v3/carbon-intensity/forecast"} <= set(
        State.calls)
    assert json.loads(json.dumps(snap.to_json()))["price_published_until"] == "2023-07-19T07:00:00Z"


def test_without_an_api_forecast_carbon_is_forecast_from_the_history(api: str) -> None:
    State.forecast_status = 401  # the free plan has no forecasts
    snap = provider(api).snapshot(NOW, horizon_hours=24)
    t0 = int(NOW // HOUR * HOUR)
    hist = State.carbon.values[(t0 - State.carbon.start) // HOUR - 24:(t0 - State.carbon.start) // HOUR]
    np.testing.assert_allclose(snap.signals.carbon, hist)  # same hour yesterday
    assert snap.carbon_api_until == t0 and any("no API forecast" in n for n in snap.notes)


def test_oasis_errors_are_input_errors(api: str) -> None:
    State.oasis_error = True
    with pytest.raises(InputError, match="OASIS error 1002: No data returned"):
        CaisoOasisPrices(api).fetch(NOW - 86400, NOW)
    with pytest.raises(InputError, match="not a ZIP"):
        parse_oasis_zip(b"<html>maintenance</html>", source="oasis")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("x.csv", "INTERVALSTARTTIME_GMT,LMP_TYPE,MW\n2023-07-18T08:00:00-00:00,LMP,abc\n")
    with pytest.raises(InputError, match=r"oasis \(x.csv\):2: field MW: not a number"):
        parse_oasis_zip(buf.getvalue(), source="oasis")
    with pytest.raises(InputError, match="HTTP 404"):
        CaisoOasisPrices(api + "/nowhere").fetch(NOW - 86400, NOW)


def test_the_deferral_decision_moves_a_flexible_job_into_its_window_and_keeps_gold_jobs_now(api: str) -> None:
    snap = provider(api).snapshot(NOW, horizon_hours=48)
    weights = CostPolicy().weights("USD")
    job = JobFeatures(duration_s=3 * HOUR, gpu_model="A100-80GB", gpus=8, deadline=NOW + 30 * HOUR, tier="bronze",
                      flexible=True, submitted=NOW)
    d = decide_deferral(job, snap.signals, NOW, weights)
    assert d.defer and d.start >= (NOW // HOUR + 1) * HOUR and d.end == d.start + 3 * HOUR
    assert d.end <= job.deadline and d.saving > 0
    # the window is the exact best score over every allowed start (checked on a 5-minute grid)
    from seedance.costmodel.score import window_costs

    power = weights.energy.job_power_kw("A100-80GB", 8.0)
    grid = np.arange(NOW, min(NOW + 24 * HOUR, job.deadline - 3 * HOUR) + 1, 300.0)
    scores = window_costs(grid, 3 * HOUR, power, 8.0, NOW, snap.signals, weights).score
    at = window_costs(np.array([d.start, NOW]), 3 * HOUR, power, 8.0, NOW, snap.signals, weights).score
    assert at[0] <= scores.min() + 1e-9 and d.saving == pytest.approx(at[1] - at[0])
    assert d.co2_window_kg < d.co2_now_kg  # here the window is cleaner, though 1.5 % dearer in energy
    assert d.reason.startswith("deferred") and "live at 2023-07-18T15:30:00Z" in d.reason
    gold = JobFeatures(duration_s=3 * HOUR, gpu_model="A100-80GB", gpus=8, deadline=NOW + 30 * HOUR, tier="gold",
                       flexible=True, submitted=NOW)
    g = decide_deferral(gold, snap.signals, NOW, weights)
    assert not g.defer and g.start == NOW and "tier 'gold' is not deferrable" in g.reason
    rigid = JobFeatures(duration_s=3 * HOUR, gpu_model="A100-80GB", gpus=8, deadline=NOW + 30 * HOUR, tier="bronze",
                        flexible=False, submitted=NOW)
    assert decide_deferral(rigid, snap.signals, NOW, weights).reason == "not flexible: runs now"
    tight = JobFeatures(duration_s=3 * HOUR, gpu_model="A100-80GB", gpus=8, deadline=NOW + 3 * HOUR, tier="bronze",
                        flexible=True, submitted=NOW)
    t = decide_deferral(tight, snap.signals, NOW, weights)
    assert not t.defer and t.start == NOW and "no room before the deadline" in t.reason


def test_the_deferral_stage_fetches_one_snapshot_per_hour(api: str) -> None:
    from seedance.costmodel.live_deferral import LiveDeferral

    stage = LiveDeferral(provider(api), CostPolicy())
    job = JobFeatures(duration_s=3 * HOUR, gpu_model="A100-80GB", gpus=8, deadline=NOW + 30 * HOUR, tier="bronze",
                      flexible=True, submitted=NOW)
    first = stage(job, NOW)
    n = len(State.calls)
    again = stage(job, NOW + 600)  # same clock hour: no new request
    assert len(State.calls) == n and again.start == first.start and first.defer
    stage(job, NOW + 3600)
    assert len(State.calls) > n

"""Signal providers: files by region, and Electricity Maps / WattTime shaped APIs over real HTTP."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from seedance.core.errors import InputError
from seedance.signals import parse_utc
from seedance.signals.providers import (
    SIGNAL_PROVIDERS,
    ElectricityMapsApi,
    FileProvider,
    WattTimeApi,
    region_signals,
)

ROUTES: dict[str, tuple[int, Any]] = {}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        url = urlparse(self.path)
        status, body = ROUTES.get(url.path, (404, {"error": "no route"}))
        if callable(body):
            body = body(parse_qs(url.query), self.headers)
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def em_body(query: dict[str, list[str]], headers: Any) -> dict[str, Any]:
    assert headers["auth-token"] == "secret" and query["zone"] == ["DE"]
    assert query["emissionFactorType"] == ["direct"]
    return {"zone": "DE", "data": [
        {"datetime": "2023-01-01T00:00:00.000Z", "carbonIntensity": 100},
        {"datetime": "2023-01-01T02:00:00.000Z", "carbonIntensity": 300},
        {"datetime": "2023-01-01T01:00:00.000Z", "carbonIntensity": 200},
    ]}


def test_electricity_maps_shaped_api_over_http(api: str) -> None:
    ROUTES["/v3/carbon-intensity/past-range"] = (200, em_body)
    p = SIGNAL_PROVIDERS.get("electricitymaps")(api, "secret")  # type: ignore[call-arg]
    s = p.series("carbon", "DE", parse_utc("2023-01-01"), parse_utc("2023-01-01T03:00:00Z"))
    assert s.values.tolist() == [100.0, 200.0, 300.0] and s.start == parse_utc("2023-01-01")
    with pytest.raises(InputError, match="has no price signal"):
        p.series("price", "DE", 0, 1)


def test_watttime_shaped_api_converts_lbs_per_mwh_and_averages_5_min_points(api: str) -> None:
    ROUTES["/v3/historical"] = (200, {"meta": {"units": "lbs_co2_per_mwh"}, "data": [
        {"point_time": "2023-01-01T00:00:00+00:00", "value": 1000.0},
        {"point_time": "2023-01-01T00:30:00+00:00", "value": 2000.0},
        {"point_time": "2023-01-01T01:00:00+00:00", "value": 500.0},
    ]})
    s = WattTimeApi(api, "t").series("carbon", "CAISO_NORTH", parse_utc("2023-01-01"),
                                     parse_utc("2023-01-01T02:00:00Z"))
    assert s.values.tolist() == pytest.approx([1500 * 0.45359237, 500 * 0.45359237])


@pytest.mark.parametrize(
    ("route", "status", "body", "message"),
    [
        ("/v3/carbon-intensity/past-range", 500, {"error": "boom"}, "HTTP 500"),
        ("/v3/carbon-intensity/past-range", 200, b"not json", "not JSON"),
        ("/v3/carbon-intensity/past-range", 200, {"data": [{"datetime": "2023-01-01T00:00:00Z"}]},
         "no numeric carbonIntensity"),
        ("/v3/carbon-intensity/past-range", 200, {"data": []}, "no data points"),
    ],
)
def test_api_errors_are_input_errors(api: str, route: str, status: int, body: Any, message: str) -> None:
    ROUTES[route] = (status, body)
    with pytest.raises(InputError, match=message):
        ElectricityMapsApi(api).series("carbon", "DE", parse_utc("2023-01-01"), parse_utc("2023-01-01T01:00:00Z"))


def test_unreachable_api_and_short_answers_fail_clearly(api: str) -> None:
    ROUTES["/v3/carbon-intensity/past-range"] = (200, {"data": [{"datetime": "2023-01-01T00:00:00Z",
                                                                 "carbonIntensity": 1}]})
    with pytest.raises(InputError, match="not the requested"):
        ElectricityMapsApi(api).series("carbon", "DE", parse_utc("2023-01-01"), parse_utc("2023-01-02"))
    with pytest.raises(InputError, match="unreachable"):
        ElectricityMapsApi("http://127.0.0.1:9", timeout_s=2).series("carbon", "DE", 0.0, 3600.0)


def test_file_provider_defaults_by_region_and_signals_overlap(shared_data: Path) -> None:
    rs = region_signals("de-lu")
    assert rs.region == "DE-LU" and rs.currency == "EUR"
    assert rs.start == parse_utc("2023-01-01") and rs.end == parse_utc("2023-12-31T23:00:00Z")
    with pytest.raises(InputError, match="known regions"):
        region_signals("atlantis")


def test_explicit_files_of_any_region_load_and_disjoint_series_fail(tmp_path: Path) -> None:
    (tmp_path / "p.csv").write_text("Datetime,Price (EUR/MWh)\n2023-01-01 00:00:00,1\n2023-01-01 01:00:00,2\n")
    (tmp_path / "c.csv").write_text("Datetime (UTC),Carbon Intensity gCO2eq/kWh (direct)\n2024-01-01 00:00:00,5\n")
    fp = FileProvider(tmp_path / "p.csv", tmp_path / "c.csv", price_tz="UTC")
    assert fp.series("price", "ANY").values.tolist() == [1.0, 2.0]
    with pytest.raises(InputError, match="do not overlap"):
        region_signals("ANY", price_provider=fp)

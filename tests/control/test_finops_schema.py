"""The FinOps routes' published schema says what their validators accept (what schemathesis found).

Each case is checked twice: against the OpenAPI document the server publishes (the parameter's pattern or
the body's JSON Schema) and against the server's answer, so schema and validator cannot drift apart.
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest

from tests.control.conftest import LiveServer
from tests.control.fuzz_hooks import UNSTATEABLE, unstateable

EDGE = "2026-03-02T00:00:00Z"  # a window edge (hour and day)


def param_schema(server: LiveServer, path: str, name: str) -> dict[str, Any]:
    doc = server.client().get("/openapi.json").json()
    params = doc["paths"][path]["get"]["parameters"]
    schema: dict[str, Any] = next(p["schema"] for p in params if p["name"] == name)
    return schema


def admits(schema: dict[str, Any], value: str) -> bool:
    return len(value) <= schema["maxLength"] and re.search(schema["pattern"], value) is not None


def body_validator(server: LiveServer) -> jsonschema.Draft202012Validator:
    doc = server.client().get("/openapi.json").json()
    ref = doc["paths"]["/api/v1/telemetry"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator({**ref, "components": doc["components"]},
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def locs(r: Any) -> list[str]:
    return [e["loc"] for e in r.json()["errors"]]


# ---------------------------------------------------------------------------------------------- reads
WINDOWS_ADMITTED = ["7d", "99999w", "2024-02-29T00:00:00Z,2024-03-01T00:00:00Z",
                    "2000-02-29T23:59:59Z,2100-02-28T00:00:00Z", "0001-01-01T00:00:00Z,9999-12-31T23:59:59Z",
                    "1772409600,1772413200"]
WINDOWS_REFUSED = ["7791-96-87T34684350Z,9388-70-00T64500086Z",  # schemathesis' case: the old pattern admitted it
                   "2023-02-29T00:00:00Z,2023-03-01T00:00:00Z",  # no leap day in 2023
                   "1900-02-29T00:00:00Z,1900-03-01T00:00:00Z",  # nor in 1900
                   "0000-01-01T00:00:00Z,2026-01-01T00:00:00Z",  # no year 0
                   "2026-03-02T24:00:00Z,2026-03-03T00:00:00Z", "0d", "00000m", "7s"]


@pytest.mark.parametrize("window", WINDOWS_ADMITTED)
def test_every_window_the_schema_admits_is_answered(live_server: LiveServer, window: str) -> None:
    assert admits(param_schema(live_server, "/api/v1/allocation", "window"), window)
    r = live_server.client().get("/api/v1/allocation", params={"window": window})
    assert r.status_code == 200, r.text
    assert r.json()["allocations"] == []


@pytest.mark.parametrize("window", WINDOWS_REFUSED)
def test_a_window_the_schema_refuses_is_a_422_naming_it(live_server: LiveServer, window: str) -> None:
    assert not admits(param_schema(live_server, "/api/v1/allocation", "window"), window)
    r = live_server.client().get("/api/v1/allocation", params={"window": window})
    assert r.status_code == 422 and locs(r) == ["query.window"], r.text


AGGREGATES_ADMITTED = ["namespace", "", "LABEL:team,env,controllerKind", "label:app.kubernetes.io/name,node"]
AGGREGATES_REFUSED = ["label:", "annotation:owner", "namespace,", ",pod", "team,,env", "label:a b", "ns\x00"]


@pytest.mark.parametrize("aggregate", AGGREGATES_ADMITTED)
def test_every_aggregate_the_schema_admits_is_answered(live_server: LiveServer, aggregate: str) -> None:
    assert admits(param_schema(live_server, "/api/v1/allocation", "aggregate"), aggregate)
    r = live_server.client().get("/api/v1/allocation", params={"window": "7d", "aggregate": aggregate})
    assert r.status_code == 200, r.text
    assert r.json()["aggregate"] == ([x for x in aggregate.split(",") if x] or ["namespace"])


@pytest.mark.parametrize("aggregate", AGGREGATES_REFUSED)
def test_an_aggregate_the_schema_refuses_is_a_422_naming_it(live_server: LiveServer, aggregate: str) -> None:
    assert not admits(param_schema(live_server, "/api/v1/allocation", "aggregate"), aggregate)
    r = live_server.client().get("/api/v1/allocation", params={"window": "7d", "aggregate": aggregate})
    assert r.status_code == 422 and locs(r) == ["query.aggregate"], r.text


def test_all_of_an_empty_ledger_is_an_empty_allocation_not_a_422(live_server: LiveServer) -> None:
    c = live_server.client()
    doc = c.get("/api/v1/allocation", params={"window": "all", "step": "1h"}).json()
    assert doc["window"] == {"start": "1970-01-01T00:00:00+00:00", "end": "1970-01-01T00:00:00+00:00"}
    assert (doc["total_cost"], doc["allocations"], len(doc["sets"])) == (0.0, [], 1)
    assert c.get("/api/v1/allocation", params={"window": "all", "format": "opencost"}).json() == {
        "code": 200, "status": "success", "data": [{}]}
    r = c.get("/api/v1/allocation/explain", params={"from": "all", "to": "all"})
    assert r.status_code == 200 and r.json()["change"] == 0.0, r.text


def test_a_reversed_pair_names_its_parameter(live_server: LiveServer) -> None:
    c = live_server.client()
    r = c.get("/api/v1/allocation", params={"window": "1772413200,1772409600"})
    assert r.status_code == 422 and locs(r) == ["window"], r.text
    for param in ("from", "to"):
        r = c.get("/api/v1/allocation/explain", params={param: "1772413200,1772409600"})
        assert r.status_code == 422 and locs(r) == [param], r.text
        assert r.json()["errors"][0]["msg"] == "window ends before it starts: '1772413200,1772409600'"


def test_too_many_steps_is_a_422_not_hours_of_work(live_server: LiveServer) -> None:
    c = live_server.client()
    r = c.get("/api/v1/allocation", params={"window": "7d", "step": "1s"})
    assert r.status_code == 422 and locs(r) == ["step"], r.text
    assert r.json()["errors"][0]["msg"] == "this window has 604800 steps of 1 s; at most 50000 (use a longer step)"
    r = c.get("/api/v1/allocation/explain", params={"step": "1s"})
    assert r.status_code == 422 and locs(r) == ["step"], r.text
    assert c.get("/api/v1/allocation", params={"window": "30d", "step": "1m"}).status_code == 200  # 43,200


# ---------------------------------------------------------------------------------------------- posts
def _window(**kw: Any) -> dict[str, Any]:
    return {"window_start": EDGE, "node_s": 3600.0, "cpu_core_s": 96 * 3600.0, "ram_byte_s": 2.0**40 * 3600,
            "gpu_s": {"H100-80GB": 8 * 3600.0}, **kw}


def _container(**kw: Any) -> dict[str, Any]:
    sums = dict.fromkeys(["run_s", "cpu_request_s", "cpu_usage_s", "cpu_billed_s", "gpu_request_s", "gpu_usage_s",
                          "gpu_billed_s"], 3600.0)
    sums |= dict.fromkeys(["ram_request_s", "ram_usage_s", "ram_billed_s"], 2.0**30 * 3600)
    return {"namespace": "ml", "pod": "train", "gpu_model": "H100-80GB", "first_seen": 1772409600.0,
            "last_seen": 1772413200.0, **sums, **kw}


def test_an_integral_gpu_index_is_an_integer(live_server: LiveServer) -> None:
    """JSON Schema's integer includes 135.0 (schemathesis' case); 135.5, "135" and true are not integers."""
    c, schema = live_server.client(), body_validator(live_server)
    body = {"node": "n0", "gpus": [{"gpu": 135.0, "uuid": "GPU-1"}]}
    assert schema.is_valid(body)
    r = c.post("/api/v1/telemetry", json=body)
    assert r.status_code == 200 and r.json() == {"lines": 0, "windows": 0, "gpus": 1}, r.text
    gpu = c.get("/api/v1/telemetry/heatmap").json()["gpus"][0]["gpu"]
    assert gpu == 135 and type(gpu) is int
    for bad in (135.5, "135", True):
        body = {"node": "n0", "gpus": [{"gpu": bad, "uuid": "GPU-1"}]}
        assert not schema.is_valid(body)
        r = c.post("/api/v1/telemetry", json=body)
        assert r.status_code == 422 and locs(r) == ["body.gpus.0.gpu"], (bad, r.text)


def test_sums_at_their_bounds_are_stored_and_read_back_finite(live_server: LiveServer) -> None:
    """The largest admitted values, at the last admitted window start: every read answers 200 with finite
    numbers (1e308 sums were stored before and made /allocation answer 500)."""
    from seedance.finops.wire import MAX_BYTE_SECONDS, MAX_EPOCH_S, MAX_SECONDS, MAX_WINDOW_S

    c, schema = live_server.client(), body_validator(live_server)
    top = _container(first_seen=0.0, last_seen=MAX_EPOCH_S, run_s=MAX_SECONDS, cpu_billed_s=MAX_SECONDS,
                     gpu_billed_s=MAX_SECONDS, ram_billed_s=MAX_BYTE_SECONDS)
    body = {"node": "n0", "window_s": MAX_WINDOW_S, "windows": [_window(
        window_start="9999-12-30T00:00:00Z", node_s=MAX_WINDOW_S, cpu_core_s=MAX_SECONDS,
        ram_byte_s=MAX_BYTE_SECONDS, gpu_s={"H100-80GB": MAX_SECONDS}, containers=[top])]}
    assert schema.is_valid(body)
    r = c.post("/api/v1/telemetry", json=body)
    assert r.status_code == 200 and r.json()["windows"] == 1, r.text
    for params in ({"window": "all"}, {"window": "all", "format": "opencost"}, {"window": "all", "step": "1d"}):
        r = c.get("/api/v1/allocation", params=params)
        assert r.status_code == 200, (params, r.text)
    doc = c.get("/api/v1/allocation", params={"window": "all"}).json()
    assert doc["allocations"] and all(e["total_cost"] >= 0 for e in doc["allocations"])
    assert 0 < doc["total_cost"] < float("inf")


@pytest.mark.parametrize(("field", "value"), [
    ("node_s", 1e308), ("cpu_core_s", 1e308), ("ram_byte_s", 1.5e308), ("gpu_s", {"H100-80GB": 1e308})])
def test_window_sums_beyond_their_bounds_are_a_422_naming_them(live_server: LiveServer, field: str,
                                                                value: Any) -> None:
    schema = body_validator(live_server)
    body = {"node": "n0", "windows": [_window(**{field: value})]}
    assert not schema.is_valid(body)
    r = live_server.client().post("/api/v1/telemetry", json=body)
    loc = f"body.windows.0.{field}" + (".H100-80GB" if field == "gpu_s" else "")
    assert r.status_code == 422 and locs(r) == [loc], r.text


@pytest.mark.parametrize(("field", "value"), [("first_seen", -1e308), ("last_seen", 1e308), ("run_s", 1e308),
                                              ("ram_billed_s", 1e308)])
def test_container_sums_beyond_their_bounds_are_a_422_naming_them(live_server: LiveServer, field: str,
                                                                   value: float) -> None:
    body = {"node": "n0", "windows": [_window(containers=[_container(**{field: value})])]}
    assert not body_validator(live_server).is_valid(body)
    r = live_server.client().post("/api/v1/telemetry", json=body)
    assert r.status_code == 422 and locs(r) == [f"body.windows.0.containers.0.{field}"], r.text


@pytest.mark.parametrize("start", ["0001-01-01T00:00:00+01:00", "9999-12-31T00:00:00Z"])
def test_a_window_start_without_utc_dates_is_a_422(live_server: LiveServer, start: str) -> None:
    """Both are on an hour edge; the first starts in year 0 in UTC, the second's window ends in year 10000
    (each made the server answer 500)."""
    r = live_server.client().post("/api/v1/telemetry", json={"node": "n0", "windows": [_window(window_start=start)]})
    assert r.status_code == 422 and locs(r) == ["body.windows.0.window_start"], r.text
    assert r.json()["errors"][0]["msg"] == (
        "Value error, must lie between 0001-01-01T00:00:00Z and 9999-12-30T00:00:00Z in UTC")


def test_a_post_with_one_window_off_an_edge_stores_none_of_them(live_server: LiveServer) -> None:
    c = live_server.client()
    body = {"node": "n0", "windows": [_window(containers=[_container()]),
                                      _window(window_start="2026-03-02T01:00:07Z")]}
    r = c.post("/api/v1/telemetry", json=body)
    assert r.status_code == 422 and locs(r) == ["body.windows.1.window_start"], r.text
    assert c.get("/api/v1/allocation", params={"window": "all"}).json()["allocations"] == []
    body["windows"] = body["windows"][:1]
    assert c.post("/api/v1/telemetry", json=body).json() == {"lines": 1, "windows": 1, "gpus": 0}


# ----------------------------------------------------------------------------------- the fuzz filters
def test_the_fuzz_filter_drops_only_422s_made_of_unstateable_rules() -> None:
    order = b'{"errors": [{"loc": "from", "msg": "window ends before it starts: \'5,3\'"}]}'
    edge = b'{"errors": [{"loc": "body.windows.3.window_start", "msg": "window_start x is not on a 60 s edge"}]}'
    other = b'{"errors": [{"loc": "from", "msg": "window ends before it starts: \'5,3\'"}, ' \
            b'{"loc": "query.step", "msg": "String should match pattern"}]}'
    assert unstateable("/api/v1/allocation/explain", 422, order) == [UNSTATEABLE[0][0]]
    assert unstateable("/api/v1/telemetry", 422, edge) == [UNSTATEABLE[2][0]]
    assert unstateable("/api/v1/allocation/explain", 422, other) == []  # one located error of another rule
    assert unstateable("/api/v1/telemetry", 422, order) == []  # a rule of another operation
    assert unstateable("/api/v1/allocation/explain", 400, order) == []
    assert unstateable("/api/v1/allocation/explain", 422, b"not json") == []


def test_a_nul_in_telemetry_text_is_refused_as_the_schema_says(live_server_factory: Any, pg_schema_url: str) -> None:
    """PostgreSQL's JSONB and text refuse NUL: a holder's namespace with one was a 500 there (schemathesis' case)."""
    server = live_server_factory(pg_schema_url)
    c, schema = server.client(), body_validator(server)
    holder = {"namespace": "ml\u0000x", "pod": "p", "allocated": 1.0}
    for body, loc in (({"node": "n0", "gpus": [{"gpu": 0, "uuid": "GPU-1", "holders": [holder]}]},
                       "body.gpus.0.holders.0.namespace"),
                      ({"node": "n\u0000", "gpus": []}, "body.node"),
                      ({"node": "n0", "windows": [_window(containers=[_container(labels={"k": "v\u0000"})])]},
                       "body.windows.0.containers.0.labels.k")):
        assert not schema.is_valid(body)
        r = c.post("/api/v1/telemetry", json=body)
        assert r.status_code == 422 and locs(r) == [loc], r.text
    ok = {"node": "n0", "gpus": [{"gpu": 0, "uuid": "GPU-1", "holders": [{**holder, "namespace": "ml"}]}]}
    assert schema.is_valid(ok) and c.post("/api/v1/telemetry", json=ok).status_code == 200

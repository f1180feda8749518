"""The policy operations' published schema says what their validators accept (what schemathesis found once
the config_yaml operations were checked strictly but for the YAML document itself)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from seedance.control.schemas import _PLACEMENTS, _QUEUES
from tests.control.conftest import LiveServer
from tests.control.test_api import setup_cluster

DOC = "spec:\n  placement: random\n  queueOrder: fifo\n"


def body_validator(server: LiveServer, path: str) -> jsonschema.Draft202012Validator:
    doc = server.client().get("/openapi.json").json()
    content = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator({**content, "components": doc["components"]})


def locs(r: Any) -> list[str]:
    return [e["loc"] for e in r.json()["errors"]]


def test_dry_run_max_jobs_takes_an_integral_float(live_server: LiveServer) -> None:
    """JSON Schema's integer includes 1109.0 (schemathesis' case on both dry-run operations)."""
    c = live_server.client()
    setup_cluster(c, nodes=1)
    schema = body_validator(live_server, "/api/v1/policies/dry-run")
    body = {"config_yaml": DOC, "window_hours": 1, "max_jobs": 1109.0}
    assert schema.is_valid(body)
    r = c.post("/api/v1/policies/dry-run", json=body)
    assert r.status_code == 200 and r.json()["proposed"]["placement"] == "random", r.text
    for bad in (1109.5, "1109", True):
        assert not schema.is_valid({**body, "max_jobs": bad})
        r = c.post("/api/v1/policies/dry-run", json={**body, "max_jobs": bad})
        assert r.status_code == 422 and locs(r) == ["body.max_jobs"], (bad, r.text)


def test_dry_run_proposals_are_the_registry_names(live_server: LiveServer) -> None:
    c = live_server.client()
    setup_cluster(c, nodes=1)
    schema = body_validator(live_server, "/api/v1/policies/dry-run")
    for field, names, good in (("placement", _PLACEMENTS, "best-fit"), ("queue_order", _QUEUES, "fifo")):
        for value in (good, "", None):
            body = {"config_yaml": DOC, "window_hours": 1, field: value}
            assert schema.is_valid(body), (field, value)
            r = c.post("/api/v1/policies/dry-run", json=body)
            assert r.status_code == 200, (field, value, r.text)
        for value in ("8\U000cb800", "\u00d5", "Best-Fit", "worst-fit"):
            body = {"config_yaml": DOC, "window_hours": 1, field: value}
            assert not schema.is_valid(body), (field, value)
            r = c.post("/api/v1/policies/dry-run", json=body)
            assert r.status_code == 422 and all(loc.startswith(f"body.{field}") for loc in locs(r)), r.text
            assert f"valid names: {', '.join(names)}" in r.json()["detail"]


@pytest.mark.parametrize("reason", [None, "", "   ", "\u3000", "\x1c", "\ufeff", "\t\n\u2028"])
def test_an_override_without_a_reason_is_refused_by_schema_and_server(live_server: LiveServer,
                                                                     reason: str | None) -> None:
    """Blank is the same set of characters to the published pattern and to the server (Python's ``strip`` kept
    ``"\\ufeff"`` as a reason; the schema did not say that an override needs one)."""
    c = live_server.client()
    setup_cluster(c, nodes=1)
    assert c.post("/api/v1/policies", json={"name": "p", "config_yaml": DOC}).status_code == 201
    schema = body_validator(live_server, "/api/v1/policies/{name}/enable")
    body: dict[str, Any] = {"override": True} if reason is None else {"override": True, "reason": reason}
    assert not schema.is_valid(body)
    r = c.post("/api/v1/policies/p/enable", json=body)
    assert r.status_code == 422 and locs(r) == ["request body.reason"], r.text
    assert c.get("/api/v1/policies/p").json()["enabled"] is False
    ok = {"override": True, "reason": "\ufeffSEC-42"}
    assert schema.is_valid(ok) and schema.is_valid({"override": False}) and schema.is_valid({"reason": " "})
    r = c.post("/api/v1/policies/p/enable", json=ok)
    assert r.status_code == 200 and r.json()["enabled"] is True, r.text

"""The compliance gate and the system's evidence over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import jsonschema
import pytest
from sqlalchemy import select

from seedance.control.db.models import EventRecord
from tests.control.conftest import LiveServer
from tests.control.test_api import make_tenant_token, setup_cluster

ROOT = Path(__file__).parents[2]
RULES = ROOT / "tests" / "compliance" / "fixtures" / "rules"
SARIF_SCHEMA = ROOT / "tests" / "compliance" / "fixtures" / "sarif-schema-2.1.0.json"


def events_of(server: LiveServer, kind: str) -> list[EventRecord]:
    with server.service.db.read() as s:
        return list(s.scalars(select(EventRecord).where(EventRecord.kind == kind).order_by(EventRecord.id)))


def create(c: httpx.Client, name: str, text: str, *, enabled: bool = False) -> httpx.Response:
    return c.post("/api/v1/policies", json={"name": name, "config_yaml": text, "enabled": enabled})


def test_enable_is_refused_on_errors_and_the_override_is_logged(
        live_server_factory: Callable[..., LiveServer], db_url: str) -> None:
    server = live_server_factory(db_url)
    c = server.client()
    setup_cluster(c, nodes=1)
    bad = (RULES / "SDC001-fail.yaml").read_text()
    assert create(c, "burst", bad).status_code == 201
    r = c.post("/api/v1/policies/burst/enable")
    assert r.status_code == 409
    assert "2 compliance error(s): SDC001 at policy burst config_yaml:8:5; SDC001 at policy burst config_yaml:9:5" \
        in r.json()["detail"]
    assert c.get("/api/v1/policies/burst").json()["enabled"] is False
    r = c.post("/api/v1/policies/burst/enable", json={"override": True})
    assert r.status_code == 422 and "reason" in r.json()["detail"]
    assert events_of(server, "policy.compliance_override") == []
    r = c.post("/api/v1/policies/burst/enable", json={"override": True, "reason": "burst pool approved, SEC-42"})
    assert r.status_code == 200 and r.json()["enabled"] is True
    (ev,) = events_of(server, "policy.compliance_override")
    assert ev.data["reason"] == "burst pool approved, SEC-42" and ev.data["by"] == "bootstrap"
    assert [(e["rule"], e["line"]) for e in ev.data["errors"]] == [("SDC001", 8), ("SDC001", 9)]
    assert ev.data["system_facts"] is True
    # created enabled with errors: refused, nothing stored (no override at creation)
    r = create(c, "burst-2", bad, enabled=True)
    assert r.status_code == 409 and c.get("/api/v1/policies/burst-2").status_code == 404
    # a clean policy passes the gate once its evidence is on record; the passed check is logged too
    clean = (ROOT / "policies" / "cold_archive.yaml").read_text()
    r = create(c, "cold-archive", clean, enabled=True)
    assert r.status_code == 409 and "SDC004" in r.json()["detail"]  # no key rotation on record yet
    rotation = {"kind": "key-rotation", "key_id": "seedance-archive-key/v7"}
    assert c.post("/api/v1/compliance/evidence", json={"record": rotation}).status_code == 201
    assert create(c, "cold-archive", clean, enabled=True).status_code == 201
    assert [e.message for e in events_of(server, "policy.compliance_checked")] == [
        "policy cold-archive: compliance passed"]
    _, member = make_tenant_token(c, "team-a", "member")
    r = server.client(member).post("/api/v1/policies/burst/enable", json={"override": True, "reason": "x"})
    assert r.status_code == 403


def test_system_evidence_turns_findings_on_and_off(live_server: LiveServer) -> None:
    c = live_server.client()
    assert c.post("/api/v1/clusters", json={"name": "default"}).status_code == 201
    node = {"name": "tmp-0", "cpu_milli": 8000, "memory_mib": 32000, "gpu_count": 1, "gpu_model": "T4",
            "labels": {"seedance.io/ephemeral": "true"}}
    assert c.post("/api/v1/clusters/default/nodes", json=node).status_code == 201
    assert c.delete("/api/v1/clusters/default/nodes/tmp-0").status_code == 204
    facts = c.get("/api/v1/compliance/facts").json()
    assert facts["append_only_logs"] is True and facts["log_retention_hours"] is None
    (removal,) = facts["node_removals"]
    assert removal["node"] == "tmp-0" and removal["ephemeral"] is True
    doc = {"config_yaml": (RULES / "SDC005-pass.yaml").read_text(), "source": "reap.yaml"}
    rep = c.post("/api/v1/compliance/check", json=doc).json()
    w, f = rep["findings"]  # by line: spec (4), then the action (6)
    assert (f["rule"], f["level"], f["system"], f["line"]) == ("SDC005", "error", f"events/{removal['event_id']}", 6)
    assert (w["rule"], w["level"], w["system"]) == ("SDC006", "warning", "events")  # no backup on record yet
    assert c.post("/api/v1/compliance/evidence", json={"record": {
        "kind": "backup", "encrypted": True, "cipher": "aes-256-gcm", "sha256": "1a" * 32}}).status_code == 201
    sarif = c.post("/api/v1/compliance/check", params={"format": "sarif"}, json=doc).json()
    schema = json.loads(SARIF_SCHEMA.read_text())
    assert list(jsonschema.Draft4Validator(schema).iter_errors(sarif)) == []
    proof = {"kind": "node-destruction", "cluster": "default", "node": "tmp-0",
             "destroyed_at": "2026-12-01T10:00:00Z", "wipe_proof_sha256": "0f" * 32}
    r = c.post("/api/v1/compliance/evidence", json={"record": {**proof, "wipe_proof_sha256": "not-a-hash"}})
    assert r.status_code == 422
    assert c.post("/api/v1/compliance/evidence", json={"record": proof}).status_code == 201
    assert c.post("/api/v1/compliance/check", json=doc).json()["findings"] == []
    backup = {"kind": "backup", "encrypted": False, "cipher": ""}
    assert c.post("/api/v1/compliance/evidence", json={"record": backup}).status_code == 201
    rep = c.post("/api/v1/compliance/check", json=doc).json()
    assert [(f["rule"], f["level"]) for f in rep["findings"]] == [("SDC006", "error")] and rep["failed"]
    _, viewer = make_tenant_token(c, "team-v", "viewer")
    v = live_server.client(viewer)
    assert v.get("/api/v1/compliance/facts").status_code == 200
    assert v.post("/api/v1/compliance/evidence", json={"record": backup}).status_code == 403
    # evidence records are append-only events like every other
    with pytest.raises(Exception, match="append-only"), live_server.service.db.write() as s:
        s.execute(EventRecord.__table__.delete().where(EventRecord.kind == "evidence.backup"))


def test_declared_log_retention_is_a_fact(live_server_factory: Callable[..., LiveServer], pg_schema_url: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL (SQLite's triggers are read in the tests above): pg_trigger in the current schema."""
    monkeypatch.setenv("SEEDANCE_COMPLIANCE_LOG_RETENTION_HOURS", "24")
    c = live_server_factory(pg_schema_url).client()
    facts = c.get("/api/v1/compliance/facts").json()
    assert facts["log_retention_hours"] == 24 and facts["append_only_logs"] is True
    assert facts["store"] == "postgresql"
    rep = c.post("/api/v1/compliance/check", json={"config_yaml": "spec: {}\n"}).json()
    errors = [(f["rule"], f["system"]) for f in rep["findings"] if f["level"] == "error"]
    assert errors == [("SDC003", "settings/log_retention_hours")] and rep["failed"]

"""Oversized and malformed payloads: a 4xx with a clear message, and nothing stored."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from seedance.control.db.models import EventRecord, Job, Node, SchedulingPolicy, Tenant
from tests.control.conftest import LiveServer

H = {"content-type": "application/json"}


def counts(server: LiveServer) -> tuple[int, ...]:
    with server.service.db.read() as s:
        return tuple(
            s.execute(select(func.count()).select_from(t)).scalar_one()
            for t in (Job, EventRecord, Node, SchedulingPolicy, Tenant)
        )


@pytest.fixture
def server(live_server: LiveServer) -> LiveServer:
    c = live_server.client()
    assert c.post("/api/v1/clusters", json={"name": "default"}).status_code == 201
    return live_server


BAD_JOBS: list[tuple[Any, int, str]] = [
    ({"gpus": 1.5}, 422, "body.gpus: Value error, more than one GPU must be a whole number"),
    ({"gpus": 0.0001}, 422, "body.gpus: Value error, gpus must be a multiple of 0.001"),
    ({"gpus": -1}, 422, "body.gpus: Input should be greater than or equal to 0"),
    ({"gpus": 65}, 422, "body.gpus: Input should be less than or equal to 64"),
    ({"gpus": "four"}, 422, "body.gpus: Input should be a valid number"),
    ({"gpus": 1, "gpu_types": ["Z9000"]}, 422, "unknown GPU model 'Z9000'; valid names:"),
    ({"gpus": 1, "tier": "platinum"}, 422, "body.tier: Input should be 'gold', 'silver' or 'bronze'"),
    ({"gpus": 1, "surprise": True}, 422, "body.surprise: Extra inputs are not permitted"),
    ({"gpus": 1, "name": "Has Spaces"}, 422, "body.name: String should match pattern"),
    ({"gpus": 1, "name": "x" * 64}, 422, "body.name: String should"),
    ({"gpus": 1, "labels": {f"k{i}": "v" for i in range(33)}}, 422, "body.labels: Dictionary should have at most 32"),
    ({"gpus": 1, "labels": {"team": "a b"}}, 422, "body.labels.team: String should match pattern"),
    ({"gpus": 1, "idempotency_key": "a b"}, 422, "body.idempotency_key: String should match pattern"),
    ({"gpus": 1, "deadline": "tomorrow"}, 422, "body.deadline: Input should be a valid datetime"),
    ({"gpus": 1, "deadline": "1970-01-01T00:00:00Z"}, 422, "deadline must be between 2000 and 2199"),
    ({"gpus": 1, "cluster": "nowhere"}, 404, "cluster 'nowhere' not found"),
    ({"gpus": 1, "priority": 10**6}, 422, "body.priority: Input should be less than or equal to 1000"),
    ({"gpus": 1, "duration_hours": 0}, 422, "body.duration_hours: Input should be greater than 0"),
    ({"gpus": 1, "tenant_id": 2**70}, 422, "body.tenant_id: Input should be less than or equal to"),
    ([1, 2, 3], 422, "body: Input should be a valid dictionary"),
]


@pytest.mark.parametrize(("body", "status", "message"), BAD_JOBS)
def test_bad_job_payloads_are_refused_with_the_field_named(server: LiveServer, body: Any, status: int,
                                                            message: str) -> None:
    before = counts(server)
    r = server.client().post("/api/v1/jobs", json=body)
    assert r.status_code == status, r.text
    assert message in r.json()["detail"], r.json()
    assert counts(server) == before


@pytest.mark.parametrize(("raw", "message"), [
    (b"{not json", "request body is not valid JSON"),
    (b'{"gpus": 1,}', "request body is not valid JSON"),
    (b"\xff\xfe\x00garbage", "request body is not valid JSON"),
    (b"", "body: Field required"),
])
def test_malformed_bodies(server: LiveServer, raw: bytes, message: str) -> None:
    before = counts(server)
    r = server.client().post("/api/v1/jobs", content=raw, headers=H)
    assert 400 <= r.status_code < 500
    assert message in r.json()["detail"], r.json()
    assert counts(server) == before


def test_oversized_bodies_get_413_declared_or_chunked(server: LiveServer) -> None:
    before = counts(server)
    big = b'{"gpus": 1, "labels": {"a": "' + b"x" * 70_000 + b'"}}'
    r = server.client().post("/api/v1/jobs", content=big, headers=H)
    assert r.status_code == 413 and "larger than 65536 bytes" in r.json()["detail"]

    def chunks() -> Any:
        for _ in range(20):
            yield b" " * 8192
    r = server.client().post("/api/v1/jobs", content=chunks(), headers=H)  # no Content-Length: chunked
    assert r.status_code == 413
    # a lying Content-Length is cut off by the server, never read past the limit
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 999999999\r\n\r\n{")
        assert b" 413 " in sock.recv(4096).split(b"\r\n")[0] + b" "
    assert counts(server) == before


@pytest.mark.parametrize(("path", "body", "message"), [
    ("/api/v1/tenants", {"name": "ok", "display_name": "nul\x00byte"}, "must not contain NUL"),
    ("/api/v1/clusters/default/nodes", {"name": "n1", "cpu_milli": 1, "memory_mib": 1, "gpu_count": 2},
     "gpu_model is required when gpu_count > 0"),
    ("/api/v1/clusters/default/nodes", {"name": "n1", "cpu_milli": 1, "memory_mib": 1, "gpu_count": 1,
                                        "gpu_model": "nope"}, "unknown GPU model"),
    ("/api/v1/policies", {"name": "p", "config_yaml": "kind: Other\n"}, "kind must be SchedulingPolicy or CostPolicy"),
    ("/api/v1/policies", {"name": "p", "config_yaml": "- a list\n"}, "must be a YAML mapping"),
    ("/api/v1/policies", {"name": "p", "config_yaml": "spec: {placement: nope}\n"}, "unknown placement policy"),
    ("/api/v1/policies", {"name": "p", "config_yaml": "a: " + "x" * 40000}, "at most 32768 characters"),
    ("/api/v1/policies", {"name": "p", "config_yaml": "spec: {plugin: [1, 2]}\n"}, "spec.plugin"),
    ("/api/v1/tokens", {"name": "t", "role": "superuser"}, "body.role: Input should be"),
])
def test_other_resources_refuse_bad_input(server: LiveServer, path: str, body: Any, message: str) -> None:
    before = counts(server)
    r = server.client().post(path, json=body)
    assert r.status_code == 422, r.text
    assert message in r.json()["detail"], r.json()
    assert counts(server) == before


def test_bad_path_and_query_parameters(server: LiveServer) -> None:
    c = server.client()
    assert c.get("/api/v1/jobs/0").status_code == 422
    assert c.get(f"/api/v1/jobs/{2**63}").status_code == 422  # would overflow BIGINT: refused before the store
    assert c.get("/api/v1/jobs", params={"limit": 0}).status_code == 422
    assert c.get("/api/v1/jobs", params={"status": "sleeping"}).status_code == 422
    assert c.get("/api/v1/clusters/BAD_NAME").status_code == 422
    r = c.get("/api/v1/nope")
    assert r.status_code == 404 and r.json()["detail"] == "Not Found"
    assert c.put("/api/v1/jobs").status_code == 405


def test_errors_are_json_error_bodies(server: LiveServer) -> None:
    r = httpx.post(f"{server.url}/api/v1/jobs", json={"gpus": 1.5, "x": 1},
                   headers={"Authorization": server.client().headers["Authorization"]})
    body = r.json()
    assert set(body) == {"detail", "errors"}
    assert {e["loc"] for e in body["errors"]} == {"body.gpus", "body.x"}
    assert body["detail"].endswith("(and 1 more)")

"""Tenant isolation walked over every route of the app: 404 for other tenants' objects, viewers never
write, revoked tokens are refused everywhere.

The walk enumerates every operation of the app's OpenAPI document; a write route this file has no
body for is still called (and must answer 403/404), so a new endpoint is checked automatically.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.control.conftest import LiveServer

TENANT_PARAMS = {"job_id", "token_id", "tenant_id", "request_id", "subject_id", "challenge_id"}  # a tenant's object
PUBLIC = {"/healthz", "/metrics", "/"}
# bodies for write routes (valid where a body is needed; tenant-scoped ones aim at tenant B)
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/api/v1/tenants"): {"name": "intruder"},
    ("POST", "/api/v1/tokens"): {"name": "x", "role": "viewer", "tenant_id": "{tenant_b}"},
    ("POST", "/api/v1/clusters"): {"name": "c2"},
    ("POST", "/api/v1/clusters/{cluster}/nodes"): {"name": "n9", "cpu_milli": 1, "memory_mib": 1},
    ("PATCH", "/api/v1/clusters/{cluster}/nodes/{node}"): {"labels": {"x": "y"}},
    ("POST", "/api/v1/jobs"): {"gpus": 1, "tenant_id": "{tenant_b}"},
    ("POST", "/api/v1/policies"): {"name": "p2"},
    ("POST", "/api/v1/telemetry/events"): {"device_id": "dev-isolation-1", "session_started_at": "2030-01-01T00:00:00Z",
                                           "events": [{"action": "view", "at": "2030-01-01T00:00:00Z"}]},
    ("POST", "/api/v1/telemetry/challenges"): {"device_id": "dev-isolation-1"},
    ("POST", "/api/v1/telemetry/challenges/{challenge_id}"): {"credential": {}},
    ("POST", "/api/v1/privacy/subjects"): {"subject": "someone@example.org"},
    ("POST", "/api/v1/privacy/consents"): {"flow_version": "2.0.0", "choice": "refused", "purposes": {}},
    ("PUT", "/api/v1/clusters/{cluster}/nodes/{node}/attestation"): {"token": "a.b.c", "nonce": "n"},
}
# reads whose answer on this server is not 200 (no attestation service is configured here: 409)
READS = {("GET", "/api/v1/clusters/{cluster}/nodes/{node}/attestation"): 409}
# writes a member may make in its own tenant (privacy telemetry and consent), with the expected answer
MEMBER_WRITES = {("POST", "/api/v1/telemetry/events"): 422,  # 2030 is in the future: refused, nothing stored
                 ("POST", "/api/v1/telemetry/challenges"): 409, ("POST", "/api/v1/privacy/subjects"): 201,
                 ("POST", "/api/v1/privacy/consents"): 201}


@pytest.fixture
def world(live_server: LiveServer) -> dict[str, Any]:
    """Tenants A and B, a shared cluster, and B's job, token and events."""
    admin = live_server.client()
    assert admin.post("/api/v1/clusters", json={"name": "default"}).status_code == 201
    admin.post("/api/v1/clusters/default/nodes", json={"name": "node-0", "cpu_milli": 64000, "memory_mib": 512000,
                                                       "gpu_count": 8, "gpu_model": "A100-80GB"})
    admin.post("/api/v1/policies", json={"name": "shared", "placement": "best-fit"})
    w: dict[str, Any] = {}
    for t in ("a", "b"):
        tid = admin.post("/api/v1/tenants", json={"name": f"tenant-{t}"}).json()["id"]
        w[f"tenant_{t}"] = tid
        for role in ("member", "viewer"):
            r = admin.post("/api/v1/tokens", json={"name": f"{t}-{role}", "role": role, "tenant_id": tid}).json()
            w[f"{role}_{t}"], w[f"{role}_{t}_id"] = r["token"], r["id"]
    b = live_server.client(w["member_b"])
    job_b = b.post("/api/v1/jobs", json={"name": "secret-b-job", "gpus": 2, "idempotency_key": "b-key-42"}).json()
    w["job_b"] = job_b["id"]
    a = live_server.client(w["member_a"])
    w["job_a"] = a.post("/api/v1/jobs", json={"name": "a-job", "gpus": 1}).json()["id"]
    live_server.service.loop.run_once()  # both get decisions and events
    w["b_markers"] = ["secret-b-job", "b-key-42", "tenant-b", w["member_b"][:12]]
    return w


def api_routes(app: Any) -> list[tuple[str, str]]:
    """Every (method, path) the app documents: its whole API surface (only the "/" redirect is left out)."""
    out = [(m.upper(), path) for path, ops in app.openapi()["paths"].items() for m in ops]
    assert len(out) >= 25, out  # never walk an empty list by mistake
    return out


def fill(path: str, w: dict[str, Any], *, own: bool, token: str = "member") -> str:
    side = "a" if own else "b"
    values = {"job_id": w[f"job_{side}"], "token_id": w[f"{token}_{side}_id"], "tenant_id": w[f"tenant_{side}"],
              "cluster": "default", "node": "node-0", "name": "shared", "request_id": 10**9,
              "subject_id": "00000000-0000-4000-8000-000000000000", "challenge_id": "c" * 24}
    return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), path)


def body_for(method: str, path: str, w: dict[str, Any]) -> Any:
    body = BODIES.get((method, path))
    if body is None:
        return None
    return {k: (w["tenant_b"] if v == "{tenant_b}" else v) for k, v in body.items()}


def call(c: httpx.Client, method: str, url: str, body: Any) -> httpx.Response:
    return c.request(method, url, json=body) if body is not None else c.request(method, url)


def test_member_of_a_gets_404_for_every_tenant_b_object_on_every_route(live_server: LiveServer,
                                                                       world: dict[str, Any]) -> None:
    a = live_server.client(world["member_a"])
    visited = set()
    for method, path in api_routes(live_server.app):
        params = set(re.findall(r"\{(\w+)\}", path))
        url = fill(path, world, own=False)
        r = call(a, method, url, body_for(method, path, world))
        visited.add((method, path))
        if params & TENANT_PARAMS:
            assert r.status_code == 404, f"{method} {url}: {r.status_code} {r.text}"
            continue
        if path in PUBLIC:
            assert r.status_code < 400
            continue
        if method == "GET":
            assert r.status_code == READS.get((method, path), 200), f"{method} {url}: {r.status_code}"
        elif (method, path) in (("POST", "/api/v1/jobs"), ("POST", "/api/v1/tokens")):
            assert r.status_code == 404, f"{method} {url} aimed at tenant B: {r.status_code} {r.text}"
        elif (method, path) in MEMBER_WRITES:
            assert r.status_code == MEMBER_WRITES[(method, path)], f"{method} {url}: {r.status_code} {r.text}"
        else:  # shared infrastructure and tenants: members may not change them
            assert r.status_code == 403, f"{method} {url}: {r.status_code} {r.text}"
        for marker in world["b_markers"]:
            assert marker not in r.text, f"{method} {url} leaks {marker!r}"
    assert visited == set(api_routes(live_server.app))
    # and B's data is really there for B (so the 404s above are isolation, not absence)
    b = live_server.client(world["member_b"])
    assert b.get(f"/api/v1/jobs/{world['job_b']}").json()["name"] == "secret-b-job"
    assert b.get(f"/api/v1/jobs/{world['job_b']}/decisions").json()["items"]


def test_a_viewer_cannot_write_anywhere(live_server: LiveServer, world: dict[str, Any]) -> None:
    v = live_server.client(world["viewer_a"])
    writes = [(m, p) for m, p in api_routes(live_server.app) if m not in ("GET", "HEAD")]
    assert len(writes) >= 10
    for method, path in writes:
        body = BODIES.get((method, path))
        if body is not None:
            body = {k: (world["tenant_a"] if val == "{tenant_b}" else val) for k, val in body.items()}
        r = call(v, method, fill(path, world, own=True, token="viewer"), body)
        assert r.status_code == 403, f"viewer {method} {path}: {r.status_code} {r.text}"
    assert v.get("/api/v1/jobs").status_code == 200  # reading is fine


def test_a_revoked_token_is_refused_on_every_route(live_server: LiveServer, world: dict[str, Any]) -> None:
    admin = live_server.client()
    assert admin.delete(f"/api/v1/tokens/{world['member_a_id']}").status_code == 200
    a = live_server.client(world["member_a"])
    for method, path in api_routes(live_server.app):
        if path in PUBLIC or path == "/openapi.json":
            continue
        r = call(a, method, fill(path, world, own=True), body_for(method, path, world))
        assert r.status_code == 401, f"revoked token on {method} {path}: {r.status_code}"

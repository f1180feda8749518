"""The REST API over real HTTP (uvicorn): resources, idempotency, tokens, roles, policies, metrics."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy import select, text

from seedance.control.db.models import ApiToken
from tests.control.conftest import LiveServer

NODE = {"cpu_milli": 64000, "memory_mib": 512000, "gpu_count": 8, "gpu_model": "A100-80GB",
        "labels": {"gpu.sla.level": "gold", "gpu.mode": "exclusive"}}


def setup_cluster(c: httpx.Client, nodes: int = 2) -> None:
    assert c.post("/api/v1/clusters", json={"name": "default"}).status_code == 201
    for i in range(nodes):
        r = c.post("/api/v1/clusters/default/nodes", json={"name": f"node-{i}", **NODE})
        assert r.status_code == 201, r.text


def make_tenant_token(c: httpx.Client, tenant: str, role: str) -> tuple[int, str]:
    tid = c.post("/api/v1/tenants", json={"name": tenant}).json()["id"]
    r = c.post("/api/v1/tokens", json={"name": f"{tenant}-{role}", "role": role, "tenant_id": tid})
    assert r.status_code == 201, r.text
    return tid, r.json()["token"]


def test_health_openapi_and_dashboard_are_served(live_server: LiveServer) -> None:
    c = live_server.client(None)
    from seedance.control.db.migrate import HEAD_REVISION

    assert c.get("/healthz").json() == {"status": "ok", "database": "sqlite", "revision": HEAD_REVISION}
    spec = c.get("/openapi.json").json()
    assert spec["info"]["title"] == "Seedance control plane"
    assert "/api/v1/jobs" in spec["paths"] and "/api/v1/jobs/{job_id}/explain" in spec["paths"]
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    page = c.get("/dashboard/")
    assert page.status_code == 200 and "heatmap" in page.text and "cdn" not in page.text.lower()
    assert c.get("/", follow_redirects=False).headers["location"] == "/dashboard/"


def test_submit_schedule_explain_cancel_over_http(live_server_factory: Callable[..., LiveServer],
                                                  db_url: str) -> None:
    server = live_server_factory(db_url, scheduler_enabled=True, scheduler_interval_s=0.05)
    c = server.client()
    setup_cluster(c)
    r = c.post("/api/v1/jobs", json={"name": "ft", "kind": "TrainingJob", "tier": "silver", "gpus": 4,
                                     "gpu_types": ["A100-80GB"], "duration_hours": 3, "idempotency_key": "k-1",
                                     "deadline": "2030-01-01T00:00:00Z", "flexibility_hours": 2,
                                     "labels": {"team": "nlp"}})
    assert r.status_code == 201, r.text
    job = r.json()
    assert (job["status"], job["gpu_types"], job["num_gpu"], job["gpu_milli"]) == ("pending", ["A100-80GB"], 4, 1000)
    assert job["cost_score"] == pytest.approx(4 * 3 * 5.12)
    again = c.post("/api/v1/jobs", json={"name": "ft", "kind": "TrainingJob", "tier": "silver", "gpus": 4,
                                         "gpu_types": ["A100-80GB"], "duration_hours": 3, "idempotency_key": "k-1",
                                         "deadline": "2030-01-01T00:00:00Z", "flexibility_hours": 2,
                                         "labels": {"team": "nlp"}})
    assert again.status_code == 200 and again.json()["id"] == job["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    clash = c.post("/api/v1/jobs", json={"gpus": 1, "idempotency_key": "k-1"})
    assert clash.status_code == 409 and "different request" in clash.json()["detail"]
    deadline = time.time() + 20
    while c.get(f"/api/v1/jobs/{job['id']}").json()["status"] != "running":
        assert time.time() < deadline, "the loop did not place the job"
        time.sleep(0.05)
    got = c.get(f"/api/v1/jobs/{job['id']}").json()
    assert got["node"] in ("node-0", "node-1") and got["gpu_indices"] == [0, 1, 2, 3]
    ex = c.get(f"/api/v1/jobs/{job['id']}/explain").json()
    assert ex["summary"].startswith("running on") and ex["latest"]["outcome"] == "bind"
    assert ex["latest"]["explanation"]["rejected_by"]["GpuModelMatch"] == 0
    decisions = c.get(f"/api/v1/jobs/{job['id']}/decisions").json()["items"]
    assert [d["outcome"] for d in decisions] == ["bind"]
    kinds = [e["kind"] for e in c.get(f"/api/v1/jobs/{job['id']}/events").json()["items"]]
    assert kinds == ["job.started", "job.bound", "job.submitted"]
    assert c.get("/api/v1/jobs", params={"name": "ft"}).json()["items"][0]["id"] == job["id"]
    cancelled = c.post(f"/api/v1/jobs/{job['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert c.post(f"/api/v1/jobs/{job['id']}/cancel").status_code == 409
    nodes = c.get("/api/v1/clusters/default/nodes").json()
    assert all(sum(n["allocated_gpu_milli"]) == 0 for n in nodes)


def test_tokens_are_shown_once_hashed_at_rest_and_revocable(live_server: LiveServer) -> None:
    admin = live_server.client()
    tid, value = make_tenant_token(admin, "team-a", "member")
    listed = admin.get("/api/v1/tokens").json()
    assert all("token" not in t for t in listed)
    assert any(t["prefix"] == value[:12] for t in listed)
    with live_server.service.db.read() as s:
        stored = {row.token_hash for row in s.scalars(select(ApiToken))}
        dump = "\n".join(str(r) for r in s.execute(text("SELECT * FROM api_tokens")).all())
    assert hashlib.sha256(value.encode()).hexdigest() in stored
    assert value not in dump
    member = live_server.client(value)
    me = member.get("/api/v1/whoami").json()
    assert (me["tenant"], me["role"]) == ("team-a", "member")
    token_id = me["token_id"]
    assert admin.delete(f"/api/v1/tokens/{token_id}").json()["revoked_at"] is not None
    refused = member.get("/api/v1/whoami")
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert live_server.client("sdt_made_up").get("/api/v1/jobs").status_code == 401
    assert live_server.client(None).get("/api/v1/jobs").status_code == 401


def test_roles(live_server: LiveServer) -> None:
    admin = live_server.client()
    setup_cluster(admin, nodes=1)
    tid, viewer_tok = make_tenant_token(admin, "team-v", "viewer")
    op = admin.post("/api/v1/tokens", json={"name": "op", "role": "operator", "tenant_id": tid}).json()["token"]
    member = admin.post("/api/v1/tokens", json={"name": "m", "role": "member", "tenant_id": tid}).json()["token"]
    viewer, operator, mem = (live_server.client(t) for t in (viewer_tok, op, member))
    assert viewer.post("/api/v1/jobs", json={"gpus": 1}).status_code == 403
    assert mem.post("/api/v1/jobs", json={"gpus": 1}).status_code == 201
    assert viewer.get("/api/v1/jobs").json()["items"][0]["tenant_id"] == tid
    assert mem.post("/api/v1/clusters", json={"name": "other"}).status_code == 403
    assert operator.post("/api/v1/clusters", json={"name": "other"}).status_code == 201
    assert operator.post("/api/v1/tokens", json={"name": "x", "role": "admin"}).status_code == 403
    assert operator.post("/api/v1/tokens", json={"name": "x", "role": "member"}).status_code == 201
    assert mem.post("/api/v1/tenants", json={"name": "nope"}).status_code == 403
    assert operator.post("/api/v1/tenants", json={"name": "nope"}).status_code == 403


def test_node_lifecycle_and_removal_requeues_jobs(live_server_factory: Callable[..., LiveServer],
                                                  sqlite_url: str) -> None:
    server = live_server_factory(sqlite_url)
    c = server.client()
    setup_cluster(c, nodes=1)
    jid = c.post("/api/v1/jobs", json={"gpus": 2}).json()["id"]
    server.service.loop.run_once()
    assert c.get(f"/api/v1/jobs/{jid}").json()["status"] == "running"
    r = c.patch("/api/v1/clusters/default/nodes/node-0", json={"status": "cordoned", "labels": {"rack": "r1"}})
    assert r.status_code == 200 and r.json()["status"] == "cordoned" and r.json()["labels"] == {"rack": "r1"}
    assert c.patch("/api/v1/clusters/default/nodes/node-0", json={"status": "bogus"}).status_code == 422
    assert c.delete("/api/v1/clusters/default/nodes/node-0").status_code == 204
    job = c.get(f"/api/v1/jobs/{jid}").json()
    assert (job["status"], job["node"]) == ("pending", None) and "removed" in job["status_reason"]
    kinds = [e["kind"] for e in c.get("/api/v1/events").json()["items"]]
    assert "node.removed" in kinds and "job.requeued" in kinds
    assert c.get("/api/v1/clusters/default").json()["nodes"] == 0


def test_policies_from_yaml(live_server: LiveServer) -> None:
    c = live_server.client()
    setup_cluster(c, nodes=1)
    doc = "apiVersion: seedance/v1\nkind: SchedulingPolicy\nmetadata: {name: peak}\n" \
          "spec:\n  placement: bf\n  queueOrder: sjf\n  plugin: electricity-pricing\n  region: DE\n  window_h: 6\n"
    r = c.post("/api/v1/policies", json={"name": "peak", "config_yaml": doc, "cluster": "default"})
    assert r.status_code == 201, r.text
    p = r.json()
    assert (p["placement"], p["queue_order"], p["plugin"], p["region"]) == ("best-fit", "smallest-first",
                                                                           "electricity-pricing", "DE")
    assert p["config"]["window_h"] == 6 and p["enabled"] is False
    assert c.post("/api/v1/policies/peak/enable").json()["enabled"] is True
    bad = c.post("/api/v1/policies", json={"name": "bad", "config_yaml": "spec:\n  placement: [unclosed\n"})
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("config_yaml:3: not valid YAML"), bad.json()
    unknown = c.post("/api/v1/policies", json={"name": "bad", "placement": "nope"})
    assert unknown.status_code == 422 and "valid names" in unknown.json()["detail"]
    alias = c.post("/api/v1/policies", json={"name": "bomb", "config_yaml": "a: &x [1]\nb: *x\n"})
    assert alias.status_code == 422 and "aliases" in alias.json()["detail"]
    assert c.delete("/api/v1/policies/peak").status_code == 204
    assert c.get("/api/v1/policies/peak").status_code == 404
    # the cost model's own policy documents (kind CostPolicy) are validated by its loader
    cost_doc = ("apiVersion: seedance.io/v1\nkind: CostPolicy\nmetadata: {name: peak-aware}\n"
                "spec:\n  plugin: electricity-pricing\n  weights: {price: 1.0, carbon: 0.5, delay: 1.0}\n")
    r = c.post("/api/v1/policies", json={"name": "peak-aware", "config_yaml": cost_doc, "region": "US-CAL-CISO"})
    assert r.status_code == 201, r.text
    assert r.json()["plugin"] == "electricity-pricing" and r.json()["config"]["spec"]["weights"]["carbon"] == 0.5
    typo = c.post("/api/v1/policies", json={"name": "typo", "config_yaml": cost_doc.replace("weights", "wieghts")})
    assert typo.status_code == 422
    assert typo.json()["detail"] == ("config_yaml:6: field spec.wieghts: unknown key (not in the CostPolicy schema; "
                                     "check the spelling)")


def test_metrics_names_and_values(live_server: LiveServer) -> None:
    c = live_server.client()
    setup_cluster(c, nodes=1)
    for g in (1, 0.5, 16):
        c.post("/api/v1/jobs", json={"gpus": g, "tier": "gold"})
    c.post("/api/v1/jobs", json={"gpus": 8, "tier": "bronze"})
    live_server.service.loop.run_once()
    text_ = live_server.client(None).get("/metrics").text
    lines = text_.splitlines()

    def value(prefix: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix))

    assert value('seedance_pending_jobs{cluster="default",tier="bronze"}') == 1
    assert value('seedance_scheduler_decisions_total{outcome="bind",policy="best-fit"}') == 2
    assert value('seedance_scheduler_decisions_total{outcome="reject",policy="best-fit"}') == 1
    gpu0 = 'seedance_gpu_allocated_ratio{Hostname="node-0",cluster="default",gpu="0",modelName="A100-80GB"}'
    assert value(gpu0) == 1.0
    assert value('seedance_gpu_allocated_ratio{Hostname="node-0",cluster="default",gpu="1"') == 0.5
    assert value('seedance_cluster_gpu_allocated{cluster="default"}') == 1.5
    assert value('seedance_scheduler_decisions_total{outcome="pending",policy="best-fit"}') == 1
    assert value("seedance_scheduler_decision_duration_seconds_count") == 4
    assert value('seedance_job_cost_score_count{tier="gold"}') == 2
    assert "seedance_http_requests_total" in text_ and "seedance_job_scheduling_latency_seconds_bucket" in text_

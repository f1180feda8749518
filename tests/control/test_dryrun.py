"""Policy dry run: the store's recent jobs replayed under the current and the proposed policy; nothing changes."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select, text

from seedance.control.db.models import Base, Cluster, Job, Node, Tenant
from seedance.control.service import ControlService
from seedance.core.catalog import PriceBook
from seedance.tiers.config import DEFAULT_TIER_CONFIG
from tests.control.conftest import LiveServer
from tests.control.helpers import add_nodes

UNTIL = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
SINCE = UNTIL - dt.timedelta(hours=1)


def dump(svc: ControlService) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (and the schema revision), ordered by primary key."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with svc.db.read() as s:
        for table in Base.metadata.sorted_tables:
            out[table.name] = [tuple(r) for r in s.execute(select(table).order_by(*table.primary_key.columns))]
        out["alembic_version"] = [tuple(r) for r in s.execute(text("SELECT version_num FROM alembic_version"))]
    return out


def job_row(tenant: int, cluster: int, name: str, *, tier: str, gpus: int, milli: int, created: float,
            finished: float | None = None, started: float | None = None, status: str = "succeeded",
            duration_h: float | None = None, base: dt.datetime = SINCE) -> dict[str, Any]:
    at = lambda s: None if s is None else base + dt.timedelta(seconds=s)  # noqa: E731
    return {"tenant_id": tenant, "cluster_id": cluster, "name": name, "kind": "TrainingJob", "tier": tier,
            "priority": 0, "cpu_milli": 1000, "memory_mib": 1024, "num_gpu": gpus, "gpu_milli": milli,
            "gpu_types": [], "labels": {}, "request_hash": name, "status": status, "status_reason": "",
            "gpu_indices": [], "duration_hours": duration_h, "created_at": at(created), "updated_at": at(created),
            "started_at": at(started if started is not None else (created if finished is not None else None)),
            "finished_at": at(finished)}


def ids(svc: ControlService) -> tuple[int, int]:
    with svc.db.read() as s:
        tenant = s.scalars(select(Tenant.id)).first()
        cluster = s.scalars(select(Cluster.id)).first()
    assert tenant is not None and cluster is not None
    return tenant, cluster


def test_dry_run_diff_is_exact_and_changes_nothing(live_server_factory: Callable[..., LiveServer],
                                                   db_url: str) -> None:
    """One T4: A (1 GPU, 0-100 s) runs; B (1 GPU, from 10 s) and C (0.5 GPU, from 20 s) wait for it.

    FIFO starts B at 100 s and C never fits; smallest-first starts C at 100 s and B never fits.
    """
    server = live_server_factory(db_url)
    svc = server.service
    add_nodes(svc, count=1, gpus=1, model="T4")
    tenant, cluster = ids(svc)
    with svc.db.write() as s:
        s.execute(insert(Job), [
            job_row(tenant, cluster, "a", tier="silver", gpus=1, milli=1000, created=0, finished=100),
            job_row(tenant, cluster, "b", tier="gold", gpus=1, milli=1000, created=10, started=100, finished=300),
            job_row(tenant, cluster, "c", tier="bronze", gpus=1, milli=500, created=20, finished=300,
                    status="cancelled", started=None),
            job_row(tenant, cluster, "old", tier="silver", gpus=1, milli=1000, created=-10, finished=50),
        ])
    c = server.client()
    for name, queue, enabled in (("fifo", "fifo", True), ("sjf", "smallest-first", False)):
        r = c.post("/api/v1/policies", json={"name": name, "placement": "best-fit", "queue_order": queue,
                                             "enabled": enabled})
        assert r.status_code == 201, r.text
    before = dump(svc)
    r = c.post("/api/v1/policies/sjf/dry-run", json={"window_hours": 1, "until": UNTIL.isoformat()})
    assert r.status_code == 200, r.text
    out = r.json()
    assert dump(svc) == before
    price = PriceBook().usd_per_gpu_hour("T4")
    a, b, d = out["current"], out["proposed"], out["diff"]
    assert (out["jobs"], out["nodes"], out["gpus"], out["variant"], out["cluster"]) == (3, 1, 1, "shared", "default")
    assert (a["policy"], a["queue_order"], b["policy"], b["queue_order"]) == ("fifo", "fifo", "sjf", "smallest-first")
    assert (a["jobs_run"], a["never_run"], b["jobs_run"], b["never_run"]) == (2, 1, 2, 1)
    assert a["gpu_cost_usd"] == pytest.approx(300 / 3600 * price, abs=1e-4)  # A 100 GPU-s + B 200 GPU-s
    assert b["gpu_cost_usd"] == pytest.approx(200 / 3600 * price, abs=1e-4)  # A 100 + C 200 x 0.5
    assert a["cluster_cost_usd"] == pytest.approx(300 / 3600 * price, abs=0.01)  # 1 GPU over the 300 s span
    assert a["queue_delay"]["all"] == {"mean_s": 45.0, "p95_s": 85.5, "max_s": 90.0}  # A 0, B 90
    assert b["queue_delay"]["all"] == {"mean_s": 40.0, "p95_s": 76.0, "max_s": 80.0}  # A 0, C 80
    assert a["queue_delay"]["tiers"]["gold"]["mean_s"] == 90.0 and b["queue_delay"]["tiers"]["bronze"]["mean_s"] == 80
    assert d["queue_delay_mean_s"] == -5.0 and d["preemptions"] == 0 and d["jobs_run"] == 0
    assert d["placed_differently"] == 2
    assert {m["job"].split(":")[1]: (m["current"], m["proposed"]) for m in d["placed_differently_sample"]} == {
        "b": ("node-0 gpu 0", None), "c": (None, "node-0 gpu 0")}
    assert {t: (v["jobs"], v["current_pct"], v["proposed_pct"]) for t, v in d["tiers"].items()} == {
        "gold": (1, 0.0, 0.0), "silver": (1, 100.0, 100.0), "bronze": (1, 0.0, 0.0)}
    assert d["gpu_cost_change_pct"] == pytest.approx(-100 / 3, abs=0.01)
    # the same policy on both sides: no difference at all
    same = c.post("/api/v1/policies/fifo/dry-run", json={"window_hours": 1, "until": UNTIL.isoformat()}).json()
    assert same["diff"]["placed_differently"] == 0 and same["diff"]["gpu_cost_usd"] == 0.0
    # an empty window, an unknown policy, a bad body
    empty = c.post("/api/v1/policies/sjf/dry-run", json={"window_hours": 1, "until": "2020-01-01T00:00:00Z"}).json()
    assert empty["jobs"] == 0 and empty["empty"] == "no jobs were submitted in the window"
    assert c.post("/api/v1/policies/nope/dry-run").status_code == 404
    assert c.post("/api/v1/policies/sjf/dry-run", json={"window_hours": -1}).status_code == 422
    r = c.post("/api/v1/policies/sjf/dry-run", json={"placement": "worst-fit"})
    assert r.status_code == 422 and "unknown placement policy 'worst-fit'" in r.json()["detail"]
    assert dump(svc) == before


def test_unstored_document_dry_run_and_member_refused(live_server: LiveServer) -> None:
    svc = live_server.service
    add_nodes(svc, count=1, gpus=1, model="T4")
    tenant, cluster = ids(svc)
    with svc.db.write() as s:
        s.execute(insert(Job), [job_row(tenant, cluster, f"j{i}", tier="silver", gpus=1, milli=500, created=10 * i,
                                        finished=10 * i + 200) for i in range(6)])
    c = live_server.client()
    doc = "spec:\n  placement: random\n  queueOrder: fifo\n"
    r = c.post("/api/v1/policies/dry-run", json={"name": "try-random", "config_yaml": doc, "window_hours": 1,
                                                  "until": UNTIL.isoformat()})
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["policy"], out["proposed"]["placement"], out["current"]["placement"]) == (
        "try-random", "random", "best-fit")  # current: the service defaults (no policy enabled)
    assert out["current"]["queue_order"] == "priority" and out["proposed"]["queue_order"] == "fifo"
    r = c.post("/api/v1/policies/dry-run", json={"config_yaml": "spec:\n  placement: [x\n"})
    assert r.status_code == 422 and r.json()["detail"].startswith("config_yaml:3: not valid YAML")
    from tests.control.test_api import make_tenant_token

    _, member = make_tenant_token(c, "team-m", "member")
    assert live_server.client(member).post("/api/v1/policies/dry-run", json={}).status_code == 403


def seed_from_trace(svc: ControlService, nodes_csv: Path, pods_csv: Path, base: dt.datetime) -> int:
    """The trace's nodes and pods as stored nodes and finished jobs (times from the trace)."""
    from seedance.traces.alibaba import load_nodes, load_pods

    spec, trace = load_nodes(nodes_csv), load_pods(pods_csv)
    add_nodes(svc, count=0)
    tenant, cluster = ids(svc)
    at = lambda s: base + dt.timedelta(seconds=float(s))  # noqa: E731
    with svc.db.write() as s:
        s.execute(insert(Node), [
            {"cluster_id": cluster, "name": n.name, "cpu_milli": n.cpu_milli, "memory_mib": n.memory_mib,
             "gpu_count": n.gpu_count, "gpu_model": n.gpu_model, "labels": dict(n.labels), "status": "ready",
             "created_at": base} for n in spec.nodes])
        rows = []
        for i in range(len(trace)):
            sched = trace.scheduled[i] if trace.scheduled[i] == trace.scheduled[i] else trace.creation[i]
            rows.append({
                "tenant_id": tenant, "cluster_id": cluster, "name": str(trace.name[i]), "kind": "TrainingJob",
                "tier": DEFAULT_TIER_CONFIG.tier_of(str(trace.qos[i])), "priority": 0,
                "cpu_milli": int(trace.cpu_milli[i]), "memory_mib": int(trace.memory_mib[i]),
                "num_gpu": int(trace.num_gpu[i]), "gpu_milli": int(trace.gpu_milli[i]), "gpu_types": [],
                "labels": {}, "request_hash": str(i), "status": "succeeded", "status_reason": "", "gpu_indices": [],
                "created_at": at(trace.creation[i]), "updated_at": at(trace.deletion[i]),
                "started_at": at(sched), "finished_at": at(trace.deletion[i])})
        s.execute(insert(Job), rows)
    return len(trace)


def test_dry_run_of_10k_stored_jobs_under_30_s_and_changes_nothing(
        live_server_factory: Callable[..., LiveServer], pg_schema_url: str, alibaba: Path) -> None:
    server = live_server_factory(pg_schema_url)
    svc = server.service
    base = UNTIL - dt.timedelta(days=150)
    n = seed_from_trace(svc, alibaba / "openb_node_list_gpu_node.csv", alibaba / "openb_pod_list_cpu300.csv", base)
    assert n >= 10_000
    c = server.client()
    assert c.post("/api/v1/policies", json={"name": "fgd", "placement": "fgd"}).status_code == 201
    before = dump(svc)
    t0 = time.perf_counter()
    r = c.post("/api/v1/policies/fgd/dry-run", json={"window_hours": 24 * 151, "until": UNTIL.isoformat()})
    wall = time.perf_counter() - t0
    assert r.status_code == 200, r.text
    out = r.json()
    assert dump(svc) == before
    print(f"dry run of {out['jobs']} stored jobs on {out['nodes']} nodes: {wall:.2f} s over HTTP "
          f"(load {out['timing_s']['load']:.2f} s, replay {out['timing_s']['replay']:.2f} s)")
    assert out["jobs"] == n and out["nodes"] == 1213 and wall <= 30.0
    assert out["current"]["placement"] == "best-fit" and out["proposed"]["placement"] == "fgd"
    assert out["current"]["jobs_run"] + out["current"]["never_run"] == n
    assert out["diff"]["placed_differently"] > 0  # FGD places differently from best-fit on this trace

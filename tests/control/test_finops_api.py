"""FinOps over real HTTP: agents post ledger windows, /api/v1/allocation answers in OpenCost's idiom."""

from __future__ import annotations

import math
from typing import Any

import pytest

from seedance.finops.lines import ALLOC
from seedance.telemetry.agent import Agent
from seedance.telemetry.collector import FakeCollector
from seedance.telemetry.pods import PodDirectory
from seedance.telemetry.procfs import ProcessSampler
from seedance.telemetry.sampler import NodeSampler
from tests.control.conftest import LiveServer
from tests.telemetry.fakes import FakePsutil, cgroup_of, pod_doc

UIDS = [f"11111111-1111-1111-1111-11111111111{i}" for i in range(4)]
CIDS = [f"{10 + i:x}" * 64 for i in range(4)]
T0 = 1772409600.0  # 2026-03-02T00:00:00Z, a window edge


def sampler(node: str, k: int, t: list[float]) -> NodeSampler:
    """A node with 8 fake H100s; pod k (team) holds 2 GPUs, pod k+1 a 0.25 share of GPU 7."""
    pods = PodDirectory.from_objects([
        pod_doc(f"train-{node}", UIDS[k], [CIDS[k]], namespace="ml", labels={"team": "nlp"}, gpus=2,
                annotations={"seedance.ai/gpu-index": "0,1"}, node=node),
        pod_doc(f"chat-{node}", UIDS[k + 1], [CIDS[k + 1]], namespace="serve", labels={"team": "search"},
                annotations={"seedance.ai/gpu-milli": "250", "seedance.ai/gpu-index": "7"}, node=node),
    ], {"ml": {"env": "prod"}, "serve": {"env": "prod"}}, node=node)
    table = {100 + k: (1.0, 0.0, 2**30), 101 + k: (1.0, 0.0, 2**30)}

    def read(pid: int) -> str:
        i = pid - 100
        return cgroup_of(UIDS[i], CIDS[i])

    return NodeSampler(node, gpus=FakeCollector(gpus=8, model="H100-80GB", clock=lambda: t[0],
                                                processes=[(100 + k, 0, 1000.0, 80.0), (101 + k, 7, 500.0, 20.0)]),
                       processes=ProcessSampler(FakePsutil(table), read), pods=pods, cpu_cores=96,
                       ram_bytes=1024 * 2**30)


def run_agents(server: LiveServer, ticks: int, token: str | None = None) -> list[dict[str, Any]]:
    c = server.client(token) if token else server.client()
    sent: list[dict[str, Any]] = []

    def send(body: dict[str, Any]) -> None:
        sent.append(body)
        r = c.post("/api/v1/telemetry", json=body)
        assert r.status_code == 200, r.text

    t = [T0]
    agents = [Agent(sampler(f"n{i}", 2 * i, t), cluster="default", send=send) for i in range(2)]
    for _ in range(ticks):
        for a in agents:
            a.step(t[0])
        t[0] += 60.0
    return sent


def test_agents_post_and_allocation_adds_up(live_server: LiveServer) -> None:
    sent = run_agents(live_server, 121)  # two hours of minute ticks on two nodes
    c = live_server.client()
    r = c.get("/api/v1/allocation", params={"window": "2026-03-02T00:00:00Z,2026-03-02T02:00:00Z",
                                            "aggregate": "team,env", "step": "1h", "idle": "true"})
    assert r.status_code == 200, r.text
    doc = r.json()
    node_hour = 8 * 12.29 + 96 * 0.031611 + 1024 * 0.004237
    assert math.isclose(doc["total_cost"], 2 * 2 * node_hour, rel_tol=1e-9)
    for s in doc["sets"]:
        assert abs(sum(e["total_cost"] for e in s["allocations"]) - 2 * node_hour) < 0.01
    e = {x["name"]: x for x in doc["allocations"]}
    assert set(e) == {"nlp/prod", "search/prod", "__idle__"}
    assert math.isclose(e["search/prod"]["gpu_hours"], 2 * 2 * 0.25)  # 2 nodes × 2 h × a quarter GPU
    assert math.isclose(e["nlp/prod"]["gpu_hours"], 2 * 2 * 2.0)
    assert math.isclose(e["search/prod"]["gpu_cost"], 1.0 * 12.29)
    assert e["nlp/prod"]["properties"] == {"team": "nlp", "env": "prod"}
    # OpenCost's response shape too
    oc = c.get("/api/v1/allocation", params={"window": "2026-03-02T00:00:00Z,2026-03-02T02:00:00Z",
                                             "aggregate": "namespace", "format": "opencost"}).json()
    assert oc["code"] == 200 and set(oc["data"][0]) == {"ml", "serve", "__idle__"}
    assert math.isclose(oc["data"][0]["serve"]["gpuHours"], 1.0)
    # the heatmap has every GPU with its holders and shares
    hm = c.get("/api/v1/telemetry/heatmap").json()
    assert hm["count"] == 16
    g7 = next(g for g in hm["gpus"] if g["node"] == "n0" and g["gpu"] == 7)
    assert g7["holders"] == [{"namespace": "serve", "pod": "chat-n0", "container": "c0", "allocated": 0.25,
                              "used": 0.2}]
    # re-posting every body again changes nothing (idempotent per node-window)
    for body in sent[-4:]:
        assert c.post("/api/v1/telemetry", json=body).status_code == 200
    again = c.get("/api/v1/allocation", params={"window": "2026-03-02T00:00:00Z,2026-03-02T02:00:00Z",
                                                "aggregate": "team,env"}).json()
    assert math.isclose(again["total_cost"], doc["total_cost"], rel_tol=1e-12)
    ex = c.get("/api/v1/allocation/explain", params={"from": "2026-03-02T00:00:00Z,2026-03-02T01:00:00Z",
                                                     "to": "2026-03-02T01:00:00Z,2026-03-02T02:00:00Z"}).json()
    assert abs(ex["change"]) < 1e-6 and abs(ex["residual"]) < 1e-9 and len(ex["hourly"]) == 1


def test_bad_posts_are_refused_and_nothing_stored_is_lost(live_server: LiveServer) -> None:
    run_agents(live_server, 5)
    c = live_server.client()
    window = {"window": "2026-03-02T00:00:00Z,2026-03-02T01:00:00Z"}
    before = c.get("/api/v1/allocation", params=window).json()["total_cost"]
    base = {"cluster": "default", "node": "n0", "windows": [{"window_start": "2026-03-02T00:00:00Z", "node_s": 60,
                                                             "cpu_core_s": 60, "ram_byte_s": 60, "containers": []}]}
    bad: list[dict[str, Any]] = [
        {**base, "windows": [{**base["windows"][0], "node_s": -1}]},  # negative usage
        {**base, "windows": [{**base["windows"][0], "window_start": "2026-03-02T00:00:07Z"}]},  # off a window edge
        {**base, "cluster": "Bad Name"},
        {**base, "surprise": 1},
        {**base, "gpus": [{"gpu": 0, "uuid": "u", "util_pct": 180}]},
    ]
    for body in bad:
        r = c.post("/api/v1/telemetry", json=body)
        assert r.status_code == 422, (body, r.text)
    assert c.get("/api/v1/allocation", params=window).json()["total_cost"] == before
    assert c.get("/api/v1/allocation", params={"window": "next tuesday"}).status_code == 422
    assert c.get("/api/v1/allocation", params={**window, "shareIdle": "half"}).status_code == 422
    assert c.get("/api/v1/allocation", params=window | {"aggregate": "annotation:x"}).status_code == 422


@pytest.mark.parametrize("role", ["viewer", "member"])
def test_everyone_reads_costs_only_operators_post_telemetry(live_server: LiveServer, role: str) -> None:
    admin = live_server.client()
    tid = admin.post("/api/v1/tenants", json={"name": f"team-{role}"}).json()["id"]
    tok = admin.post("/api/v1/tokens", json={"name": "t", "role": role, "tenant_id": tid}).json()["token"]
    c = live_server.client(tok)
    assert c.get("/api/v1/allocation", params={"window": "7d"}).status_code == 200  # showback, like OpenCost
    assert c.get("/api/v1/allocation/explain").status_code == 200
    assert c.post("/api/v1/telemetry", json={"node": "n"}).status_code == 403
    assert c.post("/api/v1/telemetry").status_code == 403  # the role is checked before the body
    assert c.get("/api/v1/telemetry/heatmap").status_code == 200
    assert live_server.client(None).get("/api/v1/allocation", params={"window": "7d"}).status_code == 401


def test_ledger_rows_are_in_the_store(live_server: LiveServer) -> None:
    run_agents(live_server, 3)
    from seedance.finops.ledger import LedgerStore

    frame = LedgerStore(live_server.service.db).read(cluster="default", source="live", start=_dt(T0),
                                                     end=_dt(T0 + 3600))
    pods = set(frame.text["pod"][frame.text["kind"] == ALLOC].tolist())
    assert pods == {"train-n0", "chat-n0", "train-n1", "chat-n1"}


def _dt(t: float) -> Any:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC)

"""The read paths of ``/metrics`` and the dashboard: the store-derived series rendered as text (byte for
byte what prometheus_client writes for the same families), the per-GPU allocation summed in the store, the
pending-reasons sample grouped in the store, and the metrics listener."""

from __future__ import annotations

import datetime as dt
import http.client
from collections.abc import Callable

import httpx
import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector
from sqlalchemy import select, update

from seedance.control.db.models import ALLOC_MILLI, Job
from seedance.control.observability import StoreCollector, StoreSnapshot, StoreText, read_store, store_families
from seedance.control.service import ControlService
from seedance.control.services import clusters, dashboard
from seedance.core.catalog import CATALOG
from tests.control.conftest import LiveServer
from tests.control.helpers import ADMIN_TOKEN, add_nodes, free_port, submit


class _Fixed(Collector):
    def __init__(self, snap: StoreSnapshot) -> None:
        self.snap = snap

    def collect(self):  # type: ignore[no-untyped-def]
        yield from store_families(self.snap)


def _reference(snap: StoreSnapshot) -> str:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(snap))
    return generate_latest(reg).decode()


def test_store_text_is_what_prometheus_client_writes() -> None:
    snap = StoreSnapshot(
        jobs=[("default", "gold", "pending", 3.0), ("default", "gold", "running", 1.0),
              ('we"ird\\c\nl', "silver", "pending", 1234567.0)],
        gpus=[("default", "node-0", "0", "A100-80GB", 1.0), ("default", "node-0", "1", "A100-80GB", 0.25),
              ('we"ird\\c\nl', "n\\1", "0", "", 0.0)],
        clusters=[("default", 16.0, 1.25), ('we"ird\\c\nl', 1.0, 0.0)],
        cost=[("gold", [("0.1", 1.0), ("0.5", 2.0), ("+Inf", 4.0)], 12.5), ("silver", [("+Inf", 0.0)], 0.0)],
    )
    text = StoreText(None).render(snap)  # type: ignore[arg-type]  # no store read with a snapshot given
    assert text == _reference(snap)
    assert 'seedance_gpu_allocated_ratio{Hostname="n\\\\1",cluster="we\\"ird\\\\c\\nl",gpu="0",modelName=""} 0.0\n' \
        in text
    assert 'seedance_jobs{cluster="default",status="pending",tier="gold"} 3.0\n' in text
    assert 'seedance_pending_jobs{cluster="we\\"ird\\\\c\\nl",tier="silver"} 1.234567e+06\n' in text
    assert text.count("seedance_pending_jobs{") == 2
    empty = StoreSnapshot([], [], [], [])
    assert StoreText(None).render(empty) == _reference(empty)  # type: ignore[arg-type]


def _placed(svc: ControlService) -> list[int]:
    add_nodes(svc, count=2, gpus=4)
    add_nodes(svc, cluster="other", count=1, gpus=2, prefix="o")
    ids = [submit(svc, gpus=g, tier="gold", name=f"j{i}") for i, g in enumerate((1, 0.5, 0.25, 2, 1))]
    ids.append(submit(svc, gpus=1, tier="gold", cluster="other", name="j5"))
    placed = {ids[0]: ("node-0", [0]), ids[1]: ("node-0", [1]), ids[2]: ("node-0", [1]), ids[3]: ("node-1", [2, 3]),
              ids[5]: ("o-0", [1])}  # ids[4] stays pending
    with svc.db.write() as s:
        for job_id, (node, gpus) in placed.items():
            s.execute(update(Job).where(Job.id == job_id).values(
                status="running" if job_id == ids[3] else "bound", node_name=node, gpu_indices=gpus))
    return ids


def test_gpu_allocation_sums_placed_jobs_in_the_store(make_service: Callable[..., ControlService], db_url: str) -> None:
    svc = make_service(db_url)
    _placed(svc)
    with svc.db.read() as s:
        default = clusters.get_cluster(session=s, name="default").id
        other = clusters.get_cluster(session=s, name="other").id
        every = clusters.gpu_allocation(session=s)
        one = clusters.gpu_allocation(session=s, cluster_id=default)
    assert one == {(default, "node-0"): {0: 1000, 1: 750}, (default, "node-1"): {2: 2000 // 2, 3: 1000}}
    assert every == {**one, (other, "o-0"): {1: 1000}}
    snap = read_store(svc.db)
    assert [g for g in snap.gpus if g[0] == "default" and g[4]] == [
        ("default", "node-0", "0", "A100-80GB", 1.0), ("default", "node-0", "1", "A100-80GB", 0.75),
        ("default", "node-1", "2", "A100-80GB", 1.0), ("default", "node-1", "3", "A100-80GB", 1.0)]
    assert len(snap.gpus) == 10 and sorted(snap.clusters) == [("default", 8.0, 3.75), ("other", 2.0, 1.0)]
    text = svc.metrics.render().decode()
    assert 'seedance_gpu_allocated_ratio{Hostname="node-0",cluster="default",gpu="1",modelName="A100-80GB"} 0.75\n' \
        in text
    assert 'seedance_cluster_gpu_allocated{cluster="default"} 3.75\n' in text
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StoreCollector(svc.db))
    assert generate_latest(reg).decode() in text  # the collector yields the same series


def test_dashboard_heatmap_reads_the_store_sums(make_service: Callable[..., ControlService], db_url: str) -> None:
    svc = make_service(db_url)
    _placed(svc)
    me = svc.authenticate(ADMIN_TOKEN)
    with svc.db.read() as s:
        data = dashboard.dashboard_data(session=s, principal=me, cluster=None)
        other = dashboard.dashboard_data(session=s, principal=me, cluster="other")
    assert data.cluster == "default" and data.clusters == ["default", "other"]
    assert [(h.node, h.gpu_milli) for h in data.heatmap] == [("node-0", [1000, 750, 0, 0]),
                                                             ("node-1", [0, 0, 1000, 1000])]
    assert [(h.node, h.gpu_milli) for h in other.heatmap] == [("o-0", [0, 1000])]
    assert data.jobs_by_tier_status == {"gold": {"bound": 3, "running": 1, "pending": 1}}
    assert [(r["tier"], r["jobs"], r["example"]) for r in data.pending_reasons] == [("gold", 1, "j4")]
    assert other.jobs_by_tier_status == {"gold": {"bound": 1}} and other.pending_reasons == []


def test_pending_reasons_rank_by_count_then_code_point(make_service: Callable[..., ControlService],
                                                       db_url: str) -> None:
    svc = make_service(db_url)
    add_nodes(svc, count=1)
    plan = [("pending", "b", "gold", "zed"), ("pending", "B", "gold", "a1"), ("unschedulable", "b", "gold", "alpha"),
            ("pending", "a", "silver", "b1"), ("pending", "a", "silver", "b-2"), ("pending", "B", "gold", "a-2")]
    ids = [submit(svc, gpus=1, tier=tier, name=name) for _, _, tier, name in plan]
    with svc.db.write() as s:
        for job_id, (status, reason, _, _) in zip(ids, plan, strict=True):
            s.execute(update(Job).where(Job.id == job_id).values(status=status, status_reason=reason))
    with svc.db.read() as s:
        got = dashboard._pending_reasons(s, 1, None)
    # two of each; ties by reason then tier by code point ("B" < "a" < "b"); example: the least name by code
    # point ("a-2" < "a1": "-" is 0x2d; a linguistic collation that skips punctuation would say "a1")
    assert got == [{"reason": "B", "tier": "gold", "jobs": 2, "example": "a-2"},
                   {"reason": "a", "tier": "silver", "jobs": 2, "example": "b-2"},
                   {"reason": "b", "tier": "gold", "jobs": 2, "example": "alpha"}]


def test_metrics_listener_serves_the_store_series(live_server_factory: Callable[..., LiveServer],
                                                  sqlite_url: str) -> None:
    port = free_port()
    server = live_server_factory(sqlite_url, metrics_listen=f"127.0.0.1:{port}")
    add_nodes(server.service, count=1, gpus=2)
    scrape = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'seedance_cluster_gpu_capacity{cluster="default"} 2.0\n' in scrape.text
    assert "seedance_http_requests_total" in scrape.text
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # keep-alive: two scrapes, one connection
    try:
        for _ in range(2):
            conn.request("GET", "/metrics")
            answer = conn.getresponse()
            assert answer.status == 200 and answer.version == 11 and b"seedance_jobs" in answer.read()
            assert answer.getheader("connection") != "close"
    finally:
        conn.close()


def _reference_cost(rows: list[tuple], models: dict[str, str | None], start: dt.datetime, now: dt.datetime,
                    points: int) -> list[tuple[dt.datetime, float, float]]:
    """The series as computed before it moved to the store: per job, two sorted prefix sums in numpy."""
    ts = np.linspace(start.timestamp(), now.timestamp(), points)
    bound = np.array([b.timestamp() for b, _, _, _, _ in rows])
    end = np.array([f.timestamp() if f is not None else np.inf for _, f, _, _, _ in rows])
    held = np.array([k * milli / 1000.0 for _, _, _, k, milli in rows])
    price = np.array([CATALOG.resolve(models.get(node or "") or "").price_usd_per_hour if models.get(node or "")
                      else 0.0 for _, _, node, _, _ in rows])

    def at(weight: np.ndarray) -> np.ndarray:
        o = np.argsort(bound, kind="stable")
        started = np.concatenate(([0.0], np.cumsum(weight[o])))[np.searchsorted(bound[o], ts, side="right")]
        o = np.argsort(end, kind="stable")
        ended = np.concatenate(([0.0], np.cumsum(weight[o])))[np.searchsorted(end[o], ts, side="right")]
        return np.round(np.maximum(started - ended, 0.0), 9)

    return [(dt.datetime.fromtimestamp(float(t), dt.UTC), round(float(r), 4), float(g))
            for t, r, g in zip(ts, at(held * price), at(held), strict=True)]


def test_cost_series_bucketed_in_the_store_matches_the_per_job_sums(
        make_service: Callable[..., ControlService], db_url: str) -> None:
    svc = make_service(db_url)
    add_nodes(svc, count=2, gpus=8)
    add_nodes(svc, count=1, gpus=8, model="H100-80GB", prefix="h")
    now = dt.datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
    h = dt.timedelta(hours=1)
    plan = [  # gpus, node, bound, finished (hours before now; None: not yet)
        (1, "node-0", 30.3, None),   # bound before the window, still held: counts at every instant
        (2, "node-0", 30.3, 25.1),   # ended before the window: not in it
        (0.5, "node-1", 23.77, 3.41),
        (0.25, "node-1", 23.77, 3.41),  # same node and instants as the one above: one group in the store
        (4, "h-0", 10.123, None),
        (3, "h-0", 0.2, 0.05),       # inside the last quarter hour: counts at no instant
        (1, "node-0", -0.5, None),   # bound after now (a clock ahead): counts at no instant
        (1, "gone", 5.5, 1.25),      # a node no longer in the cluster: its GPUs count, at no price
    ]
    ids = [submit(svc, gpus=g, tier="gold", name=f"c{i}") for i, (g, _, _, _) in enumerate(plan)]
    with svc.db.write() as s:
        for job_id, (_, node, b, f) in zip(ids, plan, strict=True):
            s.execute(update(Job).where(Job.id == job_id).values(
                status="running" if f is None else "succeeded", node_name=node, bound_at=now - b * h,
                finished_at=None if f is None else now - f * h))
    models = {"node-0": "A100-80GB", "node-1": "A100-80GB", "h-0": "H100-80GB"}
    with svc.db.read() as s:
        cid = clusters.get_cluster(session=s, name="default").id
        got = dashboard._cost_series(s, cid, None, models, now, 24.0, 96)
        other_tenant = dashboard._cost_series(s, cid, 10_000, models, now, 24.0, 96)
        rows = [tuple(r) for r in s.execute(select(Job.bound_at, Job.finished_at, Job.node_name, Job.num_gpu,
                                                   ALLOC_MILLI).where(Job.finished_at.is_(None) |
                                                                      (Job.finished_at >= now - 24 * h)))]
    expected = _reference_cost(rows, models, now - 24 * h, now, 96)
    assert [(p.t, p.usd_per_hour, p.gpus) for p in got] == expected
    assert got[0].gpus == 1.0 and got[-1].gpus == 5.0  # node-0's 1 GPU (+ node-1's 0.75 from 23.77 h ago)
    assert max(p.gpus for p in got) == 1 + 0.75 + 4 + 1
    assert [p.gpus for p in other_tenant] == [0.0] * 96 and len(other_tenant) == 96

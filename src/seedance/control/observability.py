"""Prometheus metrics of the control plane, in one registry owned by the app (no globals).

Names follow Prometheus conventions (``_seconds``, ``_total``, base units) and, for per-GPU
series, DCGM exporter labels (``gpu``, ``modelName``, ``Hostname``), so Grafana panels built for
``DCGM_FI_DEV_GPU_UTIL`` work on allocation too.

Process-local series (observed as things happen):
  * ``seedance_scheduler_decision_duration_seconds`` (histogram; ``policy``): one ``decide`` call;
  * ``seedance_scheduler_cycle_duration_seconds`` (histogram): one loop cycle over a cluster;
  * ``seedance_scheduler_decisions_total`` (counter; ``outcome``, ``policy``);
  * ``seedance_job_scheduling_latency_seconds`` (histogram; ``tier``): submission → bind;
  * ``seedance_http_requests_total`` / ``seedance_http_request_duration_seconds`` (``method``, ``route``).
Store-derived series (read at scrape time from the database, so they survive restarts and agree
across worker processes). Job counts and cost histograms come from ``job_counts``, which triggers
keep current in every writing transaction (a few dozen rows, never a scan of the queue); GPU
allocation sums the placed (bound and running) jobs only, which the cluster's GPUs bound:
  * ``seedance_pending_jobs`` (gauge; ``cluster``, ``tier``);
  * ``seedance_jobs`` (gauge; ``cluster``, ``tier``, ``status``), active and pending only;
  * ``seedance_gpu_allocated_ratio`` (gauge; ``cluster``, ``Hostname``, ``gpu``, ``modelName``);
  * ``seedance_cluster_gpu_capacity`` / ``seedance_cluster_gpu_allocated`` (gauges, GPUs; ``cluster``);
  * ``seedance_job_cost_score`` (histogram of stored cost scores, USD; ``tier``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from sqlalchemy import func, select

from seedance.control.db.aggregates import COST_BUCKETS, JobCount
from seedance.control.db.models import Cluster, Node
from seedance.control.services.clusters import gpu_allocation
from seedance.core.lifecycle import JobStatus

if TYPE_CHECKING:
    from seedance.control.db.session import Database

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # the text format generate_latest writes
_LIVE = (JobStatus.PENDING.value, JobStatus.BOUND.value, JobStatus.RUNNING.value, JobStatus.DEFERRED.value)


class ControlMetrics:
    """Every metric of one service instance, in its own registry."""

    def __init__(self, db: Database | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.decision_seconds = Histogram(
            "seedance_scheduler_decision_duration_seconds", "Time of one scheduling decision (filter+score+select).",
            ["policy"], registry=self.registry,
            buckets=(1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.1),
        )
        self.cycle_seconds = Histogram(
            "seedance_scheduler_cycle_duration_seconds", "Time of one scheduling cycle over a cluster.",
            registry=self.registry, buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.decisions = Counter(
            "seedance_scheduler_decisions", "Scheduling decisions by outcome.", ["outcome", "policy"],
            registry=self.registry,
        )
        self.scheduling_latency = Histogram(
            "seedance_job_scheduling_latency_seconds", "Time from submission to bind.", ["tier"],
            registry=self.registry, buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
        )
        self.http_requests = Counter(
            "seedance_http_requests", "HTTP requests served.", ["method", "route", "status"], registry=self.registry
        )
        self.http_seconds = Histogram(
            "seedance_http_request_duration_seconds", "HTTP request handling time.", ["method", "route"],
            registry=self.registry, buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.store = StoreText(db) if db is not None else None

    def render(self) -> bytes:
        """The exposition text: the process-local series of ``registry``, then the store-derived ones."""
        local = generate_latest(self.registry)
        return local + self.store.render().encode() if self.store is not None else local


class StoreSnapshot(NamedTuple):
    """The store-derived series' values at one scrape, label values resolved (cluster names, not ids)."""

    jobs: list[tuple[str, str, str, float]]  # cluster, tier, status, live jobs (sorted by cluster id, tier, status)
    gpus: list[tuple[str, str, str, str, float]]  # cluster, node, gpu index, model, allocated ratio
    clusters: list[tuple[str, float, float]]  # cluster, GPUs, GPUs allocated
    cost: list[tuple[str, list[tuple[str, float]], float]]  # tier, cumulative (le, count) buckets, sum


def read_store(db: Database) -> StoreSnapshot:
    """The store-derived series, in three statements: live job counts from the trigger-kept ``job_counts``,
    the nodes, and the per-GPU allocation summed in the store (one row per allocated GPU)."""
    with db.read() as s:
        names = dict(s.execute(select(Cluster.id, Cluster.name)).all())
        live: dict[tuple[int, str, str], int] = {}
        hist: dict[str, list[float]] = {}  # tier -> per-bucket counts (+ overflow), then the sum
        for cid, tier, status, bucket, n, total in s.execute(
            select(JobCount.cluster_id, JobCount.tier, JobCount.status, JobCount.cost_bucket,
                   func.sum(JobCount.n), func.sum(JobCount.cost_sum))
            .where(JobCount.status.in_(_LIVE))
            .group_by(JobCount.cluster_id, JobCount.tier, JobCount.status, JobCount.cost_bucket)
        ):
            if not n:
                continue
            live[(cid, tier, status)] = live.get((cid, tier, status), 0) + int(n)
            h = hist.setdefault(tier, [0.0] * (len(COST_BUCKETS) + 2))
            h[int(bucket)] += float(n)
            h[-1] += float(total or 0.0)
        nodes = s.execute(select(Node.cluster_id, Node.name, Node.gpu_count, Node.gpu_model)).all()
        alloc = gpu_allocation(session=s)
    jobs = [(names.get(cid, str(cid)), tier, status, float(n)) for (cid, tier, status), n in sorted(live.items())]
    gpus: list[tuple[str, str, str, str, float]] = []
    totals: dict[int, list[float]] = {}
    for cid, node, g, model in nodes:
        cname = names.get(cid, str(cid))
        t = totals.setdefault(cid, [0.0, 0.0])
        t[0] += g
        on_node = alloc.get((cid, node), {})
        for i in range(g):
            ratio = on_node.get(i, 0) / 1000.0
            gpus.append((cname, node, str(i), model or "", ratio))
            t[1] += ratio
    clusters = [(names.get(cid, str(cid)), c, u) for cid, (c, u) in totals.items()]
    cost = []
    for tier_name, h in sorted(hist.items()):
        cumulative, buckets = 0.0, []
        for i, b in enumerate(COST_BUCKETS):
            cumulative += h[i]
            buckets.append((f"{b:g}", cumulative))
        buckets.append(("+Inf", cumulative + h[len(COST_BUCKETS)]))
        cost.append((tier_name, buckets, h[-1]))
    return StoreSnapshot(jobs, gpus, clusters, cost)


_HELP = {
    "seedance_pending_jobs": ("gauge", "Jobs waiting for a placement."),
    "seedance_jobs": ("gauge", "Live jobs by status."),
    "seedance_gpu_allocated_ratio": ("gauge", "Share of each GPU allocated to jobs (0..1)."),
    "seedance_cluster_gpu_capacity": ("gauge", "GPUs in the cluster."),
    "seedance_cluster_gpu_allocated": ("gauge", "GPUs allocated (fractions add up)."),
    "seedance_job_cost_score": ("histogram", "cost_score of live jobs (USD)."),
}


def store_families(snap: StoreSnapshot) -> list[Metric]:
    """``snap`` as prometheus_client metric families (what :class:`StoreCollector` yields)."""
    def gauge(name: str, labels: list[str]) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, _HELP[name][1], labels=labels)

    pending = gauge("seedance_pending_jobs", ["cluster", "tier"])
    jobs = gauge("seedance_jobs", ["cluster", "tier", "status"])
    ratio = gauge("seedance_gpu_allocated_ratio", ["cluster", "Hostname", "gpu", "modelName"])
    cap = gauge("seedance_cluster_gpu_capacity", ["cluster"])
    used = gauge("seedance_cluster_gpu_allocated", ["cluster"])
    cost = HistogramMetricFamily("seedance_job_cost_score", _HELP["seedance_job_cost_score"][1], labels=["tier"])
    for cname, tier, status, n in snap.jobs:
        jobs.add_metric([cname, tier, status], n)
        if status == JobStatus.PENDING.value:
            pending.add_metric([cname, tier], n)
    for cname, node, gpu, model, r in snap.gpus:
        ratio.add_metric([cname, node, gpu, model], r)
    for cname, c, u in snap.clusters:
        cap.add_metric([cname], c)
        used.add_metric([cname], u)
    for tier, buckets, total in snap.cost:
        cost.add_metric([tier], buckets, total)
    return [pending, jobs, ratio, cap, used, cost]


def _num(v: float) -> str:
    """A sample value as prometheus_client writes it (Go's float formatting)."""
    return str(floatToGoString(v))  # type: ignore[no-untyped-call]


def _esc(v: str) -> str:
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


class StoreText:
    """The store-derived series rendered straight to the text exposition format, byte for byte what
    ``generate_latest`` writes for :func:`store_families` (a test holds the two equal), without building a
    sample object per series: a scrape renders ~400 per-GPU lines, and their label sets, which change
    only with the nodes, are formatted once and kept."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._gpu_keys: dict[tuple[str, str, str, str], str] = {}

    def render(self, snap: StoreSnapshot | None = None) -> str:
        snap = read_store(self.db) if snap is None else snap
        out: list[str] = []

        def head(name: str) -> None:
            kind, doc = _HELP[name]
            out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")

        head("seedance_pending_jobs")
        out.extend(f'seedance_pending_jobs{{cluster="{_esc(c)}",tier="{_esc(t)}"}} {_num(n)}\n'
                   for c, t, st, n in snap.jobs if st == JobStatus.PENDING.value)
        head("seedance_jobs")
        out.extend(f'seedance_jobs{{cluster="{_esc(c)}",status="{_esc(st)}",tier="{_esc(t)}"}} {_num(n)}\n'
                   for c, t, st, n in snap.jobs)
        head("seedance_gpu_allocated_ratio")
        keys = self._gpu_keys
        if len(keys) > 200_000:  # nodes come and go: forget label sets of nodes long gone
            keys.clear()
        for c, node, gpu, model, ratio in snap.gpus:
            key = keys.get((c, node, gpu, model))
            if key is None:
                key = keys[(c, node, gpu, model)] = (
                    f'seedance_gpu_allocated_ratio{{Hostname="{_esc(node)}",cluster="{_esc(c)}",gpu="{_esc(gpu)}",'
                    f'modelName="{_esc(model)}"}} ')
            out.append(f"{key}{_num(ratio)}\n")
        head("seedance_cluster_gpu_capacity")
        out.extend(f'seedance_cluster_gpu_capacity{{cluster="{_esc(c)}"}} {_num(cap)}\n'
                   for c, cap, _ in snap.clusters)
        head("seedance_cluster_gpu_allocated")
        out.extend(f'seedance_cluster_gpu_allocated{{cluster="{_esc(c)}"}} {_num(used)}\n'
                   for c, _, used in snap.clusters)
        head("seedance_job_cost_score")
        for tier, buckets, total in snap.cost:
            t = _esc(tier)
            out.extend(f'seedance_job_cost_score_bucket{{le="{le}",tier="{t}"}} {_num(n)}\n'
                       for le, n in buckets)
            out.append(f'seedance_job_cost_score_count{{tier="{t}"}} {_num(buckets[-1][1])}\n'
                       f'seedance_job_cost_score_sum{{tier="{t}"}} {_num(total)}\n')
        return "".join(out)


class StoreCollector(Collector):
    """The store-derived series as a prometheus_client collector (for a registry of one's own; the service
    renders them with :class:`StoreText`, the same text without the sample objects)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def describe(self) -> list[Metric]:
        return []  # computed at scrape time; no static description

    def collect(self) -> Iterator[Metric]:
        yield from store_families(read_store(self.db))


def serve_metrics(metrics: ControlMetrics, host: str, port: int) -> ThreadingHTTPServer:
    """A listener answering ``GET /metrics`` (any path, as prometheus_client's) with ``metrics.render()``, in a
    daemon thread; ``shutdown()`` and ``server_close()`` stop it."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as Prometheus scrapes (every answer has its length)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = metrics.render()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
            pass

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_cls = type("MetricsServer", (ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})
    server: ThreadingHTTPServer = server_cls((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics-listener", daemon=True).start()
    return server

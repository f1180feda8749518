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

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from seedance.control.db.aggregates import COST_BUCKETS, JobCount
from seedance.control.db.models import ALLOC_MILLI, Cluster, Job, Node
from seedance.core.lifecycle import JobStatus

if TYPE_CHECKING:
    from seedance.control.db.session import Database

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
        if db is not None:
            self.registry.register(StoreCollector(db))

    def render(self) -> bytes:
        """The exposition text."""
        return generate_latest(self.registry)


class StoreCollector(Collector):
    """Series computed from the store at scrape time."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def describe(self) -> list[Metric]:
        return []  # computed at scrape time; no static description

    def collect(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily("seedance_pending_jobs", "Jobs waiting for a placement.",
                                    labels=["cluster", "tier"])
        jobs = GaugeMetricFamily("seedance_jobs", "Live jobs by status.", labels=["cluster", "tier", "status"])
        ratio = GaugeMetricFamily(
            "seedance_gpu_allocated_ratio", "Share of each GPU allocated to jobs (0..1).",
            labels=["cluster", "Hostname", "gpu", "modelName"],
        )
        cap = GaugeMetricFamily("seedance_cluster_gpu_capacity", "GPUs in the cluster.", labels=["cluster"])
        used = GaugeMetricFamily("seedance_cluster_gpu_allocated", "GPUs allocated (fractions add up).",
                                 labels=["cluster"])
        cost = HistogramMetricFamily("seedance_job_cost_score", "cost_score of live jobs (USD).", labels=["tier"])
        with self.db.read() as s:
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
            for (cid, tier, status), n in sorted(live.items()):
                cname = names.get(cid, str(cid))
                jobs.add_metric([cname, tier, status], float(n))
                if status == JobStatus.PENDING.value:
                    pending.add_metric([cname, tier], float(n))
            nodes = s.execute(select(Node.cluster_id, Node.name, Node.gpu_count, Node.gpu_model)).all()
            alloc: dict[tuple[int, str | None], list[int]] = {(c, n): [0] * g for c, n, g, _ in nodes}
            for cid, node, gpus, milli in s.execute(
                select(Job.cluster_id, Job.node_name, Job.gpu_indices, ALLOC_MILLI)
                .where(Job.status.in_((JobStatus.BOUND.value, JobStatus.RUNNING.value)))
            ):
                per_gpu = alloc.get((cid, node))
                if per_gpu is None:
                    continue
                for g in gpus:
                    if 0 <= g < len(per_gpu):
                        per_gpu[g] += milli
            totals: dict[int, list[float]] = {}
            for cid, node, g, model in nodes:
                cname = names.get(cid, str(cid))
                t = totals.setdefault(cid, [0.0, 0.0])
                t[0] += g
                for i, milli in enumerate(alloc[(cid, node)]):
                    ratio.add_metric([cname, node, str(i), model or ""], milli / 1000.0)
                    t[1] += milli / 1000.0
            for cid, (c, u) in totals.items():
                cap.add_metric([names.get(cid, str(cid))], c)
                used.add_metric([names.get(cid, str(cid))], u)
        for tier_name, h in sorted(hist.items()):
            cumulative, buckets = 0.0, []
            for i, b in enumerate(COST_BUCKETS):
                cumulative += h[i]
                buckets.append((f"{b:g}", cumulative))
            buckets.append(("+Inf", cumulative + h[len(COST_BUCKETS)]))
            cost.add_metric([tier_name], buckets, h[-1])
        yield from (pending, jobs, ratio, cap, used, cost)

"""What the web dashboard draws: heatmap, jobs by tier and status, pending reasons, cost over time.

Job-derived panels are scoped to the caller's tenant (admins see all); the heatmap shows the
shared infrastructure (allocation only, no job identities). Jobs by tier and status come from the
trigger-maintained ``job_counts`` (no scan of the jobs); pending reasons are grouped over the
newest ``REASON_SAMPLE`` waiting jobs (one backward range of ``ix_jobs_cluster_status_id`` per waiting
status, bounded whatever the queue length).
Cost over time is the spend rate
($/h) of the GPUs held by jobs at each of ``points`` instants of the last ``window_h`` hours: each
job bound in the window contributes ``gpus × catalog $/GPU-h of its node's model`` from its bind
to its end (two sorted prefix sums over the jobs' binds and ends, not a pass per job per instant).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
from sqlalchemy import func, select, union_all
from sqlalchemy.orm import Session

from seedance.control.db.aggregates import JobCount
from seedance.control.db.models import ALLOC_MILLI, Cluster, Job, Node, utcnow
from seedance.control.errors import NotFound
from seedance.control.schemas import CostPoint, DashboardData, HeatmapRow
from seedance.control.security import Principal
from seedance.control.services import clusters
from seedance.core.catalog import CATALOG
from seedance.core.lifecycle import JobStatus

_MAX_COST_JOBS = 50_000
REASON_SAMPLE = 2000


def dashboard_data(
    *, session: Session, principal: Principal, cluster: str | None, window_h: float = 24.0, points: int = 96
) -> DashboardData:
    """The dashboard's data for one cluster (default: the first)."""
    all_clusters = [(int(i), n) for i, n in session.execute(select(Cluster.id, Cluster.name).order_by(Cluster.id))]
    chosen: tuple[int, str] | None = None
    if cluster is not None:
        chosen = next((c for c in all_clusters if c[1] == cluster), None)
        if chosen is None:
            raise NotFound(f"cluster {cluster!r} not found")
    elif all_clusters:
        chosen = all_clusters[0]
    heat: list[HeatmapRow] = []
    models: dict[str, str | None] = {}
    scope = principal.tenant_scope()
    by: dict[str, dict[str, int]] = {}
    reasons: list[dict[str, object]] = []
    cost: list[CostPoint] = []
    now = utcnow()
    if chosen is not None:
        cid = chosen[0]
        alloc = clusters.gpu_allocation(session=session, cluster_id=cid)
        for name, model, status, labels, gpus in session.execute(
                select(Node.name, Node.gpu_model, Node.status, Node.labels, Node.gpu_count)
                .where(Node.cluster_id == cid).order_by(Node.id)):
            models[name] = model
            on_node = alloc.get((cid, name), {})
            heat.append(HeatmapRow(node=name, model=model, status=status, tier=labels.get("gpu.sla.level"),
                                   gpu_milli=[on_node.get(i, 0) for i in range(gpus)]))
        q = select(JobCount.tier, JobCount.status, func.sum(JobCount.n)).where(JobCount.cluster_id == cid)
        if scope is not None:
            q = q.where(JobCount.tenant_id == scope)
        for tier, status, count in session.execute(q.group_by(JobCount.tier, JobCount.status)):
            if count:
                by.setdefault(tier, {})[status] = int(count)
        reasons = _pending_reasons(session, cid, scope)
        cost = _cost_series(session, cid, scope, models, now, window_h, points)
    return DashboardData(
        cluster=chosen[1] if chosen else None, clusters=[name for _, name in all_clusters], heatmap=heat,
        jobs_by_tier_status=by, pending_reasons=reasons, cost=cost, generated_at=now,
    )


def _pending_reasons(session: Session, cluster_id: int, scope: int | None) -> list[dict[str, object]]:
    """The 20 commonest (reason, tier) among the newest ``REASON_SAMPLE`` waiting jobs, with an example name
    (the least by code point).

    One statement: per waiting status a backward range of ``ix_jobs_cluster_status_id`` stopping after
    ``REASON_SAMPLE`` rows, the newest ``REASON_SAMPLE`` of both, grouped in the store; bounded by the
    sample however long the queue, and only the groups come back (ranked here, by code point as Python
    orders strings, whatever the store's collation)."""
    parts = []
    for status in (JobStatus.PENDING.value, JobStatus.UNSCHEDULABLE.value):
        q = (select(Job.id, Job.status_reason, Job.tier, Job.name)
             .where(Job.cluster_id == cluster_id, Job.status == status)
             .order_by(Job.id.desc()).limit(REASON_SAMPLE))
        if scope is not None:
            q = q.where(Job.tenant_id == scope)
        parts.append(select(q.subquery()))
    both = union_all(*parts).subquery()
    sample = select(both).order_by(both.c.id.desc()).limit(REASON_SAMPLE).subquery()
    name = sample.c.name.collate("C") if session.get_bind().dialect.name == "postgresql" else sample.c.name
    groups = session.execute(
        select(sample.c.status_reason, sample.c.tier, func.count(), func.min(name))
        .group_by(sample.c.status_reason, sample.c.tier))
    ranked = sorted(((-int(n), reason, tier, example) for reason, tier, n, example in groups))[:20]
    return [{"reason": r, "tier": t, "jobs": -n, "example": e} for n, r, t, e in ranked]


def _cost_series(
    session: Session, cluster_id: int, scope: int | None, models: dict[str, str | None], now: dt.datetime,
    window_h: float, points: int,
) -> list[CostPoint]:
    start = now - dt.timedelta(hours=window_h)
    q = (select(Job.bound_at, Job.finished_at, Job.node_name, Job.num_gpu, ALLOC_MILLI)
         .where(Job.cluster_id == cluster_id, Job.bound_at.is_not(None),
                (Job.finished_at.is_(None)) | (Job.finished_at >= start))
         .order_by(Job.id.desc()).limit(_MAX_COST_JOBS))
    if scope is not None:
        q = q.where(Job.tenant_id == scope)
    rows = session.execute(q).all()
    ts = np.linspace(start.timestamp(), now.timestamp(), points)
    price_of: dict[str, float] = {"": 0.0}
    n = len(rows)
    bound = np.empty(n)
    end = np.empty(n)
    held = np.empty(n)
    price = np.empty(n)
    for i, (bound_at, finished_at, node, k, milli) in enumerate(rows):
        bound[i] = bound_at.timestamp() if bound_at is not None else np.inf  # the query asks bound_at set
        end[i] = finished_at.timestamp() if finished_at is not None else np.inf
        held[i] = k * milli / 1000.0
        model = models.get(node or "") or ""
        if model not in price_of:
            price_of[model] = CATALOG.resolve(model).price_usd_per_hour
        price[i] = price_of[model]
    gpus = _held_at(ts, bound, end, held)
    rate = _held_at(ts, bound, end, held * price)
    return [
        CostPoint(t=dt.datetime.fromtimestamp(float(t), dt.UTC), usd_per_hour=round(float(r), 4), gpus=float(g))
        for t, r, g in zip(ts, rate, gpus, strict=True)
    ]


def _held_at(ts: np.ndarray, start: np.ndarray, end: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """At each instant of ``ts``, the sum of ``weight`` over intervals with ``start <= t < end``: what started
    by then minus what ended by then (two sorted prefix sums, O(n log n) instead of n × len(ts))."""
    if not len(start):
        return np.zeros(len(ts))
    o = np.argsort(start, kind="stable")
    started = np.concatenate(([0.0], np.cumsum(weight[o])))[np.searchsorted(start[o], ts, side="right")]
    o = np.argsort(end, kind="stable")
    ended = np.concatenate(([0.0], np.cumsum(weight[o])))[np.searchsorted(end[o], ts, side="right")]
    held: np.ndarray = np.round(np.maximum(started - ended, 0.0), 9)  # a prefix-sum difference: drop residue
    return held

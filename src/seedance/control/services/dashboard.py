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
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from seedance.control.db.aggregates import JobCount
from seedance.control.db.models import ALLOC_MILLI, Cluster, Job, Node, utcnow
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
    all_clusters = clusters.list_clusters(session=session)
    chosen: Cluster | None = None
    if cluster is not None:
        chosen = clusters.get_cluster(session=session, name=cluster)
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
        nodes = list(session.scalars(select(Node).where(Node.cluster_id == chosen.id).order_by(Node.id)))
        alloc = clusters.allocations(session=session, cluster_id=chosen.id, nodes=nodes)
        for n in nodes:
            models[n.name] = n.gpu_model
            heat.append(HeatmapRow(node=n.name, model=n.gpu_model, status=n.status,
                                   tier=n.labels.get("gpu.sla.level"), gpu_milli=alloc[n.name].gpu_milli))
        q = select(JobCount.tier, JobCount.status, func.sum(JobCount.n)).where(JobCount.cluster_id == chosen.id)
        if scope is not None:
            q = q.where(JobCount.tenant_id == scope)
        for tier, status, count in session.execute(q.group_by(JobCount.tier, JobCount.status)):
            if count:
                by.setdefault(tier, {})[status] = int(count)
        reasons = _pending_reasons(session, chosen.id, scope)
        cost = _cost_series(session, chosen.id, scope, models, now, window_h, points)
    return DashboardData(
        cluster=chosen.name if chosen else None, clusters=[c.name for c in all_clusters], heatmap=heat,
        jobs_by_tier_status=by, pending_reasons=reasons, cost=cost, generated_at=now,
    )


def _pending_reasons(session: Session, cluster_id: int, scope: int | None) -> list[dict[str, object]]:
    """The 20 commonest (reason, tier) among the newest ``REASON_SAMPLE`` waiting jobs, with an example name.

    One query per waiting status, each a backward range of ``ix_jobs_cluster_status_id`` stopping after
    ``REASON_SAMPLE`` rows, merged here: bounded by the sample, however long the queue."""
    rows: list[tuple[int, str, str, str]] = []
    for status in (JobStatus.PENDING.value, JobStatus.UNSCHEDULABLE.value):
        q = (select(Job.id, Job.status_reason, Job.tier, Job.name)
             .where(Job.cluster_id == cluster_id, Job.status == status)
             .order_by(Job.id.desc()).limit(REASON_SAMPLE))
        if scope is not None:
            q = q.where(Job.tenant_id == scope)
        rows.extend((int(i), r, t, n) for i, r, t, n in session.execute(q))
    rows.sort(reverse=True)
    counts: dict[tuple[str, str], int] = {}
    example: dict[tuple[str, str], str] = {}
    for _, reason, tier, name in rows[:REASON_SAMPLE]:
        key = (reason, tier)
        counts[key] = counts.get(key, 0) + 1
        example[key] = min(example.get(key, name), name)
    ranked = sorted(counts, key=lambda k: (-counts[k], k))[:20]
    return [{"reason": r, "tier": t, "jobs": counts[(r, t)], "example": example[(r, t)]} for r, t in ranked]


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

"""What the web dashboard draws: heatmap, jobs by tier and status, pending reasons, cost over time.

Job-derived panels are scoped to the caller's tenant (admins see all); the heatmap shows the
shared infrastructure (allocation only, no job identities). Jobs by tier and status come from the
trigger-maintained ``job_counts`` (no scan of the jobs); pending reasons are grouped over the
newest ``REASON_SAMPLE`` waiting jobs (one backward range of ``ix_jobs_cluster_status_id`` per waiting
status, bounded whatever the queue length).
Cost over time is the spend rate
($/h) of the GPUs held by jobs at each of ``points`` instants of the last ``window_h`` hours: each
job bound in the window contributes ``gpus × catalog $/GPU-h of its node's model`` at the instants
from its bind to its end. The store maps each job to its first and last instant and sums the jobs
sharing a node and both instants (one row per group, not per job); the rows become two prefix
sums here.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
from sqlalchemy import func, select, text, union_all
from sqlalchemy.orm import Session

from seedance.control.db.aggregates import JobCount
from seedance.control.db.models import Cluster, Job, Node, utcnow
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


_COST_SQL = {  # per job of the window: the first instant it counts at (kb) and the first it no longer does (ke)
    "postgresql": {
        "epoch": "EXTRACT(EPOCH FROM {col})::float8",
        "ceil": "CEIL({x})",
    },
    "sqlite": {
        "epoch": "((julianday({col}) - 2440587.5) * 86400.0)",
        "ceil": "(CAST({x} AS INTEGER) + ({x} > CAST({x} AS INTEGER)))",
    },
}


def _instant(dialect: str, col: str) -> str:
    """How many of the series' instants lie before ``col`` (a timestamp column): ``ceil((col - t0) / step)``
    clamped to ``0..points``, in the store's floating point (a bind or end within rounding of an instant,
    a few microseconds, may count on either side of it)."""
    f = _COST_SQL[dialect]
    x = f"(({f['epoch'].format(col=col)} - :t0) / :step)"
    return f"CASE WHEN {x} <= 0 THEN 0 WHEN {x} >= :points THEN :points ELSE {f['ceil'].format(x=x)} END"


def _cost_series(
    session: Session, cluster_id: int, scope: int | None, models: dict[str, str | None], now: dt.datetime,
    window_h: float, points: int,
) -> list[CostPoint]:
    start = now - dt.timedelta(hours=window_h)
    ts = np.linspace(start.timestamp(), now.timestamp(), points)
    step = (ts[-1] - ts[0]) / (points - 1) if points > 1 else 1.0
    dialect = session.get_bind().dialect.name
    kb = _instant(dialect, "bound_at")
    ke = f"CASE WHEN finished_at IS NULL THEN :points ELSE {_instant(dialect, 'finished_at')} END"
    tenant = " AND tenant_id = :tenant" if scope is not None else ""
    sql = (f"SELECT node_name, kb, ke, SUM(w) FROM (SELECT node_name, {kb} AS kb, {ke} AS ke, "
           "num_gpu * COALESCE(placed_gpu_milli, gpu_milli) AS w FROM jobs "
           "WHERE cluster_id = :c AND bound_at IS NOT NULL AND (finished_at IS NULL OR finished_at >= :start)"
           f"{tenant} ORDER BY id DESC LIMIT :lim) AS j WHERE kb < ke GROUP BY node_name, kb, ke")
    params = {"c": cluster_id, "t0": float(ts[0]), "step": float(step), "points": points, "lim": _MAX_COST_JOBS,
              "start": start if dialect != "sqlite" else start.replace(tzinfo=None), "tenant": scope}
    price_of: dict[str, float] = {"": 0.0}
    groups: list[tuple[int, int, float]] = []
    priced: list[tuple[int, int, float]] = []
    for node, first, end, milli in session.execute(text(sql), params):
        model = models.get(node or "") or ""
        if model not in price_of:
            price_of[model] = CATALOG.resolve(model).price_usd_per_hour
        groups.append((int(first), int(end), milli / 1000.0))
        priced.append((int(first), int(end), milli / 1000.0 * price_of[model]))
    gpus, rate = _held_at(points, groups), _held_at(points, priced)
    return [
        CostPoint(t=dt.datetime.fromtimestamp(float(t), dt.UTC), usd_per_hour=round(float(r), 4), gpus=float(g))
        for t, r, g in zip(ts, rate, gpus, strict=True)
    ]


def _held_at(points: int, groups: list[tuple[int, int, float]]) -> np.ndarray:
    """At each instant ``k < points``, the sum of the weights of the ``(first, end, weight)`` groups with
    ``first <= k < end``: a prefix sum of what starts minus what ends at each instant."""
    delta = np.zeros(points + 1)
    for first, end, weight in groups:
        delta[min(first, points)] += weight
        delta[min(end, points)] -= weight
    held: np.ndarray = np.round(np.maximum(np.cumsum(delta[:points]), 0.0), 9)  # drop the sums' float residue
    return held

"""Dry run of a policy: the cluster's recent jobs from the store, replayed under the current and the proposed policy.

Read-only: one read transaction loads the cluster's nodes and the jobs submitted in the window;
the replay (:func:`seedance.sim.sandbox.sandbox_diff`) runs in memory. Nothing is written, not
even an event, so the store is byte-for-byte what it was (a test compares every table).

NOTE(seedance): a stored job as a replayed pod, once.
  * Arrival: ``created_at`` (seconds from the window start). Request: CPU, memory, GPUs,
    milli-GPU and allowed GPU models as submitted. Tier: the job's tier (the replay's QoS class).
  * Leave: ``finished_at`` for a job that ended (succeeded, failed, cancelled); for one still
    running or bound, its start plus ``duration_hours`` when known, else the window end; for one
    still waiting, arrival plus ``duration_hours`` when known (at least the window end), else the
    window end. A pod still waiting at its leave time leaves unserved, as in the replay simulator.
  * Nodes: the cluster's nodes now (down nodes left out), in id order, with their labels (the tier
    pools of the ``tiered`` variant).
  * Current policy: the one in force for the cluster (``policies.active_policy``, else the
    service defaults); proposed: the named stored policy's placement and queue order.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from seedance.control.db.models import Cluster, Job, Node, SchedulingPolicy, utcnow
from seedance.control.errors import NotFound
from seedance.control.policydoc import (
    PolicyValidator,
    canonical_placement,
    canonical_queue_order,
    default_policy_validator,
)
from seedance.control.schemas import NAME_PATTERN, PlacementName, QueueOrderName
from seedance.control.services import clusters, policies
from seedance.control.services.compliance import Timestamp
from seedance.core.cluster import ClusterSpec, NodeSpec
from seedance.core.errors import InputError, UnknownNameError
from seedance.core.lifecycle import JobStatus
from seedance.core.numbers import Int
from seedance.sim.sandbox import ReplayPolicy, SandboxOptions, sandbox_diff
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig
from seedance.traces.schema import PodTrace

_ENDED = frozenset({JobStatus.SUCCEEDED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value})
_STARTED = frozenset({JobStatus.RUNNING.value, JobStatus.BOUND.value})


class DryRunRequest(BaseModel):
    """Body of ``POST /api/v1/policies/{name}/dry-run`` (every field optional; no lax coercion)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    cluster: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=63,
                                description="Cluster replayed (default: the policy's, else the only one).")
    window_hours: float = Field(default=24.0, gt=0, le=24 * 366, description="Hours of submitted jobs replayed.")
    until: Timestamp | None = Field(default=None, description="End of the window (default: now).")
    variant: Literal["shared", "tiered"] | None = Field(
        default=None, description="shared: placement and queue order only; tiered: tier pools and borrowing "
        "(default: as the live loop runs, tiered when the service places by tier pools).")
    preemption: bool = Field(default=False, description="Let the tiered replay preempt by cost (the live loop "
                             "does not preempt yet; on: what preemption would change).")
    max_jobs: Int = Field(default=200_000, ge=1, le=1_000_000, description="Most jobs replayed (newest kept).")
    placement: PlacementName | Literal[""] | None = Field(
        default=None, description="Proposed placement policy instead of the policy's own (empty or null: its own).")
    queue_order: QueueOrderName | Literal[""] | None = Field(
        default=None, description="Proposed queue order instead of the policy's own (empty or null: its own).")


class DryRunProposal(DryRunRequest):
    """Body of ``POST /api/v1/policies/dry-run``: a policy document not stored (yet)."""

    name: str = Field(default="proposal", pattern=NAME_PATTERN, max_length=63, description="Name shown in the diff.")
    config_yaml: str = Field(default="", max_length=32 * 1024, description="The policy YAML (as --config-file).")


def _cluster_for(session: Session, policy: SchedulingPolicy | None, name: str | None) -> Cluster:
    if name:
        return clusters.get_cluster(session=session, name=name)
    if policy is not None and policy.cluster_id is not None:
        c = session.get(Cluster, policy.cluster_id)
        if c is not None:
            return c
    found = list(session.scalars(select(Cluster).order_by(Cluster.id).limit(2)))
    if not found:
        raise NotFound("no cluster to replay: the store has none")
    if len(found) > 1:
        raise InputError("the store has several clusters; say which one to replay", source="request body",
                         field="cluster")
    return found[0]


def cluster_spec(session: Session, cluster: Cluster) -> ClusterSpec:
    """The cluster's nodes as the replay sees them (down nodes left out), in id order."""
    rows = session.scalars(select(Node).where(Node.cluster_id == cluster.id).order_by(Node.id))
    nodes = tuple(
        NodeSpec(name=n.name, cpu_milli=int(n.cpu_milli), memory_mib=int(n.memory_mib), gpu_count=int(n.gpu_count),
                 gpu_model=n.gpu_model, labels={str(k): str(v) for k, v in (n.labels or {}).items()})
        for n in rows if n.status != "down"
    )
    return ClusterSpec(nodes=nodes, name=cluster.name)


def jobs_trace(
    session: Session, cluster: Cluster, *, since: dt.datetime, until: dt.datetime, max_jobs: int
) -> tuple[PodTrace, list[str]]:
    """The jobs submitted in ``[since, until]`` as a replay trace (see the module docstring), and their ids."""
    rows = list(session.execute(
        select(Job.id, Job.name, Job.tier, Job.cpu_milli, Job.memory_mib, Job.num_gpu, Job.gpu_milli, Job.gpu_types,
               Job.status, Job.duration_hours, Job.created_at, Job.started_at, Job.bound_at, Job.finished_at,
               Job.updated_at)
        .where(Job.cluster_id == cluster.id, Job.created_at >= since, Job.created_at <= until)
        .order_by(Job.created_at.desc(), Job.id.desc()).limit(max_jobs)
    ).all())
    rows.reverse()
    n = len(rows)
    end_s = (until - since).total_seconds()
    ids, tiers, specs = [], [], []
    cpu = np.empty(n, dtype=np.int64)
    mem = np.empty(n, dtype=np.int64)
    k = np.empty(n, dtype=np.int64)
    milli = np.empty(n, dtype=np.int64)
    created = np.empty(n, dtype=np.float64)
    leave = np.empty(n, dtype=np.float64)
    types: dict[str, tuple[str, ...]] = {"": ()}
    for i, r in enumerate(rows):
        (jid, name, tier, c, m, g, gm, gtypes, status, dur_h, t_created, t_started, t_bound, t_finished,
         t_updated) = r
        ids.append(f"{jid}:{name}")
        tiers.append(str(tier))
        allowed = tuple(str(x) for x in (gtypes or ()))
        spec = "|".join(allowed)
        types.setdefault(spec, allowed)
        specs.append(spec)
        cpu[i], mem[i], k[i], milli[i] = int(c), int(m), int(g), int(gm)
        t0 = (t_created - since).total_seconds()
        dur = float(dur_h) * 3600.0 if dur_h else None
        if status in _ENDED:
            t1 = ((t_finished or t_updated) - since).total_seconds()
        elif status in _STARTED:
            began = t_started or t_bound or t_created
            t1 = (began - since).total_seconds() + dur if dur is not None else end_s
        else:
            t1 = max(end_s, t0 + dur) if dur is not None else end_s
        created[i] = t0
        leave[i] = max(t1, t0 + 1.0)
    trace = PodTrace(
        source=f"store: cluster {cluster.name}, jobs submitted {since.isoformat()} .. {until.isoformat()}",
        name=np.array(ids, dtype=np.str_) if ids else np.zeros(0, dtype=np.str_),
        cpu_milli=cpu, memory_mib=mem, num_gpu=k, gpu_milli=milli,
        gpu_spec=np.array(specs, dtype=object), gpu_types=types, qos=np.array(tiers, dtype=object),
        phase=np.array(["Running"] * n, dtype=object), creation=created, deletion=leave, scheduled=np.full(n, np.nan),
    )
    return trace, ids


def replay_tiers(tier_config: TierConfig, *, preemption: bool) -> TierConfig:
    """The tier config with each tier's name accepted as its own QoS class (and preemption off unless asked)."""
    qos = dict(tier_config.qos_map) | {t: t for t in tier_config.names()}
    tiers = tier_config.tiers if preemption else {
        n: s.model_copy(update={"may_preempt": ()}) for n, s in tier_config.tiers.items()}
    return tier_config.model_copy(update={"qos_map": qos, "tiers": tiers})


@dataclass(frozen=True, slots=True)
class PreparedDryRun:
    """What a dry run read from the store (the replay needs nothing else)."""

    head: dict[str, Any]
    spec: ClusterSpec
    trace: PodTrace
    ids: list[str]
    current: ReplayPolicy
    proposed: ReplayPolicy
    opts: SandboxOptions
    load_s: float


def _proposal(
    session: Session, name: str, request: DryRunRequest, validator: PolicyValidator | None,
) -> tuple[SchedulingPolicy | None, str | None, str | None]:
    """The stored policy (or ``None`` for a document given inline) and its placement and queue order."""
    if isinstance(request, DryRunProposal):
        config = (validator or default_policy_validator()).validate(request.config_yaml, source="config_yaml")
        placement, queue = config.get("placement"), config.get("queue_order")
        return None, str(placement) if placement else None, str(queue) if queue else None
    row = policies.get_policy(session=session, name=name)
    return row, row.placement, row.queue_order


def _canonical(value: str | None, fallback: str, field: str, fn: Callable[[str], str]) -> str:
    try:
        return fn(value or fallback)
    except UnknownNameError as exc:
        raise InputError(str(exc), source="request body", field=field) from None


def prepare(
    *, session: Session, name: str, request: DryRunRequest, default_placement: str, default_queue: str,
    tier_pools: bool, tier_config: TierConfig = DEFAULT_TIER_CONFIG, now: dt.datetime | None = None,
    validator: PolicyValidator | None = None,
) -> PreparedDryRun:
    """Read the policies, the nodes and the window's jobs (one read transaction; nothing written).

    ``request`` is a :class:`DryRunProposal` for a document not stored, else policy ``name`` is read
    from the store. The proposed placement and queue order are the request's, else the policy's, else
    (a document that sets neither, e.g. a ``CostPolicy``) the current ones.
    """
    t0 = time.perf_counter()
    proposed_row, p_place, p_queue = _proposal(session, name, request, validator)
    cluster = _cluster_for(session, proposed_row, request.cluster)
    until = request.until or now or utcnow()
    if until.tzinfo is None:
        raise InputError("give a timezone (e.g. ...Z)", source="request body", field="until")
    since = until - dt.timedelta(hours=request.window_hours)
    active = policies.active_policy(session=session, cluster_id=cluster.id, default_placement=default_placement,
                                    default_queue=default_queue)
    spec = cluster_spec(session, cluster)
    trace, ids = jobs_trace(session, cluster, since=since, until=until, max_jobs=request.max_jobs)
    variant = request.variant or ("tiered" if tier_pools else "shared")
    head = {"dry_run": True, "policy": name, "cluster": cluster.name, "variant": variant, "window": {
        "since": since.isoformat(), "until": until.isoformat(), "hours": request.window_hours}}
    return PreparedDryRun(
        head=head, spec=spec, trace=trace, ids=ids,
        current=ReplayPolicy(active.name, active.placement, active.queue_order),
        proposed=ReplayPolicy(
            name, _canonical(request.placement or p_place, active.placement, "placement", canonical_placement),
            _canonical(request.queue_order or p_queue, active.queue_order, "queue_order", canonical_queue_order)),
        opts=SandboxOptions(variant=variant, tier_config=replay_tiers(tier_config, preemption=request.preemption)),
        load_s=time.perf_counter() - t0,
    )


def execute(p: PreparedDryRun) -> dict[str, Any]:
    """Replay a prepared dry run (in memory) and return the diff."""
    t0 = time.perf_counter()
    if not len(p.trace) or not p.spec.nodes:
        why = "no jobs were submitted in the window" if not len(p.trace) else "the cluster has no nodes"
        sides = {k: {"policy": v.name, "placement": v.placement, "queue_order": v.queue_order}
                 for k, v in (("current", p.current), ("proposed", p.proposed))}
        return p.head | {"jobs": len(p.trace), "nodes": len(p.spec.nodes), "empty": why, **sides}
    out = sandbox_diff(p.spec, p.trace, p.current, p.proposed, p.opts, job_ids=p.ids)
    return p.head | out | {"timing_s": {"load": round(p.load_s, 3), "replay": round(time.perf_counter() - t0, 3)}}


def dry_run(*, session: Session, name: str, request: DryRunRequest, default_placement: str, default_queue: str,
            tier_pools: bool, now: dt.datetime | None = None) -> dict[str, Any]:
    """:func:`prepare` then :func:`execute` (the replay runs after the reads, still in the caller's session)."""
    return execute(prepare(session=session, name=name, request=request, default_placement=default_placement,
                           default_queue=default_queue, tier_pools=tier_pools, now=now))

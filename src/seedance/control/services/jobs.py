"""Jobs: submit (idempotent), read, list, cancel, and their decision and event history.

Submission stores the job as ``pending`` with its ``cost_score`` in one transaction with its
``job.submitted`` event, and answers only after the commit, so an acknowledged job is durable.
An idempotency key is unique per tenant (a database constraint): a retry with the same key and
the same request returns the stored job; the same key with a different request is a conflict.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any, cast

from sqlalchemy import Connection, Table, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from seedance.control.costing import CostInput, CostScorer
from seedance.control.db.models import Cluster, DecisionRecord, EventRecord, Job, Node, utcnow
from seedance.control.errors import Conflict, NotFound
from seedance.control.schemas import DecisionRead, Explanation, JobCreate, JobKind, JobRead, Role
from seedance.control.security import Principal
from seedance.control.services import clusters, events, tenants
from seedance.control.services.grades import isolation_of
from seedance.core.lifecycle import JOB_TRANSITIONS, TERMINAL_JOB_STATUSES, JobStatus, transition
from seedance.core.resources import MILLI_PER_GPU

_NAME_PREFIX = {JobKind.TRAINING_JOB: "train", JobKind.INFERENCE_SERVICE: "infer"}
_JOBS = cast(Table, Job.__table__)
# statements built once; executed with a parameter dict (no per-call statement construction)
_INSERT_JOB = insert(_JOBS).returning(_JOBS.c.id)
_IDEM = ["tenant_id", "idempotency_key"]
_INSERT_JOB_IDEM_PG = pg_insert(_JOBS).on_conflict_do_nothing(index_elements=_IDEM).returning(_JOBS.c.id)
_INSERT_JOB_IDEM_SQLITE = sqlite_insert(_JOBS).on_conflict_do_nothing(index_elements=_IDEM).returning(_JOBS.c.id)
_INSERT_EVENT = insert(cast(Table, EventRecord.__table__))


def request_hash(data: JobCreate) -> str:
    """SHA-256 of the request without its idempotency key (what a replay must match)."""
    body = data.model_dump(mode="json", exclude={"idempotency_key"})
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def cost_input(job: Job, cluster_models: tuple[str, ...]) -> CostInput:
    """The cost scorer's view of a stored job."""
    return CostInput(
        num_gpu=job.num_gpu, gpu_milli=job.gpu_milli, gpu_types=tuple(job.gpu_types), cluster_models=cluster_models,
        duration_hours=job.duration_hours, tier=job.tier, flexibility_hours=job.flexibility_hours,
    )


def submit_job(
    *, session: Session, principal: Principal, data: JobCreate, scorer: CostScorer, directory: ClusterDirectory
) -> tuple[JobRead, bool]:
    """Store a new pending job; returns ``(job, created)``.

    ``created`` is False when an earlier job with the same idempotency key is returned instead.
    Hot path: one ``INSERT ... ON CONFLICT (tenant, key) DO NOTHING RETURNING id`` plus the event
    insert; the cluster's id and GPU models come from ``directory`` (cached).
    """
    conn = session.connection()
    values, event = prepare_submission(session=session, principal=principal, data=data, scorer=scorer,
                                       directory=directory)
    tenant_id, name, digest = values["tenant_id"], values["name"], values["request_hash"]
    stmt: Any = _INSERT_JOB
    if data.idempotency_key is not None:
        stmt = _INSERT_JOB_IDEM_PG if conn.dialect.name == "postgresql" else _INSERT_JOB_IDEM_SQLITE
    try:
        job_id = conn.execute(stmt, values).scalar()
    except IntegrityError:
        raise Conflict(f"a job called {name!r} already exists in this tenant") from None
    if job_id is None:  # the key exists (maybe committed a moment ago by a concurrent retry)
        earlier = session.scalars(
            select(Job).where(Job.tenant_id == tenant_id, Job.idempotency_key == data.idempotency_key)
        ).one()
        if earlier.request_hash != digest:
            raise Conflict("idempotency_key was already used with a different request")
        return to_read(earlier, directory.name_of(conn, earlier.cluster_id)), False
    conn.execute(_INSERT_EVENT, {**event, "job_id": job_id})
    return read_from_values(job_id, values, data.cluster), True


def prepare_submission(
    *, session: Session, principal: Principal, data: JobCreate, scorer: CostScorer, directory: ClusterDirectory
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check the caller and price the job: the job row's values and its ``job.submitted`` event (no job id yet).

    Touches the store only for a tenant override or a cluster missing from ``directory``'s cache.
    """
    tenant_id = principal.tenant_id
    if data.tenant_id is not None and data.tenant_id != principal.tenant_id:
        tenants.get_tenant(session=session, principal=principal, tenant_id=data.tenant_id)  # 404 first
        tenant_id = data.tenant_id
    principal.require(Role.MEMBER, "submitting a job")
    fresh = directory.fresh(data.cluster)
    cluster_id, models = fresh if fresh is not None else directory.lookup(session.connection(), data.cluster)
    return _submission_rows(tenant_id, cluster_id, models, data, scorer)


def prepare_cached(
    *, principal: Principal, data: JobCreate, scorer: CostScorer, directory: ClusterDirectory
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """:func:`prepare_submission` without the store: ``None`` when it would have to read it (a tenant
    override, a cluster not in ``directory``'s cache), so the caller can run that on a worker thread."""
    if data.tenant_id is not None and data.tenant_id != principal.tenant_id:
        return None
    principal.require(Role.MEMBER, "submitting a job")
    cached = directory.cached(data.cluster)  # None: this caller refreshes it, through prepare_submission
    if cached is None:
        return None
    return _submission_rows(principal.tenant_id, cached[0], cached[1], data, scorer)


def _submission_rows(tenant_id: int, cluster_id: int, models: tuple[str, ...], data: JobCreate,
                     scorer: CostScorer) -> tuple[dict[str, Any], dict[str, Any]]:
    digest = request_hash(data)
    estimate = scorer.estimate(CostInput(
        num_gpu=data.num_gpu, gpu_milli=data.gpu_milli, gpu_types=tuple(data.gpu_types), cluster_models=models,
        duration_hours=data.duration_hours, tier=data.tier.value, flexibility_hours=data.flexibility_hours,
        deadline_in_s=(data.deadline - utcnow()).total_seconds() if data.deadline is not None else None,
    ))
    now = utcnow()
    name = data.name or f"{_NAME_PREFIX[data.kind]}-{secrets.token_hex(8)}"
    values: dict[str, Any] = {
        "tenant_id": tenant_id, "cluster_id": cluster_id, "name": name, "kind": data.kind.value,
        "tier": data.tier.value, "priority": data.priority, "cpu_milli": data.cpu_milli,
        "memory_mib": data.memory_mib, "num_gpu": data.num_gpu, "gpu_milli": data.gpu_milli,
        "gpu_types": list(data.gpu_types), "deadline": data.deadline, "flexibility_hours": data.flexibility_hours,
        "duration_hours": data.duration_hours, "labels": dict(data.labels), "idempotency_key": data.idempotency_key,
        "request_hash": digest, "status": JobStatus.PENDING.value, "status_reason": "waiting for the scheduler",
        "node_name": None, "gpu_indices": [], "cost_score": estimate.score, "cost_basis": estimate.basis[:200],
        "version": 0, "attempt_capacity_version": -1, "created_at": now, "updated_at": now,
    }
    event = {
        "tenant_id": tenant_id, "cluster_id": cluster_id, "kind": "job.submitted",
        "message": f"{data.kind.value} {name}: {data.gpus:g} GPU, tier {data.tier.value}",
        "data": {"cost_score": estimate.score}, "created_at": now,
    }
    return values, event


def resolve_not_inserted(*, session: Session, values: dict[str, Any], cluster: str,
                         directory: ClusterDirectory) -> JobRead:
    """A grouped insert stored nothing (a unique key was taken): the replay of an earlier job with the
    same idempotency key and request, else ``Conflict`` (key reused with another request, or name taken)."""
    key = values["idempotency_key"]
    if key is not None:
        earlier = session.scalars(
            select(Job).where(Job.tenant_id == values["tenant_id"], Job.idempotency_key == key)).first()
        if earlier is not None:
            if earlier.request_hash != values["request_hash"]:
                raise Conflict("idempotency_key was already used with a different request")
            return to_read(earlier, directory.name_of(session.connection(), earlier.cluster_id))
    raise Conflict(f"a job called {values['name']!r} already exists in this tenant")


def read_from_values(job_id: int, v: dict[str, Any], cluster: str) -> JobRead:
    """The API view of a job just inserted with values ``v``."""
    return JobRead(
        id=job_id, tenant_id=v["tenant_id"], name=v["name"], kind=JobKind(v["kind"]), cluster=cluster,
        tier=v["tier"],
        priority=v["priority"], gpus=_gpus(v["num_gpu"], v["gpu_milli"]), num_gpu=v["num_gpu"],
        gpu_milli=v["gpu_milli"], placed_gpu_milli=None, gpu_types=v["gpu_types"], cpu_milli=v["cpu_milli"],
        memory_mib=v["memory_mib"],
        deadline=v["deadline"], flexibility_hours=v["flexibility_hours"], duration_hours=v["duration_hours"],
        labels=v["labels"], idempotency_key=v["idempotency_key"], status=JobStatus.PENDING,
        status_reason=v["status_reason"], node=None, gpu_indices=[], cost_score=v["cost_score"],
        cost_basis=v["cost_basis"], version=0, created_at=v["created_at"], updated_at=v["updated_at"],
        bound_at=None, started_at=None, finished_at=None,
    )


class ClusterDirectory:
    """Cluster name → (id, GPU models present), cached per service instance.

    Clusters are never deleted, so ids are cached for good; the GPU models (used only to price a
    submission's ``cost_score``) are re-read after ``ttl_s`` seconds.
    """

    def __init__(self, ttl_s: float = 5.0) -> None:
        self.ttl_s = ttl_s
        self._by_name: dict[str, tuple[int, tuple[str, ...], float]] = {}
        self._names: dict[int, str] = {}
        self._refreshing: set[str] = set()

    def fresh(self, name: str) -> tuple[int, tuple[str, ...]] | None:
        """Id and GPU models of ``name`` if cached and fresh (no store access)."""
        hit = self._by_name.get(name)
        if hit is not None and hit[2] > time.monotonic():
            return hit[0], hit[1]
        return None

    def cached(self, name: str) -> tuple[int, tuple[str, ...]] | None:
        """Id and GPU models of ``name`` if cached (no store access); ``None`` if unknown, or if it went stale
        and no refresh is under way: that caller refreshes it (:meth:`lookup`) while concurrent callers get
        the stale models, so an expiry under load costs one store read, not one per request in flight."""
        hit = self._by_name.get(name)
        if hit is None:
            return None
        if hit[2] > time.monotonic() or name in self._refreshing:
            return hit[0], hit[1]
        self._refreshing.add(name)
        return None

    def lookup(self, conn: Connection, name: str) -> tuple[int, tuple[str, ...]]:
        """Id and GPU models of the cluster called ``name`` (404 if none)."""
        now = time.monotonic()
        hit = self._by_name.get(name)
        if hit is not None and hit[2] > now:
            return hit[0], hit[1]
        try:
            cid = conn.execute(select(Cluster.id).where(Cluster.name == name)).scalar()
            if cid is None:
                raise NotFound(f"cluster {name!r} not found")
            models = tuple(sorted(m for m in conn.execute(
                select(Node.gpu_model).where(Node.cluster_id == cid, Node.gpu_model.is_not(None)).distinct()
            ).scalars() if m is not None))
        finally:
            self._refreshing.discard(name)
        self._by_name[name] = (int(cid), models, now + self.ttl_s)
        self._names[int(cid)] = name
        return int(cid), models

    def name_of(self, conn: Connection, cluster_id: int) -> str:
        """Name of a cluster by id."""
        name = self._names.get(cluster_id)
        if name is None:
            name = conn.execute(select(Cluster.name).where(Cluster.id == cluster_id)).scalar_one()
            self._names[cluster_id] = name
        return name


def get_job(*, session: Session, principal: Principal, job_id: int) -> Job:
    """The job with ``job_id`` if the caller may see it (404 otherwise)."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFound("job not found")
    principal.check_tenant(job.tenant_id, "job")
    return job


def find_job(*, session: Session, principal: Principal, ref: str) -> Job:
    """A job by id (digits) or by name in the caller's tenant."""
    if ref.isdigit():
        return get_job(session=session, principal=principal, job_id=int(ref))
    job = session.scalars(select(Job).where(Job.tenant_id == principal.tenant_id, Job.name == ref)
                          .order_by(Job.id.desc())).first()  # a cancelled job's name may be reused: newest
    if job is None:
        raise NotFound(f"job {ref!r} not found")
    return job


def list_jobs(
    *, session: Session, principal: Principal, status: str | None = None, tier: str | None = None,
    cluster: str | None = None, name: str | None = None, limit: int = 100, before_id: int | None = None,
) -> list[Job]:
    """Jobs the caller may see, newest first, filtered."""
    q = select(Job).order_by(Job.id.desc()).limit(limit)
    scope = principal.tenant_scope()
    if scope is not None:
        q = q.where(Job.tenant_id == scope)
    if status is not None:
        q = q.where(Job.status == status)
    if tier is not None:
        q = q.where(Job.tier == tier)
    if name is not None:
        q = q.where(Job.name == name)
    if cluster is not None:
        q = q.where(Job.cluster_id == clusters.get_cluster(session=session, name=cluster).id)
    if before_id is not None:
        q = q.where(Job.id < before_id)
    return list(session.scalars(q))


def cancel_job(*, session: Session, principal: Principal, job_id: int) -> tuple[Job, str | None]:
    """Cancel a job (member or higher); returns it and the dispatch handle to cancel, if any.

    Cancelling an already finished or cancelled job is a conflict. A bound or running job gives
    its resources back (the cluster's capacity version moves).
    """
    job = get_job(session=session, principal=principal, job_id=job_id)
    principal.require(Role.MEMBER, "cancelling a job")
    for _ in range(5):
        current = JobStatus(job.status)
        if current in TERMINAL_JOB_STATUSES:
            raise Conflict(f"job {job.name} is already {current.value}")
        # an unschedulable job is withdrawn through pending (the table's only way out of it)
        path = [JobStatus.PENDING, JobStatus.CANCELLED] if current is JobStatus.UNSCHEDULABLE else [JobStatus.CANCELLED]
        step = current
        for nxt in path:
            step = transition(step, nxt, JOB_TRANSITIONS)
        now = utcnow()
        rows = session.execute(
            update(Job).where(Job.id == job.id, Job.version == job.version).values(
                status=JobStatus.CANCELLED.value, status_reason=f"cancelled by {principal.token_name}",
                version=Job.version + 1, updated_at=now, finished_at=now,
            )
        ).rowcount  # type: ignore[attr-defined]
        if rows == 1:
            handle = job.dispatch_handle
            if current in (JobStatus.BOUND, JobStatus.RUNNING):
                clusters.bump(session=session, cluster_id=job.cluster_id, sched=False, capacity=True)
            events.record(session=session, kind="job.cancelled", tenant_id=job.tenant_id, job_id=job.id,
                          cluster_id=job.cluster_id, message=f"was {current.value}")
            session.refresh(job)
            return job, handle
        session.refresh(job)  # lost a race with the scheduler: re-read and try again
    raise Conflict("job keeps changing; retry")


def decisions_of(*, session: Session, principal: Principal, job_id: int, limit: int = 100) -> list[DecisionRecord]:
    """The job's decisions, oldest first (the last ``limit``)."""
    get_job(session=session, principal=principal, job_id=job_id)
    rows = list(session.scalars(
        select(DecisionRecord).where(DecisionRecord.job_id == job_id).order_by(DecisionRecord.id.desc()).limit(limit)
    ))
    rows.reverse()
    return rows


def explain_job(*, session: Session, principal: Principal, job_id: int) -> Explanation:
    """Where the job stands and why, from its latest decision."""
    job = get_job(session=session, principal=principal, job_id=job_id)
    latest = session.scalars(
        select(DecisionRecord).where(DecisionRecord.job_id == job_id).order_by(DecisionRecord.id.desc()).limit(1)
    ).first()
    count = session.execute(select(func.count(DecisionRecord.id)).where(DecisionRecord.job_id == job_id)).scalar_one()
    cluster = session.get(Cluster, job.cluster_id)
    status = JobStatus(job.status)
    if status is JobStatus.PENDING and latest is None:
        summary = "pending: not yet considered by the scheduler"
    elif status in (JobStatus.BOUND, JobStatus.RUNNING):
        summary = f"{status.value} on {job.node_name} GPUs {job.gpu_indices}: {job.status_reason}"
    else:
        summary = f"{status.value}: {job.status_reason}"
    return Explanation(
        job=to_read(job, cluster.name if cluster else "?"), summary=summary,
        latest=DecisionRead.model_validate(latest) if latest is not None else None, decisions=int(count),
    )


def cluster_names(*, session: Session) -> Mapping[int, str]:
    """Cluster id → name."""
    return dict(session.execute(select(Cluster.id, Cluster.name)).all())


def to_read(job: Job, cluster_name: str) -> JobRead:
    """The API view of a job (with the isolation grade of a bound or running one)."""
    return JobRead(
        id=job.id, tenant_id=job.tenant_id, name=job.name, kind=JobKind(job.kind), cluster=cluster_name,
        tier=job.tier, priority=job.priority, gpus=_gpus(job.num_gpu, job.gpu_milli), num_gpu=job.num_gpu,
        gpu_milli=job.gpu_milli, placed_gpu_milli=job.placed_gpu_milli,
        gpu_types=list(job.gpu_types), cpu_milli=job.cpu_milli, memory_mib=job.memory_mib, deadline=job.deadline,
        flexibility_hours=job.flexibility_hours, duration_hours=job.duration_hours,
        labels={str(k): str(v) for k, v in job.labels.items()}, idempotency_key=job.idempotency_key,
        status=JobStatus(job.status), status_reason=job.status_reason, node=job.node_name,
        gpu_indices=list(job.gpu_indices), cost_score=job.cost_score, cost_basis=job.cost_basis,
        version=job.version, attempt=job.attempt, created_at=job.created_at, updated_at=job.updated_at,
        bound_at=job.bound_at, started_at=job.started_at, finished_at=job.finished_at, isolation=isolation_of(job),
    )


def _gpus(num_gpu: int, gpu_milli: int) -> float:
    return num_gpu * gpu_milli / MILLI_PER_GPU if num_gpu <= 1 else float(num_gpu)

"""SQLAlchemy models of the control plane's store (SQLite or PostgreSQL, one schema for both).

Tables: tenants, api_tokens, clusters, nodes, jobs, scheduling_policies, and the append-only
``decisions`` and ``events`` logs (triggers created by the migration refuse UPDATE and DELETE
on both). The Alembic migrations in ``migrations/versions`` create exactly these tables; a test
compares them.

NOTE(seedance): concurrency, once.
  * ``jobs.version`` grows on every change of a job; writers update ``WHERE id = ? AND version = ?``
    (optimistic versioning), so a cancel and a bind of the same job cannot both win.
  * ``clusters.sched_version`` grows on every scheduling commit and on every node change that can
    take capacity away; a scheduling cycle commits only if it is still the version it read, so two
    schedulers never bind the same free GPU twice.
  * ``clusters.capacity_version`` grows whenever capacity is given back (a job ends or is cancelled,
    a node is added or uncordoned); pending jobs are re-tried only when it moved.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

UTC = dt.UTC


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(UTC)


class UtcDateTime(TypeDecorator[dt.datetime]):
    """A timestamp that is always timezone-aware UTC in Python (SQLite stores it naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


JsonType = JSON().with_variant(JSONB(), "postgresql")
BigId = BigInteger().with_variant(Integer(), "sqlite")  # SQLite autoincrement needs INTEGER PRIMARY KEY


class Base(DeclarativeBase):
    """Declarative base of every control-plane table."""


class Tenant(Base):
    """A team (or customer) owning jobs and tokens."""

    __tablename__ = "tenants"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    display_name: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


class ApiToken(Base):
    """An API token: only its SHA-256 is stored; the value is shown once, at creation."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    name: Mapped[str] = mapped_column(String(63))
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)


class Cluster(Base):
    """A set of nodes scheduled together."""

    __tablename__ = "clusters"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    description: Mapped[str] = mapped_column(String(500), default="")
    sched_version: Mapped[int] = mapped_column(BigInteger, default=0)
    capacity_version: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


class Node(Base):
    """One machine: capacity, GPU model and count, labels (e.g. ``gpu.sla.level``), status."""

    __tablename__ = "nodes"
    __table_args__ = (UniqueConstraint("cluster_id", "name", name="uq_nodes_cluster_name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"), index=True)
    name: Mapped[str] = mapped_column(String(253))
    cpu_milli: Mapped[int] = mapped_column(BigInteger)
    memory_mib: Mapped[int] = mapped_column(BigInteger)
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    gpu_model: Mapped[str | None] = mapped_column(String(32), nullable=True)
    labels: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="ready")
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


class Job(Base):
    """A TrainingJob or InferenceService: one placement (a pod) of CPU, memory and GPUs."""

    __tablename__ = "jobs"
    __table_args__ = (
        # a cancelled job's name may be used again (migration 0004_i20)
        Index("uq_jobs_tenant_live_name", "tenant_id", "name", unique=True,
              sqlite_where=text("status <> 'cancelled'"), postgresql_where=text("status <> 'cancelled'")),
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_jobs_tenant_idem"),
        Index("ix_jobs_cluster_status_id", "cluster_id", "status", "id"),  # migration 0005_i20
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"))
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"))
    name: Mapped[str] = mapped_column(String(63))
    kind: Mapped[str] = mapped_column(String(32))
    tier: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    cpu_milli: Mapped[int] = mapped_column(BigInteger)
    memory_mib: Mapped[int] = mapped_column(BigInteger)
    num_gpu: Mapped[int] = mapped_column(Integer)
    gpu_milli: Mapped[int] = mapped_column(Integer)
    placed_gpu_milli: Mapped[int | None] = mapped_column(Integer, nullable=True)
    gpu_types: Mapped[list[str]] = mapped_column(JsonType, default=list)
    deadline: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    flexibility_hours: Mapped[float] = mapped_column(Float, default=0.0)
    duration_hours: Mapped[float | None] = mapped_column(Float, nullable=True)
    labels: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    idempotency_key: Mapped[str | None] = mapped_column(String(128), nullable=True)
    request_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str] = mapped_column(Text, default="")
    node_name: Mapped[str | None] = mapped_column(String(253), nullable=True)
    gpu_indices: Mapped[list[int]] = mapped_column(JsonType, default=list)
    cost_score: Mapped[float] = mapped_column(Float, default=0.0)
    cost_basis: Mapped[str] = mapped_column(String(200), default="")
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    attempt_capacity_version: Mapped[int] = mapped_column(BigInteger, default=-1)
    dispatch_handle: Mapped[str | None] = mapped_column(String(200), nullable=True)
    attempt: Mapped[int] = mapped_column(Integer, default=0)  # runs dispatched so far (migration 0004)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    bound_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    started_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)


class SchedulingPolicy(Base):
    """A named scheduling policy: placement and queue order by registry name plus its YAML."""

    __tablename__ = "scheduling_policies"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    cluster_id: Mapped[int | None] = mapped_column(ForeignKey("clusters.id"), nullable=True)
    placement: Mapped[str] = mapped_column(String(63))
    queue_order: Mapped[str] = mapped_column(String(63))
    plugin: Mapped[str | None] = mapped_column(String(63), nullable=True)
    region: Mapped[str | None] = mapped_column(String(63), nullable=True)
    config_yaml: Mapped[str] = mapped_column(Text, default="")
    config: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


class DecisionRecord(Base):
    """One scheduling decision with its explanation (append-only)."""

    __tablename__ = "decisions"
    __table_args__ = (Index("ix_decisions_job", "job_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"))
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"))
    outcome: Mapped[str] = mapped_column(String(16))
    node_name: Mapped[str | None] = mapped_column(String(253), nullable=True)
    gpu_indices: Mapped[list[int]] = mapped_column(JsonType, default=list)
    score: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    policy: Mapped[str] = mapped_column(String(63))
    reason: Mapped[str] = mapped_column(Text, default="")
    explanation: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    cost_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    latency_us: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


class EventRecord(Base):
    """Something that happened (job submitted, bound, cancelled; node added; ...); append-only."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_tenant", "tenant_id", "id"), Index("ix_events_job", "job_id", "id"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int | None] = mapped_column(ForeignKey("tenants.id"), nullable=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id"), nullable=True)
    cluster_id: Mapped[int | None] = mapped_column(ForeignKey("clusters.id"), nullable=True)
    kind: Mapped[str] = mapped_column(String(63))
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


APPEND_ONLY_TABLES = ("decisions", "events")

ALLOC_MILLI = func.coalesce(Job.placed_gpu_milli, Job.gpu_milli)
"""Milli-GPU a bound job holds on each of its GPUs (what was placed, else what was asked)."""

from seedance.control.db import aggregates as _aggregates  # noqa: E402,F401  (job_counts, migration 0004)
from seedance.control.db import finops as _finops_tables  # noqa: E402,F401  (FinOps ledger tables, migration 0003)
from seedance.privacy import models as _privacy_models  # noqa: E402,F401  (the privacy domain's tables)

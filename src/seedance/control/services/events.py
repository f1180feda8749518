"""The append-only event log: record and list events (tenant-scoped)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from seedance.control.db.models import EventRecord, utcnow
from seedance.control.security import Principal


def record(
    *, session: Session, kind: str, message: str = "", tenant_id: int | None = None, job_id: int | None = None,
    cluster_id: int | None = None, data: dict[str, Any] | None = None,
) -> None:
    """Append one event (in the caller's transaction)."""
    session.execute(
        insert(EventRecord).values(
            tenant_id=tenant_id, job_id=job_id, cluster_id=cluster_id, kind=kind, message=message,
            data=data or {}, created_at=utcnow(),
        )
    )


def list_events(
    *, session: Session, principal: Principal, job_id: int | None = None, kind: str | None = None,
    limit: int = 100, before_id: int | None = None,
) -> list[EventRecord]:
    """Events the caller may see, newest first.

    Members see their tenant's events; events without a tenant (node and cluster changes) are
    visible to every caller, since they concern the shared infrastructure.
    """
    q = select(EventRecord).order_by(EventRecord.id.desc()).limit(limit)
    scope = principal.tenant_scope()
    if scope is not None:
        q = q.where((EventRecord.tenant_id == scope) | EventRecord.tenant_id.is_(None))
    if job_id is not None:
        q = q.where(EventRecord.job_id == job_id)
    if kind is not None:
        q = q.where(EventRecord.kind == kind)
    if before_id is not None:
        q = q.where(EventRecord.id < before_id)
    return list(session.scalars(q))

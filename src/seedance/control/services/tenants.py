"""Tenants: create (admin), read and list (scoped to the caller)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from seedance.control.db.models import Tenant, utcnow
from seedance.control.errors import Conflict, NotFound
from seedance.control.schemas import Role, TenantCreate
from seedance.control.security import Principal
from seedance.control.services import events


def create_tenant(*, session: Session, principal: Principal, data: TenantCreate) -> Tenant:
    """Create a tenant; admin only; a taken name is a conflict."""
    principal.require(Role.ADMIN, "creating a tenant")
    tenant = Tenant(name=data.name, display_name=data.display_name, created_at=utcnow())
    try:
        with session.begin_nested():
            session.add(tenant)
            session.flush()
    except IntegrityError:
        raise Conflict(f"tenant {data.name!r} already exists") from None
    events.record(session=session, kind="tenant.created", tenant_id=tenant.id, message=f"tenant {tenant.name}")
    return tenant


def get_tenant(*, session: Session, principal: Principal, tenant_id: int) -> Tenant:
    """The tenant with ``tenant_id`` if the caller may see it (its own, or any for admins)."""
    principal.check_tenant(tenant_id, "tenant")
    tenant = session.get(Tenant, tenant_id)
    if tenant is None:
        raise NotFound("tenant not found")
    return tenant


def list_tenants(*, session: Session, principal: Principal) -> list[Tenant]:
    """Every tenant for admins; the caller's own otherwise."""
    q = select(Tenant).order_by(Tenant.id)
    scope = principal.tenant_scope()
    if scope is not None:
        q = q.where(Tenant.id == scope)
    return list(session.scalars(q))


def ensure_tenant(*, session: Session, name: str, display_name: str = "") -> Tenant:
    """The tenant called ``name``, created if missing (bootstrap and local mode)."""
    tenant = session.scalars(select(Tenant).where(Tenant.name == name)).first()
    if tenant is None:
        tenant = Tenant(name=name, display_name=display_name, created_at=utcnow())
        session.add(tenant)
        session.flush()
    return tenant

"""``/api/v1/tenants``, ``/api/v1/tokens`` and ``/api/v1/whoami``."""

from __future__ import annotations

from fastapi import APIRouter

from seedance.control.api.deps import IdPath, PrincipalDep, ServiceDep
from seedance.control.api.errors import ERROR_RESPONSES
from seedance.control.schemas import (
    TenantCreate,
    TenantRead,
    TokenCreate,
    TokenCreated,
    TokenRead,
    WhoAmI,
)
from seedance.control.services import tenants, tokens

router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)


@router.get("/whoami", response_model=WhoAmI, tags=["tenants"])
def whoami(me: PrincipalDep) -> WhoAmI:
    """The caller's token, tenant and role."""
    return WhoAmI(token_id=me.token_id, token_name=me.token_name, tenant_id=me.tenant_id, tenant=me.tenant_name,
                  role=me.role)


@router.post("/tenants", status_code=201, response_model=TenantRead, tags=["tenants"])
def create_tenant(data: TenantCreate, svc: ServiceDep, me: PrincipalDep) -> TenantRead:
    """Create a tenant (admin)."""
    with svc.db.write() as s:
        return TenantRead.model_validate(tenants.create_tenant(session=s, principal=me, data=data))


@router.get("/tenants", response_model=list[TenantRead], tags=["tenants"])
def list_tenants(svc: ServiceDep, me: PrincipalDep) -> list[TenantRead]:
    """Tenants visible to the caller (admins: all)."""
    with svc.db.read() as s:
        return [TenantRead.model_validate(t) for t in tenants.list_tenants(session=s, principal=me)]


@router.get("/tenants/{tenant_id}", response_model=TenantRead, tags=["tenants"])
def get_tenant(tenant_id: IdPath, svc: ServiceDep, me: PrincipalDep) -> TenantRead:
    """One tenant."""
    with svc.db.read() as s:
        return TenantRead.model_validate(tenants.get_tenant(session=s, principal=me, tenant_id=tenant_id))


@router.post("/tokens", status_code=201, response_model=TokenCreated, tags=["tokens"])
def create_token(data: TokenCreate, svc: ServiceDep, me: PrincipalDep) -> TokenCreated:
    """Create a token (operator: own tenant; admin: any). The value is in this answer only."""
    with svc.db.write() as s:
        token, value = tokens.create_token(session=s, principal=me, data=data)
        return TokenCreated(**TokenRead.model_validate(token).model_dump(), token=value)


@router.get("/tokens", response_model=list[TokenRead], tags=["tokens"])
def list_tokens(svc: ServiceDep, me: PrincipalDep) -> list[TokenRead]:
    """Tokens visible to the caller (never their values)."""
    with svc.db.read() as s:
        return [TokenRead.model_validate(t) for t in tokens.list_tokens(session=s, principal=me)]


@router.get("/tokens/{token_id}", response_model=TokenRead, tags=["tokens"])
def get_token(token_id: IdPath, svc: ServiceDep, me: PrincipalDep) -> TokenRead:
    """One token (never its value)."""
    with svc.db.read() as s:
        return TokenRead.model_validate(tokens.get_token(session=s, principal=me, token_id=token_id))


@router.delete("/tokens/{token_id}", response_model=TokenRead, tags=["tokens"])
def revoke_token(token_id: IdPath, svc: ServiceDep, me: PrincipalDep) -> TokenRead:
    """Revoke a token; it is refused from then on."""
    with svc.db.write() as s:
        token = tokens.revoke_token(session=s, principal=me, token_id=token_id)
        out = TokenRead.model_validate(token)
    svc.forget_token(token_id)
    return out


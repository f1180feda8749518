"""API tokens: create (value shown once), list, revoke, and authenticate a presented value."""

from __future__ import annotations

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from seedance.control.db.models import ApiToken, Tenant, utcnow
from seedance.control.errors import Conflict, Forbidden, NotFound
from seedance.control.schemas import Role, TokenCreate
from seedance.control.security import Principal, display_prefix, hash_token, new_token_value
from seedance.control.services import events, tenants
from seedance.core.errors import InputError

SYSTEM_TENANT = "system"


class BootstrapRevoked(InputError):
    """The configured bootstrap token was revoked (start-up refuses it)."""


def create_token(*, session: Session, principal: Principal, data: TokenCreate) -> tuple[ApiToken, str]:
    """Create a token; returns the row and the value (the only time it is available).

    Operators create tokens for their own tenant with a role up to operator; admins any.
    """
    tenant_id = data.tenant_id if data.tenant_id is not None else principal.tenant_id
    tenants.get_tenant(session=session, principal=principal, tenant_id=tenant_id)  # 404 before 403: leak nothing
    principal.require(Role.OPERATOR, "creating a token")
    if data.role.rank > principal.role.rank:
        raise Forbidden(f"a {principal.role.value} token cannot create a {data.role.value} token")
    value = new_token_value()
    token = _insert(session=session, tenant_id=tenant_id, name=data.name, role=data.role, value=value)
    events.record(
        session=session, kind="token.created", tenant_id=tenant_id,
        message=f"token {data.name} ({data.role.value})", data={"token_id": token.id},
    )
    return token, value


def _insert(*, session: Session, tenant_id: int, name: str, role: Role, value: str) -> ApiToken:
    token = ApiToken(
        tenant_id=tenant_id, name=name, role=role.value, token_hash=hash_token(value),
        prefix=display_prefix(value), created_at=utcnow(),
    )
    session.add(token)
    session.flush()
    return token


def list_tokens(*, session: Session, principal: Principal) -> list[ApiToken]:
    """Tokens of the caller's tenant (all tokens for admins); members see only their own."""
    q = select(ApiToken).order_by(ApiToken.id)
    scope = principal.tenant_scope()
    if scope is not None:
        q = q.where(ApiToken.tenant_id == scope)
        if principal.role.rank < Role.OPERATOR.rank:
            q = q.where(ApiToken.id == principal.token_id)
    return list(session.scalars(q))


def get_token(*, session: Session, principal: Principal, token_id: int) -> ApiToken:
    """One token, if visible to the caller (operators: their tenant's; others: their own)."""
    token = session.get(ApiToken, token_id)
    if token is None:
        raise NotFound("token not found")
    principal.check_tenant(token.tenant_id, "token")
    if not principal.is_admin and principal.role.rank < Role.OPERATOR.rank and token.id != principal.token_id:
        raise NotFound("token not found")
    return token


def revoke_token(*, session: Session, principal: Principal, token_id: int) -> ApiToken:
    """Revoke a token (operators: their tenant's; members: their own). Revoking twice is harmless."""
    token = get_token(session=session, principal=principal, token_id=token_id)
    principal.require(Role.MEMBER, "revoking a token")
    if token.id != principal.token_id:
        principal.require(Role.OPERATOR, "revoking another token")
        if Role(token.role).rank > principal.role.rank:
            raise Forbidden(f"a {principal.role.value} token cannot revoke a {token.role} token")
    if token.revoked_at is None:
        if token.role == Role.ADMIN.value:
            # lock every live admin token (in id order: no deadlock) so that two concurrent revocations
            # cannot each see the other's token as the one that stays
            live = session.scalars(select(ApiToken.id).where(
                ApiToken.role == Role.ADMIN.value, ApiToken.revoked_at.is_(None)
            ).order_by(ApiToken.id).with_for_update()).all()
            if not [t for t in live if t != token.id]:
                raise Conflict("this is the last admin token; create another admin token before revoking it")
        now = utcnow()
        session.execute(update(ApiToken).where(ApiToken.id == token.id).values(revoked_at=now))
        token.revoked_at = now
        events.record(
            session=session, kind="token.revoked", tenant_id=token.tenant_id, message=f"token {token.name}",
            data={"token_id": token.id},
        )
    return token


def authenticate(*, session: Session, value: str) -> Principal | None:
    """The principal of a presented token value (``None`` if unknown or revoked)."""
    row = session.execute(
        select(ApiToken.id, ApiToken.name, ApiToken.role, ApiToken.tenant_id, Tenant.name, ApiToken.revoked_at)
        .join(Tenant, Tenant.id == ApiToken.tenant_id)
        .where(ApiToken.token_hash == hash_token(value))
    ).first()
    if row is None or row[5] is not None:
        return None
    return Principal(token_id=row[0], token_name=row[1], role=Role(row[2]), tenant_id=row[3], tenant_name=row[4])


def ensure_admin_token(*, session: Session, value: str | None, name: str = "bootstrap") -> str | None:
    """Make sure an admin token exists.

    With ``value``: store that token (idempotent). A value that was stored and then revoked stays
    revoked: start-up fails with ``BootstrapRevoked`` (set a new value; it becomes a new admin
    token) instead of starting with a token that answers 401. Without ``value``: create a random
    admin token only if no live admin token exists, and return its value (to be shown once);
    otherwise return ``None``.
    """
    if session.get_bind().dialect.name == "postgresql":
        # processes starting together on a fresh store (an API and a ``scheduler run``) take turns here; on
        # SQLite the write transaction (BEGIN IMMEDIATE) serializes them already
        session.execute(text("SELECT pg_advisory_xact_lock(hashtext('seedance.bootstrap:' || current_schema()))"))
    system = tenants.ensure_tenant(session=session, name=SYSTEM_TENANT, display_name="platform administrators")
    if value is not None:
        row = session.execute(select(ApiToken.id, ApiToken.revoked_at)
                              .where(ApiToken.token_hash == hash_token(value))).first()
        if row is None:
            _insert(session=session, tenant_id=system.id, name=name, role=Role.ADMIN, value=value)
        elif row[1] is not None:
            raise BootstrapRevoked(
                f"the bootstrap token (SEEDANCE_BOOTSTRAP_TOKEN, token id {row[0]}) was revoked at "
                f"{row[1].isoformat()}; a revoked token is never reinstated: set a new value to create a new "
                "admin token, or unset it to get a random one if no admin token is left",
                source="settings", field="bootstrap_token")
        return None
    live_admin = session.scalars(
        select(ApiToken.id).where(ApiToken.role == Role.ADMIN.value, ApiToken.revoked_at.is_(None))
    ).first()
    if live_admin is not None:
        return None
    fresh = new_token_value()
    _insert(session=session, tenant_id=system.id, name=name, role=Role.ADMIN, value=fresh)
    return fresh

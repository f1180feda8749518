"""API tokens and the caller's identity.

Token values are ``sdt_`` + 43 URL-safe characters (256 random bits). Only their SHA-256 is
stored: with 256 bits of entropy a fast hash is as safe as a slow KDF (nothing to brute-force),
and lookups stay one indexed query. The value is returned once, when the token is created.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from seedance.control.errors import Forbidden, NotFound
from seedance.control.schemas import Role

TOKEN_PREFIX = "sdt_"


def bearer_token(header: str) -> str | None:
    """The token of an ``Authorization`` header value (``None`` unless it is ``Bearer <token>``).

    >>> bearer_token("Bearer sdt_x "), bearer_token("Basic abc"), bearer_token("Bearer ")
    ('sdt_x', None, None)
    """
    scheme, _, value = header.partition(" ")
    return (value.strip() or None) if scheme.lower() == "bearer" else None


def new_token_value() -> str:
    """A fresh random token value."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(value: str) -> str:
    """SHA-256 hex digest of a token value (what the store keeps)."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def display_prefix(value: str) -> str:
    """The first characters of a token value, safe to show in listings."""
    return value[:12]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the token, its tenant and its role."""

    token_id: int
    token_name: str
    tenant_id: int
    tenant_name: str
    role: Role

    @property
    def is_admin(self) -> bool:
        """True for the admin role (sees every tenant)."""
        return self.role is Role.ADMIN

    def require(self, role: Role, action: str) -> None:
        """Raise ``Forbidden`` unless the caller's role is at least ``role``."""
        if self.role.rank < role.rank:
            raise Forbidden(f"{action} needs role {role.value} or higher; this token is {self.role.value}")

    def check_tenant(self, tenant_id: int, what: str = "object") -> None:
        """Raise ``NotFound`` when the object of ``tenant_id`` is not visible to the caller."""
        if not self.is_admin and tenant_id != self.tenant_id:
            raise NotFound(f"{what} not found")

    def tenant_scope(self) -> int | None:
        """Tenant to filter listings by (``None`` for admins: every tenant)."""
        return None if self.is_admin else self.tenant_id


LOCAL_PRINCIPAL_NAME = "local"

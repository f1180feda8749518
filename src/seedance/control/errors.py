"""Errors raised by control-plane services; the API maps each to its HTTP status.

Services raise these (never HTTP exceptions), so the same service code serves the API and the
CLI's local mode. ``InputError`` (bad input) maps to 422.
"""

from __future__ import annotations

from typing import ClassVar

from seedance.core.errors import SeedanceError


class ControlError(SeedanceError):
    """Base class: ``status`` is the HTTP status the API answers with."""

    status: ClassVar[int] = 400


class Unauthorized(ControlError):
    """No token, an unknown token or a revoked token."""

    status = 401


class Forbidden(ControlError):
    """The token's role may not do this."""

    status = 403


class NotFound(ControlError):
    """No such object, or one of another tenant (indistinguishable on purpose)."""

    status = 404


class Conflict(ControlError):
    """A name already taken, an idempotency key reused with another request, a lost race."""

    status = 409


class TooManyRequests(ControlError):
    """A rate limit was hit; ``retry_after_s`` says when to come back."""

    status = 429

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

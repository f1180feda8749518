"""Privacy errors with their HTTP status (the control plane's handler maps every ``ControlError``)."""

from __future__ import annotations

from seedance.control.errors import ControlError


class Locked(ControlError):
    """Ingestion for this device is paused until it answers a WebAuthn challenge."""

    status = 423


class Gone(ControlError):
    """The challenge expired; the device was blacklisted."""

    status = 410


class ServiceUnavailable(ControlError):
    """A store the privacy service needs (Redis, pg_dump) is not reachable."""

    status = 503

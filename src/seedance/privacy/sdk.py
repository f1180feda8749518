"""A small Python SDK for the telemetry endpoint.

    from seedance.privacy.sdk import TelemetryClient
    client = TelemetryClient("http://127.0.0.1:8080", token, consent="granted", subject="ada@example.org")
    client.track("open_job"); client.flush()

The consent decision is a required argument (the SDK's form of the whitepaper's forced dialog at
initialisation): with ``consent="refused"`` nothing is ever queued or sent. The device id is random
per client unless given; the server keeps only keyed hashes of it. A batch refused because its
device's fingerprint cluster is paused raises ``ChallengeRequired`` (the events stay queued);
``challenge`` and ``answer`` run the WebAuthn attestation challenge.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Literal

import httpx


class TelemetryError(Exception):
    """The server refused a request; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ChallengeRequired(TelemetryError):
    """Ingestion is paused for this device until it answers a WebAuthn challenge (423)."""


class Blacklisted(TelemetryError):
    """This device is blacklisted (403)."""


class TelemetryClient:
    """Queue events and send them in batches (one session per client)."""

    def __init__(
        self, server: str, token: str, *, consent: Literal["granted", "refused"], device_id: str | None = None,
        subject: str | None = None, fingerprint: dict[str, Any] | None = None, timeout: float = 10.0,
        http: httpx.Client | None = None,
    ) -> None:
        if consent not in ("granted", "refused"):
            raise ValueError("consent must be 'granted' or 'refused'")
        self.consent = consent
        self.device_id = device_id or f"sdk-{uuid.uuid4()}"
        self.subject = subject
        self.fingerprint = fingerprint
        self.session_started_at = dt.datetime.now(dt.UTC)
        self.queue: list[dict[str, str]] = []
        self._http = http or httpx.Client(base_url=server.rstrip("/"), timeout=timeout,
                                          headers={"Authorization": f"Bearer {token}"})

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        r = self._http.post(path, json=body)
        if r.status_code < 400:
            return r.json()
        try:
            detail = str(r.json().get("detail", r.text))
        except ValueError:
            detail = r.text
        if r.status_code == 423:
            raise ChallengeRequired(detail, 423)
        if r.status_code == 403 and "blacklisted" in detail:
            raise Blacklisted(detail, 403)
        raise TelemetryError(f"{r.status_code}: {detail}", r.status_code)

    def identify(self, subject: str, traits: dict[str, str] | None = None) -> str:
        """Register the subject (and its traits) and attach this client's events to it."""
        out = self._post("/api/v1/privacy/subjects", {"subject": subject, "traits": traits or {}})
        self.subject = subject
        return str(out["subject_id"])

    def track(self, action: str, at: dt.datetime | None = None) -> None:
        """Queue one event (nothing when consent was refused)."""
        if self.consent == "granted":
            self.queue.append({"action": action, "at": (at or dt.datetime.now(dt.UTC)).isoformat()})

    def flush(self, max_events: int = 500) -> dict[str, Any] | None:
        """Send the queued events as one batch; ``None`` when there is nothing to send."""
        if not self.queue:
            return None
        body: dict[str, Any] = {"device_id": self.device_id, "session_started_at": self.session_started_at.isoformat(),
                                "events": self.queue[:max_events]}
        if self.subject:
            body["subject"] = self.subject
        if self.fingerprint:
            body["fingerprint"] = self.fingerprint
        try:
            out = self._post("/api/v1/telemetry/events", body)
        except ChallengeRequired:
            raise  # keep the events: they go once the device passes the challenge
        except TelemetryError:
            del self.queue[:max_events]  # refused for good (bad input, blacklisted): do not resend
            raise
        del self.queue[:max_events]
        result: dict[str, Any] = out
        return result

    def challenge(self) -> dict[str, Any]:
        """A WebAuthn challenge for this device: ``{"challenge_id", "public_key", "expires_at"}``."""
        body: dict[str, Any] = {"device_id": self.device_id, **({"subject": self.subject} if self.subject else {})}
        out: dict[str, Any] = self._post("/api/v1/telemetry/challenges", body)
        return out

    def answer(self, challenge_id: str, credential: dict[str, Any]) -> dict[str, Any]:
        """Send the authenticator's registration response for a challenge."""
        out: dict[str, Any] = self._post(f"/api/v1/telemetry/challenges/{challenge_id}", {"credential": credential})
        return out

    def close(self) -> None:
        """Close the HTTP connection."""
        self._http.close()

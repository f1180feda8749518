"""API models of the privacy routes (strict: unknown fields and lax coercions refused)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

ACTION_PATTERN = r"^[a-z][a-z0-9_.:-]{0,63}$"
DEVICE_ID_PATTERN = r"^[A-Za-z0-9._:-]{8,128}$"
TRAIT_KEY_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
MAX_TRAITS = 20


def _text(v: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in v):
        raise ValueError("must not contain control characters")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return v


def _rfc3339(v: object) -> object:
    if not isinstance(v, str | dt.datetime):
        raise ValueError("must be an RFC 3339 date-time string")
    return v


def _aware(v: dt.datetime) -> dt.datetime:
    if v.tzinfo is None:
        raise ValueError("must carry a time zone (e.g. 2026-01-02T03:04:05Z)")
    return v.astimezone(dt.UTC)


Timestamp = Annotated[dt.datetime, BeforeValidator(_rfc3339), AfterValidator(_aware), Field(strict=False)]
Text200 = Annotated[str, StringConstraints(max_length=200), AfterValidator(_text)]
SubjectRef = Annotated[str, StringConstraints(min_length=1, max_length=254), AfterValidator(_text)]
DeviceId = Annotated[str, StringConstraints(pattern=DEVICE_ID_PATTERN)]
Action = Annotated[str, StringConstraints(pattern=ACTION_PATTERN)]
Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{8,128}$")]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Fingerprint(_In):
    """Device signals a client reports (FingerprintJS-style components); only a WebGL hash is kept."""

    webgl_renderer: Text200 = Field(description="UNMASKED_RENDERER_WEBGL (or RENDERER).")
    webgl_vendor: Text200 = Field(default="", description="UNMASKED_VENDOR_WEBGL (or VENDOR).")
    webgl_params: Hex | None = Field(default=None, description="Hash of the WebGL extensions and parameters.")
    webgl_render: Hex | None = Field(default=None, description="Hash of the pixels of a reference WebGL scene.")
    screen: Annotated[str, StringConstraints(max_length=32)] | None = None
    timezone: Annotated[str, StringConstraints(max_length=64)] | None = None
    languages: list[Annotated[str, StringConstraints(max_length=35)]] = Field(default_factory=list, max_length=10)
    platform: Annotated[str, StringConstraints(max_length=64)] | None = None
    hardware_concurrency: int | None = Field(default=None, ge=0, le=4096)


class EventIn(_In):
    """One client event."""

    action: Action
    at: Timestamp


class TelemetryBatch(_In):
    """Events of one session from one device (``POST /api/v1/telemetry/events``)."""

    device_id: DeviceId = Field(description="The client's device id; only keyed tags of it are stored.")
    session_started_at: Timestamp = Field(description="Start of the session (hashed with the device id).")
    subject: SubjectRef | None = Field(default=None, description="External id of an identified subject.")
    events: list[EventIn] = Field(min_length=1, max_length=500)
    fingerprint: Fingerprint | None = None


class TelemetryAccepted(BaseModel):
    """Answer to an accepted batch."""

    accepted: int
    session_id: str
    entropy: float = Field(description="Behaviour entropy of the batch's action sequence, bits.")
    signature: str | None = Field(description="The WebGL signature the device was counted under.")


class SubjectIdentify(_In):
    """Register (or update) a data subject and its traits (sealed under the subject's own key)."""

    subject: SubjectRef = Field(description="External id, e.g. an e-mail address or account id.")
    traits: dict[Annotated[str, StringConstraints(pattern=TRAIT_KEY_PATTERN)], Text200] = Field(
        default_factory=dict, max_length=MAX_TRAITS)


class SubjectRead(BaseModel):
    """A subject's random id (the only form other tables and logs hold)."""

    subject_id: str
    created: bool


class ErasureCreate(_In):
    """An erasure request (GDPR Art. 17)."""

    subject: SubjectRef
    device_ids: list[DeviceId] = Field(default_factory=list, max_length=100, description=(
        "Device ids the subject gives, so anonymous (not logged-in) data of those devices is erased too."))


class ErasureRead(BaseModel):
    """One request of the erasure ledger."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    subject_id: str
    status: str
    requested_at: dt.datetime
    deadline: dt.datetime
    started_at: dt.datetime | None
    erased_at: dt.datetime | None
    verified_at: dt.datetime | None
    within_deadline: bool | None = Field(description="Verified before the deadline (null while open).")
    proof_hash: str | None
    report: dict[str, Any]
    error: str


class ErasureList(BaseModel):
    """Requests, newest first."""

    items: list[ErasureRead]


class BackupRead(BaseModel):
    """A data backup."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    path: str
    fmt: str
    taken_at: dt.datetime
    sha256: str
    size_bytes: int
    excluded: list[str]


class ChallengeCreate(_In):
    """Ask for a WebAuthn attestation challenge for a device of a paused cluster."""

    device_id: DeviceId
    subject: SubjectRef | None = None


class ChallengeRead(BaseModel):
    """The challenge: WebAuthn ``PublicKeyCredentialCreationOptions`` (JSON) and its deadline."""

    challenge_id: str
    public_key: dict[str, Any]
    expires_at: dt.datetime


class ChallengeAnswer(_In):
    """A ``RegistrationResponseJSON`` from ``navigator.credentials.create``."""

    credential: dict[str, Any]


class ChallengeResult(BaseModel):
    """A passed challenge: the device's ingestion resumes."""

    result: Literal["passed"]
    fmt: str
    aaguid: str
    verified_until: dt.datetime


class BlacklistEntry(BaseModel):
    """A blacklisted device tag and when its entry expires."""

    device_tag: str
    expires_at: dt.datetime


class ConsentDecision(_In):
    """A decision taken in the consent dialog."""

    flow_version: Annotated[str, StringConstraints(max_length=32)]
    choice: Literal["granted", "refused"]
    purposes: dict[Annotated[str, StringConstraints(pattern=TRAIT_KEY_PATTERN)], bool] = Field(max_length=20)
    device_id: DeviceId | None = None
    subject: SubjectRef | None = None


class SweepResult(BaseModel):
    """What a sweep did."""

    timed_out: int
    blacklist_pruned: int
    verified_pruned: int
    keys_destroyed: list[str]

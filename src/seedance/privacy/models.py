"""Tables of the privacy domain (one schema for SQLite and PostgreSQL; migration ``0003_i18``).

Where personal data lives, and what erasure does to it:

* ``privacy_subjects``: one data subject; its profile (external id, traits) sealed with the
  subject's own data key. Erasure deletes the row; copies in backups stay sealed under a key
  that no longer exists (crypto-shredding).
* ``privacy_subject_keys`` and ``privacy_hmac_keys``: the key vault (data keys wrapped by the
  master key; rotated HMAC keys). **Never part of a data backup.** Erasure destroys the subject's
  key and lookup hash and keeps the row as a tombstone.
* ``telemetry_events``: anonymised events (keyed session id, action, behaviour entropy, time to
  the second). A subject's events have session ids keyed by the subject's key; erasure deletes them.
* ``privacy_subject_activity``: derived daily roll-up per subject; erasure deletes it.
* ``fingerprint_clusters``, ``fingerprint_devices``: WebGL-signature clusters and challenge verdicts.
* ``privacy_consents``: consent decisions (proof of consent, GDPR Art. 7(1)).
* ``privacy_erasure_requests``: the erasure ledger; ``privacy_tombstones`` (append-only): one row
  per destroyed key; ``privacy_backups``: the data backups taken, which the verification restores.

No table stores a raw device id: devices appear only as keyed tags.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from seedance.control.db.models import Base, BigId, JsonType, UtcDateTime, utcnow

KEY_TABLES = ("privacy_subject_keys", "privacy_hmac_keys")
"""The key vault: excluded from every data backup (a backup holding the keys could not be shredded)."""
PRIVACY_APPEND_ONLY = ("privacy_tombstones",)
SUBJECT_ID_LEN = 36


class Subject(Base):
    """A data subject: a person using the dashboard or an API client's end user."""

    __tablename__ = "privacy_subjects"

    id: Mapped[str] = mapped_column(String(SUBJECT_ID_LEN), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    profile_ct: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


class SubjectKey(Base):
    """The subject's data key, wrapped by the master key, and its lookup hash (key vault)."""

    __tablename__ = "privacy_subject_keys"

    subject_id: Mapped[str] = mapped_column(String(SUBJECT_ID_LEN), primary_key=True)
    lookup_hash: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)
    wrapped_key: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    key_fingerprint: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    shredded_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    shred_request_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class HmacKey(Base):
    """A rotated HMAC key of one purpose (session ids, device tags), wrapped by the master key."""

    __tablename__ = "privacy_hmac_keys"

    id: Mapped[str] = mapped_column(String(48), primary_key=True)
    purpose: Mapped[str] = mapped_column(String(16), index=True)
    wrapped_key: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    retire_at: Mapped[dt.datetime] = mapped_column(UtcDateTime)
    destroy_at: Mapped[dt.datetime] = mapped_column(UtcDateTime)
    destroyed_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)


class TelemetryEvent(Base):
    """One anonymised event."""

    __tablename__ = "telemetry_events"
    __table_args__ = (Index("ix_telemetry_events_subject", "subject_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    subject_id: Mapped[str | None] = mapped_column(String(SUBJECT_ID_LEN), nullable=True)
    session_id: Mapped[str] = mapped_column(String(64))
    key_id: Mapped[str] = mapped_column(String(48))
    action: Mapped[str] = mapped_column(String(64))
    entropy: Mapped[float] = mapped_column(Float)
    occurred_at: Mapped[dt.datetime] = mapped_column(UtcDateTime)
    received_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    signature: Mapped[str | None] = mapped_column(String(64), nullable=True)


class SubjectActivity(Base):
    """Derived: events, batches and summed behaviour entropy per subject and UTC day."""

    __tablename__ = "privacy_subject_activity"

    subject_id: Mapped[str] = mapped_column(String(SUBJECT_ID_LEN), primary_key=True)
    day: Mapped[str] = mapped_column(String(10), primary_key=True)
    events: Mapped[int] = mapped_column(Integer, default=0)
    batches: Mapped[int] = mapped_column(Integer, default=0)
    entropy_sum: Mapped[float] = mapped_column(Float, default=0.0)


class FingerprintCluster(Base):
    """Devices sharing one WebGL signature, and whether their ingestion is paused."""

    __tablename__ = "fingerprint_clusters"

    signature: Mapped[str] = mapped_column(String(64), primary_key=True)
    renderer: Mapped[str] = mapped_column(String(200), default="")
    status: Mapped[str] = mapped_column(String(16))
    devices: Mapped[int] = mapped_column(Integer, default=0)
    paused_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


class FingerprintDevice(Base):
    """The verdict on one challenged device (keyed tag, never the device id)."""

    __tablename__ = "fingerprint_devices"

    device_tag: Mapped[str] = mapped_column(String(64), primary_key=True)
    signature: Mapped[str] = mapped_column(String(64), index=True)
    subject_id: Mapped[str | None] = mapped_column(String(SUBJECT_ID_LEN), nullable=True, index=True)
    status: Mapped[str] = mapped_column(String(16))
    fmt: Mapped[str | None] = mapped_column(String(32), nullable=True)
    aaguid: Mapped[str | None] = mapped_column(String(36), nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    decided_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    expires_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)


class ConsentRecord(Base):
    """One consent decision of the consent flow."""

    __tablename__ = "privacy_consents"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    subject_id: Mapped[str | None] = mapped_column(String(SUBJECT_ID_LEN), nullable=True, index=True)
    device_tag: Mapped[str | None] = mapped_column(String(64), nullable=True)
    flow_version: Mapped[str] = mapped_column(String(32))
    choice: Mapped[str] = mapped_column(String(16))
    purposes: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    decided_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


class ErasureRequest(Base):
    """A data-subject erasure request (GDPR Art. 17) and its per-store result."""

    __tablename__ = "privacy_erasure_requests"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    subject_id: Mapped[str] = mapped_column(String(SUBJECT_ID_LEN), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    requested_at: Mapped[dt.datetime] = mapped_column(UtcDateTime)
    deadline: Mapped[dt.datetime] = mapped_column(UtcDateTime)
    started_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    erased_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    verified_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    identity_ct: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    report: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    proof_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error: Mapped[str] = mapped_column(Text, default="")
    requested_by: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class Tombstone(Base):
    """What remains of an erased subject: its random id and the fingerprint of the destroyed key."""

    __tablename__ = "privacy_tombstones"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    subject_id: Mapped[str] = mapped_column(String(SUBJECT_ID_LEN), unique=True)
    request_id: Mapped[int] = mapped_column(BigInteger)
    key_fingerprint: Mapped[str] = mapped_column(String(64))
    destroyed_at: Mapped[dt.datetime] = mapped_column(UtcDateTime)


class BackupRecord(Base):
    """A data backup (``pg_dump`` custom format, or an SQLite copy) without the key vault."""

    __tablename__ = "privacy_backups"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    path: Mapped[str] = mapped_column(Text)
    fmt: Mapped[str] = mapped_column(String(32))
    taken_at: Mapped[dt.datetime] = mapped_column(UtcDateTime)
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    excluded: Mapped[list[str]] = mapped_column(JsonType, default=list)

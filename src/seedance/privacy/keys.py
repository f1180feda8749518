"""The key vault: per-subject data keys (crypto-shredding) and rotated HMAC keys.

Every key is stored wrapped (AES-GCM) by the master key, whose value never enters the store.
The vault's tables (``models.KEY_TABLES``) are excluded from every data backup, so destroying a
subject's key here makes that subject's rows in every earlier backup unreadable.

* ``SubjectKeys``: one random 256-bit data key per subject. Its sub-keys (HKDF) seal the profile
  and key the subject's session ids and device tags. ``shred`` destroys the key and the lookup
  hash and appends a tombstone (the fingerprint of the destroyed key blob).
* ``KeyRing``: HMAC keys per purpose (``session``, ``device``) with fixed epochs: the key of epoch
  ``floor(t / rotation)`` is created on first use, retired when the epoch ends and destroyed
  ``retention`` later; after that, tags made with it can no longer be linked to anyone.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import threading
import unicodedata
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from seedance.core.errors import InputError
from seedance.privacy import crypto
from seedance.privacy.models import HmacKey, SubjectKey, Tombstone

MASTER_KEY_FILE = "privacy-master.key"
PURPOSES = ("session", "device")


def load_master_key(value: str | None, *, home: Path | None, local: bool) -> bytes:
    """The master key: ``value`` (base64url), else the key file in ``home`` (created when local)."""
    if value:
        return crypto.decode_key(value, source="SEEDANCE_PRIVACY_MASTER_KEY")
    if not local or home is None:
        raise InputError("a master key is required outside local mode: set SEEDANCE_PRIVACY_MASTER_KEY "
                         "(32 random bytes, base64url)", source="settings", field="privacy.master_key")
    path = home / MASTER_KEY_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(crypto.encode_key(crypto.new_key()) + "\n")
    return crypto.decode_key(path.read_text().strip(), source=str(path))


def normalize_external_id(value: str) -> str:
    """The form lookups use: NFKC, trimmed, case-folded (``Alice@Example.org`` = ``alice@example.org``)."""
    return unicodedata.normalize("NFKC", value).strip().casefold()


@dataclass(frozen=True, slots=True)
class SubjectKeyMaterial:
    """The usable sub-keys of one subject's data key."""

    subject_id: str
    profile: bytes
    session: bytes
    device: bytes


class SubjectKeys:
    """Data keys of subjects, wrapped by the master key."""

    def __init__(self, master_key: bytes) -> None:
        self._kek = master_key
        self._index = crypto.derive(master_key, "subject-lookup")

    def lookup_hash(self, tenant_id: int, external_id: str) -> str:
        """Keyed hash of a subject's external id within its tenant (the only form the store keeps)."""
        return crypto.keyed_hash(self._index, str(tenant_id), normalize_external_id(external_id))

    def create(self, session: Session, tenant_id: int, external_id: str, now: dt.datetime) -> SubjectKeyMaterial:
        """A new subject id and data key (in the caller's transaction)."""
        subject_id = str(uuid.uuid4())
        key = crypto.new_key()
        wrapped = crypto.seal(self._kek, key, f"dek:{subject_id}")
        session.execute(insert(SubjectKey).values(
            subject_id=subject_id, lookup_hash=self.lookup_hash(tenant_id, external_id), wrapped_key=wrapped,
            key_fingerprint=crypto.fingerprint(wrapped), created_at=now))
        return self._material(subject_id, key)

    def find(self, session: Session, tenant_id: int, external_id: str) -> str | None:
        """The subject id of an external id (``None``: unknown, or erased)."""
        return session.scalar(select(SubjectKey.subject_id).where(
            SubjectKey.lookup_hash == self.lookup_hash(tenant_id, external_id)))

    def material(self, session: Session, subject_id: str) -> SubjectKeyMaterial | None:
        """The subject's sub-keys (``None`` once shredded)."""
        wrapped = session.scalar(select(SubjectKey.wrapped_key).where(SubjectKey.subject_id == subject_id))
        if wrapped is None:
            return None
        return self._material(subject_id, crypto.open_sealed(self._kek, wrapped, f"dek:{subject_id}"))

    def shred(self, session: Session, subject_id: str, request_id: int, now: dt.datetime) -> str | None:
        """Destroy the subject's key and lookup hash; append a tombstone. Returns the key fingerprint.

        ``None`` when there was no live key (already shredded: nothing is written twice).
        """
        row = session.execute(select(SubjectKey.wrapped_key, SubjectKey.key_fingerprint).where(
            SubjectKey.subject_id == subject_id).with_for_update()).one_or_none()
        if row is None or row.wrapped_key is None:
            return None
        session.execute(update(SubjectKey).where(SubjectKey.subject_id == subject_id).values(
            wrapped_key=None, lookup_hash=None, shredded_at=now, shred_request_id=request_id))
        session.execute(insert(Tombstone).values(
            subject_id=subject_id, request_id=request_id, key_fingerprint=row.key_fingerprint, destroyed_at=now))
        return str(row.key_fingerprint)

    @staticmethod
    def _material(subject_id: str, key: bytes) -> SubjectKeyMaterial:
        return SubjectKeyMaterial(subject_id, crypto.derive(key, "profile"), crypto.derive(key, "session"),
                                  crypto.derive(key, "device"))


def destroy_expired_keys(session: Session, now: dt.datetime) -> list[str]:
    """Destroy every HMAC key past its destruction time (no master key needed); returns their ids."""
    ids = list(session.scalars(select(HmacKey.id).where(HmacKey.destroy_at <= now, HmacKey.wrapped_key.is_not(None))))
    if ids:
        session.execute(update(HmacKey).where(HmacKey.id.in_(ids)).values(wrapped_key=None, destroyed_at=now))
    return ids


@dataclass(frozen=True, slots=True)
class RingPolicy:
    """Rotation of one purpose's HMAC keys."""

    rotation_s: float
    retention_s: float


class KeyRing:
    """Rotated HMAC keys per purpose; unwrapped keys are cached until their destruction time."""

    def __init__(self, master_key: bytes, policies: dict[str, RingPolicy]) -> None:
        unknown = set(policies) - set(PURPOSES)
        if unknown:
            raise InputError(f"unknown key purposes {sorted(unknown)}; valid: {list(PURPOSES)}")
        self._kek = master_key
        self._policies = policies
        self._cache: dict[str, tuple[bytes, dt.datetime]] = {}
        self._lock = threading.Lock()

    def current(self, session: Session, purpose: str, now: dt.datetime) -> tuple[str, bytes]:
        """The id and value of the purpose's key for ``now`` (created on first use)."""
        pol = self._policies[purpose]
        epoch = math.floor(now.timestamp() / pol.rotation_s)
        key_id = f"{purpose}:{epoch}"
        hit = self._cached(key_id, now)
        if hit is not None:
            return key_id, hit
        row = session.get(HmacKey, key_id)
        if row is None:
            retire = dt.datetime.fromtimestamp((epoch + 1) * pol.rotation_s, dt.UTC)
            key = crypto.new_key()
            try:
                with session.begin_nested():
                    session.execute(insert(HmacKey).values(
                        id=key_id, purpose=purpose, wrapped_key=crypto.seal(self._kek, key, f"hmac:{key_id}"),
                        created_at=now, retire_at=retire, destroy_at=retire + dt.timedelta(seconds=pol.retention_s)))
            except IntegrityError:  # another process made it first: use theirs
                pass
            row = session.get(HmacKey, key_id, populate_existing=True)
        if row is None or row.wrapped_key is None:
            raise InputError(f"key {key_id} is destroyed; the clock is behind the key ring")
        return key_id, self._unwrap(row)

    def live(self, session: Session, purpose: str, now: dt.datetime) -> list[tuple[str, bytes]]:
        """Every not yet destroyed key of the purpose, newest first."""
        rows = session.scalars(select(HmacKey).where(
            HmacKey.purpose == purpose, HmacKey.wrapped_key.is_not(None), HmacKey.destroy_at > now,
        ).order_by(HmacKey.created_at.desc()))
        return [(r.id, self._unwrap(r)) for r in rows]

    def destroy_expired(self, session: Session, now: dt.datetime) -> list[str]:
        """Destroy every key past its destruction time; returns their ids."""
        ids = destroy_expired_keys(session, now)
        self.forget(ids)
        return ids

    def forget(self, key_ids: list[str]) -> None:
        """Drop keys from the cache (destroyed elsewhere)."""
        with self._lock:
            for key_id in key_ids:
                self._cache.pop(key_id, None)

    def _cached(self, key_id: str, now: dt.datetime) -> bytes | None:
        with self._lock:
            hit = self._cache.get(key_id)
            if hit is None:
                return None
            if hit[1] <= now:
                del self._cache[key_id]
                return None
            return hit[0]

    def _unwrap(self, row: HmacKey) -> bytes:
        assert row.wrapped_key is not None
        key = crypto.open_sealed(self._kek, row.wrapped_key, f"hmac:{row.id}")
        with self._lock:
            self._cache[row.id] = (key, row.destroy_at)
        return key

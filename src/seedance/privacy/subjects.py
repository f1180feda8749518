"""Data subjects: register them with their traits (sealed), read their profile, cache it in Redis.

A profile is ``{"external_id": ..., "traits": {...}}`` sealed with the subject's profile key
(context ``profile:<subject id>``). The Redis cache ``subj:<subject id>:profile`` holds the
plaintext for ``profile_cache_ttl_s``; erasure deletes it with every other ``subj:<id>:*`` key.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, update
from sqlalchemy.orm import Session

from seedance.control.errors import NotFound
from seedance.privacy import crypto
from seedance.privacy.keys import SubjectKeyMaterial
from seedance.privacy.models import Subject

if TYPE_CHECKING:
    from seedance.privacy.service import PrivacyService


def _seal_profile(material: SubjectKeyMaterial, profile: dict[str, Any]) -> bytes:
    raw = json.dumps(profile, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return crypto.seal(material.profile, raw, f"profile:{material.subject_id}")


def open_profile(material: SubjectKeyMaterial, sealed: bytes) -> dict[str, Any]:
    """The plaintext profile of a sealed one."""
    out: dict[str, Any] = json.loads(crypto.open_sealed(material.profile, sealed, f"profile:{material.subject_id}"))
    return out


def identify(
    svc: PrivacyService, *, session: Session, tenant_id: int, external_id: str, traits: dict[str, str],
) -> tuple[str, bool]:
    """Register the subject, or merge ``traits`` into its profile; returns ``(subject_id, created)``."""
    now = svc.now()
    keys = svc.keys
    subject_id = keys.find(session, tenant_id, external_id)
    if subject_id is None:
        material = keys.create(session, tenant_id, external_id, now)
        profile: dict[str, Any] = {"external_id": external_id, "traits": dict(traits)}
        session.execute(insert(Subject).values(id=material.subject_id, tenant_id=tenant_id,
                                               profile_ct=_seal_profile(material, profile),
                                               created_at=now, updated_at=now))
        created = True
    else:
        found = keys.material(session, subject_id)
        row = session.get(Subject, subject_id)
        if found is None or row is None:
            raise NotFound("subject is being erased; it cannot be updated")
        material = found
        profile = open_profile(material, row.profile_ct)
        profile["traits"] = {**profile.get("traits", {}), **traits}
        session.execute(update(Subject).where(Subject.id == subject_id).values(
            profile_ct=_seal_profile(material, profile), updated_at=now))
        created = False
        svc.redis.delete(svc.key("subj", subject_id, "profile"))  # stale now; re-read fills it
    return material.subject_id, created


def read_profile(svc: PrivacyService, *, session: Session, subject_id: str) -> dict[str, Any] | None:
    """The subject's profile: from the Redis cache, else unsealed from the store (and cached)."""
    cached = svc.redis.get(svc.key("subj", subject_id, "profile"))
    if cached is not None:
        out: dict[str, Any] = json.loads(cached)
        return out
    material = svc.keys.material(session, subject_id)
    row = session.get(Subject, subject_id)
    if material is None or row is None:
        return None
    profile = open_profile(material, row.profile_ct)
    cache_profile(svc, subject_id, profile)
    return profile


def cache_profile(svc: PrivacyService, subject_id: str, profile: dict[str, Any]) -> None:
    """Put the plaintext profile in the Redis cache."""
    svc.redis.set(svc.key("subj", subject_id, "profile"), json.dumps(profile, sort_keys=True),
                  ex=svc.settings.profile_cache_ttl_s)


def require_subject(svc: PrivacyService, *, session: Session, tenant_id: int, external_id: str) -> SubjectKeyMaterial:
    """The key material of a known subject; 404 with a clear line otherwise."""
    subject_id = svc.keys.find(session, tenant_id, external_id)
    material = svc.keys.material(session, subject_id) if subject_id else None
    if material is None:
        raise NotFound("unknown subject: no data subject of this tenant has that id (register it first with "
                       "POST /api/v1/privacy/subjects); nothing was stored")
    return material

"""Event ingestion: validate a batch, screen its device, anonymise it, store it in one transaction.

Order (nothing of a refused batch is stored):
  1. bad input (too many events, a time in the future or too old, a session starting after its
     events) -> ``InputError`` (422) before anything is touched;
  2. an unknown subject -> 404;
  3. the device's keyed tag is screened (blacklist, fingerprint cluster; ``fingerprint.screen``) —
     a pause and its event are committed, then the batch is refused (403 blacklisted, 423 paused);
  4. the batch is anonymised (``anonymize``) and its rows, plus the subject's derived daily
     roll-up, are written in one transaction.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import TYPE_CHECKING

from sqlalchemy import insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from seedance.control.errors import Forbidden
from seedance.control.security import Principal
from seedance.core.errors import InputError
from seedance.privacy.anonymize import AnonymizedEvent, anonymize_batch
from seedance.privacy.errors import Locked
from seedance.privacy.fingerprint import Screening, device_tags, screen
from seedance.privacy.models import SubjectActivity, TelemetryEvent
from seedance.privacy.schemas import TelemetryAccepted, TelemetryBatch
from seedance.privacy.subjects import require_subject

if TYPE_CHECKING:
    from seedance.privacy.service import PrivacyService

SUBJECT_KEY_ID = "subject"
"""``key_id`` of session ids keyed by the subject's own key (erased with the subject)."""


def validate_batch(svc: PrivacyService, batch: TelemetryBatch, now: dt.datetime) -> None:
    """Refuse a batch whose size or times are out of bounds (``InputError``, field located)."""
    s = svc.settings
    if len(batch.events) > s.max_events_per_batch:
        raise InputError(f"{len(batch.events)} events in one batch; at most {s.max_events_per_batch}; nothing was "
                         "stored", source="body", field="events")
    latest = now + dt.timedelta(seconds=s.max_clock_skew_s)
    earliest = now - dt.timedelta(hours=s.max_event_age_hours)
    for i, e in enumerate(batch.events):
        if e.at > latest:
            raise InputError(f"{e.at.isoformat()} is in the future (server time {now.isoformat()}); nothing was "
                             "stored", source="body", field=f"events.{i}.at")
        if e.at < earliest:
            raise InputError(f"{e.at.isoformat()} is older than {s.max_event_age_hours:g} h; nothing was stored",
                             source="body", field=f"events.{i}.at")
    first = min(e.at for e in batch.events)
    if batch.session_started_at > first + dt.timedelta(seconds=s.max_clock_skew_s):
        raise InputError("the session starts after its first event; nothing was stored", source="body",
                         field="session_started_at")


def ingest(svc: PrivacyService, principal: Principal, batch: TelemetryBatch) -> TelemetryAccepted:
    """Store one batch (or refuse it whole)."""
    now = svc.now()
    validate_batch(svc, batch, now)
    verdict: Screening | None = None
    rows: list[AnonymizedEvent] = []
    with svc.db.write() as session:
        material = (require_subject(svc, session=session, tenant_id=principal.tenant_id, external_id=batch.subject)
                    if batch.subject else None)
        tag, candidates = device_tags(svc, session, batch.device_id, material, now)
        verdict = screen(svc, session, tag=tag, candidates=candidates, fp=batch.fingerprint, now=now)
        if verdict.refused is None:
            if material is not None:
                key, key_id = material.session, SUBJECT_KEY_ID
            else:
                key_id, key = svc.ring.current(session, "session", now)
            rows = anonymize_batch(key=key, key_id=key_id, device_id=batch.device_id,
                                   session_started_at=batch.session_started_at,
                                   events=[(e.action, e.at) for e in batch.events])
            subject_id = material.subject_id if material else None
            store_events(session, principal.tenant_id, subject_id, rows, verdict.signature, now)
    if verdict.refused is not None:
        svc.metrics.telemetry_events.labels("refused").inc(len(batch.events))
        raise (Forbidden if verdict.refused == "blacklisted" else Locked)(verdict.detail)
    svc.metrics.telemetry_events.labels("accepted").inc(len(rows))
    if material is not None:
        skey = svc.key("subj", material.subject_id, "sessions")
        pipe = svc.redis.pipeline(transaction=False)
        pipe.sadd(skey, rows[0].session_id)
        pipe.expire(skey, 86_400)
        pipe.execute()
    return TelemetryAccepted(accepted=len(rows), session_id=rows[0].session_id, entropy=rows[0].entropy,
                             signature=verdict.signature)


def store_events(session: Session, tenant_id: int, subject_id: str | None, rows: list[AnonymizedEvent],
                 signature: str | None, now: dt.datetime) -> None:
    """Insert anonymised rows and, for a subject, add them to its daily roll-up."""
    session.execute(insert(TelemetryEvent), [
        {"tenant_id": tenant_id, "subject_id": subject_id, "session_id": r.session_id, "key_id": r.key_id,
         "action": r.action, "entropy": r.entropy, "occurred_at": r.occurred_at, "received_at": now,
         "signature": signature} for r in rows])
    if subject_id is None:
        return
    per_day: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for r in rows:
        acc = per_day[r.occurred_at.date().isoformat()]
        acc[0] += 1
        acc[1] += r.entropy
    dialect = session.get_bind().dialect.name
    make = postgresql.insert if dialect == "postgresql" else sqlite.insert
    for day, (n, ent) in per_day.items():
        stmt = make(SubjectActivity).values(subject_id=subject_id, day=day, events=int(n), batches=1, entropy_sum=ent)
        stmt = stmt.on_conflict_do_update(index_elements=["subject_id", "day"], set_={
            "events": SubjectActivity.events + stmt.excluded.events,
            "batches": SubjectActivity.batches + 1,
            "entropy_sum": SubjectActivity.entropy_sum + stmt.excluded.entropy_sum,
        })
        session.execute(stmt)

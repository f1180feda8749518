"""Erasure requests (GDPR Art. 17): the ledger, the executors per store, and the verification.

Lifecycle of a request: ``pending`` -> ``running`` -> ``erased`` -> ``verified`` (or ``failed``,
with the locations of what was still found; ``retry`` puts it back to ``pending``).

``request_erasure`` records the request with its deadline (``erasure_deadline_hours``, 72 by
default) and the subject's identifiers, sealed under a key derived from the master key (the
verification needs them; they are wiped when the request is verified). ``run_erasures`` then, for
a batch of requests:

1. snapshots the subject's pseudonyms (its session ids and device tags) into the sealed identity,
   so the scan can look for them after they are gone;
2. **primary and derived tables** (``registry.SUBJECT_DATA``): deletes the subject's rows and, in
   the same transaction, **destroys its data key** in the vault and appends a tombstone
   (crypto-shredding: every backup's copy of the subject is now unreadable);
3. **Redis**: deletes ``subj:<id>:*`` and removes the subject's device tags from every fingerprint
   set, the blacklist, the verified set and open challenges;
4. **verification**: one scan of every store for every identifier of the batch — the live
   database (all tables), Redis (all keys under the prefix), the Parquet audit logs, and each
   registered backup restored into a scratch database, before and after the ledger replay;
5. records the result per request: per-store counts, the destroyed key's fingerprint, the
   proof hash (SHA-256 of the canonical JSON report) — in the request row, an event and a row
   of ``audit_logs/delete_requests_<YYYY>Q<n>.parquet``.

Append-only logs (``events``, ``privacy_tombstones``) never hold identifiers, only the random
subject id, which is what a tombstone is.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session

from seedance.control.errors import Conflict, NotFound
from seedance.control.schemas import Role
from seedance.control.security import Principal
from seedance.control.services import events
from seedance.privacy import audit, crypto
from seedance.privacy.backup import backups_in_scope, replay_ledger, restored
from seedance.privacy.keys import normalize_external_id
from seedance.privacy.models import (
    ConsentRecord,
    ErasureRequest,
    FingerprintDevice,
    Subject,
    SubjectKey,
    TelemetryEvent,
)
from seedance.privacy.registry import LEDGER_TABLES, SUBJECT_DATA, rowcount
from seedance.privacy.scan import Finding, Needle, NeedleIndex, StoreScan, scan_database, scan_parquet, scan_redis
from seedance.privacy.schemas import ErasureCreate, ErasureRead
from seedance.privacy.subjects import open_profile

if TYPE_CHECKING:
    from seedance.privacy.service import PrivacyService

PENDING, RUNNING, ERASED, VERIFIED, FAILED = "pending", "running", "erased", "verified", "failed"
OPEN = (PENDING, RUNNING, ERASED)
IDENTIFYING_TRAITS = ("email", "phone", "username", "login", "account")
STALE_CLAIM = dt.timedelta(hours=1)


def _identity_key(svc: PrivacyService) -> bytes:
    return crypto.derive(svc.master_key, "erasure-identity")


def _seal_identity(svc: PrivacyService, request_id: int, identity: dict[str, Any]) -> bytes:
    return crypto.seal(_identity_key(svc), json.dumps(identity, sort_keys=True).encode(), f"erasure:{request_id}")


def _open_identity(svc: PrivacyService, request_id: int, sealed: bytes) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(crypto.open_sealed(_identity_key(svc), sealed, f"erasure:{request_id}"))
    return out


def to_read(row: ErasureRequest) -> ErasureRead:
    """The API form of a request."""
    within = None if row.verified_at is None else row.verified_at <= row.deadline
    return ErasureRead(id=row.id, subject_id=row.subject_id, status=row.status, requested_at=row.requested_at,
                       deadline=row.deadline, started_at=row.started_at, erased_at=row.erased_at,
                       verified_at=row.verified_at, within_deadline=within, proof_hash=row.proof_hash,
                       report=row.report or {}, error=row.error)


def request_erasure(svc: PrivacyService, principal: Principal, data: ErasureCreate) -> tuple[ErasureRead, bool]:
    """Record a request for the subject (its open request if there is one); ``(request, created)``."""
    now = svc.now()
    with svc.db.write() as s:
        subject_id = svc.keys.find(s, principal.tenant_id, data.subject)
        material = svc.keys.material(s, subject_id) if subject_id else None
        row = s.get(Subject, subject_id) if subject_id else None
        if subject_id is None or material is None or row is None:
            raise NotFound("unknown subject: no data subject of this tenant has that id (never registered, or "
                           "already erased); nothing to erase")
        existing = s.scalars(select(ErasureRequest).where(
            ErasureRequest.subject_id == subject_id, ErasureRequest.status.in_(OPEN))).first()
        if existing is not None:
            return to_read(existing), False
        profile = open_profile(material, row.profile_ct)
        traits = profile.get("traits", {})
        identity = {
            "external_id": [data.subject, str(profile.get("external_id", data.subject)),
                            normalize_external_id(data.subject)],
            "traits": sorted({str(v) for k, v in traits.items() if k in IDENTIFYING_TRAITS and v}),
            "device_ids": sorted(set(data.device_ids)),
        }
        deadline = now + dt.timedelta(hours=svc.settings.erasure_deadline_hours)
        rid = s.execute(insert(ErasureRequest).values(
            tenant_id=principal.tenant_id, subject_id=subject_id, status=PENDING, requested_at=now, deadline=deadline,
            identity_ct=b"", report={}, error="", requested_by=principal.token_id or None,
        ).returning(ErasureRequest.id)).scalar_one()
        s.execute(update(ErasureRequest).where(ErasureRequest.id == rid).values(
            identity_ct=_seal_identity(svc, rid, identity)))
        events.record(session=s, kind="privacy.erasure.requested", tenant_id=principal.tenant_id,
                      message=f"erasure request {rid} recorded; deadline {deadline.isoformat()}",
                      data={"request_id": rid, "subject_id": subject_id, "deadline": deadline.isoformat()})
        out = s.get(ErasureRequest, rid)
        assert out is not None
        read = to_read(out)
    svc.metrics.erasures.labels("requested").inc()
    return read, True


def list_requests(svc: PrivacyService, principal: Principal, *, status: str | None = None,
                  limit: int = 100) -> list[ErasureRead]:
    """Requests the caller may see, newest first."""
    q = select(ErasureRequest).order_by(ErasureRequest.id.desc()).limit(limit)
    if not principal.is_admin:
        q = q.where(ErasureRequest.tenant_id == principal.tenant_id)
    if status:
        q = q.where(ErasureRequest.status == status)
    with svc.db.read() as s:
        return [to_read(r) for r in s.scalars(q)]


def get_request(svc: PrivacyService, principal: Principal, request_id: int) -> ErasureRead:
    """One request (404 for another tenant's)."""
    with svc.db.read() as s:
        row = s.get(ErasureRequest, request_id)
        if row is None:
            raise NotFound("erasure request not found")
        principal.check_tenant(row.tenant_id, "erasure request")
        return to_read(row)


def retry(svc: PrivacyService, principal: Principal, request_id: int) -> ErasureRead:
    """Put a failed request back in the queue."""
    with svc.db.write() as s:
        row = s.get(ErasureRequest, request_id)
        if row is None:
            raise NotFound("erasure request not found")
        principal.check_tenant(row.tenant_id, "erasure request")
        principal.require(Role.OPERATOR, "retrying an erasure")
        if row.status != FAILED:
            raise Conflict(f"only a failed request can be retried; this one is {row.status}")
        row.status = ERASED if row.erased_at is not None else PENDING
        row.error = ""
        s.flush()
        return to_read(row)


# ----------------------------------------------------------------------------------- the job
@dataclass(slots=True)
class _Work:
    id: int
    tenant_id: int
    subject_id: str
    requested_at: dt.datetime
    deadline: dt.datetime
    identity: dict[str, Any]
    report: dict[str, Any] = field(default_factory=dict)
    key_fingerprint: str = ""
    erased_at: dt.datetime | None = None


def run_erasures(svc: PrivacyService, *, limit: int = 1000) -> list[ErasureRead]:
    """Erase and verify up to ``limit`` open requests; returns them as they end up."""
    work = _claim(svc, limit)
    if not work:
        return []
    for w in work:
        if w.erased_at is None:
            _erase_tables(svc, w)
    _erase_redis(svc, work)
    scans = _verify(svc, work)
    out = _record(svc, work, scans)
    svc.metrics.erasures.labels(VERIFIED).inc(sum(1 for r in out if r.status == VERIFIED))
    svc.metrics.erasures.labels(FAILED).inc(sum(1 for r in out if r.status == FAILED))
    for r in out:
        if r.verified_at is not None:
            svc.metrics.erasure_seconds.observe((r.verified_at - r.requested_at).total_seconds())
    return out


def _claim(svc: PrivacyService, limit: int) -> list[_Work]:
    now = svc.now()
    out: list[_Work] = []
    with svc.db.write() as s:
        rows = list(s.scalars(select(ErasureRequest).where(
            (ErasureRequest.status.in_((PENDING, ERASED)))
            | ((ErasureRequest.status == RUNNING) & (ErasureRequest.started_at < now - STALE_CLAIM))
        ).order_by(ErasureRequest.deadline).limit(limit)))
        for row in rows:
            claimed = rowcount(s.execute(update(ErasureRequest).where(
                ErasureRequest.id == row.id, ErasureRequest.status == row.status).values(
                status=RUNNING, started_at=now)))
            if not claimed or row.identity_ct is None:
                continue
            identity = _open_identity(svc, row.id, row.identity_ct)
            if "pseudonyms" not in identity:
                identity["pseudonyms"] = _snapshot(svc, s, row.subject_id, identity["device_ids"], now)
                s.execute(update(ErasureRequest).where(ErasureRequest.id == row.id).values(
                    identity_ct=_seal_identity(svc, row.id, identity)))
            report = dict(row.report or {})
            report.setdefault("stores", {})
            out.append(_Work(row.id, row.tenant_id, row.subject_id, row.requested_at, row.deadline, identity,
                             report, str(report.get("key", {}).get("fingerprint", "")), row.erased_at))
    return out


def _snapshot(svc: PrivacyService, s: Session, subject_id: str, device_ids: list[str],
              now: dt.datetime) -> dict[str, list[str]]:
    """The subject's pseudonyms, taken while its key still exists."""
    sessions = sorted(set(s.scalars(select(TelemetryEvent.session_id).where(TelemetryEvent.subject_id == subject_id))))
    tags = set(s.scalars(select(FingerprintDevice.device_tag).where(FingerprintDevice.subject_id == subject_id)))
    own: set[str] = set(tags)
    material = svc.keys.material(s, subject_id)
    if material is not None:
        own.update(crypto.keyed_hash(material.device, d) for d in device_ids)
    shared = {crypto.keyed_hash(k, d) for d in device_ids for _, k in svc.ring.live(s, "device", now)}
    return {"sessions": sessions, "own_tags": sorted(own), "shared_tags": sorted(shared)}


def _erase_tables(svc: PrivacyService, w: _Work) -> None:
    now = svc.now()
    p = w.identity["pseudonyms"]
    tags = [*p["own_tags"], *p["shared_tags"]]
    deleted: dict[str, int] = {}
    with svc.db.write() as s:
        if tags:
            deleted["fingerprint_devices(by tag)"] = rowcount(s.execute(delete(FingerprintDevice).where(
                FingerprintDevice.device_tag.in_(tags))))
            deleted["privacy_consents(by tag)"] = rowcount(s.execute(delete(ConsentRecord).where(
                ConsentRecord.device_tag.in_(tags))))
        for item in SUBJECT_DATA:
            deleted[item.table] = item.delete(s, [w.subject_id])
        fp = svc.keys.shred(s, w.subject_id, w.id, now)
        if fp is None:  # shredded by an earlier, interrupted run
            fp = str(s.scalar(select(SubjectKey.key_fingerprint).where(SubjectKey.subject_id == w.subject_id)) or "")
        w.key_fingerprint = fp
        w.erased_at = now
        w.report["stores"]["primary"] = {t: n for t, n in deleted.items()
                                         if t not in {i.table for i in SUBJECT_DATA if i.store == "derived"}}
        w.report["stores"]["derived"] = {i.table: deleted[i.table] for i in SUBJECT_DATA if i.store == "derived"}
        w.report["key"] = {"fingerprint": fp, "destroyed_at": now.isoformat(), "vault": "privacy_subject_keys"}
        s.execute(update(ErasureRequest).where(ErasureRequest.id == w.id).values(
            status=ERASED, erased_at=now, report=w.report))
        events.record(session=s, kind="privacy.erasure.erased", tenant_id=w.tenant_id,
                      message=f"erasure request {w.id}: rows deleted, data key destroyed",
                      data={"request_id": w.id, "subject_id": w.subject_id, "key_fingerprint": fp})


SUBJECT_KEYS = ("profile", "sessions", "consent")
"""The Redis keys ``subj:<id>:<suffix>`` the service writes; a batch-wide scan catches any other suffix."""


def _erase_redis(svc: PrivacyService, work: list[_Work]) -> None:
    """Delete every batch subject's keys and list members (one pass over the key space per batch)."""
    r = svc.redis
    tag_owner = {t: w.id for w in work for t in [*w.identity["pseudonyms"]["own_tags"],
                                                  *w.identity["pseudonyms"]["shared_tags"]]}
    keys_deleted = {w.id: 0 for w in work}
    members = {w.id: 0 for w in work}
    by_subject = {w.subject_id: w.id for w in work}
    with svc.redis_errors():
        pipe = r.pipeline(transaction=False)
        for w in work:
            for suffix in SUBJECT_KEYS:
                pipe.delete(svc.key("subj", w.subject_id, suffix))
        for w, n in zip([w for w in work for _ in SUBJECT_KEYS], pipe.execute(), strict=True):
            keys_deleted[w.id] += int(n)
        subj = svc.key("subj", "")
        for key in r.scan_iter(match=svc.key("subj", "*"), count=5000):
            owner = by_subject.get(key[len(subj):].split(":", 1)[0])
            if owner is not None:
                keys_deleted[owner] += int(r.delete(key))
        tags = list(tag_owner)
        if tags:
            for lst in (svc.blacklist, svc.verified):
                for tag, score in zip(tags, r.zmscore(lst.key, tags), strict=True):
                    if score is not None:
                        members[tag_owner[tag]] += lst.remove(tag)
            pipe = r.pipeline(transaction=False)
            for tag in tags:
                pipe.delete(svc.key("fp", "dev", tag))
            for tag, n in zip(tags, pipe.execute(), strict=True):
                keys_deleted[tag_owner[tag]] += int(n)
            sig_keys = list(r.scan_iter(match=svc.key("fp", "sig", "*"), count=5000))
            pipe = r.pipeline(transaction=False)
            for k in sig_keys:
                pipe.zmscore(k, tags)
            hits = [(k, tag) for k, scores in zip(sig_keys, pipe.execute(), strict=True)
                    for tag, score in zip(tags, scores, strict=True) if score is not None]
            pipe = r.pipeline(transaction=False)
            for k, tag in hits:
                pipe.zrem(k, tag)
            for (_, tag), n in zip(hits, pipe.execute(), strict=True):
                members[tag_owner[tag]] += int(n)
            for ck in r.scan_iter(match=svc.key("fp", "chal", "*"), count=5000):
                owner = tag_owner.get(r.hget(ck, "tag") or "") if r.type(ck) == "hash" else None
                if owner is not None:
                    keys_deleted[owner] += int(r.delete(ck))
                    r.zrem(svc.key("fp", "chal-deadlines"), ck.rsplit(":", 1)[-1])
    for w in work:
        w.report["stores"]["redis"] = {"keys_deleted": keys_deleted[w.id], "members_removed": members[w.id]}


def _needles(w: _Work) -> list[Needle]:
    sid, ident = w.subject_id, w.identity
    out = [Needle(sid, "subject_id", sid)]
    out += [Needle(sid, "external_id", v) for v in set(ident["external_id"])]
    out += [Needle(sid, "trait", v) for v in ident["traits"]]
    out += [Needle(sid, "device_id", v) for v in ident["device_ids"]]
    p = ident["pseudonyms"]
    out += [Needle(sid, "device_tag", v) for v in p["shared_tags"]]
    out += [Needle(sid, "pseudonym", v) for v in [*p["sessions"], *p["own_tags"]]]
    return out


@dataclass(slots=True)
class _Scans:
    stores: list[StoreScan]
    backup_checks: dict[int, dict[str, Any]]  # backup id -> per-subject sealed/decryptable, replay counts
    error: str = ""


def _verify(svc: PrivacyService, work: list[_Work]) -> _Scans:
    needles: list[Needle] = []
    lookup: dict[str, str] = {}
    for w in work:
        needles += _needles(w)
        for ext in set(w.identity["external_id"]):
            lookup[svc.keys.lookup_hash(w.tenant_id, ext)] = w.subject_id
    needles += [Needle(sid, "lookup_hash", h) for h, sid in lookup.items()]
    index = NeedleIndex(needles)
    ids = [w.subject_id for w in work]
    scans = _Scans([], {})
    scans.stores.append(scan_database(svc.db, index, store="primary"))
    with svc.redis_errors():
        scans.stores.append(scan_redis(svc.redis, svc.prefix, index))
    scans.stores.append(scan_parquet(audit.files(svc.audit_dir), index))
    try:
        for b in backups_in_scope(svc, svc.now()):
            with restored(svc, b) as rdb:
                scans.stores.append(scan_database(rdb, index, store=f"backup:{b.id}"))
                check: dict[str, Any] = {"sha256": b.sha256, "taken_at": b.taken_at.isoformat()}
                with rdb.read() as rs, svc.db.read() as ls:
                    present = set(rs.scalars(select(Subject.id).where(Subject.id.in_(ids))))
                    check["sealed_subjects"] = sorted(present)
                    check["decryptable"] = sorted(sid for sid in present if svc.keys.material(ls, sid) is not None)
                    readable = []
                    for rid, ct in rs.execute(select(ErasureRequest.id, ErasureRequest.identity_ct).where(
                            ErasureRequest.subject_id.in_(ids), ErasureRequest.identity_ct.is_not(None))):
                        try:
                            _open_identity(svc, rid, bytes(ct or b""))
                            readable.append(rid)
                        except crypto.SealError:
                            pass
                    check["readable_identities"] = readable
                check["replay_deleted"] = replay_ledger(svc.db, rdb)
                scans.stores.append(scan_database(rdb, index, store=f"backup:{b.id}:replayed"))
                scans.backup_checks[b.id] = check
    except Exception as exc:  # a backup that cannot be restored leaves the requests erased, not verified
        scans.error = f"backup verification failed: {exc}"
    return scans


def _violation(f: Finding) -> bool:
    table = f.location.split(":", 1)[0]
    backup = f.store.startswith("backup:")
    replayed = f.store.endswith(":replayed")
    if f.kind == "subject_id":
        if f.store == "audit" or table in LEDGER_TABLES:
            return False
        return not backup or replayed
    if f.kind == "pseudonym":  # keyed by the destroyed key: unlinkable copies in backups are the shredded state
        return not backup or (replayed and table not in LEDGER_TABLES)
    return True


def _record(svc: PrivacyService, work: list[_Work], scans: _Scans) -> list[ErasureRead]:
    now = svc.now()
    results: list[ErasureRead] = []
    audit_rows: list[dict[str, Any]] = []
    with svc.db.write() as s:
        for w in work:
            per_store: dict[str, Any] = {}
            bad: list[Finding] = []
            for sc in scans.stores:
                mine = [f for f in sc.findings if f.subject_id == w.subject_id]
                viol = [f for f in mine if _violation(f)]
                bad += viol
                per_store[sc.store] = {"scanned": sc.scanned, "found": len(mine), "violations": len(viol),
                                       "kinds": sorted({f.kind for f in mine})}
            backups = {}
            for bid, chk in scans.backup_checks.items():
                sealed = w.subject_id in chk["sealed_subjects"]
                decryptable = w.subject_id in chk["decryptable"]
                readable = [rid for rid in chk["readable_identities"] if rid == w.id]
                backups[str(bid)] = {"sha256": chk["sha256"], "taken_at": chk["taken_at"],
                                     "subject_rows_sealed": sealed, "decryptable": decryptable,
                                     "identity_readable": bool(readable)}
                if decryptable or readable:
                    where = "privacy_subjects" if decryptable else "privacy_erasure_requests"
                    bad.append(Finding(f"backup:{bid}", where, w.subject_id, "decryptable"))
            w.report["stores"]["backups"] = backups
            w.report["scan"] = per_store
            w.report["needles"] = _needle_counts(w)
            error = scans.error or ("; ".join(sorted({f"{f.kind} in {f.store} {f.location}" for f in bad}))[:4000]
                                    if bad else "")
            status = FAILED if error else VERIFIED
            verified_at = now if status == VERIFIED else None
            proof = {"request_id": w.id, "subject_id": w.subject_id, "requested_at": w.requested_at.isoformat(),
                     "erased_at": w.erased_at.isoformat() if w.erased_at else None,
                     "verified_at": verified_at.isoformat() if verified_at else None, "report": w.report}
            proof_hash = hashlib.sha256(json.dumps(proof, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
            values: dict[str, Any] = {"status": status, "report": w.report, "error": error, "verified_at": verified_at,
                                      "proof_hash": proof_hash if status == VERIFIED else None}
            if status == VERIFIED:
                values["identity_ct"] = None
            s.execute(update(ErasureRequest).where(ErasureRequest.id == w.id).values(**values))
            events.record(session=s, kind=f"privacy.erasure.{status}", tenant_id=w.tenant_id,
                          message=f"erasure request {w.id} {status}" + (f": {error[:200]}" if error else ""),
                          data={"request_id": w.id, "subject_id": w.subject_id,
                                "proof_hash": proof_hash if status == VERIFIED else None})
            if status == VERIFIED:
                audit_rows.append({
                    "request_id": w.id, "subject_tombstone": w.subject_id, "tenant_id": w.tenant_id, "status": status,
                    "requested_at": w.requested_at, "deadline": w.deadline, "erased_at": w.erased_at,
                    "verified_at": verified_at, "within_deadline": bool(verified_at and verified_at <= w.deadline),
                    "key_fingerprint": w.key_fingerprint, "stores": sorted(per_store), "proof_hash": proof_hash})
        s.flush()
        rows = {r.id: r for r in s.scalars(select(ErasureRequest).where(ErasureRequest.id.in_([w.id for w in work])))}
        results = [to_read(rows[w.id]) for w in work]
    if audit_rows:
        audit.append(svc.audit_dir, audit_rows)
    return results


def _needle_counts(w: _Work) -> dict[str, int]:
    p = w.identity["pseudonyms"]
    return {"external_id": len(set(w.identity["external_id"])), "trait": len(w.identity["traits"]),
            "device_id": len(w.identity["device_ids"]), "device_tag": len(p["shared_tags"]),
            "pseudonym": len(p["sessions"]) + len(p["own_tags"])}

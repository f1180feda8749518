"""Compliance in the control plane: the system's facts, evidence records, and the enable gate.

* ``gather_facts`` reads the evidence the rules check from the store (see
  :mod:`seedance.compliance.facts`): append-only triggers, declared log retention, the oldest
  retained event, and the evidence records of the lookback window.
* ``record_evidence`` appends a backup, key-rotation or node-destruction record to the event log
  (``evidence.backup``, ``evidence.key_rotated``, ``evidence.node_destroyed``).
* ``gate`` runs the rules on a policy document with the facts; a policy with error findings is
  refused (409) unless the caller overrides with a reason, which is appended to the event log as
  ``policy.compliance_override`` with the findings it overrode.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from seedance.compliance.document import parse_document
from seedance.compliance.engine import ComplianceReport, check_document
from seedance.compliance.facts import (
    EPHEMERAL_LABEL,
    BackupRecord,
    ComplianceSettings,
    KeyRotation,
    NodeDestruction,
    NodeRemoval,
    SystemFacts,
)
from seedance.control.db.models import Cluster, EventRecord, Tenant, utcnow
from seedance.control.errors import Conflict
from seedance.control.schemas import Role
from seedance.control.security import Principal
from seedance.control.services import clusters, events
from seedance.core.errors import InputError

OVERRIDE_EVENT = "policy.compliance_override"
CHECKED_EVENT = "policy.compliance_checked"
EVIDENCE_EVENTS = {"backup": "evidence.backup", "key-rotation": "evidence.key_rotated",
                   "node-destruction": "evidence.node_destroyed"}
_MAX_ROWS = 10_000
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


def _rfc3339(v: object) -> object:
    if not isinstance(v, str | dt.datetime):
        raise ValueError("must be an RFC 3339 date-time string")
    return v


Timestamp = Annotated[dt.datetime, BeforeValidator(_rfc3339), Field(strict=False)]
"""A date-time from its RFC 3339 string (strict bodies otherwise; a number is not a time)."""
Text200 = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class ComplianceRefused(Conflict):
    """A policy with error findings, enabled without an override."""

    def __init__(self, report: ComplianceReport, policy: str) -> None:
        errs = report.errors()
        where = "; ".join(f"{f.rule_id} at {report.source}:{f.line}:{f.column}" + (f" [{f.system}]" if f.system else "")
                          for f in errs[:5])
        more = f" (and {len(errs) - 5} more)" if len(errs) > 5 else ""
        super().__init__(f"policy {policy!r} has {len(errs)} compliance error(s): {where}{more}; fix them, or enable "
                         "with override and a reason (recorded in the event log)")
        self.report = report


class _Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    at: Timestamp | None = Field(default=None, description="When it happened (default: now).")
    note: Annotated[str, StringConstraints(max_length=500)] = ""


class BackupEvidence(_Evidence):
    """A backup of the store."""

    kind: Literal["backup"]
    encrypted: bool
    cipher: Annotated[str, StringConstraints(max_length=63)] = ""
    sha256: Sha256 | None = Field(default=None, description="Checksum of the backup artefact.")


class KeyRotationEvidence(_Evidence):
    """An encryption key rotation."""

    kind: Literal["key-rotation"]
    key_id: Text200


class NodeDestructionEvidence(_Evidence):
    """A node destroyed, with the SHA-256 of its memory-wipe proof."""

    kind: Literal["node-destruction"]
    cluster: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    node: Annotated[str, StringConstraints(min_length=1, max_length=253)]
    destroyed_at: Timestamp
    wipe_proof_sha256: Sha256


class EvidenceCreate(BaseModel):
    """Body of ``POST /api/v1/compliance/evidence``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    record: Annotated[BackupEvidence | KeyRotationEvidence | NodeDestructionEvidence, Field(discriminator="kind")]


def _aware(t: dt.datetime, field: str) -> dt.datetime:
    if t.tzinfo is None:
        raise InputError("give a timezone (e.g. ...Z)", source="request body", field=field)
    return t.astimezone(dt.UTC)


def record_evidence(*, session: Session, principal: Principal, data: EvidenceCreate) -> dict[str, Any]:
    """Append one evidence record to the event log (operator)."""
    principal.require(Role.OPERATOR, "recording compliance evidence")
    rec = data.record
    at = _aware(rec.at, "record.at") if rec.at is not None else utcnow()
    body: dict[str, Any] = {"at": at.isoformat(), "note": rec.note, "by": principal.token_name}
    cluster_id: int | None = None
    if isinstance(rec, BackupEvidence):
        body |= {"encrypted": rec.encrypted, "cipher": rec.cipher, "sha256": rec.sha256 or ""}
        message = f"backup ({'encrypted' if rec.encrypted else 'UNENCRYPTED'})"
    elif isinstance(rec, KeyRotationEvidence):
        body |= {"key_id": rec.key_id}
        message = f"key {rec.key_id} rotated"
    else:
        cluster_id = clusters.get_cluster(session=session, name=rec.cluster).id
        body |= {"node": rec.node, "destroyed_at": _aware(rec.destroyed_at, "record.destroyed_at").isoformat(),
                 "wipe_proof_sha256": rec.wipe_proof_sha256}
        message = f"node {rec.node} destroyed"
    kind = EVIDENCE_EVENTS[rec.kind]
    events.record(session=session, kind=kind, cluster_id=cluster_id, message=message, data=body)
    return {"kind": kind, **body}


def append_only_logs(session: Session) -> bool:
    """Whether the UPDATE/DELETE triggers of ``events`` and ``decisions`` exist in the store."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        rows = session.execute(text(
            "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON t.tgrelid = c.oid "
            "JOIN pg_namespace n ON c.relnamespace = n.oid "
            "WHERE n.nspname = current_schema() AND c.relname IN ('events', 'decisions') AND NOT t.tgisinternal"
        )).all()
        have = {(str(r[0]), str(r[1])) for r in rows}
        return all((t, f"{t}_append_only") in have for t in ("events", "decisions"))
    if dialect == "sqlite":
        rows = session.execute(text("SELECT tbl_name, name FROM sqlite_master WHERE type = 'trigger'")).all()
        have = {(str(r[0]), str(r[1])) for r in rows}
        return all((t, f"{t}_no_{a}") in have for t in ("events", "decisions") for a in ("update", "delete"))
    return False


def _parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


def gather_facts(*, session: Session, settings: ComplianceSettings | None = None,
                 now: dt.datetime | None = None) -> SystemFacts:
    """The running control plane's facts (see :mod:`seedance.compliance.facts`)."""
    settings = settings or ComplianceSettings()
    now = now or utcnow()
    since = now - dt.timedelta(days=settings.lookback_days)
    oldest = session.scalar(select(func.min(EventRecord.created_at)))
    starts = [t for t in (session.scalar(select(func.min(Tenant.created_at))),
                          session.scalar(select(func.min(Cluster.created_at)))) if t is not None]
    kinds = (*EVIDENCE_EVENTS.values(), "node.removed")
    rows = session.execute(
        select(EventRecord.id, EventRecord.kind, EventRecord.cluster_id, EventRecord.message, EventRecord.data,
               EventRecord.created_at)
        .where(EventRecord.kind.in_(kinds), EventRecord.created_at >= since)
        .order_by(EventRecord.id.desc()).limit(_MAX_ROWS)
    ).all()
    backups, rotations, removals, destructions = [], [], [], []
    for eid, kind, cid, message, data, created in rows:
        d = data if isinstance(data, dict) else {}
        at = _parse_time(d.get("at")) or created
        if kind == EVIDENCE_EVENTS["backup"]:
            backups.append(BackupRecord(event_id=eid, at=at, encrypted=bool(d.get("encrypted")),
                                        cipher=str(d.get("cipher", "")), sha256=str(d.get("sha256", ""))))
        elif kind == EVIDENCE_EVENTS["key-rotation"]:
            rotations.append(KeyRotation(event_id=eid, at=at, key_id=str(d.get("key_id", ""))))
        elif kind == EVIDENCE_EVENTS["node-destruction"]:
            destructions.append(NodeDestruction(event_id=eid, at=at, cluster_id=cid, node=str(d.get("node", "")),
                                                destroyed_at=_parse_time(d.get("destroyed_at")),
                                                wipe_proof_sha256=str(d.get("wipe_proof_sha256", ""))))
        else:
            raw = d.get("labels")
            labels: dict[str, Any] = raw if isinstance(raw, dict) else {}
            node = str(message).removeprefix("node ")
            removals.append(NodeRemoval(event_id=eid, at=created, cluster_id=cid, node=node,
                                        ephemeral=str(labels.get(EPHEMERAL_LABEL, "")).lower() == "true"))
    return SystemFacts(
        collected_at=now, store=session.get_bind().dialect.name, append_only_logs=append_only_logs(session),
        log_retention_hours=settings.log_retention_hours, oldest_event_at=oldest,
        store_started_at=min(starts) if starts else None, lookback_days=settings.lookback_days,
        backups=backups, key_rotations=rotations, node_removals=removals, node_destructions=destructions,
    )


def check_text(text_: str, *, source: str, facts: SystemFacts | None) -> ComplianceReport:
    """All rules on one policy document text (an empty document has nothing to check)."""
    doc = parse_document(text_ if text_.strip() else "{}", source=source)
    return check_document(doc, facts)


def gate(
    *, session: Session, principal: Principal, policy: str, report: ComplianceReport, override: bool,
    reason: str | None, cluster_id: int | None = None,
) -> None:
    """Refuse a failing report unless overridden with a reason; log the override or the passed check."""
    if report.failed and not override:
        raise ComplianceRefused(report, policy)
    if override and not has_text(reason):
        raise InputError("an override needs a reason", source="request body", field="reason")
    if report.failed:
        record_override(session=session, principal=principal, policy=policy, reason=str(reason), report=report,
                        cluster_id=cluster_id)
    else:
        events.record(session=session, kind=CHECKED_EVENT, cluster_id=cluster_id,
                      message=f"policy {policy}: compliance passed", data=_summary(report))


def record_override(
    *, session: Session, principal: Principal, policy: str, reason: str, report: ComplianceReport,
    cluster_id: int | None = None,
) -> None:
    """Append a ``policy.compliance_override`` event naming the caller, the reason and the findings overridden."""
    principal.require(Role.OPERATOR, "overriding a compliance gate")
    if not reason.strip():
        raise InputError("an override needs a reason", source="--reason")
    events.record(session=session, kind=OVERRIDE_EVENT, cluster_id=cluster_id,
                  message=f"policy {policy} enabled over {len(report.errors())} compliance error(s): {reason}",
                  data={"policy": policy, "reason": reason, "by": principal.token_name, **_summary(report)})


def _summary(report: ComplianceReport) -> dict[str, Any]:
    return {"source": report.source, "system_facts": report.system,
            "rules": {r.id: report.status(r.id) for r in report.rules},
            "errors": [{"rule": f.rule_id, "line": f.line, "column": f.column, "path": f.path, "system": f.system,
                        "message": f.message} for f in report.errors()]}


_BLANK = r"\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
NONBLANK_PATTERN = f"[^{_BLANK}]"
"""A character that is not blank, spelled out so that Python and ECMA-262 (JSON Schema) read it alike (their
``\\s`` differ): the blanks are those of Python's ``str.isspace`` and of ECMA-262's ``\\s`` together."""
_NONBLANK = re.compile(NONBLANK_PATTERN)


def has_text(v: str | None) -> bool:
    """Whether ``v`` has a character that is not blank (:data:`NONBLANK_PATTERN`)."""
    return v is not None and _NONBLANK.search(v) is not None


class EnableRequest(BaseModel):
    """Optional body of ``POST /api/v1/policies/{name}/enable``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, json_schema_extra={
        # the rule of gate(): an override needs a reason that is not blank
        "if": {"properties": {"override": {"const": True}}, "required": ["override"]},
        "then": {"properties": {"reason": {"type": "string", "pattern": NONBLANK_PATTERN}}, "required": ["reason"]},
    })

    override: bool = Field(default=False, description="Enable despite compliance errors (needs a reason).")
    reason: Annotated[str, StringConstraints(max_length=500)] | None = Field(
        default=None, description="Why the errors are accepted; recorded in the event log.")


class OverrideCreate(BaseModel):
    """Body of ``POST /api/v1/compliance/overrides``: a policy enabled elsewhere over compliance errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    policy: Annotated[str, StringConstraints(min_length=1, max_length=63)]
    reason: Annotated[str, StringConstraints(min_length=1, max_length=500)]
    config_yaml: Annotated[str, StringConstraints(max_length=32 * 1024)]
    source: Annotated[str, StringConstraints(min_length=1, max_length=500)] = "config_yaml"


def gate_stored(
    *, session: Session, principal: Principal, name: str, override: bool, reason: str | None,
    settings: ComplianceSettings | None = None,
) -> ComplianceReport | None:
    """The enable gate of a stored policy (nothing to check when it is enabled already)."""
    from seedance.control.services import policies

    principal.require(Role.OPERATOR, "enabling a policy")
    policy = policies.get_policy(session=session, name=name)
    if policy.enabled:
        return None
    facts = gather_facts(session=session, settings=settings)
    report = check_text(policy.config_yaml, source=f"policy {name} config_yaml", facts=facts)
    gate(session=session, principal=principal, policy=name, report=report, override=override, reason=reason,
         cluster_id=policy.cluster_id)
    return report


def override_elsewhere(*, session: Session, principal: Principal, data: OverrideCreate,
                       settings: ComplianceSettings | None = None) -> ComplianceReport:
    """Record an override of a policy enabled outside this store, checked here with this store's facts."""
    facts = gather_facts(session=session, settings=settings)
    report = check_text(data.config_yaml, source=data.source, facts=facts)
    record_override(session=session, principal=principal, policy=data.policy, reason=data.reason, report=report)
    return report


def gate_new(*, session: Session, principal: Principal, policy: str, text: str, cluster_id: int | None,
             settings: ComplianceSettings | None = None) -> ComplianceReport:
    """The gate of a policy created enabled: refused on errors (no override at creation)."""
    facts = gather_facts(session=session, settings=settings)
    report = check_text(text, source=f"policy {policy} config_yaml", facts=facts)
    gate(session=session, principal=principal, policy=policy, report=report, override=False, reason=None,
         cluster_id=cluster_id)
    return report

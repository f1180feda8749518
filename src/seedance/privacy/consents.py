"""Recording consent decisions (proof of consent, GDPR Art. 7(1); CCPA opt-out of sale/sharing)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sqlalchemy import insert

from seedance.control.errors import Conflict
from seedance.control.security import Principal
from seedance.core.errors import InputError
from seedance.privacy.fingerprint import device_tags
from seedance.privacy.models import ConsentRecord
from seedance.privacy.schemas import ConsentDecision
from seedance.privacy.subjects import require_subject

if TYPE_CHECKING:
    from seedance.privacy.service import PrivacyService


def record_decision(svc: PrivacyService, principal: Principal, d: ConsentDecision) -> int:
    """Store a decision taken in the current flow; returns its id.

    A decision for another flow version is refused (409: ask again); purposes must be the
    flow's; a refusal must not grant any purpose that is a sale or sharing.
    """
    flow = svc.consent_flow
    if d.flow_version != flow.version:
        raise Conflict(f"consent flow {d.flow_version!r} is not the current one ({flow.version}); ask again")
    known = {p.id: p for p in flow.purposes}
    unknown = sorted(set(d.purposes) - set(known))
    if unknown:
        raise InputError(f"unknown purposes {unknown}; the flow declares {sorted(known)}", source="body",
                         field="purposes")
    if d.choice == "refused" and any(d.purposes.get(p.id) for p in flow.purposes if p.sale_or_share):
        raise InputError("a refusal cannot grant a purpose that is a sale or sharing", source="body", field="purposes")
    purposes = {p: bool(d.purposes.get(p, False)) for p in known}
    now = svc.now()
    with svc.db.write() as s:
        material = (require_subject(svc, session=s, tenant_id=principal.tenant_id, external_id=d.subject)
                    if d.subject else None)
        tag = device_tags(svc, s, d.device_id, material, now)[0] if d.device_id else None
        rid = s.execute(insert(ConsentRecord).values(
            tenant_id=principal.tenant_id, subject_id=material.subject_id if material else None, device_tag=tag,
            flow_version=d.flow_version, choice=d.choice, purposes=purposes, decided_at=now,
        ).returning(ConsentRecord.id)).scalar_one()
    if material is not None:
        svc.redis.set(svc.key("subj", material.subject_id, "consent"),
                      json.dumps({"choice": d.choice, "purposes": purposes, "version": d.flow_version}),
                      ex=int(flow.remember_days * 86400))
    return int(rid)

"""SDC004 key-rotation-records: encryption keys rotate and the rotations are on record (§4.3 table, row 1).

Applies when the policy stores or moves data. Document: ``keys.rotation_days`` is stated (1 to
365). System (``--system``): an ``evidence.key_rotated`` record exists within that many days.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from seedance.compliance.actions import mapping, number, touches_storage
from seedance.compliance.document import PolicyDocument
from seedance.compliance.facts import SystemFacts
from seedance.compliance.rule import COMPLIANCE_RULES, GBT_8_2_3_D, GDPR_32_1_C, Finding, Rule


@COMPLIANCE_RULES.register("SDC004", aliases=("key-rotation-records",))
class KeyRotationRecords(Rule):
    """Keys of data the policy stores rotate at least every ``keys.rotation_days``, with records."""

    id = "SDC004"
    name = "key-rotation-records"
    summary = "Encryption keys rotate on a stated period and each rotation is recorded"
    help = ("State keys.rotation_days (at most 365) in a policy that stores or moves data, and record each "
            "rotation (POST /api/v1/compliance/evidence, kind key-rotation).")
    clauses = (GDPR_32_1_C, GBT_8_2_3_D)
    evidence = ("encryption key rotation records",)
    max_days: ClassVar[int] = 365

    def check(self, doc: PolicyDocument, facts: SystemFacts | None) -> Iterator[Finding]:
        if not touches_storage(doc):
            return
        mapping(doc, "keys")
        days = number(doc, "keys.rotation_days", integer=True, minimum=1)
        if days is None:
            yield self.at(doc, "keys" if doc.has("keys") else "storage",
                          "keys.rotation_days is missing: the key rotation period of stored data is not stated")
        elif days > self.max_days:
            yield self.at(doc, "keys.rotation_days", f"keys.rotation_days {int(days)} > {self.max_days}")
        if facts is None:
            return
        period = days if days is not None and days <= self.max_days else float(self.max_days)
        recent = [k for k in facts.key_rotations if (facts.hours_since(k.at) or 0.0) <= period * 24.0]
        if not recent:
            last = max(facts.key_rotations, key=lambda k: k.at, default=None)
            seen = f"the last was {facts.hours_since(last.at) or 0:.0f} h ago" if last else "none on record"
            yield self.at(doc, "keys.rotation_days", f"no key rotation recorded in the last {period:g} days "
                          f"({seen})", system=f"events/{last.event_id}" if last else "events")

"""SDC006 backup-encryption: the store is backed up, encrypted, so availability can be restored.

GDPR Art. 32(1)(c) asks for the ability to restore availability in a timely manner; encrypted
backups keep GB/T 22239-2019 8.2.3.d's integrity requirement. Document: ``storage.backup.encrypted``,
when given, is true. System (``--system``): no backup on record in the lookback window may be
unencrypted (error), and the newest backup is at most :attr:`max_age_hours` old (warning).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from seedance.compliance.actions import boolean, mapping
from seedance.compliance.document import PolicyDocument
from seedance.compliance.facts import SystemFacts
from seedance.compliance.rule import COMPLIANCE_RULES, GBT_8_2_3_D, GDPR_32_1_C, Finding, Level, Rule


@COMPLIANCE_RULES.register("SDC006", aliases=("backup-encryption",))
class BackupEncryption(Rule):
    """Backups exist, are recent and are encrypted."""

    id = "SDC006"
    name = "backup-encryption"
    summary = "Backups of the store are encrypted and at most 24 h old"
    help = ("Record each backup of the store (POST /api/v1/compliance/evidence, kind backup, encrypted: true, "
            "cipher, sha256); never keep unencrypted backups.")
    clauses = (GDPR_32_1_C, GBT_8_2_3_D)
    evidence = ("backup records: time, encryption, cipher and checksum",)
    max_age_hours: ClassVar[float] = 24.0

    def check(self, doc: PolicyDocument, facts: SystemFacts | None) -> Iterator[Finding]:
        mapping(doc, "storage.backup")
        if boolean(doc, "storage.backup.encrypted") is False:
            yield self.at(doc, "storage.backup.encrypted", "storage.backup.encrypted is false: backups would be "
                          "written unencrypted")
        if facts is None:
            return
        for b in facts.backups:
            if not b.encrypted:
                yield self.at(doc, "", f"backup of {b.at.isoformat()} is not encrypted", system=f"events/{b.event_id}")
        newest = max(facts.backups, key=lambda b: b.at, default=None)
        age = facts.hours_since(newest.at) if newest else None
        if age is None or age > self.max_age_hours:
            seen = "none on record" if age is None else f"the newest is {age:.0f} h old"
            yield self.at(doc, "", f"no backup in the last {self.max_age_hours:g} h ({seen})", level=Level.WARNING,
                          system=f"events/{newest.event_id}" if newest else "events")

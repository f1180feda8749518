"""SDC002 storage-encryption-at-rest: data a policy stores or moves is encrypted at rest.

The whitepaper's second sample check flags a policy whose ``storage`` lacks ``encryption_at_rest``
(GB/T 22239-2019 8.2.3.d). Generalised: it applies when the policy configures ``storage`` or has
an action that stores or moves data (cold-storage downgrade, checkpoint offload), and
``storage.encryption_at_rest`` must be present and ``true``. A policy that never touches stored
data (a CPU-throttling flag, a deferral policy) is not concerned.
"""

from __future__ import annotations

from collections.abc import Iterator

from seedance.compliance.actions import actions, boolean, mapping, touches_storage
from seedance.compliance.document import PolicyDocument
from seedance.compliance.facts import SystemFacts
from seedance.compliance.rule import COMPLIANCE_RULES, GBT_8_2_3_D, GDPR_32_1_A, GDPR_32_1_C, Finding, Rule


@COMPLIANCE_RULES.register("SDC002", aliases=("storage-encryption-at-rest",))
class StorageEncryption(Rule):
    """``storage.encryption_at_rest: true`` wherever the policy stores or moves data."""

    id = "SDC002"
    name = "storage-encryption-at-rest"
    summary = "Data the policy stores or moves is encrypted at rest"
    help = ("Add storage.encryption_at_rest: true (and the KMS key in storage.kms_key) to a policy that "
            "configures storage or moves data to another storage class.")
    clauses = (GBT_8_2_3_D, GDPR_32_1_C, GDPR_32_1_A)
    evidence = ("encryption-at-rest setting of every storage class the policy writes to",)

    def check(self, doc: PolicyDocument, facts: SystemFacts | None) -> Iterator[Finding]:
        if not touches_storage(doc):
            return
        mapping(doc, "storage")
        enc = boolean(doc, "storage.encryption_at_rest")
        movers = [f"actions.{i}" for i, _, k in actions(doc) if k.stores_data]
        where = "storage" if doc.has("storage") else (movers[0] if movers else "")
        if enc is None:
            yield self.at(doc, where, "storage.encryption_at_rest is missing: static encryption is not enabled, "
                          "which breaks the data-integrity requirement of the computing audit")
        elif not enc:
            yield self.at(doc, "storage.encryption_at_rest", "storage.encryption_at_rest is false: data the policy "
                          "stores or moves would be written unencrypted")

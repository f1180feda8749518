"""SDC005 node-destruction-wipe-proof: destroyed nodes leave a timestamp and a memory-wipe proof hash.

Whitepaper §4.3 table, row 2 (automatic deletion of temporary compute nodes: GDPR Art. 17(1)(a),
GB/T 22239-2019 8.1.3.b). Document: every action that destroys nodes (``delete-temp-nodes``,
``spot-migration``, an autoscaler with ``scale_in: delete-nodes``) declares ``wipe.method`` and
``wipe.proof: sha256``. System (``--system``): every removal of a temporary node (label
``seedance.io/ephemeral=true``) has an ``evidence.node_destroyed`` record with its destruction time
and a SHA-256 proof hash; missing records are errors for a policy that destroys nodes and warnings
otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from seedance.compliance.actions import mapping, node_deleters
from seedance.compliance.document import PolicyDocument
from seedance.compliance.facts import SystemFacts
from seedance.compliance.rule import COMPLIANCE_RULES, GBT_8_1_3_B, GDPR_17_1_A, Finding, Level, Rule

SHA256 = re.compile(r"^[0-9a-f]{64}$")


@COMPLIANCE_RULES.register("SDC005", aliases=("node-destruction-wipe-proof",))
class NodeWipeProof(Rule):
    """Node destruction is evidenced by a timestamp and a memory-wipe proof hash."""

    id = "SDC005"
    name = "node-destruction-wipe-proof"
    summary = "Destroyed temporary nodes have a destruction timestamp and a memory-wipe proof hash"
    help = ("Give every node-destroying action wipe: {method: <how GPU and host memory are cleared>, proof: sha256} "
            "and record each destruction (POST /api/v1/compliance/evidence, kind node-destruction, with "
            "destroyed_at and wipe_proof_sha256).")
    clauses = (GDPR_17_1_A, GBT_8_1_3_B)
    evidence = ("node destruction timestamp", "memory-wipe proof hash (SHA-256)")

    def check(self, doc: PolicyDocument, facts: SystemFacts | None) -> Iterator[Finding]:
        deleters = node_deleters(doc)
        for path in deleters:
            wipe = mapping(doc, f"{path}.wipe")
            if wipe is None:
                yield self.at(doc, path, "destroys nodes without a wipe section: add wipe.method and "
                              "wipe.proof: sha256")
                continue
            if not str(wipe.get("method") or "").strip():
                yield self.at(doc, f"{path}.wipe", "wipe.method is missing: say how memory is cleared")
            if str(wipe.get("proof") or "").lower() != "sha256":
                yield self.at(doc, f"{path}.wipe", "wipe.proof must be sha256 (the proof hash recorded per node)")
        if facts is None:
            return
        level = Level.ERROR if deleters else Level.WARNING
        anchor = deleters[0] if deleters else ""
        proofs = {(d.cluster_id, d.node) for d in facts.node_destructions
                  if d.destroyed_at is not None and SHA256.match(d.wipe_proof_sha256)}
        for r in facts.node_removals:
            if r.ephemeral and (r.cluster_id, r.node) not in proofs:
                yield self.at(doc, anchor, f"temporary node {r.node!r} was removed at {r.at.isoformat()} without a "
                              "destruction record carrying a memory-wipe proof hash", level=level,
                              system=f"events/{r.event_id}")
        for d in facts.node_destructions:
            if d.destroyed_at is None or not SHA256.match(d.wipe_proof_sha256):
                yield self.at(doc, anchor, f"destruction record of node {d.node!r} lacks its timestamp or a SHA-256 "
                              "wipe proof", level=level, system=f"events/{d.event_id}")

"""SARIF 2.1.0 output of compliance reports (what GitHub code scanning and other CI viewers read).

One run per call, tool ``seedance-compliance``. ``tool.driver.rules`` lists every rule that ran,
with its clauses as ``properties.tags`` and the evidence it needs in ``properties.evidence``;
``helpUri`` is left out (an empty one makes GitHub reject an upload, bridgecrewio/checkov#3540).
Each finding is a result at the policy file's line and column; a finding about the running
system adds a logical location naming the record (``controlplane/events/42``). Suppressed
findings stay in the log with an ``inSource`` suppression and its justification.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seedance.compliance.engine import ComplianceReport
from seedance.compliance.rule import Rule

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
TOOL_NAME = "seedance-compliance"


def artifact_uri(source: str) -> str:
    """The artifact URI of a policy file: relative paths with forward slashes, absolute ones as file URIs."""
    p = Path(source)
    return p.as_uri() if p.is_absolute() else p.as_posix()


def _rule(r: type[Rule]) -> dict[str, Any]:
    return {
        "id": r.id,
        "name": r.name,
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": r.__doc__.strip().splitlines()[0] if r.__doc__ else r.summary},
        "help": {"text": r.help},
        "defaultConfiguration": {"level": str(r.level)},
        "properties": {"tags": ["compliance", *(c.tag for c in r.clauses)],
                       "clauses": [{"framework": c.framework, "ref": c.ref, "title": c.title} for c in r.clauses],
                       "evidence": list(r.evidence)},
    }


def to_sarif(reports: Sequence[ComplianceReport], *, version: str = "0") -> dict[str, Any]:
    """A SARIF 2.1.0 log of ``reports`` (one run)."""
    rules: list[type[Rule]] = []
    for rep in reports:
        rules.extend(r for r in rep.rules if r not in rules)
    index = {r.id: i for i, r in enumerate(rules)}
    artifacts = [{"location": {"uri": artifact_uri(rep.source)}} for rep in reports]
    results: list[dict[str, Any]] = []
    for ai, rep in enumerate(reports):
        uri = artifact_uri(rep.source)
        for rf in rep.findings:
            f = rf.finding
            res: dict[str, Any] = {
                "ruleId": f.rule_id,
                "ruleIndex": index[f.rule_id],
                "level": str(f.level),
                "message": {"text": f.message},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri, "index": ai},
                        "region": {"startLine": f.line, "startColumn": f.column},
                    },
                    **({"logicalLocations": [{"fullyQualifiedName": f"controlplane/{f.system}", "kind": "resource"}]}
                       if f.system else {}),
                }],
                "partialFingerprints": {"seedanceFinding/v1": _fingerprint(uri, f.rule_id, f.path, f.system,
                                                                          f.message)},
                "properties": {"path": f.path, **({"system": f.system} if f.system else {})},
            }
            if rf.suppressed_by is not None:
                res["suppressions"] = [{"kind": "inSource", "justification": rf.suppressed_by}]
            results.append(res)
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {"name": TOOL_NAME, "version": version, "semanticVersion": version,
                                "rules": [_rule(r) for r in rules]}},
            "artifacts": artifacts,
            "invocations": [{"executionSuccessful": True}],
            "results": results,
            "columnKind": "unicodeCodePoints",
        }],
    }


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]

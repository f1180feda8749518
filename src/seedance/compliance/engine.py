"""Run the compliance rules over a policy document (and the system's facts) into a report.

``check_document`` resolves the rule selection and the document's suppressions (unknown ids are
bad input, located), runs every selected rule and returns a :class:`ComplianceReport`: the
findings, which of them are suppressed (and why), and per rule whether it passed. ``report.failed``
is true when an unsuppressed finding has level ``error``: ``seedancectl policy validate`` exits 1
then and ``scheduler policy enable`` refuses the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from seedance.compliance.document import SKIP_FIELD, PolicyDocument
from seedance.compliance.facts import SystemFacts
from seedance.compliance.rule import COMPLIANCE_RULES, Finding, Level, Rule
from seedance.core.errors import InputError, UnknownNameError


@dataclass(frozen=True, slots=True)
class ReportedFinding:
    """A finding with its suppression (``None``: in force)."""

    finding: Finding
    suppressed_by: str | None = None

    @property
    def active(self) -> bool:
        """Whether the finding counts (not suppressed)."""
        return self.suppressed_by is None


@dataclass(frozen=True, slots=True)
class ComplianceReport:
    """Findings of the selected rules on one document."""

    source: str
    rules: tuple[type[Rule], ...]
    findings: tuple[ReportedFinding, ...]
    system: bool
    suppressions: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """Whether an unsuppressed error-level finding exists."""
        return any(f.active and f.finding.level is Level.ERROR for f in self.findings)

    def errors(self) -> list[Finding]:
        """The unsuppressed error-level findings."""
        return [f.finding for f in self.findings if f.active and f.finding.level is Level.ERROR]

    def status(self, rule_id: str) -> str:
        """``fail``, ``warn``, ``suppressed`` or ``pass`` for one rule."""
        mine = [f for f in self.findings if f.finding.rule_id == rule_id]
        if any(f.active and f.finding.level is Level.ERROR for f in mine):
            return "fail"
        if any(f.active for f in mine):
            return "warn"
        return "suppressed" if mine else "pass"

    def to_json(self) -> dict[str, Any]:
        """JSON summary (``-o json`` and the override event's data)."""
        return {
            "source": self.source, "failed": self.failed, "system_facts": self.system,
            "rules": {r.id: self.status(r.id) for r in self.rules},
            "findings": [
                {"rule": f.finding.rule_id, "level": str(f.finding.level), "message": f.finding.message,
                 "path": f.finding.path, "line": f.finding.line, "column": f.finding.column,
                 "system": f.finding.system, "suppressed": f.suppressed_by}
                for f in self.findings
            ],
        }


def unknown_rule(rid: str) -> str:
    """The message for an unknown rule id: the valid ids and names."""
    valid = sorted((COMPLIANCE_RULES.get(n) for n in COMPLIANCE_RULES.names()), key=lambda r: r.id)
    return f"unknown compliance rule {rid!r}; valid: {', '.join(f'{r.id} ({r.name})' for r in valid)}"


def resolve_rules(ids: Sequence[str] | None, *, source: str) -> list[type[Rule]]:
    """Rule classes for ``ids`` (every rule when ``None``); unknown ids name the valid ones."""
    if ids is None:
        return sorted((COMPLIANCE_RULES.get(n) for n in COMPLIANCE_RULES.names()), key=lambda r: r.id)
    out: list[type[Rule]] = []
    for rid in ids:
        try:
            cls = COMPLIANCE_RULES.get(rid)
        except UnknownNameError:
            raise InputError(unknown_rule(rid), source=source, field="rule") from None
        if cls not in out:
            out.append(cls)
    return out


def check_document(
    doc: PolicyDocument, facts: SystemFacts | None = None, *, rules: Sequence[str] | None = None,
    skip: Sequence[str] = (),
) -> ComplianceReport:
    """Run the selected rules (all by default, less ``skip``) on ``doc``; see the module docstring."""
    selected = resolve_rules(rules, source="--rules")
    skipped = set(resolve_rules(list(skip), source="--skip")) if skip else set()
    selected = [r for r in selected if r not in skipped]
    reasons: dict[str, str] = {}
    for s in doc.suppressions:
        if not s.rule_id:
            raise InputError("malformed suppression; write '# seedance:skip=SDC001 reason'", source=doc.source,
                             line=s.line, field=SKIP_FIELD)
        try:
            cls = COMPLIANCE_RULES.get(s.rule_id)
        except UnknownNameError:
            raise InputError(unknown_rule(s.rule_id), source=doc.source, line=s.line, field=SKIP_FIELD) from None
        reasons[cls.id] = s.reason or "suppressed in source (no reason given)"
    found: list[ReportedFinding] = []
    for cls in selected:
        for f in cls().check(doc, facts):
            found.append(ReportedFinding(f, reasons.get(cls.id)))
    found.sort(key=lambda r: (r.finding.line, r.finding.column, r.finding.rule_id, r.finding.system))
    return ComplianceReport(source=doc.source, rules=tuple(selected), findings=tuple(found), system=facts is not None,
                            suppressions=reasons)

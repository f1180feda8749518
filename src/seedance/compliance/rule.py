"""Compliance rules as code: the rule interface, findings, legal clauses and the rule registry.

A rule is a class registered by id in :data:`COMPLIANCE_RULES` (its ``name`` is an alias), one
module per rule under ``seedance.compliance.rules``. ``check`` reads the policy document and,
when given, the running control plane's facts (:class:`~seedance.compliance.facts.SystemFacts`),
and yields findings located at a key of the document (and at a record of the system where the
finding is about the system).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from seedance.core.registry import Registry

if TYPE_CHECKING:
    from seedance.compliance.document import PolicyDocument
    from seedance.compliance.facts import SystemFacts


class Level(StrEnum):
    """SARIF result levels used here (``error`` fails the gate)."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Clause:
    """A legal or standard clause a rule evidences.

    Attributes:
        framework: ``GDPR`` or ``GB/T 22239-2019``.
        ref: Article or clause, e.g. ``Art. 32(1)(c)`` or ``8.2.3.d``.
        title: What it asks, in a few words.
    """

    framework: str
    ref: str
    title: str

    @property
    def tag(self) -> str:
        """The tag carried in SARIF ``properties.tags``, e.g. ``GDPR Art. 32(1)(c)``."""
        return f"{self.framework} {self.ref}"


# The whitepaper's clause table (section 4.3); GB/T numbering as the whitepaper gives it.
GDPR_32_1_C = Clause("GDPR", "Art. 32(1)(c)", "restore availability of and access to personal data in a timely manner")
GDPR_32_1_A = Clause("GDPR", "Art. 32(1)(a)", "pseudonymisation and encryption of personal data")
GDPR_17_1_A = Clause("GDPR", "Art. 17(1)(a)", "erasure once the data are no longer necessary")
GBT_8_2_3_D = Clause("GB/T 22239-2019", "8.2.3.d", "computing audit: data integrity and audit records")
GBT_8_1_3_B = Clause("GB/T 22239-2019", "8.1.3.b", "residual information: storage released only after clearing")


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found by a rule.

    Attributes:
        rule_id: Canonical rule id.
        level: Severity.
        message: What is wrong and what would fix it.
        path: Dotted path of the key concerned (``spec.autoscale.max_instances``), "" for the file.
        line, column: Position of that key (1-based).
        system: The record of the running system concerned (``events/42``, ``settings/log_retention_hours``),
            "" when the finding is about the document only.
    """

    rule_id: str
    level: Level
    message: str
    path: str
    line: int
    column: int
    system: str = ""


class Rule(ABC):
    """A compliance rule. Subclasses register with ``@COMPLIANCE_RULES.register(id, aliases=(name,))``.

    Attributes:
        id: Stable id (``SDC001``), used in SARIF ``ruleId`` and suppressions.
        name: Kebab-case name (an alias of the id).
        summary: One line.
        help: What the rule checks and how to fix a finding.
        clauses: Clauses the rule evidences (at least one).
        evidence: The evidence the clauses require, in words.
        level: Level of the rule's findings unless a finding says otherwise.
    """

    id: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    help: ClassVar[str]
    clauses: ClassVar[tuple[Clause, ...]]
    evidence: ClassVar[tuple[str, ...]] = ()
    level: ClassVar[Level] = Level.ERROR

    @abstractmethod
    def check(self, doc: PolicyDocument, facts: SystemFacts | None) -> Iterable[Finding]:
        """Findings on ``doc`` (and on ``facts`` when the system's facts are given)."""

    def at(self, doc: PolicyDocument, path: str, message: str, *, level: Level | None = None,
           system: str = "") -> Finding:
        """A finding at the key ``path`` of ``doc`` (or its nearest existing ancestor)."""
        pos = doc.where(path)
        return Finding(self.id, level or self.level, message, doc.dotted(path) if path else "", pos.line,
                       pos.column, system)


COMPLIANCE_RULES: Registry[type[Rule]] = Registry("compliance rule", plugins="seedance.compliance.rules")

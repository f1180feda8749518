"""Audit findings: check classes, severities, one finding, the report of one node."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    """How bad a finding is; any ``error`` makes ``seedancectl mig audit`` exit 1."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Check(StrEnum):
    """Audit check classes."""

    DUPLICATE_UUID = "duplicate-uuid"
    DUPLICATE_ID = "duplicate-id"
    GI_ILLEGAL = "gi-illegal-placement"
    GI_OVERLAP = "gi-overlap"
    CI_EXCEEDS_GI = "ci-exceeds-gi"
    CI_ORPHAN = "ci-orphan"
    GI_WITHOUT_CI = "gi-without-ci"
    MIG_PENDING = "mig-pending-reset"
    MIG_NO_INSTANCES = "mig-no-instances"
    VIEW_MISMATCH = "view-mismatch"
    DRIFT = "drift"
    UNSUPPORTED = "unsupported-model"


SEVERITY: Mapping[Check, Severity] = {
    Check.DUPLICATE_UUID: Severity.ERROR,
    Check.DUPLICATE_ID: Severity.ERROR,
    Check.GI_ILLEGAL: Severity.ERROR,
    Check.GI_OVERLAP: Severity.ERROR,
    Check.CI_EXCEEDS_GI: Severity.ERROR,
    Check.CI_ORPHAN: Severity.ERROR,
    Check.GI_WITHOUT_CI: Severity.WARNING,
    Check.MIG_PENDING: Severity.ERROR,
    Check.MIG_NO_INSTANCES: Severity.WARNING,
    Check.VIEW_MISMATCH: Severity.ERROR,
    Check.DRIFT: Severity.ERROR,
    Check.UNSUPPORTED: Severity.INFO,
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One audit finding."""

    check: Check
    gpu: int | None
    source: str | None
    line: int | None
    message: str
    fix: str

    @property
    def severity(self) -> Severity:
        """Severity of the finding's check."""
        return SEVERITY[self.check]

    def to_json(self) -> dict[str, Any]:
        """``{"check", "severity", "gpu", "line", "message", "fix", "source"}``."""
        return {
            "check": self.check.value,
            "severity": self.severity.value,
            "gpu": self.gpu,
            "line": self.line,
            "message": self.message,
            "fix": self.fix,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class AuditReport:
    """Findings of one node's outputs."""

    findings: tuple[Finding, ...]
    files: tuple[tuple[str, str], ...]
    gpus: tuple[tuple[int, str], ...]

    @property
    def has_errors(self) -> bool:
        """Whether any finding is an error."""
        return any(f.severity is Severity.ERROR for f in self.findings)

    def checks(self) -> set[Check]:
        """Check classes that fired."""
        return {f.check for f in self.findings}

    def to_json(self) -> dict[str, Any]:
        """JSON document ``{"findings": [...], "files": [...], "gpus": [...], "summary": {...}}``."""
        counts = Counter(f.severity.value for f in self.findings)
        return {
            "findings": [f.to_json() for f in self.findings],
            "files": [{"source": s, "kind": k} for s, k in self.files],
            "gpus": [{"gpu": g, "model": m} for g, m in self.gpus],
            "summary": {s.value: counts.get(s.value, 0) for s in Severity},
        }

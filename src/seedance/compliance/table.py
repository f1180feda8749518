"""Terminal view of compliance reports: one row per rule and document, then the findings."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from seedance.compliance.engine import ComplianceReport

_STYLE = {"fail": "bold red", "warn": "yellow", "pass": "green", "suppressed": "cyan"}


def render_table(reports: Sequence[ComplianceReport]) -> Table:
    """A rich table: rule, clauses, status per document, and every finding with its location."""
    t = Table(title="compliance check", show_lines=False)
    for col in ("file", "rule", "clauses", "status", "where", "finding"):
        t.add_column(col, overflow="fold")
    for rep in reports:
        for r in rep.rules:
            status = rep.status(r.id)
            mine = [f for f in rep.findings if f.finding.rule_id == r.id]
            clauses = ", ".join(c.tag for c in r.clauses)
            label = f"{r.id} {r.name}"
            if not mine:
                t.add_row(escape(rep.source), label, clauses, f"[{_STYLE[status]}]{status}[/]", "", "")
                continue
            for i, rf in enumerate(mine):
                f = rf.finding
                where = f"{f.line}:{f.column}" + (f" {f.path}" if f.path else "")
                where += f" [{f.system}]" if f.system else ""
                what = f"{f.level}: {f.message}" + (f" (suppressed: {rf.suppressed_by})" if rf.suppressed_by else "")
                t.add_row(escape(rep.source) if i == 0 else "", label if i == 0 else "", clauses if i == 0 else "",
                          f"[{_STYLE[status]}]{status}[/]" if i == 0 else "", escape(where), escape(what))
    return t

"""``seedancectl policy``: compliance checks of policy files (SARIF for CI), the rules, evidence records.

``policy validate FILE...`` runs every compliance rule on each file (the YAML only, or with
``--system`` also the running control plane's facts) and prints a table, SARIF 2.1.0 or JSON; it
exits 1 when an unsuppressed finding is an error (CI gates on that), 2 on bad input (YAML errors,
unknown rule ids), 0 otherwise.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seedance.core.errors import InputError

if TYPE_CHECKING:
    from seedance.compliance.engine import ComplianceReport
    from seedance.compliance.facts import SystemFacts


class Format(StrEnum):
    """Output formats of ``policy validate``."""

    table = "table"
    sarif = "sarif"
    json = "json"


def split_ids(text: str | None) -> list[str] | None:
    """``"SDC001, sdc002"`` → ``["SDC001", "sdc002"]`` (``None`` stays ``None``)."""
    if text is None:
        return None
    return [x.strip() for x in text.split(",") if x.strip()]


def system_facts(context: str | None) -> SystemFacts:
    """The facts of the control plane of ``context`` (or the local store)."""
    from seedance.control.client import ClientError
    from seedance.control.safechange_client import make_safechange_client

    client = make_safechange_client(context)
    try:
        return client.facts()
    except ClientError as exc:
        raise InputError(str(exc), source=client.where) from None
    finally:
        client.close()


def check_files(
    files: list[Path], *, facts: SystemFacts | None, rules: list[str] | None = None, skip: list[str] | None = None
) -> list[ComplianceReport]:
    """One report per file."""
    from seedance.compliance.document import load_document
    from seedance.compliance.engine import check_document

    return [check_document(load_document(f), facts, rules=rules, skip=skip or ()) for f in files]


def print_reports(reports: list[ComplianceReport], fmt: Format, out: Path | None) -> None:
    """Render ``reports`` to stdout or ``out``."""
    import seedance

    if fmt is Format.table:
        from rich.console import Console

        from seedance.compliance.table import render_table

        if out is not None:
            with out.open("w", encoding="utf-8") as fh:
                Console(file=fh, width=160).print(render_table(reports))
        else:
            Console(width=160).print(render_table(reports))
        return
    if fmt is Format.sarif:
        from seedance.compliance.sarif import to_sarif

        payload: Any = to_sarif(reports, version=getattr(seedance, "__version__", "0"))
    else:
        payload = [r.to_json() for r in reports]
    text = json.dumps(payload, indent=2)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")
        n = sum(len(r.findings) for r in reports)
        typer.echo(f"wrote {fmt.value} ({n} finding(s), {len(reports)} file(s)) to {out}", err=True)
    else:
        typer.echo(text)


def register(app: typer.Typer) -> None:
    """Add the ``policy`` command group."""
    pol = typer.Typer(help="Compliance of policy files: validate (SARIF for CI), rules, evidence.",
                      no_args_is_help=True)
    app.add_typer(pol, name="policy")

    @pol.command("validate")
    def validate(
        files: Annotated[list[Path], typer.Argument(help="Policy YAML files.")],
        fmt: Annotated[Format, typer.Option("--format", "-f", help="table, sarif or json.")] = Format.table,
        out: Annotated[Path | None, typer.Option("--output-file", "-O", help="Write to this file.")] = None,
        rules: Annotated[str | None, typer.Option("--rules", help="Only these rule ids (comma list).")] = None,
        skip: Annotated[str | None, typer.Option("--skip", help="Rule ids not to run (comma list).")] = None,
        system: Annotated[bool, typer.Option("--system/--no-system",
                                             help="Also check the running control plane's facts.")] = False,
        context: Annotated[str | None, typer.Option("--context", help="Context for --system.")] = None,
    ) -> None:
        """Check policy files against the compliance rules; exit 1 on an error finding."""
        facts = system_facts(context) if system else None
        reports = check_files(files, facts=facts, rules=split_ids(rules), skip=split_ids(skip))
        print_reports(reports, fmt, out)
        if any(r.failed for r in reports):
            raise typer.Exit(1)

    @pol.command("rules")
    def rules_cmd(
        output: Annotated[str, typer.Option("-o", "--output", help="table or json.")] = "table",
    ) -> None:
        """List the compliance rules with the clauses and the evidence each requires."""
        from rich.console import Console
        from rich.table import Table

        from seedance.compliance.engine import resolve_rules

        items = resolve_rules(None, source="")
        if output == "json":
            typer.echo(json.dumps([{"id": r.id, "name": r.name, "summary": r.summary,
                                    "clauses": [c.tag for c in r.clauses], "evidence": list(r.evidence)}
                                   for r in items], indent=2))
            return
        t = Table(title="compliance rules")
        for col in ("id", "name", "clauses", "evidence", "checks"):
            t.add_column(col, overflow="fold")
        for r in items:
            t.add_row(r.id, r.name, "\n".join(c.tag for c in r.clauses), "\n".join(r.evidence), r.summary)
        Console(width=160).print(t)

    @pol.command("evidence")
    def evidence(
        kind: Annotated[str, typer.Argument(help="backup, key-rotation or node-destruction.")],
        fields: Annotated[list[str] | None, typer.Argument(help="KEY=VALUE fields of the record.")] = None,
        context: Annotated[str | None, typer.Option("--context", help="Context (default: current or local).")] = None,
    ) -> None:
        """Append an evidence record, e.g. ``node-destruction cluster=c node=n destroyed_at=T wipe_proof_sha256=H``."""
        from pydantic import ValidationError

        from seedance.control.client import ClientError
        from seedance.control.errors import ControlError
        from seedance.control.safechange_client import make_safechange_client

        record: dict[str, Any] = {"kind": kind}
        for f in fields or []:
            key, sep, value = f.partition("=")
            if not sep or not key:
                raise InputError(f"expected KEY=VALUE, got {f!r}", source="policy evidence")
            record[key] = {"true": True, "false": False}.get(value.lower(), value)
        client = make_safechange_client(context)
        try:
            out = client.record_evidence(record)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = [str(x) for x in err["loc"][1:] if x != kind]  # drop "record" and the kind tag
            raise InputError(str(err["msg"]), source="policy evidence", field=".".join(where) or None) from None
        except ClientError as exc:
            raise InputError(str(exc), source=client.where) from None
        except ControlError as exc:
            raise InputError(f"{exc.status}: {exc}", source=client.where) from None
        finally:
            client.close()
        typer.echo(json.dumps(out, indent=2, default=str))

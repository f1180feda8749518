"""``seedancectl privacy``: erasure requests (GDPR Art. 17), backups, the blacklist, consent flows.

    seedancectl privacy erase SUBJECT [--device-id ID ...] [--no-wait]   # record, then execute and verify
    seedancectl privacy requests [--status verified]                     # the ledger, with deadlines
    seedancectl privacy show ID                                          # one request: per-store report, proof
    seedancectl privacy run | backup | blacklist | sweep
    seedancectl privacy identify SUBJECT --trait email=...               # register a subject (tests, demos)
    seedancectl privacy check-consent FILE                               # validate a consent flow document

With a context (``seedancectl config``) the commands talk to that server (erase and run need an
admin token to execute); without one they work on the local store through the same services.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seedance.cli.jobs import ContextOpt, Output, OutputOpt
from seedance.core.errors import InputError

if TYPE_CHECKING:
    from seedance.privacy.client import PrivacyClient

TOKEN_ENV = "SEEDANCE_TOKEN"


def make_client(context: str | None) -> PrivacyClient:
    """The client for ``context`` (or the current one, or the local store)."""
    from seedance.cli.config import active_context
    from seedance.privacy.client import LocalPrivacyClient, RemotePrivacyClient

    ctx = active_context(context)
    if ctx is None:
        return LocalPrivacyClient()
    return RemotePrivacyClient(str(ctx["server"]), ctx.get("token") or os.environ.get(TOKEN_ENV))


def _run(context: str | None, fn: Any) -> Any:
    from seedance.control.client import ClientError
    from seedance.control.errors import ControlError

    client = make_client(context)
    try:
        return fn(client)
    except ClientError as exc:
        raise InputError(str(exc)) from None
    except ControlError as exc:
        raise InputError(f"{exc.status}: {exc}") from None
    finally:
        client.close()


def _emit(obj: Any, output: Output, rows: list[dict[str, Any]], cols: tuple[str, ...]) -> None:
    if output is Output.json:
        typer.echo(json.dumps(obj, indent=2, default=str))
        return
    if output is Output.yaml:
        import yaml

        typer.echo(yaml.safe_dump(json.loads(json.dumps(obj, default=str)), sort_keys=False).rstrip())
        return
    from rich.console import Console
    from rich.table import Table

    t = Table()
    for c in cols:
        t.add_column(c.upper())
    for r in rows:
        t.add_row(*[str(r.get(c) if r.get(c) is not None else "-")[:64] for c in cols])
    Console(width=160).print(t)


REQ_COLS = ("id", "subject_id", "status", "requested_at", "deadline", "verified_at", "within_deadline", "proof_hash")


def register(app: typer.Typer) -> None:
    """Add the ``privacy`` command group."""
    grp = typer.Typer(help="Privacy operations: erasure requests, backups, blacklist, consent.", no_args_is_help=True)
    app.add_typer(grp, name="privacy")

    @grp.command("erase")
    def erase(
        subject: Annotated[str, typer.Argument(help="The subject's external id (e.g. an e-mail address).")],
        device_id: Annotated[list[str] | None, typer.Option("--device-id", help="A device id the subject gives "
                                                             "(repeatable): its anonymous data is erased too.")] = None,
        wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Execute and verify now (else the "
                                           "server's worker does, before the deadline).")] = True,
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """Request the erasure of SUBJECT's data in every store (GDPR Art. 17), deadline 72 h."""
        def go(c: PrivacyClient) -> dict[str, Any]:
            req = c.request_erasure(subject, list(device_id or []))
            if wait and req["status"] != "verified":
                done = {r["id"]: r for r in c.run_erasures()}
                req = done.get(req["id"]) or c.get_request(req["id"])
            return req

        req = _run(context, go)
        _emit(req, output, [req], REQ_COLS)
        if req["status"] == "failed":
            raise InputError(f"erasure request {req['id']} failed verification: {req['error']}")

    @grp.command("requests")
    def requests(
        status: Annotated[str | None, typer.Option(help="Only this status.")] = None,
        limit: Annotated[int, typer.Option(min=1, max=1000)] = 100,
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """List erasure requests with their deadlines."""
        items = _run(context, lambda c: c.list_requests(status, limit))
        _emit(items, output, items, REQ_COLS)

    @grp.command("show")
    def show(request_id: Annotated[int, typer.Argument(min=1)], output: OutputOpt = Output.json,
             context: ContextOpt = None) -> None:
        """One erasure request with its per-store report and proof hash."""
        req = _run(context, lambda c: c.get_request(request_id))
        _emit(req, output, [req], REQ_COLS)

    @grp.command("run")
    def run(output: OutputOpt = Output.table, context: ContextOpt = None) -> None:
        """Execute and verify every open request now."""
        items = _run(context, lambda c: c.run_erasures())
        _emit(items, output, items, REQ_COLS)

    @grp.command("backup")
    def backup(output: OutputOpt = Output.table, context: ContextOpt = None) -> None:
        """Back up the store without the key vault (pg_dump, or an SQLite copy)."""
        rec = _run(context, lambda c: c.backup())
        _emit(rec, output, [rec], ("id", "path", "fmt", "taken_at", "size_bytes", "sha256"))

    @grp.command("blacklist")
    def blacklist(output: OutputOpt = Output.table, context: ContextOpt = None) -> None:
        """Live blacklist entries (device tags) and their expiry."""
        items = _run(context, lambda c: c.blacklist())
        _emit(items, output, items, ("device_tag", "expires_at"))

    @grp.command("sweep")
    def sweep(output: OutputOpt = Output.table, context: ContextOpt = None) -> None:
        """Expire unanswered challenges, prune expired entries, destroy retired HMAC keys."""
        out = _run(context, lambda c: c.sweep())
        _emit(out, output, [out], ("timed_out", "blacklist_pruned", "verified_pruned", "keys_destroyed"))

    @grp.command("identify")
    def identify(
        subject: Annotated[str, typer.Argument(help="External id.")],
        trait: Annotated[list[str] | None, typer.Option("--trait", help="key=value (repeatable).")] = None,
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """Register a data subject with its traits (sealed under its own key)."""
        traits = {}
        for t in trait or []:
            k, sep, v = t.partition("=")
            if not sep or not k:
                raise InputError(f"a trait is key=value, got {t!r}", source="--trait")
            traits[k] = v
        out = _run(context, lambda c: c.identify(subject, traits))
        _emit(out, output, [out], ("subject_id", "created"))

    @grp.command("check-consent")
    def check_consent(file: Annotated[Path, typer.Argument(help="A consent flow document (JSON).")]) -> None:
        """Validate a consent flow document against its schema and rules."""
        from seedance.privacy.consent import load_consent_flow

        flow = load_consent_flow(file)
        typer.echo(f"{file}: consent flow {flow.version} is valid ({len(flow.purposes)} purposes, "
                   f"{len(flow.third_party_scripts)} third-party scripts)")

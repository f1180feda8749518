"""Job commands: ``submit -f``, ``get jobs|nodes``, ``describe job``, ``explain job``, ``cancel``.

``explain job`` joins the ``explain`` command group when another module registered it first.

With a context (``seedancectl config``) they talk to that server; without one they work on the
local embedded store (``$SEEDANCE_HOME/local.db``) through the same services the server runs.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seedance.cli.common import command_group
from seedance.core.errors import InputError

if TYPE_CHECKING:
    from seedance.control.client import ControlClient

TOKEN_ENV = "SEEDANCE_TOKEN"


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"
    yaml = "yaml"


class Resource(StrEnum):
    """What ``get`` lists."""

    jobs = "jobs"
    nodes = "nodes"


OutputOpt = Annotated[Output, typer.Option("-o", "--output", help="table, json or yaml.")]
ContextOpt = Annotated[str | None, typer.Option("--context", help="Context to use (default: the current one).")]


def make_client(context: str | None) -> tuple[ControlClient, str]:
    """The client for ``context`` (or the current one, or the local store) and its default cluster."""
    from seedance.cli.config import active_context
    from seedance.control.client import LocalClient, RemoteClient

    ctx = active_context(context)
    if ctx is None:
        return LocalClient(), "default"
    token = ctx.get("token") or os.environ.get(TOKEN_ENV)
    return RemoteClient(str(ctx["server"]), token), str(ctx.get("cluster", "default"))


def _emit(obj: Any, output: Output, table: Any) -> None:
    if output is Output.json:
        typer.echo(json.dumps(obj, indent=2, default=str))
    elif output is Output.yaml:
        import yaml

        typer.echo(yaml.safe_dump(json.loads(json.dumps(obj, default=str)), sort_keys=False).rstrip())
    else:
        from rich.console import Console

        Console(width=160).print(table() if callable(table) else table)


def _run(context: str | None, fn: Any) -> Any:
    from seedance.control.client import ClientError
    from seedance.control.errors import ControlError

    client, cluster = make_client(context)
    try:
        return fn(client, cluster)
    except ClientError as exc:
        raise InputError(str(exc)) from None
    except ControlError as exc:
        raise InputError(f"{exc.status}: {exc}") from None
    finally:
        client.close()


_PLACED = ("bound", "running")


def _jobs_table(items: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table()
    for col in ("ID", "NAME", "KIND", "TIER", "GPUS", "STATUS", "NODE", "COST $", "REASON"):
        t.add_column(col)
    for j in items:
        node = j.get("node") if j["status"] in _PLACED else None  # a finished job holds no node any more
        t.add_row(str(j["id"]), j["name"], j["kind"], j["tier"], f"{j['gpus']:g}", j["status"], node or "-",
                  f"{j['cost_score']:.2f}", (j.get("status_reason") or "")[:60])
    return t


def _nodes_table(items: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table()
    for col in ("NAME", "STATUS", "MODEL", "GPUS", "ALLOCATED", "CPU", "JOBS", "LABELS"):
        t.add_column(col)
    for n in items:
        alloc = sum(n["allocated_gpu_milli"]) / 1000
        labels = ",".join(f"{k}={v}" for k, v in sorted(n["labels"].items()))
        t.add_row(n["name"], n["status"], n.get("gpu_model") or "-", str(n["gpu_count"]), f"{alloc:g}",
                  f"{n['allocated_cpu_milli']}/{n['cpu_milli']}", str(n["jobs"]), labels)
    return t


def _kv_table(title: str, obj: dict[str, Any]) -> Any:
    from rich.table import Table

    t = Table(title=title, show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value")
    for k, v in obj.items():
        t.add_row(k, json.dumps(v, default=str) if isinstance(v, dict | list) else str(v))
    return t


def register(app: typer.Typer) -> None:
    """Add the job commands."""

    @app.command("submit")
    def submit(
        file: Annotated[Path, typer.Option("-f", "--filename", help="Manifest YAML ('-' for stdin).")],
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """Submit jobs (and clusters, nodes, policies) from a manifest file."""
        from seedance.control.manifest import load_manifests

        if str(file) == "-":
            text, source = sys.stdin.read(), "<stdin>"
        else:
            try:
                text, source = file.read_text(encoding="utf-8"), str(file)
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"cannot read file: {exc}", source=str(file)) from None
        manifests = load_manifests(text, source=source)
        # one key per document of this invocation: retries after a lost connection never duplicate
        keys = [f"cli-{uuid.uuid4().hex}" for _ in manifests]

        def go(client: ControlClient, _cluster: str) -> list[dict[str, Any]]:
            return [
                {"kind": k, "created": created, "object": obj}
                for k, obj, created in (client.apply(m, idempotency_key=key) for m, key in zip(manifests, keys,
                                                                                              strict=True))
            ]

        results = _run(context, go)

        def table() -> Any:
            from rich.table import Table

            t = Table()
            for col in ("KIND", "NAME", "ID", "RESULT", "STATUS"):
                t.add_column(col)
            for r in results:
                o = r["object"]
                t.add_row(r["kind"], str(o.get("name")), str(o.get("id", "-")),
                          "created" if r["created"] else "unchanged", str(o.get("status", "-")))
            return t

        _emit(results, output, table)

    @app.command("get")
    def get(
        resource: Annotated[Resource, typer.Argument(help="jobs or nodes.")],
        output: OutputOpt = Output.table, context: ContextOpt = None,
        status: Annotated[str | None, typer.Option(help="Jobs: only this status.")] = None,
        tier: Annotated[str | None, typer.Option(help="Jobs: only this tier.")] = None,
        cluster: Annotated[str | None, typer.Option(help="Nodes: cluster (default: the context's).")] = None,
        limit: Annotated[int, typer.Option(min=1, max=1000, help="Jobs: most shown.")] = 100,
    ) -> None:
        """List jobs or nodes."""
        if resource is Resource.jobs:
            items = _run(context, lambda c, _: c.list_jobs(status=status, tier=tier, limit=limit))
            _emit(items, output, lambda: _jobs_table(items))
        else:
            items = _run(context, lambda c, default: c.list_nodes(cluster or default))
            _emit(items, output, lambda: _nodes_table(items))

    @app.command("describe")
    def describe(
        kind: Annotated[str, typer.Argument(help="'job'.")],
        ref: Annotated[str, typer.Argument(help="Job id or name.")],
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """Show a job with its decision history."""
        _check_kind(kind)

        def go(c: ControlClient, _: str) -> dict[str, Any]:
            job = c.get_job(ref)
            return {"job": job, "decisions": c.decisions(str(job["id"]))}

        out = _run(context, go)

        def table() -> Any:
            from rich.console import Group
            from rich.markup import escape
            from rich.table import Table

            d = Table(title="decisions")
            for col in ("AT", "OUTCOME", "NODE", "GPUS", "SCORE", "POLICY", "REASON"):
                d.add_column(col)
            for x in out["decisions"]:  # reasons hold brackets ("in [gold]"): never rich markup
                d.add_row(str(x["created_at"])[:19], x["outcome"], x.get("node") or "-",
                          escape(str(x["gpu_indices"])), str(x.get("score")), x["policy"], escape(x["reason"]))
            return Group(_kv_table(f"job {out['job']['name']}", out["job"]), d)

        _emit(out, output, table)

    # ``explain`` is a command group shared with other modules (``explain pod`` explains a simulated
    # pod): join it when it is already registered, else create it.
    explain_group = command_group(app, "explain", "Explain scheduling decisions.")

    @explain_group.command("job")
    def explain(
        ref: Annotated[str, typer.Argument(help="Job id or name.")],
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """Why a live job is where it is: its latest decision, filter rejections and runner-up nodes."""
        out = _run(context, lambda c, _: c.explain(ref))

        def table() -> Any:
            latest = out.get("latest") or {}
            ex = latest.get("explanation") or {}
            rows = {"summary": out["summary"], "decisions": out["decisions"], "policy": ex.get("policy", "-"),
                    "feasible nodes": ex.get("feasible_nodes", "-"), "rejected by filter": ex.get("rejected_by", {}),
                    "top nodes": ex.get("top", []), "cost_score": out["job"]["cost_score"],
                    "cost basis": out["job"]["cost_basis"], "isolation": out["job"].get("isolation") or "-"}
            if ex.get("deferral"):
                rows["deferral"] = ex["deferral"]
            return _kv_table(f"job {out['job']['name']}: {out['job']['status']}", rows)

        _emit(out, output, table)

    @app.command("cancel")
    def cancel(
        args: Annotated[list[str], typer.Argument(help="[job] ID_OR_NAME")],
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """Cancel a job; a placed job gives its GPUs back."""
        if len(args) == 2:
            _check_kind(args[0])
            ref = args[1]
        elif len(args) == 1:
            ref = args[0]
        else:
            raise InputError("usage: seedancectl cancel [job] ID_OR_NAME")
        out = _run(context, lambda c, _: c.cancel(ref))
        _emit(out, output, lambda: _jobs_table([out]))


def _check_kind(kind: str) -> None:
    if kind not in ("job", "jobs"):
        raise InputError(f"only jobs can be described or explained, not {kind!r}")

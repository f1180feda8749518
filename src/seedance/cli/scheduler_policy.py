"""``seedancectl scheduler policy``: enable, list, describe and disable cost policies.

``enable`` validates everything before it stores anything: the plug-in name, the policy file
against its schema, the region (its price and carbon files must load) and the policy's values for
the region's currency. Then the compliance gate: every compliance rule runs on the file with the
facts of the control plane of the current context (or the local store); a policy with error
findings is refused (exit 1, the findings printed) unless ``--override --reason TEXT``, which is
recorded in that control plane's append-only event log.

``--dry-run`` changes nothing. By default (``--dry-run-source store``) it replays the jobs the
control plane's store holds for the window (``--window`` hours) under the policy in force and
under this one (same replay code for both) and prints the diff: cost, SLA attainment per tier,
queueing delay, preemptions and the jobs placed differently. ``--dry-run-source trace`` replays
the public trace for a few days with and without the policy's deferral and prints the energy
and carbon change. Enabled policies live in the local SQLite store (:mod:`seedance.costmodel.store`)
until the control plane takes over.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from seedance.cli.costmodel import Output, OutputOpt, emit
from seedance.cli.policy import Format
from seedance.core.errors import InputError


def register(app: typer.Typer) -> None:
    """Add the ``scheduler policy`` command group."""
    sched = typer.Typer(help="Scheduler: run the loop on its own (run), cost policies.", no_args_is_help=True)
    pol = typer.Typer(help="Cost policies: enable, list, describe, disable.", no_args_is_help=True)
    sched.add_typer(pol, name="policy")
    app.add_typer(sched, name="scheduler")

    @pol.command("enable")
    def enable(
        name: Annotated[str, typer.Option(help="Policy name.")],
        plugin: Annotated[str, typer.Option(help="Cost-policy plug-in, e.g. electricity-pricing.")],
        region: Annotated[str, typer.Option(help="Region (grid zone) with price and carbon data.")],
        config_file: Annotated[Path, typer.Option("--config-file", help="Policy YAML.")],
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Replay the trace and print the changes only.")]
        = False,
        dry_run_days: Annotated[float, typer.Option(help="Days replayed by --dry-run.")] = 14.0,
        dry_run_start: Annotated[str, typer.Option(help="UTC date where the --dry-run replay starts.")]
        = "2023-06-01",
        output: OutputOpt = Output.table,
        dry_run_source: Annotated[DrySource, typer.Option(
            help="store: replay the store's recent jobs; trace: replay the public trace's energy.")]
        = DrySource.store,
        window: Annotated[float, typer.Option(help="Hours of stored jobs replayed by --dry-run.")] = 24.0,
        cluster: Annotated[str | None, typer.Option(help="Cluster replayed by --dry-run.")] = None,
        variant: Annotated[str | None, typer.Option(help="Replay variant: shared or tiered.")] = None,
        placement: Annotated[str | None, typer.Option(help="Proposed placement policy (dry run).")] = None,
        queue_order: Annotated[str | None, typer.Option(help="Proposed queue order (dry run).")] = None,
        override: Annotated[bool, typer.Option("--override", help="Enable despite compliance errors.")] = False,
        reason: Annotated[str | None, typer.Option(help="Why the errors are accepted (with --override).")] = None,
        system: Annotated[bool, typer.Option("--system/--no-system",
                                             help="Check the control plane's facts too.")] = True,
        context: Annotated[str | None, typer.Option("--context", help="Control plane (default: current).")] = None,
    ) -> None:
        """Validate a cost policy and enable it for a region (or only replay it with --dry-run)."""
        from seedance.costmodel.evaluation import policy_signals
        from seedance.costmodel.policy import COST_PLUGINS, load_policy
        from seedance.costmodel.store import PolicyStore

        plugin_cls = COST_PLUGINS.get(plugin)
        policy = load_policy(config_file)
        if "plugin" in policy.spec.model_fields_set and COST_PLUGINS.get(policy.spec.plugin) is not plugin_cls:
            raise InputError(f"--plugin {plugin} but the file asks for plugin {policy.spec.plugin!r}",
                             source=str(config_file), field="spec.plugin")
        policy = policy.model_copy(update={
            "metadata": policy.metadata.model_copy(update={"name": name}),
            "spec": policy.spec.model_copy(update={"plugin": plugin_cls.name}),
        })
        _check_name(name)
        rs = policy_signals(policy, region)
        policy.weights(rs.currency)  # the policy must price this region's currency
        if override and not (reason and reason.strip()):
            raise InputError("--override needs --reason TEXT (it is recorded in the event log)", source="--reason")
        from seedance.cli.policy import check_files, print_reports, system_facts
        from seedance.compliance.document import load_document

        text = load_document(config_file).text
        report = check_files([config_file], facts=system_facts(context) if system else None)[0]
        if dry_run:
            if dry_run_source is DrySource.trace:
                payload = dry_run_replay(policy, rs.region, days=dry_run_days, start=dry_run_start)
                payload["compliance"] = report.to_json()
                emit(payload, output, _dry_table(payload))
                return
            proposal = {"name": name, "config_yaml": text, "window_hours": window, "cluster": cluster,
                        "variant": variant, "placement": placement, "queue_order": queue_order}
            payload = _safechange(context, lambda c: c.dry_run({k: v for k, v in proposal.items() if v is not None}))
            payload["compliance"] = report.to_json()
            from seedance.cli.dryrun_view import render_dry_run

            emit(payload, output, render_dry_run(payload))
            return
        if report.failed and not override:
            print_reports([report], Format.table, None)
            typer.echo(f"error: policy {name!r} refused: {len(report.errors())} compliance error(s); fix them or "
                       "pass --override --reason TEXT", err=True)
            raise typer.Exit(1)
        if report.failed:
            assert reason is not None
            _safechange(context, lambda c: c.record_override(policy=name, reason=reason, config_yaml=text,
                                                             source=str(config_file)))
        stored = PolicyStore().enable(name=name, plugin=plugin_cls.name, region=rs.region, policy=policy,
                                      config_path=str(config_file))
        payload = {"enabled": stored.to_json(), "store": str(PolicyStore().path)}
        emit(payload, output, f"enabled cost policy {stored.name!r} (plugin {stored.plugin}, region {stored.region}); "
                              f"stored in {PolicyStore().path}")

    @pol.command("list")
    def list_cmd(output: OutputOpt = Output.table) -> None:
        """List stored cost policies (enabled first)."""
        from seedance.costmodel.store import PolicyStore

        items = [p.to_json() for p in PolicyStore().all()]
        t = Table(title="cost policies")
        for col in ("name", "plugin", "region", "enabled", "enabled at", "config"):
            t.add_column(col)
        for p in items:
            t.add_row(str(p["name"]), str(p["plugin"]), str(p["region"]), "yes" if p["enabled"] else "no",
                      str(p["enabled_at"] or "-"), str(p["config_path"]))
        emit({"policies": items}, output, t if items else "no stored cost policies")

    @pol.command("describe")
    def describe(
        name_arg: Annotated[str | None, typer.Argument(metavar="NAME", help="Policy name.")] = None,
        name: Annotated[str | None, typer.Option("--name", help="Policy name.")] = None,
        output: OutputOpt = Output.yaml,
    ) -> None:
        """Print a stored policy's status and full document."""
        from seedance.costmodel.store import PolicyStore

        key = name or name_arg
        if not key:
            raise InputError("give the policy name (NAME or --name)", source="scheduler policy describe")
        store = PolicyStore()
        stored = store.get(key)
        if stored is None:
            raise InputError(f"no stored policy {key!r}; stored: {', '.join(p.name for p in store.all()) or '(none)'}",
                             source="--name")
        payload = stored.to_json() | {"policy": stored.policy().model_dump(mode="json")}
        if output is Output.table:
            output = Output.yaml
        emit(payload, output)

    @pol.command("disable")
    def disable(
        name_arg: Annotated[str | None, typer.Argument(metavar="NAME", help="Policy name.")] = None,
        name: Annotated[str | None, typer.Option("--name", help="Policy name.")] = None,
        output: OutputOpt = Output.table,
    ) -> None:
        """Disable a stored policy (it stays listed)."""
        from seedance.costmodel.store import PolicyStore

        key = name or name_arg
        if not key:
            raise InputError("give the policy name (NAME or --name)", source="scheduler policy disable")
        stored = PolicyStore().disable(key)
        emit({"disabled": stored.to_json()}, output, f"disabled cost policy {stored.name!r}")


class DrySource(StrEnum):
    """What ``--dry-run`` replays."""

    store = "store"
    trace = "trace"


def _safechange(context: str | None, fn: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """Run ``fn`` on the safe-change client of ``context``; refusals become one error line."""
    from seedance.control.client import ClientError
    from seedance.control.errors import ControlError
    from seedance.control.safechange_client import make_safechange_client

    client = make_safechange_client(context)
    try:
        return fn(client)
    except ClientError as exc:
        raise InputError(str(exc), source=client.where) from None
    except ControlError as exc:
        raise InputError(f"{exc.status}: {exc}", source=client.where) from None
    finally:
        client.close()


def _check_name(name: str) -> None:
    """``--name`` follows the same rules as ``metadata.name``."""
    from pydantic import ValidationError

    from seedance.costmodel.policy import Metadata

    try:
        Metadata(name=name)
    except ValidationError as exc:
        raise InputError(str(exc.errors()[0]["msg"]).removeprefix("Value error, "), source="--name") from None


def dry_run_replay(policy: Any, region: str, *, days: float, start: str) -> dict[str, Any]:
    """Replay ``days`` of the trace with and without ``policy``; what it would change."""
    from seedance.costmodel.evaluation import evaluate_region

    res = evaluate_region(region, policies=("immediate", "peak-aware"), policy=policy, start_date=start, days=days)
    base, new = res["results"]
    return {
        "dry_run": True, "policy": policy.metadata.name, "region": res["region"], "span": [res["start"], res["end"]],
        "jobs": new["jobs"], "flexible_jobs": new["flexible_jobs"], "deferred_jobs": new["deferred_jobs"],
        "mean_delay_h_flexible": new["mean_delay_h_flexible"], "deadline_misses": new["deadline_misses"],
        "currency": new["currency"], "energy_cost_before": base["energy_cost"], "energy_cost_after": new["energy_cost"],
        "energy_cost_change_pct": new.get("cost_vs_immediate_pct"), "co2_kg_before": base["co2_kg"],
        "co2_kg_after": new["co2_kg"], "co2_change_pct": new.get("co2_vs_immediate_pct"),
        "flexible_energy_cost_change_pct": new.get("flexible_cost_vs_immediate_pct"),
        "flexible_co2_change_pct": new.get("flexible_co2_vs_immediate_pct"),
    }


def _dry_table(p: dict[str, Any]) -> Table:
    t = Table(title=f"dry run of {p['policy']!r} on {p['region']} ({p['span'][0]} .. {p['span'][1]}): not enabled")
    t.add_column("what")
    t.add_column("value", justify="right")
    cur = p["currency"]
    t.add_row("jobs replayed", f"{p['jobs']:,}")
    t.add_row("flexible jobs", f"{p['flexible_jobs']:,}")
    t.add_row("jobs it would defer", f"{p['deferred_jobs']:,}")
    t.add_row("mean delay of flexible jobs", f"{p['mean_delay_h_flexible']:.2f} h")
    t.add_row("deadline misses", str(p["deadline_misses"]))
    t.add_row("energy cost", f"{p['energy_cost_before']:,.2f} → {p['energy_cost_after']:,.2f} {cur} "
                             f"({p['energy_cost_change_pct']:+.3f}%)")
    t.add_row("CO2", f"{p['co2_kg_before']:,.1f} → {p['co2_kg_after']:,.1f} kg ({p['co2_change_pct']:+.3f}%)")
    t.add_row("flexible jobs only", f"cost {p['flexible_energy_cost_change_pct']:+.2f}%, "
                                    f"CO2 {p['flexible_co2_change_pct']:+.2f}%")
    return t

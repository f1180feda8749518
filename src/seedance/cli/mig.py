"""``seedancectl mig``: MIG profiles, legal geometries, layout checks, the geometry planner and the audit.

Also holds the glue behind ``seedancectl simulate --slices mig`` (free sharing vs MIG pools on
the same seeds).
"""

from __future__ import annotations

import csv
import io
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from seedance.cli.common import dumps, emit, progress_bar
from seedance.core.errors import InputError

if TYPE_CHECKING:
    from seedance.slicing.planner import MigPlan
    from seedance.slicing.sim import IsolationCost
    from seedance.trust.audit import AuditReport


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"
    yaml = "yaml"


class AuditOutput(StrEnum):
    """Audit output formats."""

    table = "table"
    json = "json"


class ObjectiveOpt(StrEnum):
    """Planner objectives."""

    milli = "milli"
    requests = "requests"


def _emit(obj: Any, output: Output, table: Any, out: Path | None = None) -> None:
    if output is Output.json:
        emit(dumps(obj), out)
    elif output is Output.yaml:
        import yaml

        emit(yaml.safe_dump(obj, sort_keys=False), out)
    else:
        emit(table, out)


def register(app: typer.Typer) -> None:
    """Add the ``mig`` command group."""
    mig = typer.Typer(
        help="MIG: profiles, legal geometries, layout checks, geometry planning, configuration audit.",
        no_args_is_help=True,
    )
    app.add_typer(mig, name="mig")

    @mig.command("profiles")
    def profiles(
        gpu: Annotated[list[str] | None, typer.Option(help="GPU model, repeatable (default: all).")] = None,
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
    ) -> None:
        """GPU instance profiles with SMs, memory, instance counts and legal placements."""
        from seedance.slicing.mig import mig_gpu, mig_gpus, profile_table

        models = [mig_gpu(g) for g in gpu] if gpu else list(mig_gpus())
        rows = [r for g in models for r in profile_table(g)]
        table = Table(title="MIG GPU instance profiles (placements {starts}:memory slices)")
        for col in ("gpu", "profile", "id", "compute_slices", "memory_slices", "sms", "memory_gib", "max_instances"):
            table.add_column(col, justify="left" if col in ("gpu", "profile") else "right")
        table.add_column("placements")
        table.add_column("milli", justify="right")
        for r in rows:
            table.add_row(*(str(r[c]) for c in r))
        _emit(
            {"profiles": rows, "notes": {g.model: list(g.unconfirmed) for g in models if g.unconfirmed}}, output, table
        )

    @mig.command("geometries")
    def geometries(
        gpu: Annotated[str, typer.Option(help="GPU model.")] = "A100-80GB",
        media: Annotated[bool, typer.Option(help="Include the +me profiles.")] = False,
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
    ) -> None:
        """Every maximal legal layout (no instance can be added) of one GPU model."""
        from seedance.slicing.mig import enumerate_layouts, format_layout, geometry_name, mig_gpu

        g = mig_gpu(gpu)
        layouts = enumerate_layouts(g, media=media, maximal=True)
        rows = [{"geometry": geometry_name(lay), "layout": format_layout(lay)} for lay in layouts]
        table = Table(title=f"{g.model}: {len(rows)} maximal legal layouts")
        table.add_column("geometry")
        table.add_column("layout (profile@start)")
        for r in rows:
            table.add_row(r["geometry"], r["layout"])
        _emit({"gpu": g.model, "layouts": rows}, output, table)

    @mig.command("check")
    def check(
        layout: Annotated[list[str], typer.Argument(help="Instances PROFILE@START, e.g. 3g.40gb@0 3g.40gb@4.")],
        gpu: Annotated[str, typer.Option(help="GPU model.")] = "A100-80GB",
    ) -> None:
        """Check that a layout is legal on a GPU (exit 2 with the reasons if not)."""
        from seedance.slicing.mig import Instance, check_layout, format_layout, mig_gpu

        g = mig_gpu(gpu)
        insts = [Instance.parse(x, source="layout") for x in layout]
        check_layout(g, insts)
        typer.echo(f"legal on {g.model}: {format_layout(insts)}")

    @mig.command("plan")
    def plan(
        demand: Annotated[
            Path, typer.Option(help="YAML plan request, or an Alibaba pod-list CSV (its shares are the demand).")
        ],
        gpus: Annotated[
            list[str] | None, typer.Option(help="Extra idle GPUs MODEL[:COUNT], repeatable (needed with a CSV).")
        ] = None,
        objective: Annotated[ObjectiveOpt | None, typer.Option(help="Maximise served milli or requests.")] = None,
        time_limit: Annotated[float | None, typer.Option(help="CP-SAT time limit, seconds.")] = None,
        reconfig_s: Annotated[float | None, typer.Option(help="Seconds to repartition an idle GPU.")] = None,
        horizon_s: Annotated[float | None, typer.Option(help="Planning horizon, seconds.")] = None,
        drain_weight: Annotated[float | None, typer.Option(help="Multiplier of the change cost.")] = None,
        allow_drain: Annotated[
            bool | None, typer.Option("--allow-drain/--no-drain", help="May busy GPUs be drained?")
        ] = None,
        summary: Annotated[bool, typer.Option(help="Group identical GPUs in the table.")] = False,
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
        out: Annotated[Path | None, typer.Option(help="Also write the output to this file.")] = None,
    ) -> None:
        """Plan per-GPU MIG layouts for a demand mix and print the layout of every GPU."""
        from dataclasses import replace

        from seedance.slicing.demand import load_plan_request, parse_gpu_pool
        from seedance.slicing.planner import plan_geometries

        slots, classes, opts = load_plan_request(demand)
        slots = slots + parse_gpu_pool(gpus)
        if not slots:
            raise InputError("no GPUs to plan: list them in the file or pass --gpus MODEL:COUNT", source=str(demand))
        changes: dict[str, Any] = {
            k: v
            for k, v in {
                "objective": objective.value if objective else None,
                "time_limit_s": time_limit,
                "reconfig_s": reconfig_s,
                "horizon_s": horizon_s,
                "drain_weight": drain_weight,
                "allow_drain": allow_drain,
            }.items()
            if v is not None
        }
        for k in ("time_limit_s", "horizon_s"):
            if k in changes and changes[k] <= 0:
                raise InputError("must be > 0", source=f"--{k.replace('_', '-')}")
        for k in ("reconfig_s", "drain_weight"):
            if k in changes and changes[k] < 0:
                raise InputError("must be >= 0", source=f"--{k.replace('_', '-')}")
        opts = replace(opts, **changes)
        result = plan_geometries(slots, classes, opts)
        _emit(result.to_json(), output, _plan_table(result, summary), out)

    @mig.command("compare")
    def compare(
        demand: Annotated[Path, typer.Option(help="YAML plan request or Alibaba pod-list CSV.")],
        gpus: Annotated[list[str] | None, typer.Option(help="Idle GPUs MODEL[:COUNT], repeatable.")] = None,
        objective: Annotated[
            ObjectiveOpt, typer.Option(help="Maximise served milli or requests.")
        ] = ObjectiveOpt.milli,
        time_limit: Annotated[float, typer.Option(help="CP-SAT time limit, seconds.")] = 10.0,
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
    ) -> None:
        """The planner against every single fixed geometry on the same idle GPUs and demand."""
        from seedance.slicing.demand import load_plan_request, parse_gpu_pool
        from seedance.slicing.planner import PlannerOptions, plan_geometries, rank_fixed_geometries

        file_slots, classes, _ = load_plan_request(demand)
        slots = file_slots + parse_gpu_pool(gpus)
        models = {s.model for s in slots}
        if len(models) != 1 or any(s.layout for s in slots):
            raise InputError("compare needs idle, unpartitioned GPUs of one model (use --gpus MODEL:COUNT)")
        from seedance.slicing.mig import mig_gpu

        g = mig_gpu(models.pop())
        obj = objective.value
        ranked = rank_fixed_geometries(g, len(slots), classes, objective=obj)  # type: ignore[arg-type]
        res = plan_geometries(
            slots,
            classes,
            PlannerOptions(objective=obj, time_limit_s=time_limit, reconfig_s=0.0),  # type: ignore[arg-type]
        )
        rows = [{"layout": "planner (per GPU)", "geometry": "mixed", **_fit_cols(res.fit), "status": res.status}] + [
            {"layout": "fixed", "geometry": r.name, **_fit_cols(r.fit), "status": ""} for r in ranked
        ]
        table = Table(title=f"{len(slots)} x {g.model}: what each layout serves at once ({obj} objective)")
        for c in ("layout", "geometry", "served_requests", "served_requests_pct", "served_milli", "served_milli_pct"):
            table.add_column(c, justify="left" if c in ("layout", "geometry") else "right")
        table.add_column("status")
        for r in rows:
            table.add_row(*(str(r[c]) for c in r))
        _emit({"gpus": len(slots), "model": g.model, "objective": obj, "rows": rows}, output, table)

    @mig.command("audit")
    def audit_cmd(
        from_: Annotated[
            list[Path] | None,
            typer.Option("--from", help="A captured nvidia-smi -L, mig -lgi, mig -lci or -q output (repeatable)."),
        ] = None,
        live: Annotated[bool, typer.Option("--live", help="Run the four nvidia-smi listings on this node.")] = False,
        plan: Annotated[
            Path | None, typer.Option(help="Planned layouts (seedancectl mig plan -o json) to check drift against.")
        ] = None,
        node: Annotated[str | None, typer.Option(help="Node name of the plan's NODE/gpu-I GPUs.")] = None,
        gpu_map: Annotated[
            list[str] | None, typer.Option(help="Plan GPU name to nvidia-smi index, NAME=INDEX (repeatable).")
        ] = None,
        output: Annotated[AuditOutput, typer.Option("-o", "--output", help="Output format.")] = AuditOutput.table,
        out: Annotated[Path | None, typer.Option(help="Also write the output to this file.")] = None,
    ) -> None:
        """Audit one node's MIG configuration (exit 1 when a finding is an error)."""
        from seedance.trust.audit import audit
        from seedance.trust.live import capture_live
        from seedance.trust.nvsmi import OutputKind, parse_output
        from seedance.trust.plan import load_plan, planned_by_index

        if bool(from_) == live:
            raise InputError("give --from FILE (repeatable) or --live, not both", source="--from")
        captured: list[tuple[str, str, OutputKind | None]] = []
        for f in from_ or []:
            try:
                captured.append((str(f), f.read_text(encoding="utf-8", errors="strict"), None))
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"cannot read: {exc}", source=str(f)) from exc
        if live:
            captured = list(capture_live())
        outputs = [parse_output(text, name, kind=kind) for name, text, kind in captured]
        planned = None
        if plan is not None:
            mapping = None
            if gpu_map:
                mapping = {}
                for item in gpu_map:
                    name, sep, index = item.rpartition("=")
                    if not sep or not name or not index.isdigit():
                        raise InputError(f"expected NAME=INDEX, got {item!r}", source="--gpu-map")
                    mapping[name] = int(index)
            planned = planned_by_index(load_plan(plan), node=node, gpu_map=mapping, source=str(plan))
        report = audit(outputs, planned, plan_source=str(plan) if plan else "plan")
        if output is AuditOutput.json:
            emit(dumps(report.to_json()), out)
        else:
            emit(_audit_table(report), out)
        if report.has_errors:
            raise typer.Exit(1)


def _fit_cols(fit: Any) -> dict[str, Any]:
    return {
        "served_requests": fit.served_requests,
        "served_requests_pct": fit.served_requests_pct,
        "served_milli": fit.served_milli,
        "served_milli_pct": fit.served_milli_pct,
    }


def _audit_table(report: AuditReport) -> Table:
    summary = report.to_json()["summary"]
    files = ", ".join(f"{s} ({k})" for s, k in report.files)
    table = Table(
        title=f"MIG audit of {files}: {summary['error']} error(s), {summary['warning']} warning(s), "
        f"{summary['info']} info",
        show_lines=True,
    )
    for col in ("severity", "check", "gpu", "where", "message", "fix"):
        table.add_column(col, overflow="fold")
    for f in report.findings:
        where = f"{f.source}:{f.line}" if f.line is not None else (f.source or "")
        table.add_row(f.severity.value, f.check.value, "-" if f.gpu is None else str(f.gpu), where, f.message, f.fix)
    if not report.findings:
        table.add_row("ok", "-", "-", "-", "no findings: " + "; ".join(f"GPU {g} {m}" for g, m in report.gpus), "-")
    return table


def _plan_table(result: MigPlan, summary: bool) -> Table:
    fit = result.fit
    title = (
        f"MIG plan ({result.status}; serves {fit.served_requests}/{fit.demand_requests} requests, "
        f"{fit.served_milli}/{fit.demand_milli} milli; best single geometry {result.best_fixed_geometry}: "
        f"{result.best_fixed_value}; change cost {result.change_cost})"
    )
    table = Table(title=title)
    if summary:
        groups: dict[tuple[str, str, str], int] = {}
        for g in result.gpus:
            key = (g.model, g.action, " + ".join(str(i) for i in g.layout) or "(empty)")
            groups[key] = groups.get(key, 0) + 1
        for col in ("gpus", "model", "action", "layout"):
            table.add_column(col, justify="right" if col == "gpus" else "left")
        for (model, action, layout), n in groups.items():
            table.add_row(str(n), model, action, layout)
        return table
    for col in ("gpu", "model", "action", "layout", "serves"):
        table.add_column(col)
    for g in result.gpus:
        table.add_row(
            g.name,
            g.model,
            g.action,
            " + ".join(str(i) for i in g.layout) or "(empty)",
            ", ".join(f"{n}x{c}" for c, n in g.serves.items()),
        )
    return table


# ---------------------------------------------------------------------------- simulate --slices


def simulate_sliced(
    *,
    nodes_path: Path,
    pod_paths: list[Path],
    policies: list[str],
    seeds: list[int],
    arrived_max: int,
    workers: int,
    slices: str,
    mig_map: list[str] | None,
    output: str,
    out: Path | None,
) -> None:
    """``seedancectl simulate --slices mig``: free sharing and MIG pools on the same seeds and policies."""

    from seedance.slicing.placement import DEFAULT_MIG_MAP, parse_mig_map
    from seedance.slicing.sim import SLICE_MODES, SlicedRunSpec, isolation_costs, sweep_sliced
    from seedance.traces.alibaba import load_nodes, load_pods

    if slices not in SLICE_MODES:
        raise InputError(f"unknown slice mode {slices!r}; valid: {', '.join(SLICE_MODES)}", source="--slices")
    pools = parse_mig_map(mig_map) if mig_map else dict(DEFAULT_MIG_MAP)
    load_nodes(nodes_path)
    for p in pod_paths:
        load_pods(p)
    modes = ("free", "mig") if slices == "mig" else ("free",)
    runs = [
        SlicedRunSpec(
            str(nodes_path), str(p), pol, s, mode, tuple(sorted(pools.items())), arrived_max / 100.0, arrived_max
        )
        for p in pod_paths
        for pol in policies
        for s in seeds
        for mode in modes
    ]
    with progress_bar() as prog:
        task = prog.add_task(f"simulating ({'free + MIG' if slices == 'mig' else 'free'})", total=len(runs))
        results = sweep_sliced(runs, workers=workers, progress=lambda r: prog.advance(task))
    costs = isolation_costs(results) if slices == "mig" else []
    payload = {
        "mode": "inflation",
        "slices": slices,
        "mig_map": pools if slices == "mig" else {},
        "assumption": "trace GPU models in mig_map are treated as MIG-mode pools of the mapped GPU"
        if slices == "mig"
        else "",
        "arrived_max": arrived_max,
        "results": [r.to_json() for r in results],
        "isolation_cost": [c.to_json() for c in costs],
    }
    if output == "json":
        text = dumps(payload)
    elif output == "csv":
        buf = io.StringIO()
        rows = [c.to_json() for c in costs]
        w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow({k: (";".join(map(str, v)) if isinstance(v, list) else v) for k, v in row.items()})
        text = buf.getvalue().rstrip("\n")
    else:
        emit(_cost_table(costs, pools) if slices == "mig" else _free_table(results), out)
        return
    emit(text, out)


def _cost_table(costs: list[IsolationCost], pools: dict[str, str]) -> Table:
    mapped = ", ".join(f"{k} -> {v}" for k, v in pools.items())
    table = Table(
        title=f"cost of MIG isolation: unallocated GPU % at 100% arrived (MIG pools: {mapped}; mean over seeds)"
    )
    for col, just in (
        ("trace", "left"),
        ("policy", "left"),
        ("seeds", "right"),
        ("free %", "right"),
        ("MIG %", "right"),
        ("cost pp", "right"),
        ("sd", "right"),
        ("MIG booked %", "right"),
        ("wall free s", "right"),
        ("wall MIG s", "right"),
    ):
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for c in costs:
        table.add_row(
            c.trace,
            c.policy,
            str(len(c.seeds)),
            f"{c.free_unallocated:.2f}",
            f"{c.mig_unallocated:.2f}",
            f"{c.cost_pp:+.2f}",
            "-" if c.cost_sd is None else f"{c.cost_sd:.2f}",
            f"{c.mig_booked_unallocated:.2f}",
            f"{c.free_wall_s:.2f}",
            f"{c.mig_wall_s:.2f}",
        )
    return table


def _free_table(results: list[Any]) -> Table:
    table = Table(title="unallocated GPU % at 100% arrived (free sharing)")
    for col in ("trace", "policy", "seed", "unallocated %", "wall s"):
        table.add_column(col)
    for r in results:
        table.add_row(
            r.run.trace, r.run.policy, str(r.run.seed), str(r.run.unallocated_pct_at_100), f"{r.run.wall_s:.2f}"
        )
    return table

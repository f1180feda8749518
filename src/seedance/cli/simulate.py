"""``seedancectl simulate``: replay a trace under placement policies.

With no arguments it runs the bundled experiment: the six FGD-paper policies on the default
Alibaba trace, inflation mode, and prints the table beside the paper's numbers.
"""

from __future__ import annotations

import csv
import io
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from seedance.cli.common import dumps, emit, parse_seeds, progress_bar, split_names
from seedance.core.errors import InputError

PAPER_POLICIES = "random,dot-product,clustering,packing,best-fit,fgd"


class Mode(StrEnum):
    """Simulation modes."""

    inflation = "inflation"
    replay = "replay"


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"
    csv = "csv"


def expand_pods(paths: list[Path]) -> list[Path]:
    """Pod-list paths; a folder stands for every ``*pod_list*.csv`` file in it."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(p.glob("*pod_list*.csv"))
            if not found:
                raise InputError("folder holds no pod list (*pod_list*.csv)", source=str(p))
            out.extend(found)
        else:
            out.append(p)
    return out


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command."""

    @app.command("simulate")
    def simulate(
        nodes: Annotated[Path | None, typer.Option(help="Node list CSV (default: the trace's GPU nodes).")] = None,
        pods: Annotated[
            list[Path] | None,
            typer.Option(
                help="Pod list CSV, repeatable; a folder means every pod list in it (default: default trace)."
            ),
        ] = None,
        policy: Annotated[
            str, typer.Option(help="Placement policies, comma-separated registry names.")
        ] = PAPER_POLICIES,
        seeds: Annotated[str, typer.Option(help="Seeds: a range '42-51' and/or a list '42,43'.")] = "42-46",
        mode: Annotated[
            Mode, typer.Option(help="inflation (FGD paper) or replay (arrivals and departures).")
        ] = Mode.inflation,
        arrived_max: Annotated[
            int,
            typer.Option(help="Inflation: submit pods until the arrived GPU request is PCT% of capacity."),
        ] = 130,
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
        out: Annotated[Path | None, typer.Option(help="Also write the output to this file.")] = None,
        report: Annotated[Path | None, typer.Option(help="Write an HTML report with plots (and JSON) here.")] = None,
        workers: Annotated[int, typer.Option(help="Worker processes (or CPUs of the local Ray cluster).")] = 2,
        executor: Annotated[
            str,
            typer.Option(help="Where runs execute: 'local' (worker processes) or 'ray[=ADDRESS]' (Ray tasks; "
                         "a local Ray cluster without an address). docs/simulation.md."),
        ] = "local",
        retries: Annotated[int, typer.Option(help="With --executor ray: retries of a failed run.")] = 2,
        paper: Annotated[
            Path | None,
            typer.Option(help="FGD paper results CSV shown beside ours (default: the shared copy)."),
        ] = None,
        capacity_scale: Annotated[
            float, typer.Option(help="Replay: keep about this share of the nodes (same mix of node kinds).")
        ] = 1.0,
        queue_order: Annotated[str, typer.Option(help="Replay: queue-sort plug-in for pending pods.")] = "fifo",
        end: Annotated[
            str,
            typer.Option(help="Replay: 'fixed' (leave at deletion time) or 'shifted' (run full duration)."),
        ] = "fixed",
        slices: Annotated[
            str,
            typer.Option(help="Sub-GPU slices: 'free' (fractional sharing) or 'mig' (MIG pools; compared with free)."),
        ] = "free",
        mig_map: Annotated[
            list[str] | None,
            typer.Option(help="With --slices mig: NODE_MODEL=MIG_GPU, repeatable (default G2=A100-80GB, assumed)."),
        ] = None,
        ab: Annotated[
            str | None,
            typer.Option(help="Replay: A/B of SLA tiers, e.g. 'shared,tiered' (docs/tiers.md)."),
        ] = None,
        interference: Annotated[
            str | None,
            typer.Option(help="With --ab: slowdown of pods sharing a GPU: 'gavel-pair' or 'mps-llm' (docs/tiers.md)."),
        ] = None,
        interference_charge: Annotated[
            str,
            typer.Option(help="With --interference: charge slowdowns to 'isolated-tiers' (Gold, Silver) or 'all'."),
        ] = "isolated-tiers",
        bound: Annotated[
            bool, typer.Option("--bound", help="Inflation: also compute the offline LP bound per trace and seed.")
        ] = False,
        region: Annotated[
            str | None,
            typer.Option(
                help="Replay: energy evaluation (immediate, day-ahead-rule, peak-aware, optimal-cost/-co2/-score) "
                "in these regions, "
                "comma-separated (docs/costmodel.md)."
            ),
        ] = None,
        prices: Annotated[Path | None, typer.Option(help="With --region: hourly price file (one region).")] = None,
        carbon: Annotated[Path | None, typer.Option(help="With --region: hourly carbon file (one region).")] = None,
        start_date: Annotated[str, typer.Option(help="With --region: where the year of work starts.")] = "2023-01-01",
        flexible_share: Annotated[
            float, typer.Option(help="With --region: share of jobs marked flexible (deadline-bound).")
        ] = 0.3,
        workload: Annotated[
            str | None,
            typer.Option(help="Replay: 'gavel-mix' = heterogeneous fleet, Gavel job mix (docs/hetero.md)."),
        ] = None,
        storage: Annotated[
            str, typer.Option(help="With --workload: checkpoint storage layouts, comma-separated "
                                   "(tiered, nvme, dram-remote, remote-only).")
        ] = "tiered",
        checkpoint_rule: Annotated[
            str, typer.Option(help="With --workload: checkpoint interval rule, checkfreq or young-daly.")
        ] = "checkfreq",
        jobs: Annotated[int, typer.Option(help="With --workload: jobs per seed.")] = 300,
        jobs_per_hour: Annotated[float, typer.Option(help="With --workload: arrival rate.")] = 3.0,
        profile: Annotated[
            Path | None,
            typer.Option(help="A `kind: SchedulingProfile` YAML (docs/profiles.md): its placement policy, "
                              "options, queue order and stages replace --policy and --queue-order."),
        ] = None,
    ) -> None:
        """Simulate placement policies on a trace and compare them."""
        if workload is not None:  # heterogeneous fleet replay, owned by seedance.hetero
            from seedance.cli.hetero import simulate_workload

            simulate_workload(workload, mode.value, policy, PAPER_POLICIES, seeds, pods, storage, jobs,
                              jobs_per_hour, output.value, out, rule=checkpoint_rule)
            return
        from seedance.scheduling.framework import make_policy
        from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, FGD_EXPECTED, data_file

        cfg = None
        if profile is not None:
            from seedance.profile import load_profile

            cfg = load_profile(profile)
            policy, queue_order = cfg.placement.policy, cfg.queue
        policies = split_names(policy)
        for name in policies if region is None else ():  # fail fast on unknown names (lists the valid ones)
            _check_policy(name, make_policy)
        seed_list = parse_seeds(seeds)
        if arrived_max < 1 or arrived_max > 1000:
            raise InputError(f"must be within 1..1000, got {arrived_max}", source="--arrived-max")
        if workers < 1:
            raise InputError("must be >= 1", source="--workers")
        from seedance.sim.executors import make_executor

        runner = make_executor(executor, workers=workers, retries=retries)
        if runner.name != "local" and (region is not None or slices != "free" or ab is not None):
            raise InputError("only inflation and replay sweeps run on another executor", source="--executor")
        nodes_path = nodes or data_file(DEFAULT_NODES)
        pod_paths = expand_pods(pods or [data_file(DEFAULT_PODS)])
        if region is not None:  # price/carbon-aware evaluation, owned by seedance.costmodel
            _energy(region, policy, pods, prices, carbon, start_date, flexible_share, seed_list, output, out)
            return
        if slices != "free":  # sub-GPU slicing: seedance.cli.mig runs free and MIG pools on the same seeds
            if mode is Mode.replay or report:
                raise InputError("MIG pools run in inflation mode, without --report", source="--slices")
            from seedance.cli.mig import simulate_sliced

            simulate_sliced(
                nodes_path=nodes_path,
                pod_paths=pod_paths,
                policies=policies,
                seeds=seed_list,
                arrived_max=arrived_max,
                workers=workers,
                slices=slices,
                mig_map=mig_map,
                output=output.value,
                out=out,
            )
            return
        if ab is not None:  # SLA-tier A/B replay, owned by seedance.sim.ab
            from seedance.sim.ab import ab_from_cli, render_ab

            payload = ab_from_cli(
                ab, mode.value, nodes_path, pod_paths, policy, seed_list, capacity_scale, queue_order, end,
                interference=interference, interference_charge=interference_charge,
            )
            _emit(payload, output, out, lambda p, o: render_ab(p, o.value))
            return
        if mode is Mode.replay:
            payload = _run_replay(
                nodes_path, pod_paths, policies, seed_list, capacity_scale, queue_order, end, runner, cfg
            )
            _emit(payload, output, out, _render_replay)
            if report:
                from seedance.sim.report import write_replay_report

                path = write_replay_report(report, payload["_runs"], _public(payload))
                typer.echo(f"report: {path}", err=True)
            return
        paper_results = _load_paper(paper, data_file, FGD_EXPECTED)
        payload = _run_inflation(
            nodes_path, pod_paths, policies, seed_list, arrived_max, runner, paper_results, output, bound, cfg
        )
        _emit(payload, output, out, _render)
        if report:
            from seedance.sim.report import write_inflation_report

            path = write_inflation_report(report, payload["_runs"], payload["_summary"], _public(payload))
            typer.echo(f"report: {path}", err=True)


def _energy(
    region: str,
    policy: str,
    pods: list[Path] | None,
    prices: Path | None,
    carbon: Path | None,
    start_date: str,
    flexible_share: float,
    seeds: list[int],
    output: Output,
    out: Path | None,
) -> None:
    from seedance.costmodel.evaluation import DEFAULT_POLICIES, render_table, run_evaluation

    names = split_names(policy)
    if names == split_names(PAPER_POLICIES):  # the default list: every energy policy and the three optima
        names = list(DEFAULT_POLICIES)
    if pods is not None and len(pods) != 1:
        raise InputError("give one pod list with --region", source="--pods")
    payload = run_evaluation(
        regions=tuple(split_names(region)),
        policies=tuple(names),
        prices=prices,
        carbon=carbon,
        start_date=start_date,
        flexible_share=flexible_share,
        pods=pods[0] if pods else None,
        seed=seeds[0],
    )
    _emit(payload, output, out, lambda p, o: dumps(p) if o is Output.json else render_table(p))


def _emit(payload: dict[str, Any], output: Output, out: Path | None, render: Any) -> None:
    emit(render(payload, output), out)


def _run_replay(
    nodes_path: Path,
    pod_paths: list[Path],
    policies: list[str],
    seeds: list[int],
    capacity_scale: float,
    queue_order: str,
    end: str,
    runner: Any,
    profile: Any = None,
) -> dict[str, Any]:
    from seedance.scheduling.queueing import QUEUE_ORDERS
    from seedance.sim.experiment import ReplaySpec, execute_replay
    from seedance.traces.alibaba import load_nodes, load_pods

    QUEUE_ORDERS.get(queue_order)
    # validate every input up front: one clear error before any run starts (runs may be remote)
    if end not in ("fixed", "shifted"):
        raise InputError(f"unknown end rule {end!r}; valid: fixed, shifted", source="end")
    if not capacity_scale > 0:
        raise InputError(f"must be > 0, got {capacity_scale}", source="--capacity-scale")
    load_nodes(nodes_path)
    for p in pod_paths:
        if not load_pods(p).has_times:
            raise InputError("replay needs creation_time and deletion_time for every pod", source=str(p))
    specs = [
        ReplaySpec(str(nodes_path), str(p), pol, s, capacity_scale, queue_order, end, profile)
        for p in pod_paths
        for pol in policies
        for s in seeds
    ]
    with progress_bar() as prog:
        task = prog.add_task("simulating", total=len(specs))
        runs = runner.map(specs, execute_replay, progress=lambda r: prog.advance(task))
    return {
        "mode": "replay",
        "nodes": str(nodes_path),
        "capacity_scale": capacity_scale,
        "queue_order": queue_order,
        "end": end,
        "results": [r.to_json() for r in runs],
        "_runs": runs,
    }


def _render_replay(payload: dict[str, Any], output: Output) -> Any:
    rows = [{k: v for k, v in r.items() if k != "timeline"} for r in payload["results"]]
    if output is Output.json:
        return dumps(_public(payload))
    if output is Output.csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0].keys()) if rows else [], lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        return buf.getvalue().rstrip("\n")
    table = Table(title=f"replay (capacity scale {payload['capacity_scale']:g}, queue {payload['queue_order']})")
    cols = (
        "trace",
        "policy",
        "seed",
        "nodes",
        "gpus",
        "pods",
        "scheduled",
        "never_scheduled",
        "utilization_pct",
        "queue_delay_s_mean",
        "queue_delay_s_p99",
        "wall_s",
    )
    heads = (
        "trace",
        "policy",
        "seed",
        "nodes",
        "GPUs",
        "pods",
        "sched",
        "never",
        "util %",
        "delay s",
        "p99 s",
        "wall s",
    )
    for c, h in zip(cols, heads, strict=True):
        table.add_column(h, justify="left" if c in ("trace", "policy") else "right", no_wrap=True)
    for r in rows:
        table.add_row(*(str(r[c]) for c in cols))
    return table


def _check_policy(name: str, make_policy: Any) -> None:
    from seedance.scheduling.framework import PLACEMENT_POLICIES

    PLACEMENT_POLICIES.get(name)


def _load_paper(paper: Path | None, data_file: Any, rel: str) -> Any:
    from seedance.sim.paper import load_paper_results

    if paper is not None:
        return load_paper_results(paper)
    try:
        path = data_file(rel)
    except InputError:
        return None
    return load_paper_results(path) if path.exists() else None


def _run_inflation(
    nodes_path: Path,
    pod_paths: list[Path],
    policies: list[str],
    seeds: list[int],
    arrived_max: int,
    runner: Any,
    paper: Any,
    output: Output,
    bound: bool = False,
    profile: Any = None,
) -> dict[str, Any]:

    from seedance.sim.experiment import RunSpec, execute
    from seedance.sim.inflation import InflationRun
    from seedance.sim.summary import summarize
    from seedance.traces.alibaba import load_nodes, load_pods

    # validate every input file up front: one clear error before any work starts
    load_nodes(nodes_path)
    for p in pod_paths:
        load_pods(p)
    runs = [
        RunSpec(str(nodes_path), str(p), pol, s, arrived_max / 100.0, arrived_max, profile)
        for p in pod_paths
        for pol in policies
        for s in seeds
    ]
    with progress_bar() as prog:
        task = prog.add_task("simulating", total=len(runs))
        results: list[InflationRun] = runner.map(runs, execute, progress=lambda r: prog.advance(task))
    bounds: dict[str, float] = {}
    bound_rows: list[dict[str, Any]] = []
    bound_summary: list[dict[str, Any]] = []
    if bound:
        import statistics
        import time

        from seedance.finops.bill import inflation_bill_bound
        from seedance.sim.bound import inflation_bound

        spec = load_nodes(nodes_path)
        for p in pod_paths:
            trace = load_pods(p)
            name = p.stem.removeprefix("openb_pod_list_")
            rows: list[dict[str, Any]] = []
            for seed in seeds:
                t0 = time.perf_counter()
                b = inflation_bound(spec, trace, seed, ratio=arrived_max / 100.0)
                bb = inflation_bill_bound(spec, trace, seed, ratio=arrived_max / 100.0)
                rows.append({"trace": name, "seed": seed, "bound_unallocated_pct": b.unallocated_pct,
                             "bound_bill_allocated_usd_h": round(bb.alloc_usd_h, 2),
                             "bill_total_usd_h": round(bb.cluster_usd_h, 2),
                             "wall_s": round(time.perf_counter() - t0, 3)})
            bound_rows.extend(rows)
            vals = [r["bound_unallocated_pct"] for r in rows]
            bounds[name] = round(sum(vals) / len(vals), 2)
            usd = round(statistics.fmean(r["bound_bill_allocated_usd_h"] for r in rows), 2)
            total = rows[0]["bill_total_usd_h"]
            bound_summary.append({
                "trace": name, "policy": "offline bound (LP)", "seeds": list(seeds),
                "unallocated_pct_at_100_mean": bounds[name],
                "unallocated_pct_at_100_sd": round(statistics.stdev(vals), 2) if len(vals) > 1 else None,
                "bill_allocated_usd_h": usd, "bill_idle_usd_h": round(total - usd, 2), "bill_total_usd_h": total,
                "wall_s_mean": round(statistics.fmean(r["wall_s"] for r in rows), 3),
            })
    summary = summarize(results, paper, bounds)
    return {
        "mode": "inflation",
        "nodes": str(nodes_path),
        "arrived_max": arrived_max,
        "bill_note": "bill = $/h at 100% arrived: allocated (what the placed pods are billed, OpenCost's rules), "
                     "idle (cluster cost - allocated) and total (the cluster); G1/G2/G3 priced as their proxies",
        "results": [r.to_json() for r in results],
        "summary": [s.to_json() for s in summary],
        "bounds": bound_rows,
        "bound_summary": bound_summary,
        "_runs": results,
        "_summary": summary,
    }


def _public(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if not k.startswith("_")}


def _render(payload: dict[str, Any], output: Output) -> Any:
    summary = payload["summary"]
    if output is Output.json:
        return dumps(_public(payload))
    if output is Output.csv:
        buf = io.StringIO()
        cols = list(summary[0].keys()) if summary else []
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for row in summary:
            w.writerow({k: (";".join(map(str, v)) if isinstance(v, list) else v) for k, v in row.items()})
        return buf.getvalue().rstrip("\n")
    from seedance.sim.summary import BOUND_HEADS, SUMMARY_HEADS, TAIL_HEADS, summary_cells

    with_bound = bool(payload.get("bounds"))
    table = Table(title=f"unallocated GPU % and bill at 100% arrived ({payload['mode']}, mean over seeds)",
                  show_edge=False)
    table.caption = ("n/a: no such figure (the paper has no seedance run; the LP bound has no fragmentation). "
                     "Bill: $/h at 100% arrived (docs/finops.md).")
    cols = [*SUMMARY_HEADS, *(BOUND_HEADS if with_bound else ()), *TAIL_HEADS]
    for col in cols:
        table.add_column(col, justify="left" if col in ("trace", "policy") else "right", no_wrap=True)
    for row in summary_cells(payload, with_bound):
        table.add_row(*row)
    return table


def _f(v: Any) -> str:
    return "n/a" if v is None else f"{v:.2f}"

"""``seedancectl optimize``: cost / latency / accuracy deployment search with NSGA-II and its exact front.

``families`` lists the served model families and their spaces; ``deploy`` builds a family's space
(variants x precision x GPU x count x batch x compile mode, each point priced and timed by the
calibrated serving model), enumerates the exact Pareto front, runs NSGA-II at the whitepaper's
settings and reports how much of the exact front's hypervolume NSGA-II reached. ``--submit`` sends
the chosen point to the control plane as an InferenceService.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from seedance.cli.common import dumps, parse_seeds


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"


def _families_rows() -> list[dict[str, Any]]:
    from seedance.optimize.families import FAMILIES

    rows = []
    for name in FAMILIES.names():
        f = FAMILIES.get(name)
        size = len(f.variants) * len(f.precisions) * len(f.gpus) * len(f.counts) * len(f.batches) * len(f.modes)
        rows.append({"family": name, "task": f.task, "metric": f.metric, "variants": [v.name for v in f.variants],
                     "precisions": list(f.precisions), "gpus": list(f.gpus), "counts": list(f.counts),
                     "batches": list(f.batches), "modes": list(f.modes), "grid_points": size})
    return rows


def _front_table(payload: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=180)
    n = payload["nsga2"]
    console.print(
        f"{payload['family']}: {payload['enumerated']} grid points, {payload['deployable']} deployable, "
        f"{payload['feasible']} meet the SLO; exact front {payload['exact_front_size']} points "
        f"(enumerated in {payload['enumeration_seconds']} s); NSGA-II front {len(payload['front'])} points, "
        f"hypervolume ratio {payload['hypervolume_ratio']:.4f} (seed {n['seeds'][0]}; mean over {len(n['seeds'])} "
        f"seeds {n['hypervolume_ratio_mean']:.4f}, min {n['hypervolume_ratio_min']:.4f}; slowest run "
        f"{n['seconds_max']} s)")
    unit = "$/1k req" if payload["cost_unit"] == "usd_per_1k_requests" else "GFLOPs/req"
    t = Table(title=f"NSGA-II front ({payload['metric']})")
    for c in ("variant", "precision", "gpu", "count", "batch", "mode", unit, "p95 ms", "accuracy", "req/s"):
        t.add_column(c, justify="left" if c in ("variant", "precision", "gpu", "mode") else "right")
    for r in payload["front"]:
        t.add_row(r["variant"], r["precision"], r["gpu"], str(r["count"]), str(r["batch"]), r["mode"],
                  f"{r['cost']:.4g}", f"{r['p95_ms']:.4g}", f"{r['accuracy']:.4g}", f"{r['throughput_rps']:.4g}")
    console.print(t)
    w = payload.get("whitepaper")
    if w:
        t2 = Table(title=f"beside the whitepaper's {w['benchmark']} row (§3.1)")
        for c in ("row", "variant", "precision", "gpu", "batch", "GFLOPs/req", "p95 ms", "accuracy", "$/1k req"):
            t2.add_column(c)
        for r in w["rows"]:
            t2.add_row(r["row"], r["variant"], str(r["precision"]),
                       str(r["gpu"]), str(r["batch"]), f"{r['gflops_per_request']:.4g}", f"{r['p95_ms']:.4g}",
                       f"{r['accuracy']:.4g}", f"{r['cost']:.4g}" if isinstance(r["cost"], float) else "")
        console.print(t2)


def register(app: typer.Typer) -> None:
    """Add the ``optimize`` command group."""
    grp = typer.Typer(help="Deployment optimiser: NSGA-II over cost / latency / accuracy, with the exact front.",
                      no_args_is_help=True)
    app.add_typer(grp, name="optimize")

    @grp.command("families")
    def families(output: Annotated[Output, typer.Option("-o", "--output")] = Output.table) -> None:
        """The served model families and the size of each deployment space."""
        rows = _families_rows()
        if output is Output.json:
            typer.echo(dumps(rows))
            return
        from rich.console import Console
        from rich.table import Table

        t = Table()
        for c in ("family", "task", "metric", "variants", "precisions", "grid points"):
            t.add_column(c)
        for r in rows:
            t.add_row(r["family"], r["task"], r["metric"], ", ".join(r["variants"]), ", ".join(r["precisions"]),
                      str(r["grid_points"]))
        Console(width=180).print(t)

    @grp.command("deploy")
    def deploy(
        family: Annotated[str, typer.Option("--family", help="A family from `optimize families`.")],
        slo_ms: Annotated[float | None, typer.Option("--slo-ms", help="p95 latency bound (ms).")] = None,
        min_accuracy: Annotated[float | None, typer.Option("--min-accuracy", help="Accuracy floor (metric units).")
                                ] = None,
        cost: Annotated[str, typer.Option(help="usd ($ per 1k requests) or flops (GFLOPs per request).")] = "usd",
        prices: Annotated[str, typer.Option(help="catalog, on-demand or spot (cheapest per-GPU instance price).")
                          ] = "catalog",
        profile: Annotated[Path | None, typer.Option(help="Kernel profile (`kernels bench --out`) for the "
                                                          "compiled/fused ratios.")] = None,
        trace: Annotated[Path | None, typer.Option(help="Azure-format trace for LLM request lengths.")] = None,
        pop: Annotated[int, typer.Option(help="NSGA-II population.")] = 100,
        generations: Annotated[int, typer.Option(help="NSGA-II generations.")] = 200,
        crossover: Annotated[float, typer.Option(help="SBX crossover probability.")] = 0.9,
        mutation: Annotated[float, typer.Option(help="Polynomial mutation probability.")] = 0.2,
        archive: Annotated[bool, typer.Option(help="Keep every non-dominated point evaluated (external archive).")
                           ] = False,
        seeds: Annotated[str, typer.Option(help="NSGA-II seeds, e.g. 1 or 1-10.")] = "1",
        output: Annotated[Output, typer.Option("-o", "--output")] = Output.table,
        report: Annotated[Path | None, typer.Option("--report", help="Write the HTML report here.")] = None,
        submit: Annotated[bool, typer.Option(help="Submit the chosen point as an InferenceService.")] = False,
        pick_rule: Annotated[str, typer.Option("--pick", help="cheapest, fastest or accurate.")] = "cheapest",
        name: Annotated[str | None, typer.Option(help="InferenceService name (default: variant-precision).")] = None,
        cluster: Annotated[str, typer.Option(help="Cluster to submit to.")] = "default",
        tier: Annotated[str, typer.Option(help="SLA tier of the InferenceService.")] = "silver",
        context: Annotated[str | None, typer.Option(help="Control-plane context (default: current or local).")
                           ] = None,
    ) -> None:
        """Search a family's deployments; print NSGA-II's front beside the exact one."""
        from seedance.kernels.profile import load_profile
        from seedance.optimize.deploy import run_deploy
        from seedance.optimize.families import get_family
        from seedance.optimize.search import NsgaSettings, Slo
        from seedance.optimize.space import SpaceOptions
        from seedance.optimize.submit import PICKS, pick

        if pick_rule not in PICKS:
            from seedance.core.errors import InputError

            raise InputError(f"unknown pick {pick_rule!r}; valid: {', '.join(PICKS)}", source="--pick")
        fam = get_family(family)
        if slo_ms is not None and not slo_ms > 0:
            from seedance.core.errors import InputError

            raise InputError(f"must be > 0, got {slo_ms}", source="--slo-ms")
        opts = SpaceOptions(prices=prices, cost=cost, trace=trace,
                            profile=load_profile(profile) if profile is not None else None)
        settings = NsgaSettings(pop_size=pop, generations=generations, crossover=crossover, mutation=mutation,
                                archive=archive)
        res = run_deploy(fam, Slo(slo_ms, min_accuracy), options=opts, settings=settings,
                         seeds=tuple(parse_seeds(seeds)))
        payload = res.payload
        payload["chosen"] = pick(payload["front"], pick_rule)
        if report is not None:
            from seedance.optimize.report import write_report

            write_report(report, payload, res.space, res.exact.indices, res.found)
        if submit:
            from seedance.cli.jobs import _run
            from seedance.optimize.submit import inference_manifest

            m = inference_manifest(fam.name, payload["chosen"], name=name, cluster=cluster, tier=tier, slo_ms=slo_ms)
            kind, obj, created = _run(context, lambda client, _cluster: client.apply(m))
            payload["submitted"] = {"kind": kind, "created": created, "job": obj}
        if output is Output.json:
            typer.echo(dumps(payload))
        else:
            _front_table(payload)
            c = payload["chosen"]
            typer.echo(f"chosen ({pick_rule}): {c['variant']} {c['precision']} on {c['count']} x {c['gpu']}, batch "
                       f"{c['batch']}, {c['mode']}: cost {c['cost']:.4g}, p95 {c['p95_ms']:.4g} ms, "
                       f"{payload['metric']} {c['accuracy']:.4g}")
            if submit:
                s = payload["submitted"]
                typer.echo(f"submitted InferenceService {s['job'].get('name')} (id {s['job'].get('id')}, "
                           f"status {s['job'].get('status')}, created {s['created']})")

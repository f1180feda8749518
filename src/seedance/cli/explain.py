"""``seedancectl explain pod``: every scheduling decision about one pod of a tiered replay, explained.

The trace is replayed under tiered binding (``seedance.sim.tiered``) on the cluster the A/B replay
uses (same capacity scale, seed and pool labelling), recording each decision about the pod: why
this node (stage, pool, policy score, runner-up nodes), why pending (per stage, per filter), why
these victims (cost breakdown, alternatives), and when it was preempted itself.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from seedance.core.errors import InputError


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"
    yaml = "yaml"


def register(app: typer.Typer) -> None:
    """Add the ``explain`` command group."""
    explain = typer.Typer(help="Explain scheduling decisions of a simulated pod.", no_args_is_help=True)
    app.add_typer(explain, name="explain")

    @explain.command("pod")
    def pod(
        pod: Annotated[str, typer.Argument(help="Pod name (e.g. openb-pod-0042) or row index in the pod list.")],
        nodes: Annotated[Path | None, typer.Option(help="Node list CSV (default: the trace's GPU nodes).")] = None,
        pods: Annotated[Path | None, typer.Option(help="Pod list CSV (default: the default trace).")] = None,
        capacity_scale: Annotated[
            float, typer.Option(help="Keep about this share of the nodes (as simulate --capacity-scale).")
        ] = 1.0,
        seed: Annotated[int, typer.Option(help="Seed (cluster sampling, random policies).")] = 0,
        policy: Annotated[str, typer.Option(help="Placement policy.")] = "best-fit",
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
    ) -> None:
        """Replay the trace under SLA tiers and print every decision about POD with its explanation."""
        from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file

        result = explain_pod(
            nodes or data_file(DEFAULT_NODES),
            pods or data_file(DEFAULT_PODS),
            pod,
            capacity_scale=capacity_scale,
            seed=seed,
            policy=policy,
        )
        if output is Output.json:
            from seedance.cli.common import dumps

            typer.echo(dumps(result))
        elif output is Output.yaml:
            import yaml

            typer.echo(yaml.safe_dump(result, sort_keys=False, allow_unicode=True).rstrip("\n"))
        else:
            _print_table(result)


def explain_pod(
    nodes_path: Path,
    pods_path: Path,
    pod: str,
    *,
    capacity_scale: float = 1.0,
    seed: int = 0,
    policy: str = "best-fit",
) -> dict[str, Any]:
    """Replay and return the decision log of one pod (JSON-ready)."""
    import numpy as np

    from seedance.sim.ab import prepare_cluster
    from seedance.sim.tiered import TieredReplay
    from seedance.tiers.availability import pod_availability
    from seedance.traces.alibaba import load_nodes, load_pods

    spec = load_nodes(nodes_path)
    trace = load_pods(pods_path)
    idx = _pod_index(trace.name, pod, str(pods_path))
    cluster, plan = prepare_cluster(spec, trace, capacity_scale=capacity_scale, seed=seed)
    sim = TieredReplay(cluster, trace, policy=policy, seed=seed, explain_pod=idx)
    sim.run()
    seg = sim.segments()
    ran, av = pod_availability(trace.creation, trace.deletion, seg.pod, seg.start, seg.end)
    req = sim.request(idx)
    tier = sim.tier(idx)
    target = sim.tier_config.tiers[tier].target_availability
    names = [n.name for n in cluster.nodes]
    events = [_name_nodes(e, names) for e in sim.log]
    mine = np.flatnonzero(seg.pod == idx)
    return {
        "pod": str(trace.name[idx]),
        "index": idx,
        "qos": str(trace.qos[idx]),
        "tier": tier,
        "request": {
            "num_gpu": req.num_gpu,
            "gpu_milli": req.gpu_milli,
            "cpu_milli": req.cpu_milli,
            "memory_mib": req.memory_mib,
        },
        "window_s": [float(trace.creation[idx]), float(trace.deletion[idx])],
        "ran_s": float(ran[idx]),
        "availability": float(av[idx]),
        "target": target,
        "meets_target": bool(av[idx] >= target - 1e-12),
        "preempted": int(sim.preempted[idx]),
        "runs": [
            {"start_s": float(seg.start[j]), "end_s": float(seg.end[j]), "node": names[int(seg.node[j])],
             "lost_work_s": float(seg.lost_s[j])}
            for j in mine.tolist()
        ],
        "capacity_scale": capacity_scale,
        "seed": seed,
        "policy": policy,
        "cluster": {"nodes": len(cluster.nodes), "gpus": cluster.total_gpus, "pools": plan.to_json()},
        "events": events,
    }


def _pod_index(names: Any, pod: str, source: str) -> int:
    hits = [i for i, n in enumerate(names.tolist()) if n == pod]
    if hits:
        return hits[0]
    if pod.isdigit() and int(pod) < len(names):
        return int(pod)
    raise InputError(f"no pod {pod!r} in the pod list (give a name or an index < {len(names)})", source=source)


def _name_nodes(entry: dict[str, Any], names: list[str]) -> dict[str, Any]:
    out = dict(entry)
    pl = out.get("placement")
    if isinstance(pl, dict) and isinstance(pl.get("node"), int):
        out["placement"] = {**pl, "node": names[pl["node"]]}
    pre = out.get("preemptions")
    if isinstance(pre, list):
        out["preemptions"] = [{**p, "node": names[p["node"]]} if isinstance(p.get("node"), int) else p for p in pre]
    return out


def _print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=max(Console().width, 120))
    r = result["request"]
    console.print(
        f"[bold]{escape(result['pod'])}[/bold] (QoS {result['qos']} → tier {result['tier']}), "
        f"request {r['num_gpu']} GPU x {r['gpu_milli']} milli, {r['cpu_milli']} mCPU, {r['memory_mib']} MiB; "
        f"window {result['window_s'][0]:.0f}–{result['window_s'][1]:.0f} s; "
        f"availability {result['availability']:.4%} (target {result['target']:.2%}, "
        f"{'met' if result['meets_target'] else 'missed'}), preempted {result['preempted']}x; "
        f"cluster {result['cluster']['nodes']} nodes / {result['cluster']['gpus']} GPUs "
        f"(capacity scale {result['capacity_scale']:g}, seed {result['seed']})"
    )
    table = Table(show_lines=True)
    for col in ("t (s)", "event", "detail"):
        table.add_column(col, overflow="fold")
    for e in result["events"]:
        kind = e["event"] if e["event"] != "decision" else f"decision: {e['outcome']}"
        detail = [e.get("reason", "")]
        if e.get("retries"):
            detail.append(f"(same answer on {e['retries']} more retries, last at {e['last_retry_t_s']:.0f} s)")
        exp = e.get("explanation") or {}
        if exp.get("stage") in ("own-pool", "borrow", "preempt"):
            detail.append(f"stage {exp['stage']}, pool: {exp.get('pool')}, node {exp.get('node')}")
            for c in exp.get("top", [])[:3]:
                detail.append(f"  candidate {c['node']} score {c['score']}")
        for p in e.get("preemptions", []):
            detail.append(f"  victim pod {p['victim']} on {p['node']}: ${p['cost_usd']:.4f}: {p['reason']}")
        for a in (exp.get("preemption") or {}).get("alternatives", []):
            detail.append(f"  alternative {a['node']}: ${a['cost_usd']:.4f} ({a['victims']} victims)")
        table.add_row(f"{e['t_s']:.0f}", kind, escape("\n".join(x for x in detail if x)))
    console.print(table)

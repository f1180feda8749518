"""Heterogeneous fleet commands: ``explain migration JOB`` and the ``simulate --workload gavel-mix`` replay.

``explain migration JOB``: JOB is either a job index of the Gavel-mix replay (the replay runs with the
given seed and policy and every move of that job is explained with the migration planner's breakdown)
or a JSON/YAML job spec (:class:`MigrationSpec`): the job, its source node and the candidate targets.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from seedance.cli.common import command_group
from seedance.core.errors import InputError


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"
    yaml = "yaml"


class NodeSpec(BaseModel):
    """A node of a migration spec."""

    model_config = ConfigDict(extra="forbid")
    name: str
    gpu: str
    gpus: int = Field(1, ge=1)
    topology: str | None = None
    driver: str | None = None
    power_cap_w: float | None = Field(None, gt=0)
    storage: str = "tiered"
    network_gbps: float = Field(100.0, gt=0)


class MigrationSpec(BaseModel):
    """A job to move, its source and the candidates."""

    model_config = ConfigDict(extra="forbid")
    job: str
    state_gb: float | None = Field(None, gt=0)
    params: float | None = Field(None, gt=0)
    optimizer: str = "adam"
    weight_bytes: int = 4
    cuda: str = "12.4"
    sass: list[str] = Field(default_factory=list)
    ptx: list[str] = Field(default_factory=list)
    precision: str = "fp32"
    job_type: str | None = None
    remaining_steps: float = Field(0.0, ge=0)
    source: NodeSpec
    targets: list[NodeSpec] = Field(min_length=1)


def _node(spec: NodeSpec, where: str) -> Any:
    from seedance.hetero.fleet import FleetNode, gpu_type
    from seedance.storage.tiers import STORAGE
    from seedance.topology.compat import newest_driver, version_tuple

    try:
        g = gpu_type(spec.gpu)
    except InputError as exc:
        raise InputError(exc.message, source=where, field=f"{spec.name}.gpu") from None
    drv = version_tuple(spec.driver, field="driver", source=where) if spec.driver else newest_driver(
        g.compute_capability)
    return FleetNode(spec.name, g, spec.gpus, drv, spec.power_cap_w or g.tdp_w, STORAGE.get(spec.storage),
                     spec.network_gbps / 8.0, spec.topology)


def explain_spec(path: Path) -> dict[str, Any]:
    """Plan the move described by a JSON/YAML spec file."""
    from seedance.core import yamldoc
    from seedance.hetero.migration import MigrationPlanner, MigrationRequest
    from seedance.hetero.throughput import default_matrix
    from seedance.storage.checkpoint import checkpoint_gb
    from seedance.topology.compat import CudaBuild
    from seedance.topology.topo import fixture, load_topo

    src = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=src) from None
    raw = yamldoc.compose(text, source=src, what="migration spec", allow_empty=True)[1]
    try:
        spec = MigrationSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"], source=src, field=".".join(str(x) for x in err["loc"])) from None
    if spec.state_gb is None and spec.params is None:
        raise InputError("give state_gb or params", source=src, field="state_gb")
    state = spec.state_gb if spec.state_gb is not None else checkpoint_gb(
        spec.params or 0.0, spec.optimizer, weight_bytes=spec.weight_bytes, source=src)
    topos = {}
    for n in (spec.source, *spec.targets):
        if n.topology:
            p = Path(n.topology)
            topos[n.topology] = load_topo(p) if p.suffix else fixture(n.topology)
    build = CudaBuild.of(spec.cuda, spec.sass, spec.ptx, source=src)
    req = MigrationRequest(spec.job, state, build, _node(spec.source, src), spec.remaining_steps, spec.job_type,
                           spec.precision)
    matrix = default_matrix() if spec.job_type else None
    planner = MigrationPlanner(matrix, topos)
    return planner.select_target(req, [_node(t, src) for t in spec.targets])


def explain_replay_job(job: int, *, seed: int, policy: str, jobs: int, jobs_per_hour: float,
                       storage: str) -> dict[str, Any]:
    """Replay the Gavel mix and explain every move of job ``job``."""
    from seedance.hetero.experiment import GAVEL_CLUSTER
    from seedance.hetero.fleet import make_fleet
    from seedance.hetero.replay import ReplayOptions, replay_rounds
    from seedance.hetero.throughput import default_matrix
    from seedance.hetero.workload import alibaba_gaps, gavel_mix
    from seedance.traces.paths import DEFAULT_PODS, data_file

    if not 0 <= job < jobs:
        raise InputError(f"job index must be in [0, {jobs})", field="JOB")
    m = default_matrix()
    wl = gavel_mix(m, alibaba_gaps(data_file(DEFAULT_PODS)), jobs=jobs, jobs_per_hour=jobs_per_hour, seed=seed)
    log: list[dict[str, Any]] = []
    summary = replay_rounds(policy, wl, make_fleet(list(GAVEL_CLUSTER), storage=storage), ReplayOptions(),
                            explain=job, log=log)
    for mv in log:
        if mv["was_preempted"]:
            mv["why"] = "preempted by the round's allocation, resumed on another node"
        elif mv["planner"]["decision"] == "migrate":
            mv["why"] = "the round's allocation moved it; the planner agrees for this job alone"
        else:
            mv["why"] = ("the round's allocation moved it for the fleet's total normalised throughput; for this "
                         "job alone the planner would stay")
    return {"job": job, "job_type": m.job_types[int(wl.job_type[job])], "arrival_s": float(wl.arrival[job]),
            "steps": float(wl.steps[job]), "policy": policy, "seed": seed, "moves": log,
            "replay": {k: summary[k] for k in ("avg_jct_s", "migrations")}}


def simulate_workload(workload: str, mode: str, policy: str, paper_policies: str, seeds: str,
                      pods: list[Path] | None, storage: str, jobs: int, jobs_per_hour: float, output: str,
                      out: Path | None, *, rule: str = "checkfreq") -> None:
    """``simulate --mode replay --workload gavel-mix``."""
    from seedance.cli.common import dumps, emit, parse_seeds, split_names
    from seedance.hetero.experiment import DEFAULT_POLICIES, render_table, run
    from seedance.hetero.replay import ReplayOptions
    from seedance.hetero.throughput import default_matrix
    from seedance.traces.paths import DEFAULT_PODS, data_file

    if workload != "gavel-mix":
        raise InputError(f"unknown workload {workload!r}; valid: gavel-mix", source="--workload")
    if mode != "replay":
        raise InputError("--workload runs in replay mode (--mode replay)", source="--mode")
    if pods is not None and len(pods) != 1:
        raise InputError("give one pod list (the arrivals) with --workload", source="--pods")
    names = split_names(DEFAULT_POLICIES if policy == paper_policies else policy)
    try:
        opts = ReplayOptions(interval_rule=rule)
    except InputError as exc:
        raise InputError(exc.message, source="--checkpoint-rule") from None
    payload = run(default_matrix(), pods[0] if pods else data_file(DEFAULT_PODS), policies=names,
                  seeds=parse_seeds(seeds), jobs=jobs, jobs_per_hour=jobs_per_hour, storages=split_names(storage),
                  opts=opts)
    emit(dumps(payload) if output == "json" else render_table(payload), out)


def register(app: typer.Typer) -> None:
    """Add ``explain migration`` to the ``explain`` group."""
    group = command_group(app, "explain", "Explain scheduling decisions.")

    @group.command("migration")
    def migration(
        job: Annotated[str, typer.Argument(help="Job index of the Gavel-mix replay, or a JSON/YAML job spec.")],
        seed: Annotated[int, typer.Option(help="Replay seed.")] = 42,
        policy: Annotated[str, typer.Option(help="Replay policy (round-based).")] = "hetero-jct",
        jobs: Annotated[int, typer.Option(help="Replay jobs.")] = 300,
        jobs_per_hour: Annotated[float, typer.Option(help="Replay arrival rate.")] = 3.0,
        storage: Annotated[str, typer.Option(help="Replay storage layout.")] = "tiered",
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
    ) -> None:
        """Explain the migration planner's choice for JOB: every candidate's cost breakdown."""
        from seedance.cli.common import dumps

        path = Path(job)
        if path.suffix in (".json", ".yaml", ".yml") or path.is_file():
            result = explain_spec(path)
        elif job.isdigit():
            result = explain_replay_job(int(job), seed=seed, policy=policy, jobs=jobs, jobs_per_hour=jobs_per_hour,
                                        storage=storage)
        else:
            raise InputError(f"{job!r} is neither a job index nor a spec file", field="JOB")
        if output is Output.json:
            typer.echo(dumps(result))
        elif output is Output.yaml:
            import yaml

            typer.echo(yaml.safe_dump(result, sort_keys=False).rstrip("\n"))
        else:
            typer.echo(_table(result))


def _plan_lines(plan: dict[str, Any], indent: str = "") -> list[str]:
    lines = [f"{indent}decision: {plan['decision']}" + (f" -> {plan['target']}" if plan["target"] else "")
             + f" (state {plan['state_gb']:.3g} GB; whitepaper argmin(topology+compat): {plan['whitepaper_argmin']})"]
    lines.append(f"{indent}{'candidate':<14}{'ckpt':>8}{'topo':>9}{'hbm':>8}{'power':>10}{'compat':>8}{'restart':>8}"
                 f"{'cost':>10}{'gain':>11}{'net':>11}  slowest link / reason")
    for c in plan["candidates"]:
        if not c["feasible"]:
            lines.append(f"{indent}{c['node']:<14}{'infeasible':>8}  {c['reason']}")
            continue
        slow = c["slowest_link"]
        lines.append(f"{indent}{c['node']:<14}{c['checkpoint_s']:>8.2f}{c['topology_s']:>9.2f}{c['bandwidth_s']:>8.3f}"
                     f"{c['power_s']:>10.1f}{c['compat_s']:>8.1f}{c['restart_s']:>8.1f}{c['cost_s']:>10.1f}"
                     f"{c['gain_s']:>11.1f}{c['net_s']:>11.1f}  {slow['kind']} {slow['gbs']:.3g} GB/s; {c['reason']}")
    return lines


def _table(result: dict[str, Any]) -> str:
    if "moves" not in result:
        return "\n".join([f"job {result['job']} on {result['source']}", *_plan_lines(result)])
    lines = [f"job {result['job']} ({result['job_type']}), arrival {result['arrival_s']:.0f} s, {result['steps']:.0f} "
             f"steps, policy {result['policy']}, seed {result['seed']}: {len(result['moves'])} move(s)"]
    for mv in result["moves"]:
        lines.append(f"t={mv['t_s']:.0f} s: {mv['from']} -> {mv['to']}: {mv['why']}; true remaining "
                     f"{mv['true_remaining_steps']:.0f} steps")
        lines.extend(_plan_lines(mv["planner"], "  "))
    return "\n".join(lines)

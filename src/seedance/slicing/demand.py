"""Planner input files: a YAML plan request, or an Alibaba pod list whose shares are the demand.

YAML (every field documented on the models below)::

    gpus:
      - model: A100-80GB        # 4 idle, unpartitioned GPUs named a100-0 .. a100-3
        count: 4
        name: a100
      - name: node-7/gpu-0      # one GPU with a current layout, half of it busy for 20 min
        model: A100-80GB
        layout: [3g.40gb@0, 3g.40gb@4]
        busy: [3g.40gb@0]
        drain_s: 1200
    demand:
      - {name: chat, gpu_milli: 250, count: 6}
      - {name: embed, gpu_milli: 120, count: 10, gpu_memory_gib: 15}
    options: {objective: milli, reconfig_s: 30, horizon_s: 3600}

A CSV in the Alibaba pod-list format gives one demand class per distinct fractional ``gpu_milli``
(whole-GPU and CPU-only pods are ignored); the GPUs then come from the command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from seedance.core import yamldoc
from seedance.core.errors import InputError, UnknownNameError
from seedance.slicing.mig import Instance, mig_gpu
from seedance.slicing.planner import DemandClass, GpuSlot, PlannerOptions, demand_from_shares


class GpuEntry(BaseModel):
    """One GPU, or ``count`` identical idle GPUs."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="MIG-capable GPU model (A100-40GB, A100-80GB, H100-80GB, H200).")
    count: int = Field(default=1, ge=1, description="How many identical GPUs this entry stands for.")
    name: str | None = Field(default=None, description="Name (with count > 1: a prefix, '-<i>' appended).")
    layout: list[str] = Field(default_factory=list, description="Current instances, PROFILE@START.")
    busy: list[str] = Field(default_factory=list, description="Instances of layout running work now.")
    drain_s: float = Field(default=0.0, ge=0, description="Seconds until the busy instances finish.")


class DemandEntry(BaseModel):
    """Requests of one shape."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, description="Label (default '<milli>m').")
    gpu_milli: int = Field(ge=1, le=1000, description="Share of one GPU per request, milli-GPU.")
    count: int = Field(ge=0, description="Number of requests.")
    gpu_memory_gib: float | None = Field(default=None, gt=0, description="GPU memory per request, GiB.")


class OptionsEntry(BaseModel):
    """Planner options (command-line flags override them)."""

    model_config = ConfigDict(extra="forbid")

    objective: Literal["milli", "requests"] = Field(default="milli", description="What to maximise.")
    reconfig_s: float = Field(default=30.0, ge=0, description="Seconds to repartition an idle GPU.")
    horizon_s: float = Field(default=3600.0, gt=0, description="Horizon converting seconds into lost capacity.")
    drain_weight: float = Field(default=1.0, ge=0, description="Multiplier of the change cost.")
    allow_drain: bool = Field(default=True, description="Allow planning busy GPUs for drain-then-repartition.")
    time_limit_s: float = Field(default=10.0, gt=0, description="CP-SAT time limit.")


class PlanRequest(BaseModel):
    """A whole planner input file."""

    model_config = ConfigDict(extra="forbid")

    gpus: list[GpuEntry] = Field(default_factory=list, description="The MIG-mode GPUs.")
    demand: list[DemandEntry] = Field(description="What should be served at once.")
    options: OptionsEntry = Field(default_factory=OptionsEntry, description="Planner options.")


def load_plan_request(path: str | Path) -> tuple[list[GpuSlot], list[DemandClass], PlannerOptions]:
    """Read a YAML plan request or an Alibaba pod-list CSV (then ``gpus`` is empty).

    Raises:
        InputError: unreadable file, bad YAML, a schema violation (named by field), an unknown GPU
            model or profile, or an illegal current layout.
    """
    src = str(path)
    p = Path(path)
    if p.suffix.lower() == ".csv":
        from seedance.traces.alibaba import load_pods

        trace = load_pods(p)
        shares = [int(m) for k, m in zip(trace.num_gpu.tolist(), trace.gpu_milli.tolist(), strict=True) if k == 1]
        demand = demand_from_shares(shares)
        if not demand:
            raise InputError("the pod list has no fractional (gpu_milli < 1000) request", source=src)
        return [], demand, PlannerOptions()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError:
        raise InputError("cannot read file", source=src) from None
    node, data = yamldoc.compose(text, source=src, what="demand file", allow_empty=True)
    req = yamldoc.validate(PlanRequest, data, node, source=src, schema="demand file")
    gpus: list[GpuSlot] = []
    for i, g in enumerate(req.gpus):
        where = f"gpus.{i}"
        try:
            model = mig_gpu(g.model).model
        except UnknownNameError as exc:
            raise InputError(str(exc), source=src, line=yamldoc.line_of(node, ("gpus", i, "model")),
                             field=f"{where}.model") from None
        layout = tuple(Instance.parse(x, source=src) for x in g.layout)
        busy = tuple(Instance.parse(x, source=src) for x in g.busy)
        base = g.name or model.lower()
        names = [base] if g.count == 1 and g.name else [f"{base}-{j}" for j in range(g.count)]
        for n in names:
            slot = GpuSlot(n, model, layout, busy, g.drain_s)
            try:
                _validate(slot)
            except InputError as exc:
                raise InputError(exc.message, source=src, line=yamldoc.line_of(node, ("gpus", i)),
                                 field=where) from None
            gpus.append(slot)
    demand = [DemandClass(d.name or f"{d.gpu_milli}m", d.gpu_milli, d.count, d.gpu_memory_gib) for d in req.demand]
    if len({d.name for d in demand}) != len(demand):
        raise InputError("demand names must be unique (give each class a name)", source=src, field="demand")
    o = req.options
    opts = PlannerOptions(
        objective=o.objective,
        reconfig_s=o.reconfig_s,
        horizon_s=o.horizon_s,
        drain_weight=o.drain_weight,
        allow_drain=o.allow_drain,
        time_limit_s=o.time_limit_s,
    )
    return gpus, demand, opts


def _validate(slot: GpuSlot) -> None:
    from seedance.slicing.mig import layout_problems

    problems = layout_problems(mig_gpu(slot.model), slot.layout)
    if problems:
        raise InputError("illegal layout: " + "; ".join(problems))
    missing = [str(i) for i in slot.busy if i not in slot.layout]
    if missing:
        raise InputError(f"busy instances not in the layout: {', '.join(missing)}")


def parse_gpu_pool(items: list[str] | None) -> list[GpuSlot]:
    """``["A100-80GB:64"]`` → 64 idle ``A100-80GB`` slots (``--gpus``)."""
    out: list[GpuSlot] = []
    for item in items or []:
        for part in (x.strip() for x in item.split(",")):
            if not part:
                continue
            model, _, count = part.partition(":")
            try:
                name = mig_gpu(model).model
            except UnknownNameError as exc:
                raise InputError(str(exc), source="--gpus") from None
            if count and not count.strip().isdigit():
                raise InputError(f"expected MODEL[:COUNT], got {part!r}", source="--gpus")
            n = int(count) if count else 1
            if n < 1:
                raise InputError(f"count must be >= 1 in {part!r}", source="--gpus")
            start = sum(1 for s in out if s.model == name)
            out.extend(GpuSlot(f"{name.lower()}-{start + i}", name) for i in range(n))
    return out

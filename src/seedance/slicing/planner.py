"""MIG geometry planner: per-GPU layouts for a demand mix, with OR-Tools CP-SAT.

NOTE(seedance): the model, once.
  Variables: ``x[g, k]`` = 1 when GPU ``g`` carries placement ``k = (profile, start)`` (every
  legal start of every non-``+me`` profile of the GPU's model); ``keep[g]`` = 1 when GPU ``g``
  keeps its current layout; ``y[c, t]`` = requests of demand class ``c`` served by instances of
  slice type ``t = (GPU model, profile)``.
  Constraints: per GPU and memory slice, at most one placement covers it (no overlap); per
  profile at most its instance count; ``keep[g] ⇒ x[g] = current layout``; a GPU with busy
  instances keeps its layout unless draining is allowed (repartitioning happens only once the
  GPU is idle: after ``drain_s``); ``Σ_c y[c, t] ≤`` free instances of type ``t`` (busy instances
  of kept GPUs are not free); ``Σ_t y[c, t] ≤ count[c]``; ``y[c, t] = 0`` unless ``t`` covers
  ``c`` (compute slices ≥ ``ceil(7·milli/1000)`` and usable memory ≥ the class's need).
  Objective: maximise served value (GPU-milli, or requests) minus, for every GPU that changes,
  ``drain_weight · 1000 · (drain_s + reconfig_s) / horizon_s`` — the GPU's capacity lost while it
  drains and is reconfigured, spread over the planning horizon; ties go to fewer changes.
  Identical GPUs are ordered (lexicographic layout codes) to cut symmetry.
  Warm start: the same problem over groups of identical GPUs (how many take each maximal
  geometry) is exact and tiny, so CP-SAT proves its optimum quickly; its solution is a complete
  hint for the per-GPU model, and the plan returned is never worse than it nor than the best
  single fixed geometry. On pools of hundreds of GPUs the per-GPU model's own bound is weak and
  optimality rests on the aggregate model (``MigPlan.aggregate_status``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ortools.graph.python import min_cost_flow
from ortools.sat.python import cp_model

from seedance.core.errors import InputError
from seedance.core.resources import MILLI_PER_GPU
from seedance.slicing.mig import (
    COMPUTE_SLICES,
    MEMORY_SLICES,
    Instance,
    Layout,
    MigGpu,
    MigProfile,
    enumerate_layouts,
    geometry_name,
    layout_problems,
    mig_gpu,
)

Objective = Literal["milli", "requests"]


@dataclass(frozen=True, slots=True)
class DemandClass:
    """Requests of one shape that should be served at once.

    Attributes:
        name: Label in reports.
        gpu_milli: Share of one GPU each request asks for (1..1000).
        count: Number of such requests.
        gpu_memory_gib: GPU memory each needs, when known.
    """

    name: str
    gpu_milli: int
    count: int
    gpu_memory_gib: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.gpu_milli <= MILLI_PER_GPU:
            raise ValueError(f"demand {self.name!r}: gpu_milli must be within 1..1000")
        if self.count < 0:
            raise ValueError(f"demand {self.name!r}: count must be >= 0")

    @property
    def compute_need(self) -> int:
        """Compute slices a MIG instance needs to cover the share: ``ceil(7 · milli / 1000)``."""
        return -(-COMPUTE_SLICES * self.gpu_milli // MILLI_PER_GPU)


@dataclass(frozen=True, slots=True)
class GpuSlot:
    """One MIG-mode GPU as the planner sees it.

    Attributes:
        name: Label (``node/gpu``).
        model: MIG GPU model (catalog name or alias).
        layout: Current GPU instances.
        busy: Instances of ``layout`` running work now (they cannot be touched).
        drain_s: Seconds until the busy instances finish (the wait before a repartition).
    """

    name: str
    model: str
    layout: tuple[Instance, ...] = ()
    busy: tuple[Instance, ...] = ()
    drain_s: float = 0.0

    @property
    def idle(self) -> bool:
        """No instance of the GPU runs work."""
        return not self.busy


@dataclass(frozen=True, slots=True)
class PlannerOptions:
    """Knobs of :func:`plan_geometries`.

    Attributes:
        objective: ``"milli"`` maximises served GPU-milli; ``"requests"`` the number of requests
            served (each worth 1000, a GPU's capacity, against the change cost).
        reconfig_s: Seconds to destroy and create the instances of an idle GPU.
        horizon_s: Planning horizon; converts drain and reconfiguration seconds into lost capacity.
        drain_weight: Multiplier of the change cost (0: repartitioning is free).
        allow_drain: Whether a busy GPU may be planned for drain-then-repartition.
        time_limit_s: CP-SAT wall-time limit.
        workers: CP-SAT search workers.
        seed: CP-SAT random seed.
        symmetry_breaking: Order identical GPUs by layout code.
    """

    objective: Objective = "milli"
    reconfig_s: float = 30.0
    horizon_s: float = 3600.0
    drain_weight: float = 1.0
    allow_drain: bool = True
    time_limit_s: float = 10.0
    workers: int = 2
    seed: int = 0
    symmetry_breaking: bool = True

    def change_cost(self, slot: GpuSlot) -> int:
        """Objective units lost when ``slot`` is repartitioned (rounded to an integer)."""
        seconds = self.reconfig_s + (slot.drain_s if slot.busy else 0.0)
        return int(round(self.drain_weight * MILLI_PER_GPU * seconds / self.horizon_s))


@dataclass(frozen=True, slots=True)
class GpuPlan:
    """The plan for one GPU."""

    name: str
    model: str
    layout: Layout
    previous: Layout
    action: str  # "keep" | "repartition" | "drain-repartition"
    cost: int
    serves: Mapping[str, int] = field(default_factory=dict)  # class name -> requests on this GPU

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "gpu": self.name,
            "model": self.model,
            "layout": [str(i) for i in self.layout],
            "geometry": geometry_name(self.layout),
            "previous": [str(i) for i in self.previous],
            "action": self.action,
            "change_cost": self.cost,
            "serves": dict(self.serves),
        }


@dataclass(frozen=True, slots=True)
class Fit:
    """How much of a demand mix a set of instances serves at once."""

    served: Mapping[str, int]
    served_requests: int
    served_milli: int
    demand_requests: int
    demand_milli: int

    @property
    def served_requests_pct(self) -> float:
        """Served requests as % of the demand's requests."""
        return round(100.0 * self.served_requests / self.demand_requests, 2) if self.demand_requests else 100.0

    @property
    def served_milli_pct(self) -> float:
        """Served GPU-milli as % of the demand's GPU-milli."""
        return round(100.0 * self.served_milli / self.demand_milli, 2) if self.demand_milli else 100.0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "served_requests": self.served_requests,
            "served_milli": self.served_milli,
            "demand_requests": self.demand_requests,
            "demand_milli": self.demand_milli,
            "served_requests_pct": self.served_requests_pct,
            "served_milli_pct": self.served_milli_pct,
            "served": dict(self.served),
        }


@dataclass(frozen=True, slots=True)
class MigPlan:
    """A planner result.

    Attributes:
        gpus: Per-GPU layouts and actions, in input order.
        fit: What the planned layouts serve at once.
        change_cost: Total change cost (objective units).
        objective: Served value − change cost.
        bound: The per-GPU CP-SAT model's upper bound on the objective.
        status: Status of the per-GPU CP-SAT model (``OPTIMAL``, ``FEASIBLE``), or ``WARM-START``
            when its search ended without improving on the warm start, which is then returned.
        aggregate_status: Status of the symmetric warm-start model (geometry counts per group of
            identical GPUs), ``OPTIMAL`` when it proved its optimum.
        aggregate_objective: That model's objective.
        best_fixed_geometry: The best single geometry on every changeable GPU.
        best_fixed_value: Its served value under the objective.
        wall_s: Total planning time.
    """

    gpus: tuple[GpuPlan, ...]
    fit: Fit
    change_cost: int
    objective: int
    bound: float
    status: str
    aggregate_status: str
    aggregate_objective: int
    best_fixed_geometry: str
    best_fixed_value: int
    wall_s: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "status": self.status,
            "objective": self.objective,
            "bound": None if self.bound != self.bound else round(self.bound, 2),
            "change_cost": self.change_cost,
            "aggregate_status": self.aggregate_status,
            "aggregate_objective": self.aggregate_objective,
            "best_fixed_geometry": self.best_fixed_geometry,
            "best_fixed_value": self.best_fixed_value,
            "wall_s": round(self.wall_s, 3),
            "fit": self.fit.to_json(),
            "gpus": [g.to_json() for g in self.gpus],
        }


# ---------------------------------------------------------------------------- demand helpers


def covers(profile: MigProfile, demand: DemandClass) -> bool:
    """Whether an instance of ``profile`` can serve one request of ``demand``."""
    return profile.compute_slices >= demand.compute_need and (
        demand.gpu_memory_gib is None or profile.memory_gib >= demand.gpu_memory_gib
    )


def demand_from_shares(shares: Iterable[int], *, prefix: str = "") -> list[DemandClass]:
    """One class per distinct ``gpu_milli`` value of fractional requests (sorted by milli)."""
    counts: dict[int, int] = {}
    for m in shares:
        if 0 < int(m) < MILLI_PER_GPU:
            counts[int(m)] = counts.get(int(m), 0) + 1
    return [DemandClass(f"{prefix}{m}m", m, n) for m, n in sorted(counts.items())]


def _value(demand: DemandClass, objective: Objective) -> int:
    return demand.gpu_milli if objective == "milli" else MILLI_PER_GPU


def _check(demand: Sequence[DemandClass]) -> None:
    names = [d.name for d in demand]
    if len(set(names)) != len(names):
        raise InputError("demand class names must be unique", source="demand")


# ---------------------------------------------------------------------------- exact fit of fixed instances


def fit_instances(
    instances: Mapping[tuple[str, str], int], demand: Sequence[DemandClass], *, objective: Objective = "milli"
) -> Fit:
    """Exact best service of ``demand`` by a pool of instances (min-cost flow).

    Args:
        instances: ``(gpu model, profile name) -> number of free instances``.
        demand: The demand mix.
        objective: What to maximise (served GPU-milli or requests); among optimal assignments,
            small requests take the smallest instances.
    """
    _check(demand)
    served = {d.name: 0 for d in demand}
    for (ci, _), n in assign_instances(instances, demand, objective=objective).items():
        served[demand[ci].name] += n
    return _fit(served, demand)


def assign_instances(
    instances: Mapping[tuple[str, str], int], demand: Sequence[DemandClass], *, objective: Objective = "milli"
) -> dict[tuple[int, tuple[str, str]], int]:
    """The optimal assignment behind :func:`fit_instances`: ``(class index, type) -> requests``."""
    types = [((m, p), n) for (m, p), n in instances.items() if n > 0]
    profiles = [mig_gpu(m).profile(p) for (m, p), _ in types]
    flow = min_cost_flow.SimpleMinCostFlow()
    src, sink = 0, 1
    cls0 = 2
    typ0 = cls0 + len(demand)
    total = sum(d.count for d in demand)
    # value first; among equal values, fewer compute slices (small requests on small instances)
    weight = COMPUTE_SLICES * total + 1
    for i, d in enumerate(demand):
        flow.add_arc_with_capacity_and_unit_cost(src, cls0 + i, d.count, 0)
        for j, p in enumerate(profiles):
            if covers(p, d):
                flow.add_arc_with_capacity_and_unit_cost(
                    cls0 + i, typ0 + j, d.count, -_value(d, objective) * weight + p.compute_slices
                )
    for j, (_, n) in enumerate(types):
        flow.add_arc_with_capacity_and_unit_cost(typ0 + j, sink, n, 0)
    flow.add_arc_with_capacity_and_unit_cost(src, sink, total, 0)
    flow.set_node_supply(src, total)
    flow.set_node_supply(sink, -total)
    status = flow.solve()
    if status != flow.OPTIMAL:
        raise RuntimeError(f"min-cost flow failed with status {status}")
    out: dict[tuple[int, tuple[str, str]], int] = {}
    for a in range(flow.num_arcs()):
        tail, head = flow.tail(a), flow.head(a)
        if cls0 <= tail < typ0 and head >= typ0 and flow.flow(a):
            out[(tail - cls0, types[head - typ0][0])] = flow.flow(a)
    return out


def _fit(served: Mapping[str, int], demand: Sequence[DemandClass]) -> Fit:
    by_name = {d.name: d for d in demand}
    return Fit(
        served=dict(served),
        served_requests=sum(served.values()),
        served_milli=sum(n * by_name[c].gpu_milli for c, n in served.items()),
        demand_requests=sum(d.count for d in demand),
        demand_milli=sum(d.count * d.gpu_milli for d in demand),
    )


def fixed_geometry_fit(
    gpu: MigGpu, layout: Layout, n_gpus: int, demand: Sequence[DemandClass], *, objective: Objective = "milli"
) -> Fit:
    """What ``n_gpus`` GPUs all cut the same way (``layout``) serve of ``demand`` at once."""
    inst: dict[tuple[str, str], int] = {}
    for i in layout:
        inst[(gpu.model, i.profile)] = inst.get((gpu.model, i.profile), 0) + n_gpus
    return fit_instances(inst, demand, objective=objective)


@dataclass(frozen=True, slots=True)
class GeometryFit:
    """A single fixed geometry applied to every GPU, and what it serves."""

    layout: Layout
    fit: Fit

    @property
    def name(self) -> str:
        """The geometry's profiles, largest first."""
        return geometry_name(self.layout)


def rank_fixed_geometries(
    gpu: MigGpu, n_gpus: int, demand: Sequence[DemandClass], *, objective: Objective = "milli"
) -> list[GeometryFit]:
    """Every maximal legal geometry of ``gpu`` (one per distinct profile multiset), best first."""
    seen: dict[str, Layout] = {}
    for layout in enumerate_layouts(gpu, maximal=True):
        seen.setdefault(geometry_name(layout), layout)
    out = [
        GeometryFit(layout, fixed_geometry_fit(gpu, layout, n_gpus, demand, objective=objective))
        for layout in seen.values()
    ]
    key = (
        (lambda g: (g.fit.served_milli, g.fit.served_requests))
        if objective == "milli"
        else (lambda g: (g.fit.served_requests, g.fit.served_milli))
    )
    out.sort(key=key, reverse=True)
    return out


# ---------------------------------------------------------------------------- the CP-SAT planner


def plan_geometries(
    gpus: Sequence[GpuSlot], demand: Sequence[DemandClass], options: PlannerOptions | None = None
) -> MigPlan:
    """Choose a MIG layout per GPU for ``demand`` (fresh plan, or a replan of current layouts).

    Args:
        gpus: The MIG-mode GPUs with their current layouts, busy instances and drain times.
        demand: What should be served at once (pending requests; running work is in ``busy``).
        options: Objective, change-cost and solver settings.

    Raises:
        InputError: a current layout is illegal, a busy instance is not in its layout, or a demand
            name repeats.
    """
    opts = options or PlannerOptions()
    _check(demand)
    t0 = time.perf_counter()
    specs: dict[str, MigGpu] = {}
    for s in gpus:
        specs.setdefault(mig_gpu(s.model).model, mig_gpu(s.model))
        _check_slot(s)
    model = cp_model.CpModel()
    x: list[list[Any]] = []  # per GPU, per placement
    cands: list[list[tuple[MigProfile, int]]] = []
    keep: list[Any] = []
    cost = [opts.change_cost(s) for s in gpus]
    types: list[tuple[str, str]] = []
    type_index: dict[tuple[str, str], int] = {}
    for gname, g in specs.items():
        for p in g.planning_profiles():
            type_index[(gname, p.name)] = len(types)
            types.append((gname, p.name))
    cap_terms: list[list[Any]] = [[] for _ in types]
    cap_busy: list[list[tuple[Any, int]]] = [[] for _ in types]
    for gi, s in enumerate(gpus):
        g = mig_gpu(s.model)
        ks = list(g.placements(media=False))
        cands.append(ks)
        xs = [model.new_bool_var(f"x{gi}_{k}") for k in range(len(ks))]
        x.append(xs)
        for slot in range(MEMORY_SLICES):
            covering = [xs[k] for k, (p, st) in enumerate(ks) if p.mask(st) >> slot & 1]
            if len(covering) > 1:
                model.add_at_most_one(covering)
        for p in g.planning_profiles():
            mine = [xs[k] for k, (q, _) in enumerate(ks) if q.name == p.name]
            if len(mine) > p.max_instances:
                model.add(sum(mine) <= p.max_instances)
        kv = model.new_bool_var(f"keep{gi}")
        keep.append(kv)
        current = {(i.profile, i.start) for i in s.layout}
        for k, (p, st) in enumerate(ks):
            if (p.name, st) in current:
                model.add_implication(kv, xs[k])
            else:
                model.add_implication(kv, xs[k].Not())
        if s.busy and not opts.allow_drain:
            model.add(kv == 1)
        for k, (p, _) in enumerate(ks):
            cap_terms[type_index[(g.model, p.name)]].append(xs[k])
        busy_counts: dict[str, int] = {}
        for i in s.busy:
            busy_counts[i.profile] = busy_counts.get(i.profile, 0) + 1
        for pname, n in busy_counts.items():
            cap_busy[type_index[(g.model, pname)]].append((kv, n))
    if opts.symmetry_breaking:
        _break_symmetry(model, gpus, x)
    # demand assignment
    y: dict[tuple[int, int], Any] = {}
    for ci, d in enumerate(demand):
        for ti, (gname, pname) in enumerate(types):
            if d.count and covers(specs[gname].profile(pname), d):
                y[(ci, ti)] = model.new_int_var(0, d.count, f"y{ci}_{ti}")
        served_c = [v for (c, _), v in y.items() if c == ci]
        if served_c:
            model.add(sum(served_c) <= d.count)
    for ti in range(len(types)):
        use = [v for (_, t), v in y.items() if t == ti]
        if use:
            model.add(sum(use) <= sum(cap_terms[ti]) - sum(n * kv for kv, n in cap_busy[ti]))
    value = sum(_value(demand[c], opts.objective) * v for (c, _), v in y.items())
    penalty = sum(cost[i] * (1 - keep[i]) for i in range(len(gpus)))
    changes = sum(1 - kv for kv in keep)
    scale = len(gpus) + 1
    model.maximize((value - penalty) * scale - changes)
    # warm start: the symmetric model's optimum (never worse than the best single fixed geometry)
    fixed = _best_fixed(gpus, demand, opts, specs)
    agg, agg_status = _aggregate_plan(gpus, demand, opts, specs)
    warm = agg if agg.objective >= fixed.objective else fixed
    _apply_hint(model, warm, gpus, cands, x, keep, y, types, demand, opts)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = opts.time_limit_s
    solver.parameters.num_search_workers = max(1, opts.workers)
    solver.parameters.random_seed = opts.seed
    status = solver.solve(model)
    extra = {
        "aggregate_status": agg_status,
        "aggregate_objective": agg.objective,
        "best_fixed_geometry": fixed.geometry,
        "best_fixed_value": fixed.value,
    }
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        layouts = [
            tuple(
                sorted(
                    (Instance(p.name, st) for k, (p, st) in enumerate(cands[gi]) if solver.value(x[gi][k])),
                    key=lambda i: i.start,
                )
            )
            for gi in range(len(gpus))
        ]
        result = _finish(
            gpus, layouts, demand, opts, solver.best_objective_bound / scale, solver.status_name(status), t0, extra
        )
        if result.objective >= warm.objective:
            return result
    return _finish(
        gpus,
        list(warm.layouts),
        demand,
        opts,
        solver.best_objective_bound / scale if status != cp_model.UNKNOWN else float("nan"),
        "WARM-START",
        t0,
        extra,
    )


def _check_slot(s: GpuSlot) -> None:
    g = mig_gpu(s.model)
    problems = layout_problems(g, s.layout)
    if problems:
        raise InputError("; ".join(problems), source=f"gpu {s.name}", field="layout")
    missing = [str(i) for i in s.busy if i not in s.layout]
    if missing:
        raise InputError(f"busy instances not in the layout: {', '.join(missing)}", source=f"gpu {s.name}")
    if s.drain_s < 0:
        raise InputError("drain_s must be >= 0", source=f"gpu {s.name}", field="drain_s")


def _break_symmetry(model: cp_model.CpModel, gpus: Sequence[GpuSlot], x: list[list[Any]]) -> None:
    """Identical GPUs (same model, layout, busy set, drain) take layouts in decreasing code order."""
    for members in _symmetry_groups(gpus):
        for a, b in zip(members, members[1:], strict=False):
            code_a = sum((1 << k) * v for k, v in enumerate(x[a]))
            code_b = sum((1 << k) * v for k, v in enumerate(x[b]))
            model.add(code_a >= code_b)


@dataclass(frozen=True, slots=True)
class _Hint:
    layouts: tuple[Layout, ...]
    geometry: str
    value: int
    objective: int


def _served_value(fit: Fit, objective: Objective) -> int:
    return fit.served_milli if objective == "milli" else MILLI_PER_GPU * fit.served_requests


def _sorted(layout: Iterable[Instance]) -> Layout:
    return tuple(sorted(layout, key=lambda i: i.start))


def _free_instances(gpus: Sequence[GpuSlot], layouts: Sequence[Layout]) -> dict[tuple[str, str], int]:
    """Instances free to serve the demand: all of a changed GPU's, a kept GPU's minus its busy ones."""
    inst: dict[tuple[str, str], int] = {}
    for s, layout in zip(gpus, layouts, strict=True):
        model = mig_gpu(s.model).model
        busy = list(s.busy) if tuple(layout) == _sorted(s.layout) else []
        for i in layout:
            if i in busy:
                busy.remove(i)
                continue
            inst[(model, i.profile)] = inst.get((model, i.profile), 0) + 1
    return inst


def _objective(
    gpus: Sequence[GpuSlot], layouts: Sequence[Layout], demand: Sequence[DemandClass], opts: PlannerOptions
) -> tuple[Fit, int, int]:
    fit = fit_instances(_free_instances(gpus, layouts), demand, objective=opts.objective)
    penalty = sum(opts.change_cost(s) for s, lay in zip(gpus, layouts, strict=True) if tuple(lay) != _sorted(s.layout))
    return fit, penalty, _served_value(fit, opts.objective) - penalty


def _movable(s: GpuSlot, opts: PlannerOptions) -> bool:
    return s.idle or opts.allow_drain


def _best_fixed(
    gpus: Sequence[GpuSlot], demand: Sequence[DemandClass], opts: PlannerOptions, specs: Mapping[str, MigGpu]
) -> _Hint:
    """The best plan that cuts every changeable GPU of a model the same way (or changes nothing)."""
    current = tuple(_sorted(s.layout) for s in gpus)
    fit, _, obj = _objective(gpus, current, demand, opts)
    best = _Hint(current, "(current)", _served_value(fit, opts.objective), obj)
    for gname, g in specs.items():
        idx = [i for i, s in enumerate(gpus) if _movable(s, opts) and mig_gpu(s.model).model == gname]
        if not idx:
            continue
        for cand in rank_fixed_geometries(g, len(idx), demand, objective=opts.objective):
            layouts = list(current)
            for i in idx:
                layouts[i] = _sorted(cand.layout)
            fit, _, obj = _objective(gpus, layouts, demand, opts)
            if obj > best.objective:
                best = _Hint(tuple(layouts), cand.name, _served_value(fit, opts.objective), obj)
    return best


def _representatives(g: MigGpu) -> list[Layout]:
    """One positional layout per distinct profile multiset among the maximal layouts."""
    seen: dict[str, Layout] = {}
    for layout in enumerate_layouts(g, maximal=True):
        seen.setdefault(geometry_name(layout), _sorted(layout))
    return list(seen.values())


def _aggregate_plan(
    gpus: Sequence[GpuSlot], demand: Sequence[DemandClass], opts: PlannerOptions, specs: Mapping[str, MigGpu]
) -> tuple[_Hint, str]:
    """The same problem over groups of identical GPUs: how many of each group take each geometry.

    Exact for the planning problem (identical GPUs are interchangeable and a maximal layout serves
    at least what any of its subsets serves), and small (groups × ~30 geometries), so CP-SAT
    solves it to optimality in well under a second; it warm-starts the per-GPU model.
    """
    groups: dict[tuple[Any, ...], list[int]] = {}
    for gi, s in enumerate(gpus):
        key = (mig_gpu(s.model).model, _sorted(s.layout), tuple(sorted(s.busy)), s.drain_s)
        groups.setdefault(key, []).append(gi)
    reps = {name: _representatives(g) for name, g in specs.items()}
    m = cp_model.CpModel()
    types = [(gname, p.name) for gname, g in specs.items() for p in g.planning_profiles()]
    tindex = {t: i for i, t in enumerate(types)}
    cap: list[list[Any]] = [[] for _ in types]
    z: dict[tuple[Any, ...], list[tuple[Layout, Any]]] = {}
    penalty_terms: list[Any] = []
    change_terms: list[Any] = []
    for key, members in groups.items():
        gname, cur = key[0], key[1]
        first = gpus[members[0]]
        options_ = [cur]
        if _movable(first, opts):
            options_ += [r for r in reps[gname] if r != cur]
        vars_ = []
        for li, lay in enumerate(options_):
            v = m.new_int_var(0, len(members), f"z{len(z)}_{li}")
            vars_.append((lay, v))
            counts: dict[str, int] = {}
            for i in lay:
                counts[i.profile] = counts.get(i.profile, 0) + 1
            if li == 0:
                for i in first.busy:
                    counts[i.profile] -= 1
            for pname, n in counts.items():
                if n:
                    cap[tindex[(gname, pname)]].append(n * v)
            if li > 0:
                penalty_terms.append(opts.change_cost(first) * v)
                change_terms.append(v)
        m.add(sum(v for _, v in vars_) == len(members))
        z[key] = vars_
    y: dict[tuple[int, int], Any] = {}
    for ci, d in enumerate(demand):
        for ti, (gname, pname) in enumerate(types):
            if d.count and covers(specs[gname].profile(pname), d):
                y[(ci, ti)] = m.new_int_var(0, d.count, f"y{ci}_{ti}")
        row = [v for (c, _), v in y.items() if c == ci]
        if row:
            m.add(sum(row) <= d.count)
    for ti in range(len(types)):
        col = [v for (_, t), v in y.items() if t == ti]
        if col:
            m.add(sum(col) <= sum(cap[ti]))
    value = sum(_value(demand[c], opts.objective) * v for (c, _), v in y.items())
    scale = len(gpus) + 1
    m.maximize((value - sum(penalty_terms)) * scale - sum(change_terms))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(1.0, opts.time_limit_s)
    solver.parameters.num_search_workers = max(1, opts.workers)
    solver.parameters.random_seed = opts.seed
    status = solver.solve(m)
    layouts: list[Layout] = [_sorted(s.layout) for s in gpus]
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        for key, members in groups.items():
            it = iter(members)
            for lay, v in z[key]:
                for _ in range(int(solver.value(v))):
                    layouts[next(it)] = lay
    fit, _, obj = _objective(gpus, layouts, demand, opts)
    name = "mixed" if len({geometry_name(lay) for lay in layouts}) > 1 else geometry_name(layouts[0] if layouts else ())
    return _Hint(tuple(layouts), name, _served_value(fit, opts.objective), obj), solver.status_name(status)


def _symmetry_groups(gpus: Sequence[GpuSlot]) -> list[list[int]]:
    groups: dict[tuple[Any, ...], list[int]] = {}
    for gi, s in enumerate(gpus):
        key = (mig_gpu(s.model).model, tuple(sorted(s.layout)), tuple(sorted(s.busy)), s.drain_s)
        groups.setdefault(key, []).append(gi)
    return list(groups.values())


def _code(cands: list[tuple[MigProfile, int]], layout: Layout) -> int:
    chosen = {(i.profile, i.start) for i in layout}
    return sum(1 << k for k, (p, st) in enumerate(cands) if (p.name, st) in chosen)


def _apply_hint(
    model: cp_model.CpModel,
    hint: _Hint,
    gpus: Sequence[GpuSlot],
    cands: list[list[tuple[MigProfile, int]]],
    x: list[list[Any]],
    keep: list[Any],
    y: Mapping[tuple[int, int], Any],
    types: list[tuple[str, str]],
    demand: Sequence[DemandClass],
    opts: PlannerOptions,
) -> None:
    """A complete, feasible hint: layouts (ordered to satisfy symmetry breaking) and the flow's y."""
    layouts = list(hint.layouts)
    if opts.symmetry_breaking:
        for members in _symmetry_groups(gpus):
            ordered = sorted((layouts[i] for i in members), key=lambda lay: -_code(cands[members[0]], lay))
            for i, lay in zip(members, ordered, strict=True):
                layouts[i] = lay
    for gi, layout in enumerate(layouts):
        chosen = {(i.profile, i.start) for i in layout}
        for k, (p, st) in enumerate(cands[gi]):
            model.add_hint(x[gi][k], (p.name, st) in chosen)
        model.add_hint(keep[gi], tuple(layout) == _sorted(gpus[gi].layout))
    assigned = assign_instances(_free_instances(gpus, layouts), demand, objective=opts.objective)
    for (ci, ti), v in y.items():
        model.add_hint(v, assigned.get((ci, types[ti]), 0))


def _finish(
    gpus: Sequence[GpuSlot],
    layouts: Sequence[Layout],
    demand: Sequence[DemandClass],
    opts: PlannerOptions,
    bound: float,
    status: str,
    t0: float,
    extra: Mapping[str, Any],
) -> MigPlan:
    fit, penalty, obj = _objective(gpus, layouts, demand, opts)
    plans = []
    for s, layout in zip(gpus, layouts, strict=True):
        prev = _sorted(s.layout)
        if tuple(layout) == prev:
            action, c = "keep", 0
        else:
            action, c = ("drain-repartition" if s.busy else "repartition"), opts.change_cost(s)
        plans.append(GpuPlan(s.name, mig_gpu(s.model).model, tuple(layout), prev, action, c))
    plans = _attach_service(plans, gpus, fit, demand)
    return MigPlan(
        gpus=tuple(plans),
        fit=fit,
        change_cost=penalty,
        objective=obj,
        bound=bound,
        status=status,
        aggregate_status=str(extra["aggregate_status"]),
        aggregate_objective=int(extra["aggregate_objective"]),
        best_fixed_geometry=str(extra["best_fixed_geometry"]),
        best_fixed_value=int(extra["best_fixed_value"]),
        wall_s=time.perf_counter() - t0,
    )


def _attach_service(
    plans: list[GpuPlan], gpus: Sequence[GpuSlot], fit: Fit, demand: Sequence[DemandClass]
) -> list[GpuPlan]:
    """Spread the served requests over the free instances, largest needs first (for the report)."""
    left = dict(fit.served)
    order = sorted(demand, key=lambda d: (-d.compute_need, -d.gpu_milli))
    slots: list[tuple[int, MigProfile]] = []
    for gi, (p, s) in enumerate(zip(plans, gpus, strict=True)):
        g = mig_gpu(s.model)
        busy = list(s.busy) if p.action == "keep" else []
        for i in p.layout:
            if i in busy:
                busy.remove(i)
                continue
            slots.append((gi, g.profile(i.profile)))
    slots.sort(key=lambda e: e[1].compute_slices)
    serves: list[dict[str, int]] = [{} for _ in plans]
    for d in order:
        for idx, (gi, prof) in enumerate(slots):
            if left.get(d.name, 0) <= 0:
                break
            if gi < 0 or not covers(prof, d):
                continue
            serves[gi][d.name] = serves[gi].get(d.name, 0) + 1
            left[d.name] -= 1
            slots[idx] = (-1, prof)
    return [
        GpuPlan(p.name, p.model, p.layout, p.previous, p.action, p.cost, dict(sorted(sv.items())))
        for p, sv in zip(plans, serves, strict=True)
    ]


def pool_of(model: str, count: int, *, prefix: str = "gpu") -> list[GpuSlot]:
    """``count`` idle, unpartitioned GPUs of ``model`` named ``gpu-0, gpu-1, ...``."""
    name = mig_gpu(model).model
    return [GpuSlot(f"{prefix}-{i}", name) for i in range(count)]

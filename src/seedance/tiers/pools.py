"""Tier node pools: how much each tier needs, and which nodes get which tier's labels.

NOTE(seedance): the labelling rule, stated once (docs/tiers.md shows it on the default trace).
  * Demand of a tier, from the replayed trace (capacity planning with hindsight): its peak
    concurrent request in GPUs (after ``adapt_request``: a Gold share counts as a whole GPU), CPU
    and memory; per whole-GPU count k, the peak number of concurrent k-GPU pods and their 90th
    percentile CPU and memory (a node hosts min(GPUs // k, CPU // cpu, memory // mem) of them);
    and the distinct request shapes.
  * Coverage of a tier = its pool's capacity / demand, per dimension (GPU, CPU, memory, and the
    k-GPU slots of each class); a tier's coverage is the smallest.
  * Every node joins exactly one pool. Nodes of one kind (model, GPUs, CPU, memory) are
    interchangeable, so a small integer program (CP-SAT, one worker: deterministic) chooses how
    many of each kind each tier gets, in stages that each keep the previous optimum:
    ``priority`` (default): for each tier, highest first, maximise (request shapes that some
    node of its pool can host, then the sum of its per-dimension coverages capped at 1); then,
    for both rules, maximise the smallest coverage over tiers; ties give spare GPUs to higher
    tiers (lower tiers may borrow them, Gold may not). ``proportional`` skips the per-tier
    stages (homes of every tier first, then the max-min coverage).
  * Labels: the tier's ``node_labels`` (first value of each key) plus a ``gpu.mode`` the tier's
    slice backends allow when the tier does not fix it (``shared`` when it allows MPS or
    time-slicing, else ``mig`` on MIG-capable models, else ``exclusive``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import CATALOG, GpuCatalog
from seedance.core.cluster import ClusterSpec, NodeSpec
from seedance.core.errors import InputError
from seedance.core.resources import SliceBackend
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig, TierSpec
from seedance.tiers.filters import LABEL_MODE, MODE_EXCLUSIVE, MODE_MIG, MODE_SHARED, adapt_request
from seedance.traces.schema import PodTrace

POOL_RULES = ("priority", "proportional")


@dataclass(frozen=True, slots=True)
class TierDemand:
    """Peak concurrent demand of one tier over a trace.

    Attributes:
        tier: Tier name.
        pods: Number of pods of the tier.
        gpus: Peak concurrent GPUs (after tier adaptation).
        cpu_milli: Peak concurrent CPU.
        memory_mib: Peak concurrent memory.
        max_gpus_per_pod: Largest GPU count of one pod.
        classes: Per whole-GPU count k of its pods: ``(k, CPU milli, memory MiB, peak pods)``, the
            90th percentile CPU and memory of those pods and their peak concurrent number.
        shapes: Distinct ``(GPUs, CPU milli, memory MiB)`` of its pods, largest first.
    """

    tier: str
    pods: int
    gpus: float
    cpu_milli: float
    memory_mib: float
    max_gpus_per_pod: int
    classes: tuple[tuple[int, int, int, float], ...] = ()
    shapes: tuple[tuple[int, int, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "pods": self.pods,
            "peak_gpus": round(self.gpus, 3),
            "peak_cpu_cores": round(self.cpu_milli / 1000, 3),
            "peak_memory_gib": round(self.memory_mib / 1024, 3),
            "max_gpus_per_pod": self.max_gpus_per_pod,
            "classes": [
                {"gpus": k, "cpu_milli_p90": c, "memory_mib_p90": m, "peak_pods": round(n, 3)}
                for k, c, m, n in self.classes
            ],
        }


def pod_tiers(trace: PodTrace, tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> NDArray[np.int64]:
    """Tier index (position in ``tier_config.names()``) of every pod, from its QoS class."""
    names = tier_config.names()
    idx = {n: i for i, n in enumerate(names)}
    by_qos = {q: idx[tier_config.tier_of(str(q))] for q in set(trace.qos.tolist())}
    return np.array([by_qos[q] for q in trace.qos.tolist()], dtype=np.int64)


def _peak(start: NDArray[np.float64], end: NDArray[np.float64], amount: NDArray[np.float64]) -> float:
    if amount.size == 0:
        return 0.0
    t = np.concatenate([start, end])
    d = np.concatenate([amount, -amount])
    order = np.lexsort((d, t))  # at equal times departures (negative) first
    return float(max(0.0, np.cumsum(d[order]).max()))


def tier_demand(trace: PodTrace, tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> dict[str, TierDemand]:
    """Peak concurrent demand of each tier (see the module docstring)."""
    if not trace.has_times:
        raise InputError("pool sizing needs creation_time and deletion_time for every pod", source=trace.source)
    tiers = pod_tiers(trace, tier_config)
    keys, reqs = trace.request_keys()
    out: dict[str, TierDemand] = {}
    for i, name in enumerate(tier_config.names()):
        m = tiers == i
        spec = tier_config.tiers[name]
        gpu_by_key = np.array([adapt_request(r, spec).total_gpu_milli / 1000 for r in reqs], dtype=np.float64)
        gpus = gpu_by_key[keys[m]] if reqs else np.zeros(0)
        s, e = trace.creation[m], trace.deletion[m]
        k = int(trace.num_gpu[m].max()) if m.any() else 0
        adapted = np.array([adapt_request(r, spec).gpu_milli for r in reqs], dtype=np.int64)
        whole = (adapted[keys[m]] == 1000) & (trace.num_gpu[m] > 0)
        classes = []
        for g in sorted(set(trace.num_gpu[m][whole].tolist())):
            c = whole & (trace.num_gpu[m] == g)
            classes.append((
                int(g),
                int(np.percentile(trace.cpu_milli[m][c], 90)),
                int(np.percentile(trace.memory_mib[m][c], 90)),
                _peak(s[c], e[c], np.ones(int(c.sum()))),
            ))
        shapes = {
            (r.num_gpu, r.cpu_milli, r.memory_mib)
            for r in (adapt_request(reqs[j], spec) for j in np.unique(keys[m]).tolist())
        }
        out[name] = TierDemand(
            tier=name,
            pods=int(m.sum()),
            gpus=_peak(s, e, gpus),
            cpu_milli=_peak(s, e, trace.cpu_milli[m].astype(np.float64)),
            memory_mib=_peak(s, e, trace.memory_mib[m].astype(np.float64)),
            max_gpus_per_pod=k,
            classes=tuple(classes),
            shapes=tuple(sorted(shapes, reverse=True)),
        )
    return out


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """Which tier each node of a labelled cluster serves, and how well each pool covers its demand."""

    rule: str
    node_tier: tuple[str, ...]
    demand: Mapping[str, TierDemand]
    gpus: Mapping[str, int]
    cpu_milli: Mapping[str, int]
    memory_mib: Mapping[str, int]
    slots: Mapping[str, tuple[int, ...]]

    def nodes(self, tier: str) -> int:
        """Number of nodes in ``tier``'s pool."""
        return sum(1 for t in self.node_tier if t == tier)

    def coverage(self, tier: str) -> float:
        """Pool capacity over peak demand, smallest over GPU, CPU and memory (``inf`` without demand)."""
        d = self.demand[tier]
        return _coverage(self.gpus[tier], self.cpu_milli[tier], self.memory_mib[tier], d, self.slots[tier])

    def to_json(self) -> dict[str, Any]:
        """JSON form: per tier nodes, GPUs, CPU, coverage and demand."""
        out: dict[str, Any] = {"rule": self.rule, "tiers": {}}
        total = sum(self.gpus.values()) or 1
        for t, d in self.demand.items():
            cov = self.coverage(t)
            out["tiers"][t] = {
                "nodes": self.nodes(t),
                "gpus": self.gpus[t],
                "gpu_share_pct": round(100.0 * self.gpus[t] / total, 2),
                "cpu_cores": self.cpu_milli[t] // 1000,
                "coverage": round(cov, 3) if math.isfinite(cov) else None,
                "demand": d.to_json(),
            }
        return out


def _coverage(gpus: float, cpu: float, mem: float, d: TierDemand, slots: tuple[int, ...] = ()) -> float:
    dims = [(gpus, d.gpus), (cpu, d.cpu_milli), (mem, d.memory_mib)]
    dims += [(float(n), cls[3]) for n, cls in zip(slots, d.classes, strict=True)]
    ratios = [cap / need for cap, need in dims if need > 0]
    return min(ratios) if ratios else math.inf


def node_labels_for(tier: str, spec: TierSpec, model: str | None, catalog: GpuCatalog = CATALOG) -> dict[str, str]:
    """Labels a node of ``tier``'s pool carries (see the module docstring)."""
    labels = {k: v[0] for k, v in spec.node_labels.items() if v}
    if LABEL_MODE not in labels:
        allowed = set(spec.allowed_backends)
        if spec.exclusive:
            mode = MODE_EXCLUSIVE
        elif allowed & {SliceBackend.MPS, SliceBackend.TIME_SLICING}:
            mode = MODE_SHARED
        elif SliceBackend.MIG in allowed and model is not None and catalog.resolve(model).mig:
            mode = MODE_MIG
        else:
            mode = MODE_EXCLUSIVE
        labels[LABEL_MODE] = mode
    return labels


def label_pools(
    spec: ClusterSpec,
    demand: Mapping[str, TierDemand],
    tier_config: TierConfig = DEFAULT_TIER_CONFIG,
    *,
    rule: str = "priority",
    catalog: GpuCatalog = CATALOG,
    time_limit_s: float = 5.0,
) -> tuple[ClusterSpec, PoolPlan]:
    """Label every node of ``spec`` into one tier's pool (see the module docstring).

    Args:
        spec: The cluster (existing labels are kept unless a tier label overwrites them).
        demand: Per tier demand (``tier_demand``).
        tier_config: The tiers.
        rule: ``priority`` (higher tiers reach coverage 1 first) or ``proportional``.
        catalog: GPU catalog (MIG capability).
        time_limit_s: Limit per solver stage (the models are tiny; it is a guard).

    Returns:
        The labelled cluster and the plan.
    """
    if rule not in POOL_RULES:
        raise InputError(f"unknown pool rule {rule!r}; valid: {', '.join(POOL_RULES)}", source="rule")
    names = [t for t in tier_config.names() if tier_config.tiers[t].node_labels]
    if not names:
        raise InputError("no tier has node_labels; nothing to label", source="tier_config")
    dem = {t: demand.get(t, TierDemand(t, 0, 0.0, 0.0, 0.0, 0)) for t in names}
    kinds: dict[tuple[str | None, int, int, int], list[int]] = {}
    for i, node in enumerate(spec.nodes):
        kinds.setdefault((node.gpu_model, node.gpu_count, node.cpu_milli, node.memory_mib), []).append(i)
    counts = _solve_pools(list(kinds), [len(v) for v in kinds.values()], names, dem, rule, time_limit_s)
    owner: list[str] = [""] * len(spec.nodes)
    for kind_idx, members in enumerate(kinds.values()):
        j = 0
        for t in names:  # within a kind, nodes go to tiers in trace order, highest tier first
            for i in members[j : j + counts[kind_idx][t]]:
                owner[i] = t
            j += counts[kind_idx][t]
    gpus = dict.fromkeys(names, 0)
    cpu = dict.fromkeys(names, 0)
    mem = dict.fromkeys(names, 0)
    slots = {t: [0] * len(dem[t].classes) for t in names}
    nodes = []
    for i, node in enumerate(spec.nodes):
        t = owner[i]
        gpus[t] += node.gpu_count
        cpu[t] += node.cpu_milli
        mem[t] += node.memory_mib
        for j, cls in enumerate(dem[t].classes):
            slots[t][j] += _slots(node.gpu_count, node.cpu_milli, node.memory_mib, cls)
        labels = {**dict(node.labels), **node_labels_for(t, tier_config.tiers[t], node.gpu_model, catalog)}
        nodes.append(
            NodeSpec(
                name=node.name,
                cpu_milli=node.cpu_milli,
                memory_mib=node.memory_mib,
                gpu_count=node.gpu_count,
                gpu_model=node.gpu_model,
                labels=labels,
            )
        )
    plan = PoolPlan(
        rule=rule,
        node_tier=tuple(owner),
        demand=dem,
        gpus=gpus,
        cpu_milli=cpu,
        memory_mib=mem,
        slots={t: tuple(v) for t, v in slots.items()},
    )
    return ClusterSpec(nodes=tuple(nodes), name=spec.name), plan


def _slots(gpus: int, cpu: int, mem: int, cls: tuple[int, int, int, float]) -> int:
    """Pods of a class ``(k GPUs, CPU, memory, _)`` one empty node can host."""
    k, c, m, _ = cls
    return min(gpus // k, cpu // c if c > 0 else gpus, mem // m if m > 0 else gpus)


_SCALE = 1000  # coverage in thousandths


def _solve_pools(
    kinds: list[tuple[str | None, int, int, int]],
    counts: list[int],
    names: list[str],
    dem: Mapping[str, TierDemand],
    rule: str,
    time_limit_s: float,
) -> list[dict[str, int]]:
    """How many nodes of each kind each tier gets (CP-SAT, deterministic: one worker).

    Stages, each fixing its optimum as a floor for the next: with ``priority``, for each tier
    highest first, maximise (shapes with a home, coverage capped at 1); then, for both rules,
    maximise (homes of every tier, for ``proportional``) and the smallest coverage over tiers.
    """
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    x = {
        (k, t): m.new_int_var(0, counts[k], f"x{k}_{t}") for k in range(len(kinds)) for t in names
    }
    for k in range(len(kinds)):
        m.add(sum(x[k, t] for t in names) == counts[k])
    top = _SCALE * 1000  # coverage is bounded by 1000 for the solver
    y: dict[str, Any] = {}
    capped: dict[str, Any] = {}
    homes: dict[str, Any] = {}
    for t in names:
        d = dem[t]
        y[t] = m.new_int_var(0, top, f"y_{t}")
        dims = (
            ([g for (_, g, _, _) in kinds], d.gpus),
            ([c for (_, _, c, _) in kinds], d.cpu_milli),
            ([mm for (_, _, _, mm) in kinds], d.memory_mib),
        ) + tuple(([_slots(g, c, mm, cls) for (_, g, c, mm) in kinds], cls[3]) for cls in d.classes)
        parts = []
        for j, (caps, need) in enumerate(dims):
            if need <= 0:
                continue
            need_i = max(1, int(math.ceil(need)))
            cap = sum(_SCALE * caps[k] * x[k, t] for k in range(len(kinds)))
            m.add(cap >= need_i * y[t])
            part = m.new_int_var(0, _SCALE, f"p_{t}_{j}")  # this dimension's coverage, capped at 1
            m.add(cap >= need_i * part)
            parts.append(part)
        capped[t] = sum(parts) if parts else 0
        hs = []
        for j, (ng, nc, nm) in enumerate(d.shapes):
            hosts = [k for k, (_, g, c, mm) in enumerate(kinds) if g >= ng and c >= nc and mm >= nm]
            if not hosts:
                continue
            h = m.new_bool_var(f"h_{t}_{j}")
            m.add(sum(x[k, t] for k in hosts) >= h)
            hs.append(h)
        homes[t] = sum(hs) if hs else 0

    def stage(objective: Any) -> cp_model.CpSolver:
        m.maximize(objective)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_time_in_seconds = time_limit_s
        status = solver.solve(m)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):  # pragma: no cover - always feasible
            raise InputError("pool planning found no assignment", source="label_pools")
        m.add(objective >= int(round(solver.objective_value)))
        return solver

    # one more home outweighs any coverage gain (every dimension's capped coverage is at most 1)
    weight = (3 + max(len(dem[t].classes) for t in names)) * _SCALE + 1
    if rule == "priority":
        for t in names:
            stage(weight * homes[t] + capped[t])
    else:
        stage(sum((len(names) - i) * weight * homes[t] + capped[t] for i, t in enumerate(names)))
    z = m.new_int_var(0, top, "z")
    for t in names:
        if dem[t].pods:
            m.add(z <= y[t])
    stage(z)
    # tie-break: spare GPUs to the higher tiers (lower tiers may borrow them, Gold may not)
    solver = stage(
        sum((len(names) - i) * kinds[k][1] * x[k, t] for i, t in enumerate(names) for k in range(len(kinds)))
    )
    return [{t: int(solver.value(x[k, t])) for t in names} for k in range(len(kinds))]

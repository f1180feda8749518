"""Offline bound: the least unallocated GPU % any placement could reach at 100% arrived.

NOTE(seedance): in inflation mode nothing departs, so whatever a policy has allocated after the
pods of a prefix arrived is a set of those pods that fits in the cluster at once. An upper bound
on the GPU of any simultaneously feasible subset of the prefix therefore bounds every policy's
allocation, whatever order or algorithm it uses. We compute it with a linear relaxation solved
by OR-Tools (GLOP):

  * pods are grouped into request types ``t`` (CPU, memory, GPU count, per-GPU milli, allowed
    models) with ``n_t`` arrivals; nodes into classes ``c`` of identical nodes (``N_c`` of them);
  * ``y[t, c] >= 0`` pods of type ``t`` on class ``c``; ``Σ_c y[t, c] <= n_t``;
  * per class, total CPU, memory and GPU milli fit: ``Σ_t r_t y[t, c] <= N_c R_c``;
  * whole-GPU pods use whole GPUs: ``Σ_t whole k_t y[t, c] <= N_c G_c``;
  * no node can hold more than ``m[t, c]`` pods of one type (by GPU, CPU and memory), and a
    pod fits a class only if one node of it could hold it: ``y[t, c] <= N_c m[t, c]``;
  * GPU shares are bin packing into GPUs of size 1: for dual-feasible functions ``f``
    (Fekete–Schepers ``f_k``, k = 1, 2, 3, and one pairing function per share size above one
    half), ``Σ_t share f(m_t) y[t, c] + Σ_t whole k_t y[t, c] <= N_c G_c``. The pairing cuts
    carry the trace's main loss: a 0.81 share leaves 0.19 that only tiny shares can use.
  Every constraint holds for any real placement, so the LP optimum is an upper bound on the
  allocation. The bound reported for column 100 averages ``min(arrived, LP)`` over the events
  that fall in that column (as the metric does) and is rounded down after allowing for the
  metric's two roundings, so it never exceeds a measured value.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from seedance.core.cluster import ClusterSpec
from seedance.core.resources import MILLI_PER_GPU
from seedance.sim.inflation import build_stream, sort_by_name
from seedance.traces.schema import PodTrace

DFF_KS = (1, 2, 3)


def dff(x: float, k: int) -> float:
    """Fekete–Schepers dual-feasible function: ``x`` if ``(k+1)x`` is whole, else ``floor((k+1)x)/k``.

    Any set of item sizes in [0, 1] that fits in one bin keeps ``Σ f(x) <= 1``.

    >>> dff(0.81, 1), dff(0.47, 1), dff(0.47, 2), dff(0.5, 1)
    (1.0, 0.0, 0.5, 0.5)
    """
    v = (k + 1) * x
    if abs(v - round(v)) < 1e-12:
        return x
    return math.floor(v) / k


def dff_pair(x: float, b: float) -> float:
    """Dual-feasible function for pairing: 1 if ``x >= 1-b``, ``x`` if ``b < x < 1-b``, 0 if ``x <= b`` (b < 1/2).

    An item of size ``>= 1-b`` can only share its bin with items ``<= b``, which count 0, so
    ``Σ f(x) <= 1`` over any bin.

    >>> dff_pair(0.81, 0.19), dff_pair(0.47, 0.19), dff_pair(0.16, 0.19)
    (1.0, 0.47, 0.0)
    """
    if x >= 1.0 - b - 1e-12:
        return 1.0
    return x if x > b + 1e-12 else 0.0


@dataclass(frozen=True, slots=True)
class BoundResult:
    """The bound for one pod sequence."""

    unallocated_pct: float
    lp_alloc_milli: float
    prefix_pods: int
    arrived_milli: int
    types: int
    classes: int


PodValue = Callable[[int, int, int, int, tuple[str | None, int, int, int]], float]
"""Value of one pod (cpu milli, memory MiB, GPU count, milli per GPU) on a node class (model, GPUs, cpu, mem)."""


def lp_max_allocation(
    spec: ClusterSpec, trace: PodTrace, pods: np.ndarray, value: PodValue | None = None
) -> tuple[float, int, int]:
    """Upper bound on the value of any subset of ``pods`` placed at once; also #types, #classes.

    The value is the GPU milli held (default) or ``value(cpu, mem, k, milli, node class)`` per pod,
    e.g. the $/h it is billed on that class (``seedance.finops.bill``).
    """
    from ortools.linear_solver import pywraplp

    classes = Counter((n.gpu_model, n.gpu_count, n.cpu_milli, n.memory_mib) for n in spec.nodes)
    cls = list(classes.items())
    keys = Counter(
        zip(
            trace.cpu_milli[pods].tolist(),
            trace.memory_mib[pods].tolist(),
            trace.num_gpu[pods].tolist(),
            trace.gpu_milli[pods].tolist(),
            trace.gpu_spec[pods].tolist(),
            strict=True,
        )
    )
    big_sizes = sorted({m for m in trace.gpu_milli[pods].tolist() if MILLI_PER_GPU // 2 < m < MILLI_PER_GPU})
    pair_bs = [(MILLI_PER_GPU - m) / MILLI_PER_GPU for m in big_sizes]
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:  # pragma: no cover - GLOP ships with OR-Tools
        raise RuntimeError("OR-Tools GLOP solver is unavailable")
    inf = solver.infinity()
    ys: dict[tuple[int, int], object] = {}
    objective = solver.Objective()
    per_class: list[list[tuple[object, int, int, int, int, bool]]] = [[] for _ in cls]
    for ti, ((cpu, mem, k, milli, spec_s), n_t) in enumerate(keys.items()):
        allowed = trace.gpu_types.get(spec_s, ())
        row = []
        for ci, ((model, g, ccpu, cmem), n_c) in enumerate(cls):
            if k and (model is None or (allowed and model not in allowed) or k > g):
                continue
            caps = [ccpu // cpu if cpu else math.inf, cmem // mem if mem else math.inf]
            if k:
                caps.append(g * (MILLI_PER_GPU // milli) if k == 1 and milli < MILLI_PER_GPU else g // k)
            cap = min(caps)
            if cap <= 0:
                continue
            ub = n_c * cap if math.isfinite(cap) else inf
            y = solver.NumVar(0.0, ub, f"y_{ti}_{ci}")
            ys[(ti, ci)] = y
            row.append(y)
            objective.SetCoefficient(
                y, float(k * milli) if value is None else float(value(cpu, mem, k, milli, cls[ci][0])))
            per_class[ci].append((y, cpu, mem, k, milli, k >= 1 and milli == MILLI_PER_GPU))
        if row:
            c = solver.Constraint(0.0, float(n_t))
            for y in row:
                c.SetCoefficient(y, 1.0)
    for ci, ((_model, g, ccpu, cmem), n_c) in enumerate(cls):
        items = per_class[ci]
        if not items:
            continue
        c_cpu = solver.Constraint(-inf, float(n_c * ccpu))
        c_mem = solver.Constraint(-inf, float(n_c * cmem))
        c_gpu = solver.Constraint(-inf, float(n_c * g * MILLI_PER_GPU))
        c_whole = solver.Constraint(-inf, float(n_c * g))
        # one cut per dual-feasible function f_k: every GPU is a bin of 1 for the shares on it
        c_dff = [solver.Constraint(-inf, float(n_c * g)) for _ in DFF_KS]
        c_pair = [solver.Constraint(-inf, float(n_c * g)) for _ in pair_bs]
        for y, cpu, mem, k, milli, whole in items:
            c_cpu.SetCoefficient(y, float(cpu))
            c_mem.SetCoefficient(y, float(mem))
            c_gpu.SetCoefficient(y, float(k * milli))
            if whole:
                c_whole.SetCoefficient(y, float(k))
            for cut, kk in zip(c_dff, DFF_KS, strict=True):
                cut.SetCoefficient(y, float(k) if whole else dff(milli / MILLI_PER_GPU, kk))
            for cut, b in zip(c_pair, pair_bs, strict=True):
                cut.SetCoefficient(y, float(k) if whole else dff_pair(milli / MILLI_PER_GPU, b))
    objective.SetMaximization()
    status = solver.Solve()
    if status != pywraplp.Solver.OPTIMAL:  # pragma: no cover - the LP is always feasible (y = 0)
        raise RuntimeError(f"bound LP did not solve (status {status})")
    return objective.Value(), len(keys), len(cls)


def inflation_bound(
    spec: ClusterSpec, trace: PodTrace, seed: int, *, ratio: float = 1.3, column: int = 100
) -> BoundResult:
    """Lower bound on unallocated GPU % at arrived ``column`` % for the seed's pod sequence."""
    trace = sort_by_name(trace)
    capacity = spec.total_gpus * MILLI_PER_GPU
    stream = build_stream(trace, capacity, len(spec.nodes), seed, ratio)
    per_pod = (trace.num_gpu * trace.gpu_milli)[stream.pods]
    arrived = np.cumsum(per_pod)
    bucket = np.round(arrived / spec.total_gpus / 10.0).astype(np.int64)
    idx = np.flatnonzero(bucket == column)
    if idx.size == 0:
        idx = np.flatnonzero(np.abs(bucket - column) <= 1)
    if idx.size == 0:
        raise ValueError(f"no event falls in column {column}")
    last = int(idx[-1])
    lp, n_types, n_classes = lp_max_allocation(spec, trace, stream.pods[: last + 1])
    ub_pct = np.minimum(arrived[idx], lp) / capacity * 100.0
    raw = 100.0 - float(ub_pct.mean()) - 0.01  # allow for the metric's roundings
    return BoundResult(
        unallocated_pct=max(0.0, math.floor(raw * 100.0) / 100.0),
        lp_alloc_milli=lp,
        prefix_pods=last + 1,
        arrived_milli=int(arrived[last]),
        types=n_types,
        classes=n_classes,
    )

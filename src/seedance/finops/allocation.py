"""Allocation queries over ledger lines, in OpenCost's model and idiom.

``allocate(frame, query)`` groups allocation lines by the query's ``aggregate`` properties and, per
step: distributes shared costs (lines of ``share_namespaces`` and the ``shared`` overhead lines) over
the remaining groups (``weighted`` by their cost, or ``even``); then either keeps idle as its own
``__idle__`` entry or shares it (``weighted``: per resource, by each group's cost of that resource —
OpenCost's ``shareIdle``; ``even``: equally), over the cluster or per node (``idle_by_node``). Idle
of a resource that no group is billed for cannot be weighted and stays in ``__idle__`` (OpenCost
fixed the same case in opencost/opencost#883). So for every step Σ entries = cluster cost.

Aggregate properties: ``cluster``, ``node``, ``namespace``, ``pod``, ``container``, ``controller``,
``controllerKind``, ``gpu_model``, ``label:<key>``; any other bare word is a label key (``team``,
``env``, ``qos``). Lines without a label aggregate as ``__unallocated__``; names join properties
with ``/`` as OpenCost does.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.finops.lines import ALLOC, IDLE, SHARED, LedgerFrame, at
from seedance.finops.prices import GIB
from seedance.finops.window import step_count

IDLE_NAME = "__idle__"
UNALLOCATED = "__unallocated__"
SHARED_NAME = "__shared__"
PROPERTIES = {"cluster": "cluster", "node": "node", "namespace": "namespace", "pod": "pod",
              "container": "container", "controller": "controller", "controllerkind": "controller_kind",
              "controller_kind": "controller_kind", "gpu_model": "gpu_model"}
SHARE_IDLE = ("none", "weighted", "even")
RESOURCES = ("cpu", "ram", "gpu")
_HOURS = ("cpu_request_h", "cpu_usage_h", "cpu_h", "ram_request_h", "ram_usage_h", "ram_h", "gpu_request_h",
          "gpu_usage_h", "gpu_h")


@dataclass(frozen=True, slots=True)
class AllocationQuery:
    """What to compute (OpenCost's ``/allocation`` parameters)."""

    start: dt.datetime
    end: dt.datetime
    aggregate: tuple[str, ...] = ("namespace",)
    step_s: float | None = None
    idle: bool = True
    share_idle: str = "none"
    idle_by_node: bool = False
    share_namespaces: tuple[str, ...] = ()
    share_split: str = "weighted"

    def __post_init__(self) -> None:
        if self.share_idle not in SHARE_IDLE:
            raise InputError(f"unknown rule {self.share_idle!r}; valid: {', '.join(SHARE_IDLE)}", source="shareIdle")
        if self.share_split not in ("weighted", "even"):
            raise InputError(f"unknown split {self.share_split!r}; valid: weighted, even", source="shareSplit")
        if self.end < self.start:
            raise InputError("window ends before it starts", source="window")
        if self.step_s is not None and not self.step_s > 0:
            raise InputError("must be > 0", source="step")
        if self.step_s is not None:
            step_count(self.start, self.end, self.step_s)
        for a in self.aggregate:
            _prop(a)


def _prop(name: str) -> tuple[str, str]:
    n = name.strip()
    if not n:
        raise InputError("empty aggregate property", source="aggregate")
    low = n.lower()
    if low in PROPERTIES:
        return "col", PROPERTIES[low]
    if low.startswith("label:"):
        key = n[6:]
        if not key:
            raise InputError("label: needs a key", source="aggregate")
        return "label", key
    if low.startswith("annotation:"):
        raise InputError("the ledger keeps labels, not annotations; aggregate by label:<key>", source="aggregate")
    return "label", n


@dataclass(slots=True)
class _Acc:
    """Sums behind one allocation entry."""

    hours: dict[str, float] = field(default_factory=lambda: dict.fromkeys(_HOURS, 0.0))
    cost: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))
    idle: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))
    shared: float = 0.0
    other: float = 0.0
    first: float = math.inf
    last: float = -math.inf
    props: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.cost.values()) + sum(self.idle.values()) + self.shared + self.other

    def add(self, o: _Acc) -> None:
        for k in self.hours:
            self.hours[k] += o.hours[k]
        for k in RESOURCES:
            self.cost[k] += o.cost[k]
            self.idle[k] += o.idle[k]
        self.shared += o.shared
        self.other += o.other
        self.first = min(self.first, o.first)
        self.last = max(self.last, o.last)
        self.props = self.props or dict(o.props)


def _eff(use: float, req: float) -> float:
    if req > 0:
        return use / req
    return 1.0 if use > 0 else 0.0


def _entry(name: str, a: _Acc, start: float, end: float) -> dict[str, Any]:
    h = a.hours
    minutes = max(0.0, a.last - a.first) / 60.0 if math.isfinite(a.first) else 0.0
    run_h = minutes / 60.0
    per = (lambda x: x / run_h) if run_h > 0 else (lambda x: 0.0)
    cpu_eff, ram_eff = _eff(h["cpu_usage_h"], h["cpu_request_h"]), _eff(h["ram_usage_h"], h["ram_request_h"])
    gpu_eff = _eff(h["gpu_usage_h"], h["gpu_request_h"])
    parts = [(cpu_eff, a.cost["cpu"]), (ram_eff, a.cost["ram"])]
    if h["gpu_usage_h"] > 0:
        parts.append((gpu_eff, a.cost["gpu"]))
    denom = sum(c for _, c in parts)
    return {
        "name": name, "properties": dict(a.props),
        "window": {"start": at(start).isoformat(), "end": at(end).isoformat()},
        "start": at(a.first).isoformat() if math.isfinite(a.first) else at(start).isoformat(),
        "end": at(a.last).isoformat() if math.isfinite(a.last) else at(end).isoformat(),
        "minutes": minutes,
        "cpu_cores": per(h["cpu_h"]), "cpu_core_request_average": per(h["cpu_request_h"]),
        "cpu_core_usage_average": per(h["cpu_usage_h"]), "cpu_core_hours": h["cpu_h"], "cpu_cost": a.cost["cpu"],
        "cpu_efficiency": cpu_eff,
        "gpu_count": per(h["gpu_h"]), "gpu_hours": h["gpu_h"], "gpu_request_hours": h["gpu_request_h"],
        "gpu_usage_hours": h["gpu_usage_h"], "gpu_cost": a.cost["gpu"], "gpu_efficiency": gpu_eff,
        "ram_bytes": per(h["ram_h"]), "ram_byte_request_average": per(h["ram_request_h"]),
        "ram_byte_usage_average": per(h["ram_usage_h"]), "ram_byte_hours": h["ram_h"], "ram_cost": a.cost["ram"],
        "ram_efficiency": ram_eff,
        "shared_cost": a.shared, "idle_cost": sum(a.idle.values()), "other_cost": a.other,
        "total_cost": a.total,
        "total_efficiency": sum(e * c for e, c in parts) / denom if denom > 0 else 0.0,
    }


def _group_keys(frame: LedgerFrame, idx: np.ndarray, props: Sequence[tuple[str, str]], cluster: str
                ) -> list[tuple[str, ...]]:
    cols = [frame.text[c] if kind == "col" and c != "cluster" else None for kind, c in props]
    out = []
    for i in idx.tolist():
        key = []
        for (kind, c), col in zip(props, cols, strict=True):
            if kind == "col":
                v = cluster if c == "cluster" else str(col[i]) if col is not None else ""
                key.append(v or UNALLOCATED)
            else:
                key.append(frame.labels[i].get(c) or UNALLOCATED)
        out.append(tuple(key))
    return out


def _one_set(frame: LedgerFrame, q: AllocationQuery, cluster: str, start: float, end: float,
             warnings: list[str]) -> dict[tuple[str, ...], _Acc]:
    props = [_prop(a) for a in q.aggregate]
    kind = frame.text["kind"]
    ns = frame.text["namespace"]
    alloc = kind == ALLOC
    shared_ns = alloc & np.isin(ns, np.array(list(q.share_namespaces), dtype=object)) if q.share_namespaces \
        else np.zeros(len(frame), dtype=bool)
    own = np.flatnonzero(alloc & ~shared_ns)
    keys = _group_keys(frame, own, props, cluster)
    groups: dict[tuple[str, ...], _Acc] = {}
    pos: dict[tuple[str, ...], int] = {}
    gid = np.empty(own.size, dtype=np.int64)
    for j, k in enumerate(keys):
        g = pos.get(k)
        if g is None:
            g = pos[k] = len(pos)
            groups[k] = _Acc(props=dict(zip(q.aggregate, k, strict=True)))
        gid[j] = g
    order = list(pos)
    n = len(order)
    num = frame.num
    for col in _HOURS:
        s = np.bincount(gid, weights=num[col][own], minlength=n)
        for j, k in enumerate(order):
            groups[k].hours[col] += float(s[j])
    res_cost = {}
    for r in RESOURCES:
        s = np.bincount(gid, weights=num[f"{r}_cost"][own], minlength=n)
        res_cost[r] = s
        for j, k in enumerate(order):
            groups[k].cost[r] += float(s[j])
    first = np.full(n, np.inf)
    last = np.full(n, -np.inf)
    np.minimum.at(first, gid, num["first_seen"][own])
    np.maximum.at(last, gid, num["last_seen"][own])
    for j, k in enumerate(order):
        groups[k].first, groups[k].last = float(first[j]), float(last[j])
    # shared costs: lines of shared namespaces and overhead lines, spread over the groups
    pool = float(num["total_cost"][shared_ns].sum() + num["total_cost"][kind == SHARED].sum())
    if pool:
        base = np.array([groups[k].total for k in order])
        if n == 0:
            groups[(SHARED_NAME,)] = _Acc(shared=pool, props={"name": SHARED_NAME})
        elif q.share_split == "even" or base.sum() <= 0:
            for k in order:
                groups[k].shared += pool / n
        else:
            w = base / base.sum()
            for j, k in enumerate(order):
                groups[k].shared += pool * float(w[j])
    # idle
    idle_idx = np.flatnonzero(kind == IDLE)
    if idle_idx.size:
        _idle(frame, q, groups, order, gid, own, idle_idx, res_cost, warnings)
    return groups


def _idle(frame: LedgerFrame, q: AllocationQuery, groups: dict[tuple[str, ...], _Acc],
          order: list[tuple[str, ...]], gid: np.ndarray, own: np.ndarray, idle_idx: np.ndarray,
          res_cost: Mapping[str, np.ndarray], warnings: list[str]) -> None:
    num = frame.num
    nodes = frame.text["node"]
    by_node = q.idle_by_node
    scope = nodes[idle_idx] if by_node else np.array([""] * idle_idx.size, dtype=object)
    n = len(order)
    leftover: dict[str, dict[str, float]] = {}
    for sc in sorted(set(scope.tolist())):
        sel = idle_idx[scope == sc]
        amount = {r: float(num[f"{r}_cost"][sel].sum()) for r in RESOURCES}
        for r, v in amount.items():
            if v < -1e-9:
                warnings.append(f"negative {r} idle ${v:.4f}{' on ' + sc if sc else ''}: usage above requests "
                                f"exceeded capacity (a data-quality signal, as in OpenCost)")
        left = dict(amount)
        if q.share_idle != "none" and n:
            if by_node:
                on = nodes[own] == sc
            else:
                on = np.ones(own.size, dtype=bool)
            for r in RESOURCES:
                if not amount[r]:
                    continue
                if q.share_idle == "weighted":
                    w = np.bincount(gid[on], weights=num[f"{r}_cost"][own][on], minlength=n)
                else:
                    w = (np.bincount(gid[on], minlength=n) > 0).astype(np.float64)
                tot = float(w.sum())
                if tot <= 0:
                    continue  # nobody is billed for this resource here: it stays idle
                for j, k in enumerate(order):
                    if w[j]:
                        groups[k].idle[r] += amount[r] * float(w[j]) / tot
                left[r] = 0.0
        if any(left.values()):
            leftover[sc] = left
    if not q.idle and q.share_idle == "none":
        return
    for sc, left in leftover.items():
        name = f"{IDLE_NAME}/{sc}" if sc else IDLE_NAME
        acc = _Acc(props={"name": name})
        for r in RESOURCES:
            acc.cost[r] = left[r]
        groups[(name,)] = acc


def allocate(frame: LedgerFrame, q: AllocationQuery, *, cluster: str = "") -> dict[str, Any]:
    """The allocation document for ``q`` over the ledger lines in ``frame``."""
    start, end = q.start.timestamp(), q.end.timestamp()
    ws = frame.window_start
    inside = (ws >= start) & (ws < end)
    frame = frame.take(inside)
    step = q.step_s or (end - start) or 1.0  # an empty window (``all`` of an empty ledger) is one empty step
    nsteps = max(1, math.ceil((end - start) / step - 1e-9))
    bucket = np.minimum(np.floor((frame.window_start - start) / step).astype(np.int64), nsteps - 1)
    warnings: list[str] = []
    sets = []
    totals: dict[str, _Acc] = {}
    idle_total = shared_total = grand = 0.0
    for b in range(nsteps):
        sub = frame.take(bucket == b)
        b0, b1 = start + b * step, min(end, start + (b + 1) * step)
        groups = _one_set(sub, q, cluster, b0, b1, warnings) if len(sub) else {}
        entries = []
        for k, acc in sorted(groups.items(), key=lambda kv: -kv[1].total):
            name = "/".join(k)
            entries.append(_entry(name, acc, b0, b1))
            totals.setdefault(name, _Acc(props=dict(acc.props))).add(acc)
            if name.startswith(IDLE_NAME):
                idle_total += acc.total
            else:
                idle_total += sum(acc.idle.values())
            shared_total += acc.shared
        set_total = sum(e["total_cost"] for e in entries)
        grand += set_total
        if q.step_s:
            sets.append({"window": {"start": at(b0).isoformat(), "end": at(b1).isoformat()},
                         "total_cost": set_total, "allocations": entries})
    allocations = [_entry(name, acc, start, end) for name, acc in sorted(totals.items(), key=lambda kv: -kv[1].total)]
    cluster_cost = float(frame.num["total_cost"].sum())
    doc: dict[str, Any] = {
        "window": {"start": q.start.isoformat(), "end": q.end.isoformat()},
        "step": q.step_s, "aggregate": list(q.aggregate), "idle": q.idle, "share_idle": q.share_idle,
        "idle_by_node": q.idle_by_node, "share_namespaces": list(q.share_namespaces),
        "total_cost": grand, "idle_cost": idle_total, "shared_cost": shared_total,
        "allocated_cost": grand - idle_total - shared_total if q.share_idle == "none" else grand - shared_total,
        "cluster_cost": cluster_cost, "allocations": allocations, "warnings": sorted(set(warnings)),
    }
    if q.step_s:
        doc["sets"] = sets
    return doc


OPENCOST_FIELDS = {
    "cpu_cores": "cpuCores", "cpu_core_request_average": "cpuCoreRequestAverage",
    "cpu_core_usage_average": "cpuCoreUsageAverage", "cpu_core_hours": "cpuCoreHours", "cpu_cost": "cpuCost",
    "cpu_efficiency": "cpuEfficiency", "gpu_count": "gpuCount", "gpu_hours": "gpuHours", "gpu_cost": "gpuCost",
    "ram_bytes": "ramBytes", "ram_byte_request_average": "ramByteRequestAverage",
    "ram_byte_usage_average": "ramByteUsageAverage", "ram_byte_hours": "ramByteHours", "ram_cost": "ramCost",
    "ram_efficiency": "ramEfficiency", "shared_cost": "sharedCost", "total_cost": "totalCost",
    "total_efficiency": "totalEfficiency", "minutes": "minutes", "name": "name", "properties": "properties",
    "window": "window", "start": "start", "end": "end",
}


def to_opencost(doc: Mapping[str, Any]) -> dict[str, Any]:
    """OpenCost's response shape: ``{"code": 200, "data": [{name: Allocation}, ...]}`` (one map per step)."""
    sets = doc.get("sets") or [{"allocations": doc["allocations"]}]
    data = []
    for s in sets:
        m = {}
        for e in s["allocations"]:
            m[e["name"]] = {OPENCOST_FIELDS[k]: v for k, v in e.items() if k in OPENCOST_FIELDS}
            m[e["name"]]["gpuCostAdjustment"] = m[e["name"]]["cpuCostAdjustment"] = 0
            m[e["name"]]["ramCostAdjustment"] = 0
        data.append(m)
    return {"code": 200, "status": "success", "data": data}


def ram_gib_hours(byte_hours: float) -> float:
    """GiB-hours of byte-hours."""
    return byte_hours / GIB

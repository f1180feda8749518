"""Replay → ledger: a replayed trace is billed exactly like a live cluster.

The adapter reads only a replay's outputs — per pod: node, GPUs and milli-GPU taken, CPU, memory,
start and end (``ReplaySimulation.records``) — into columnar :class:`Spans`, and prices them window
by window with the same rules as telemetry: a pod is billed its request (a replay has no usage
telemetry, so request = usage and efficiency is 1), every node of the cluster costs its full
capacity from the first arrival to the last departure, and the difference is idle. Teams come from
trace fields (``qos``, ``gpu_spec``) and an optional label file (CSV: ``name`` plus one column per
label, e.g. ``team,env,namespace``). Idle is kept per cluster and GPU model (a 1 000-node trace over
months would otherwise write a line per node and hour); ``idle_by_node=True`` keeps it per node.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterSpec
from seedance.core.errors import InputError
from seedance.core.resources import MILLI_PER_GPU
from seedance.finops.ingest import split_windows
from seedance.finops.lines import ALLOC, IDLE, SHARED, LedgerLine, at
from seedance.finops.prices import GIB, PriceSheet
from seedance.traces.schema import PodTrace

MIB = float(2**20)


@dataclass(frozen=True, slots=True)
class Spans:
    """Placements with their times, as columns (``pod`` indexes the trace, ``node`` the cluster)."""

    pod: NDArray[np.int64]
    node: NDArray[np.int64]
    start: NDArray[np.float64]
    end: NDArray[np.float64]
    cpu: NDArray[np.float64]
    ram: NDArray[np.float64]
    gpu: NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.pod.size)


def spans_from_records(records: Sequence[Any], *, end_time: float) -> Spans:
    """Spans of placed pods from replay records (``start``, ``end``, ``placement``); a pod still
    running at the end of the replay runs until ``end_time``."""
    rows = [(i, r) for i, r in enumerate(records) if r.placement is not None and not math.isnan(r.start)]
    p = [r.placement for _, r in rows]
    return Spans(
        pod=np.array([i for i, _ in rows], dtype=np.int64),
        node=np.array([x.node for x in p], dtype=np.int64),
        start=np.array([r.start for _, r in rows], dtype=np.float64),
        end=np.array([end_time if math.isnan(r.end) else r.end for _, r in rows], dtype=np.float64),
        cpu=np.array([x.cpu_milli / 1000.0 for x in p], dtype=np.float64),
        ram=np.array([x.memory_mib * MIB for x in p], dtype=np.float64),
        gpu=np.array([len(x.gpus) * x.gpu_milli / MILLI_PER_GPU for x in p], dtype=np.float64),
    )


def spans_from_replay(sim: Any) -> Spans:
    """Spans of a finished :class:`~seedance.sim.replay.ReplaySimulation` (reads its records only)."""
    ends = [r.end for r in sim.records if not math.isnan(r.end)]
    last = max([*ends, float(np.max(sim.trace.deletion)) if len(sim.trace) else 0.0])
    return spans_from_records(sim.records, end_time=last)


def load_label_file(path: str | Path) -> dict[str, dict[str, str]]:
    """``{pod name: {label: value}}`` from a CSV with a ``name`` column."""
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        raise InputError("cannot open file", source=src) from None
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames or "name" not in reader.fieldnames:
        raise InputError("needs a 'name' column", source=src, line=1, field="name")
    out: dict[str, dict[str, str]] = {}
    for i, row in enumerate(reader, start=2):
        name = (row.get("name") or "").strip()
        if not name:
            raise InputError("empty name", source=src, line=i, field="name")
        out[name] = {k: v for k, v in row.items() if k and k != "name" and v}
    return out


def replay_ledger(
    spec: ClusterSpec, trace: PodTrace, spans: Spans, prices: PriceSheet, *, cluster: str, source: str,
    epoch: dt.datetime, window_s: float = 3600.0, labels: Mapping[str, Mapping[str, str]] | None = None,
    idle_by_node: bool = False, span: tuple[float, float] | None = None,
) -> list[LedgerLine]:
    """Priced ledger lines of a replay; trace time 0 is ``epoch``.

    ``span`` is the billed period of the cluster in trace seconds (default: first arrival to the
    last departure).
    """
    e0 = epoch.timestamp()
    if span is None:
        lo = float(np.min(trace.creation)) if len(trace) else 0.0
        hi = float(max(np.max(spans.end) if len(spans) else lo, np.max(trace.deletion) if len(trace) else lo))
        span = (lo, hi)
    t0, t1 = e0 + span[0], e0 + span[1]
    nodes = spec.nodes
    rates = [prices.node_rates(n.name, n.cpu_milli / 1000.0, n.memory_mib * MIB,
                               {n.gpu_model: float(n.gpu_count)} if n.gpu_model and n.gpu_count else {})
             for n in nodes]
    out: list[LedgerLine] = []
    # allocations: one line per (window, pod)
    s_idx, win, dur = split_windows(spans.start + e0, spans.end + e0, window_s)
    w_lo = np.maximum(win * window_s, (spans.start + e0)[s_idx])
    alloc_cost: dict[int, dict[str, float]] = {}
    alloc_h: dict[int, dict[str, float]] = {}
    extra = labels or {}
    bounds: dict[int, tuple[dt.datetime, dt.datetime]] = {}
    names = trace.name
    qos = trace.qos
    gspec = trace.gpu_spec
    for i, w, d, lo in zip(s_idx.tolist(), win.tolist(), dur.tolist(), w_lo.tolist(), strict=True):
        pod = int(spans.pod[i])
        n = int(spans.node[i])
        node = nodes[n]
        r = rates[n]
        h = d / 3600.0
        cpu_h, ram_h, gpu_h = spans.cpu[i] * h, spans.ram[i] * h, spans.gpu[i] * h
        model = node.gpu_model or "" if gpu_h else ""
        g_rate = r.gpu_rate(model) if gpu_h else 0.0
        lab = {"qos": str(qos[pod]) or "none"}
        if gspec[pod]:
            lab["gpu_spec"] = str(gspec[pod])
        name = str(names[pod])
        lab.update(extra.get(name, {}))
        ns = lab.pop("namespace", "default")
        ws, we = bounds.get(w) or bounds.setdefault(w, (at(w * window_s), at((w + 1) * window_s)))
        ln = LedgerLine(
            cluster=cluster, source=source, window_start=ws, window_end=we, kind=ALLOC,
            node=node.name, namespace=ns, pod=name, container="main", gpu_model=model, labels=lab,
            first_seen=lo, last_seen=lo + d, run_s=d, cpu_request_h=cpu_h, cpu_usage_h=cpu_h, cpu_h=cpu_h,
            ram_request_h=ram_h, ram_usage_h=ram_h, ram_h=ram_h, gpu_request_h=gpu_h, gpu_usage_h=gpu_h, gpu_h=gpu_h,
            cpu_rate=r.cpu, ram_rate=r.ram_gib, gpu_rate=g_rate, cpu_cost=cpu_h * r.cpu,
            ram_cost=ram_h / GIB * r.ram_gib, gpu_cost=gpu_h * g_rate,
        )
        ln.total_cost = ln.cpu_cost + ln.ram_cost + ln.gpu_cost
        out.append(ln)
        key = n if idle_by_node else -1
        c = alloc_cost.setdefault(_wk(w, key), {})
        hh = alloc_h.setdefault(_wk(w, key), {})
        for k, v in (("cpu", ln.cpu_cost), ("ram", ln.ram_cost), (f"gpu:{model}", ln.gpu_cost)):
            c[k] = c.get(k, 0.0) + v
        for k, v in (("cpu", cpu_h), ("ram", ram_h), (f"gpu:{model}", gpu_h)):
            hh[k] = hh.get(k, 0.0) + v
    # capacity and idle per window (cluster, or node): capacity per hour of each group, computed once
    groups = [(n, [n]) for n in range(len(nodes))] if idle_by_node else [(-1, list(range(len(nodes))))]
    per_hour: list[tuple[int, dict[str, float], dict[str, float]]] = []
    for key, members in groups:
        cap_h: dict[str, float] = {}
        cap_c: dict[str, float] = {}
        for n in members:
            nd, r = nodes[n], rates[n]
            for k, hours, cost in (("cpu", nd.cpu_milli / 1000.0, nd.cpu_milli / 1000.0 * r.cpu),
                                   ("ram", nd.memory_mib * MIB, nd.memory_mib * MIB / GIB * r.ram_gib)):
                cap_h[k] = cap_h.get(k, 0.0) + hours
                cap_c[k] = cap_c.get(k, 0.0) + cost
            if nd.gpu_model and nd.gpu_count:
                k = f"gpu:{nd.gpu_model}"
                cap_h[k] = cap_h.get(k, 0.0) + nd.gpu_count
                cap_c[k] = cap_c.get(k, 0.0) + nd.gpu_count * r.gpu_rate(nd.gpu_model)
        per_hour.append((key, cap_h, cap_c))
    w_first, w_last = int(math.floor(t0 / window_s)), int(math.ceil(t1 / window_s)) - 1
    for w in range(w_first, w_last + 1):
        o = max(0.0, min(t1, (w + 1) * window_s) - max(t0, w * window_s)) / 3600.0
        if o <= 0:
            continue
        ws, we = at(w * window_s), at((w + 1) * window_s)
        for key, hour_h, hour_c in per_hour:
            cap_h = {k: v * o for k, v in hour_h.items()}
            cap_c = {k: v * o for k, v in hour_c.items()}
            used_c = alloc_cost.get(_wk(w, key), {})
            used_h = alloc_h.get(_wk(w, key), {})
            node_name = nodes[key].name if key >= 0 else ""
            base: dict[str, Any] = {
                "cluster": cluster, "source": source, "window_start": ws, "window_end": we, "kind": IDLE,
                "node": node_name, "first_seen": max(t0, w * window_s), "last_seen": min(t1, (w + 1) * window_s),
                "run_s": o * 3600.0}
            ch, rh = cap_h.get("cpu", 0.0) - used_h.get("cpu", 0.0), cap_h.get("ram", 0.0) - used_h.get("ram", 0.0)
            cc, rc = cap_c.get("cpu", 0.0) - used_c.get("cpu", 0.0), cap_c.get("ram", 0.0) - used_c.get("ram", 0.0)
            out.append(LedgerLine(**base, cpu_h=ch, ram_h=rh, cpu_rate=cc / ch if ch else 0.0,
                                  ram_rate=rc / (rh / GIB) if rh else 0.0, cpu_cost=cc, ram_cost=rc,
                                  total_cost=cc + rc))
            for k in sorted(x for x in cap_h if x.startswith("gpu:")):
                gh = cap_h[k] - used_h.get(k, 0.0)
                gc = cap_c[k] - used_c.get(k, 0.0)
                out.append(LedgerLine(**base, gpu_model=k[4:], gpu_h=gh, gpu_rate=gc / gh if gh else 0.0,
                                      gpu_cost=gc, total_cost=gc))
        if prices.shared_overhead_per_hour:
            oc = prices.shared_overhead_per_hour * o
            out.append(LedgerLine(cluster=cluster, source=source, window_start=ws, window_end=we, kind=SHARED,
                                  first_seen=max(t0, w * window_s), last_seen=min(t1, (w + 1) * window_s),
                                  run_s=o * 3600.0, other_cost=oc, total_cost=oc))
    return out


def _wk(w: int, key: int) -> int:
    return w * 1_000_003 + key + 1

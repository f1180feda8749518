"""From usage samples to priced ledger lines, per node and ledger window.

A usage sample covers ``[t - dt, t)`` for one container on one node: its requests and usage
(cores, bytes, GPUs). An asset sample covers the same span for the node itself (cores, bytes,
GPUs by model). :class:`LedgerIngestor` splits samples at window edges (a sample straddling an
edge is divided exactly), accumulates per (window, node, container, GPU model) with numpy
group-bys, and prices node-windows into lines:

* ``alloc``: per container, billed = ``max(request, usage)`` **per sample** (OpenCost's rule at the
  sampling resolution) × the node's rate per resource (GPU by fraction: a 0.25 share for one hour
  is 0.25 GPU-h);
* ``idle``: per node, what the node offered minus what was billed, per resource (one line per
  GPU model, one for CPU and RAM). It can be negative when usage beyond requests exceeds the node
  — OpenCost reports that as a data-quality signal, and so does the query (``warnings``).

So Σ alloc + idle = node cost for every node-window by construction.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.finops.lines import ALLOC, IDLE, LedgerLine, at
from seedance.finops.prices import GIB, NodeRates, PriceSheet

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ContainerKey:
    """Who a usage sample is about."""

    namespace: str
    pod: str
    container: str
    controller: str = ""
    controller_kind: str = ""
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class UsageBatch:
    """Usage samples as columns; ``node``, ``key`` and ``model`` index the string tables."""

    t: F64
    dt: F64
    node: I64
    key: I64
    model: I64
    cpu_req: F64
    cpu_use: F64
    ram_req: F64
    ram_use: F64
    gpu_req: F64
    gpu_use: F64
    nodes: list[str]
    keys: list[ContainerKey]
    models: list[str]

    def __len__(self) -> int:
        return int(self.t.size)

    def validate(self, source: str = "usage samples") -> None:
        """Raise :class:`InputError` on negative or non-finite values (nothing is stored then)."""
        n = len(self)
        for name in ("t", "dt", "node", "key", "model", "cpu_req", "cpu_use", "ram_req", "ram_use", "gpu_req",
                     "gpu_use"):
            a = getattr(self, name)
            if a.shape != (n,):
                raise InputError(f"column has {a.size} values, expected {n}", source=source, field=name)
            if name not in ("node", "key", "model") and not np.all(np.isfinite(a)):
                raise InputError("not a finite number", source=source, field=name)
            if name not in ("t", "model") and np.any(a < 0):
                i = int(np.flatnonzero(a < 0)[0])
                raise InputError(f"negative value {a[i]!r} at sample {i}", source=source, field=name)
        if n and (self.node.max() >= len(self.nodes) or self.key.max() >= len(self.keys)
                  or self.model.max() >= len(self.models)):
            raise InputError("index out of its table", source=source)


@dataclass(slots=True)
class AssetBatch:
    """Node capacity samples: one *primary* row per (sample, node) carrying its cores, bytes and the GPUs
    of one model (``model`` -1: none), plus non-primary rows for further GPU models of the same node."""

    t: F64
    dt: F64
    node: I64
    cpu_cores: F64
    ram_bytes: F64
    model: I64
    gpus: F64
    primary: NDArray[np.bool_]
    nodes: list[str]
    models: list[str]


def split_windows(t0: F64, t1: F64, window_s: float) -> tuple[I64, I64, F64]:
    """Split spans ``[t0, t1)`` at multiples of ``window_s``: (span index, window index, seconds).

    >>> s, w, d = split_windows(np.array([3590.0, 10.0]), np.array([3610.0, 20.0]), 3600.0)
    >>> s.tolist(), w.tolist(), d.tolist()
    ([0, 0, 1], [0, 1, 0], [10.0, 10.0, 10.0])
    """
    w0 = np.floor(t0 / window_s).astype(np.int64)
    w1 = np.ceil(t1 / window_s).astype(np.int64) - 1
    w1 = np.maximum(w1, w0)
    count = w1 - w0 + 1
    span = np.repeat(np.arange(t0.size, dtype=np.int64), count)
    first = np.repeat(np.cumsum(count) - count, count)
    win = w0[span] + (np.arange(span.size, dtype=np.int64) - first)
    lo = np.maximum(t0[span], win * window_s)
    hi = np.minimum(t1[span], (win + 1) * window_s)
    dur = np.maximum(0.0, hi - lo)
    keep = dur > 0
    return span[keep], win[keep], dur[keep]


# accumulator columns of a container: run, cpu req/use/billed, ram req/use/billed, gpu req/use/billed (seconds ×)
_NCOLS = 10


@dataclass(slots=True)
class NodeWindow:
    """Everything accumulated for one node in one window."""

    window: int
    node: str
    containers: dict[tuple[ContainerKey, str], F64] = field(default_factory=dict)
    first: dict[tuple[ContainerKey, str], float] = field(default_factory=dict)
    last: dict[tuple[ContainerKey, str], float] = field(default_factory=dict)
    node_s: float = 0.0
    cpu_core_s: float = 0.0
    ram_byte_s: float = 0.0
    gpu_s: dict[str, float] = field(default_factory=dict)


class LedgerIngestor:
    """Accumulates samples into node-windows and prices them into ledger lines.

    Args:
        cluster: Cluster name on every line.
        prices: The price sheet.
        window_s: Ledger window (default one hour).
        source: ``live`` for telemetry, ``replay:<policy>`` for replays.
    """

    def __init__(self, cluster: str, prices: PriceSheet, *, window_s: float = 3600.0, source: str = "live") -> None:
        if not window_s > 0:
            raise InputError("must be > 0", source="ledger window")
        self.cluster = cluster
        self.prices = prices
        self.window_s = float(window_s)
        self.source = source
        self.state: dict[tuple[int, str], NodeWindow] = {}

    def _nw(self, w: int, node: str) -> NodeWindow:
        key = (w, node)
        nw = self.state.get(key)
        if nw is None:
            nw = self.state[key] = NodeWindow(window=w, node=node)
        return nw

    def add(self, usage: UsageBatch | None = None, assets: AssetBatch | None = None) -> set[tuple[int, str]]:
        """Accumulate a batch; returns the (window, node) pairs it touched."""
        touched: set[tuple[int, str]] = set()
        if usage is not None and len(usage):
            usage.validate()
            touched |= self._add_usage(usage)
        if assets is not None and assets.t.size:
            touched |= self._add_assets(assets)
        return touched

    def _add_usage(self, u: UsageBatch) -> set[tuple[int, str]]:
        span, win, dur = split_windows(u.t - u.dt, u.t, self.window_s)
        cols = np.empty((span.size, _NCOLS), dtype=np.float64)
        cols[:, 0] = dur
        for j, (req, use) in enumerate(((u.cpu_req, u.cpu_use), (u.ram_req, u.ram_use), (u.gpu_req, u.gpu_use))):
            r, s = req[span], use[span]
            cols[:, 1 + 3 * j] = r * dur
            cols[:, 2 + 3 * j] = s * dur
            cols[:, 3 + 3 * j] = np.maximum(r, s) * dur
        # group by (window, node, key, model)
        nk, nm = len(u.keys), max(1, len(u.models))
        wmin = int(win.min())
        code = (((win - wmin) * len(u.nodes) + u.node[span]) * nk + u.key[span]) * nm + u.model[span]
        uniq, inv = np.unique(code, return_inverse=True)
        sums = np.zeros((uniq.size, _NCOLS), dtype=np.float64)
        np.add.at(sums, inv, cols)
        t_end = np.minimum(u.t[span], (win + 1) * self.window_s)
        t_start = t_end - dur
        first = np.full(uniq.size, np.inf)
        last = np.full(uniq.size, -np.inf)
        np.minimum.at(first, inv, t_start)
        np.maximum.at(last, inv, t_end)
        touched = set()
        for g, c in enumerate(uniq.tolist()):
            c, model = divmod(c, nm)
            c, key = divmod(c, nk)
            w, node = divmod(c, len(u.nodes))
            nw = self._nw(w + wmin, u.nodes[node])
            k = (u.keys[key], u.models[model] if u.models else "")
            acc = nw.containers.get(k)
            if acc is None:
                nw.containers[k] = sums[g].copy()
                nw.first[k], nw.last[k] = float(first[g]), float(last[g])
            else:
                acc += sums[g]
                nw.first[k] = min(nw.first[k], float(first[g]))
                nw.last[k] = max(nw.last[k], float(last[g]))
            touched.add((nw.window, nw.node))
        return touched

    def _add_assets(self, a: AssetBatch) -> set[tuple[int, str]]:
        span, win, dur = split_windows(a.t - a.dt, a.t, self.window_s)
        touched = set()
        # group by (window, node, model, primary) first: node samples repeat every tick
        wmin = int(win.min())
        nm = len(a.models) + 1
        code = (((win - wmin) * len(a.nodes) + a.node[span]) * nm + (a.model[span] + 1)) * 2 + a.primary[span]
        uniq, inv = np.unique(code, return_inverse=True)
        d = np.bincount(inv, weights=dur, minlength=uniq.size)
        cpu = np.bincount(inv, weights=a.cpu_cores[span] * dur, minlength=uniq.size)
        ram = np.bincount(inv, weights=a.ram_bytes[span] * dur, minlength=uniq.size)
        gpu = np.bincount(inv, weights=a.gpus[span] * dur, minlength=uniq.size)
        for g, c in enumerate(uniq.tolist()):
            c, primary = divmod(c, 2)
            c, model = divmod(c, nm)
            w, node = divmod(c, len(a.nodes))
            nw = self._nw(w + wmin, a.nodes[node])
            if model > 0:
                m = a.models[model - 1]
                nw.gpu_s[m] = nw.gpu_s.get(m, 0.0) + float(gpu[g])
            if primary:
                nw.node_s += float(d[g])
                nw.cpu_core_s += float(cpu[g])
                nw.ram_byte_s += float(ram[g])
            touched.add((nw.window, nw.node))
        return touched

    # ------------------------------------------------------------------------------------------
    def window_bounds(self, w: int) -> tuple[dt.datetime, dt.datetime]:
        """Start and end of window ``w``."""
        return at(w * self.window_s), at((w + 1) * self.window_s)

    def rates(self, nw: NodeWindow) -> NodeRates:
        """The node's rates over the window (its average capacity; a contract price normalises them)."""
        gpus_avg = {m: s / nw.node_s for m, s in nw.gpu_s.items()} if nw.node_s > 0 else {}
        return self.prices.node_rates(nw.node, nw.cpu_core_s / nw.node_s if nw.node_s else 0.0,
                                      nw.ram_byte_s / nw.node_s if nw.node_s else 0.0, gpus_avg)

    def _base(self, nw: NodeWindow) -> dict[str, Any]:
        start, end = self.window_bounds(nw.window)
        return {"cluster": self.cluster, "source": self.source, "window_start": start, "window_end": end,
                "node": nw.node}

    def alloc_lines(self, nw: NodeWindow) -> list[LedgerLine]:
        """The allocation lines of a node-window's containers."""
        rates = self.rates(nw)
        base = self._base(nw)
        out: list[LedgerLine] = []
        for (key, model), s in nw.containers.items():
            cpu_h, ram_h, gpu_h = s[3] / 3600.0, s[6] / 3600.0, s[9] / 3600.0
            g_rate = rates.gpu_rate(model) if gpu_h > 0 else 0.0
            ln = LedgerLine(
                **base, kind=ALLOC, namespace=key.namespace, pod=key.pod, container=key.container, gpu_model=model,
                controller=key.controller, controller_kind=key.controller_kind, labels=dict(key.labels),
                first_seen=nw.first[(key, model)], last_seen=nw.last[(key, model)], run_s=float(s[0]),
                cpu_request_h=s[1] / 3600.0, cpu_usage_h=s[2] / 3600.0, cpu_h=cpu_h,
                ram_request_h=s[4] / 3600.0, ram_usage_h=s[5] / 3600.0, ram_h=ram_h,
                gpu_request_h=s[7] / 3600.0, gpu_usage_h=s[8] / 3600.0, gpu_h=gpu_h,
                cpu_rate=rates.cpu, ram_rate=rates.ram_gib, gpu_rate=g_rate,
                cpu_cost=cpu_h * rates.cpu, ram_cost=ram_h / GIB * rates.ram_gib, gpu_cost=gpu_h * g_rate,
            )
            ln.total_cost = ln.cpu_cost + ln.ram_cost + ln.gpu_cost
            out.append(ln)
        return out

    def idle_lines(self, nw: NodeWindow, billed: Mapping[str, float]) -> list[LedgerLine]:
        """The node's idle lines given what its allocations were billed: ``{"cpu": core-h, "ram": byte-h,
        "gpu:<model>": GPU-h}``."""
        if nw.node_s <= 0:
            return []
        rates = self.rates(nw)
        base = self._base(nw)
        t0 = base["window_start"].timestamp()
        cpu_idle = nw.cpu_core_s / 3600.0 - billed.get("cpu", 0.0)
        ram_idle = nw.ram_byte_s / 3600.0 - billed.get("ram", 0.0)
        out = [LedgerLine(**base, kind=IDLE, first_seen=t0, last_seen=t0 + nw.node_s, run_s=nw.node_s, cpu_h=cpu_idle,
                          ram_h=ram_idle, cpu_rate=rates.cpu, ram_rate=rates.ram_gib, cpu_cost=cpu_idle * rates.cpu,
                          ram_cost=ram_idle / GIB * rates.ram_gib,
                          total_cost=cpu_idle * rates.cpu + ram_idle / GIB * rates.ram_gib)]
        models = set(nw.gpu_s) | {k[4:] for k, v in billed.items() if k.startswith("gpu:") and v}
        for m in sorted(models):
            idle_h = nw.gpu_s.get(m, 0.0) / 3600.0 - billed.get(f"gpu:{m}", 0.0)
            r = rates.gpu_rate(m)
            out.append(LedgerLine(**base, kind=IDLE, gpu_model=m, first_seen=t0, last_seen=t0 + nw.node_s,
                                  run_s=nw.node_s, gpu_h=idle_h, gpu_rate=r, gpu_cost=idle_h * r,
                                  total_cost=idle_h * r))
        return out

    def lines(self, nw: NodeWindow) -> list[LedgerLine]:
        """Priced lines of one node-window: its containers' allocations and the node's idle lines."""
        alloc = self.alloc_lines(nw)
        return [*alloc, *self.idle_lines(nw, billed_hours(alloc))]

    def node_windows(self, keys: Sequence[tuple[int, str]] | None = None) -> list[NodeWindow]:
        """The accumulated node-windows (all, or those of ``keys``), in window order."""
        ks = sorted(self.state) if keys is None else sorted(k for k in keys if k in self.state)
        return [self.state[k] for k in ks]

    def drop_before(self, window: int) -> None:
        """Forget node-windows older than ``window`` (after they were written)."""
        for k in [k for k in self.state if k[0] < window]:
            del self.state[k]


def billed_hours(lines: Sequence[LedgerLine]) -> dict[str, float]:
    """What allocation lines were billed: ``{"cpu": core-h, "ram": byte-h, "gpu:<model>": GPU-h}``."""
    out = {"cpu": 0.0, "ram": 0.0}
    for ln in lines:
        out["cpu"] += ln.cpu_h
        out["ram"] += ln.ram_h
        if ln.gpu_h:
            out[f"gpu:{ln.gpu_model}"] = out.get(f"gpu:{ln.gpu_model}", 0.0) + ln.gpu_h
    return out


def usage_from_rows(rows: Sequence[Mapping[str, object]], *, source: str = "usage samples") -> UsageBatch:
    """A :class:`UsageBatch` from dict rows (the API body, tests): t, dt, node, namespace, pod, container,
    labels, gpu_model, cpu_request, cpu_usage, ram_request, ram_usage, gpu_request, gpu_usage."""
    nodes: dict[str, int] = {}
    keys: dict[ContainerKey, int] = {}
    models: dict[str, int] = {"": 0}
    cols: dict[str, list[float]] = {c: [] for c in ("t", "dt", "cpu_request", "cpu_usage", "ram_request", "ram_usage",
                                                    "gpu_request", "gpu_usage")}
    idx: dict[str, list[int]] = {"node": [], "key": [], "model": []}
    for i, r in enumerate(rows):
        try:
            labels = r.get("labels") or {}
            if not isinstance(labels, Mapping):
                raise TypeError("labels must be a mapping")
            k = ContainerKey(str(r["namespace"]), str(r["pod"]), str(r.get("container", "")),
                             str(r.get("controller", "")), str(r.get("controller_kind", "")),
                             tuple(sorted((str(a), str(b)) for a, b in labels.items())))
            for c in cols:
                v = float(r.get(c, 0.0) or 0.0)  # type: ignore[arg-type]
                if not math.isfinite(v):
                    raise ValueError(f"{c} is not finite")
                cols[c].append(v)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"bad sample: {exc}", source=source, line=i + 1) from None
        idx["node"].append(nodes.setdefault(str(r.get("node", "")), len(nodes)))
        idx["key"].append(keys.setdefault(k, len(keys)))
        idx["model"].append(models.setdefault(str(r.get("gpu_model", "") or ""), len(models)))
    f = {c: np.asarray(v, dtype=np.float64) for c, v in cols.items()}
    return UsageBatch(
        t=f["t"], dt=f["dt"], node=np.asarray(idx["node"], dtype=np.int64), key=np.asarray(idx["key"], dtype=np.int64),
        model=np.asarray(idx["model"], dtype=np.int64), cpu_req=f["cpu_request"], cpu_use=f["cpu_usage"],
        ram_req=f["ram_request"], ram_use=f["ram_usage"], gpu_req=f["gpu_request"], gpu_use=f["gpu_usage"],
        nodes=list(nodes), keys=list(keys), models=list(models),
    )

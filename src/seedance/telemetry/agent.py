"""The node agent: sample every 5 s, keep the node's ledger windows, post them with the GPU state.

``TickBuffer`` turns sampler :class:`~seedance.telemetry.sampler.Tick` s into the ledger's usage and
asset batches; :class:`Agent` feeds them to a :class:`~seedance.finops.ingest.LedgerIngestor` and,
per tick, sends the open window (and a just-closed one) to the control plane's
``POST /api/v1/telemetry`` — or writes them to a store directly. Re-sending is harmless: the server
replaces the node-window.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from seedance.finops.ingest import AssetBatch, ContainerKey, LedgerIngestor, UsageBatch
from seedance.finops.prices import PriceSheet
from seedance.finops.wire import MAX_CONTAINERS, from_node_window
from seedance.telemetry.pods import PodDirectory
from seedance.telemetry.sampler import NodeSampler, Tick

log = logging.getLogger(__name__)


def batches(ticks: Sequence[Tick]) -> tuple[UsageBatch, AssetBatch]:
    """Columns of the containers and node assets of ``ticks`` (ticks with ``dt == 0`` are skipped)."""
    nodes: dict[str, int] = {}
    keys: dict[ContainerKey, int] = {}
    models: dict[str, int] = {"": 0}
    u: dict[str, list[float]] = {c: [] for c in ("t", "dt", "cpu_req", "cpu_use", "ram_req", "ram_use", "gpu_req",
                                                 "gpu_use")}
    ui: dict[str, list[int]] = {"node": [], "key": [], "model": []}
    a: dict[str, list[float]] = {c: [] for c in ("t", "dt", "cpu", "ram", "gpus")}
    ai: dict[str, list[int]] = {"node": [], "model": [], "primary": []}
    amodels: dict[str, int] = {}
    for tk in ticks:
        if tk.dt <= 0:
            continue
        n = nodes.setdefault(tk.node, len(nodes))
        for c in tk.containers:
            k = ContainerKey(c.namespace, c.pod, c.container, c.controller, c.controller_kind,
                             tuple(sorted(c.labels.items())))
            ui["node"].append(n)
            ui["key"].append(keys.setdefault(k, len(keys)))
            ui["model"].append(models.setdefault(c.gpu_model, len(models)))
            for col, v in (("t", tk.t), ("dt", tk.dt), ("cpu_req", c.cpu_request), ("cpu_use", c.cpu_usage),
                           ("ram_req", c.ram_request), ("ram_use", c.ram_usage), ("gpu_req", c.gpu_request),
                           ("gpu_use", c.gpu_usage)):
                u[col].append(v)
        gpus = list(tk.asset.gpus.items()) or [("", 0.0)]
        for j, (m, count) in enumerate(gpus):
            ai["node"].append(n)
            ai["model"].append(amodels.setdefault(m, len(amodels)) if m else -1)
            ai["primary"].append(1 if j == 0 else 0)
            for col, v in (("t", tk.t), ("dt", tk.dt), ("cpu", tk.asset.cpu_cores if j == 0 else 0.0),
                           ("ram", tk.asset.ram_bytes if j == 0 else 0.0), ("gpus", count)):
                a[col].append(v)
    f = {k: np.asarray(v, dtype=np.float64) for k, v in u.items()}
    usage = UsageBatch(t=f["t"], dt=f["dt"], node=np.asarray(ui["node"], dtype=np.int64),
                       key=np.asarray(ui["key"], dtype=np.int64), model=np.asarray(ui["model"], dtype=np.int64),
                       cpu_req=f["cpu_req"], cpu_use=f["cpu_use"], ram_req=f["ram_req"], ram_use=f["ram_use"],
                       gpu_req=f["gpu_req"], gpu_use=f["gpu_use"], nodes=list(nodes), keys=list(keys),
                       models=list(models))
    g = {k: np.asarray(v, dtype=np.float64) for k, v in a.items()}
    assets = AssetBatch(t=g["t"], dt=g["dt"], node=np.asarray(ai["node"], dtype=np.int64), cpu_cores=g["cpu"],
                        ram_bytes=g["ram"], model=np.asarray(ai["model"], dtype=np.int64), gpus=g["gpus"],
                        primary=np.asarray(ai["primary"], dtype=bool), nodes=list(nodes), models=list(amodels))
    return usage, assets


def device_json(tick: Tick) -> list[dict[str, Any]]:
    """The GPU state rows of a tick (``POST /api/v1/telemetry`` ``gpus``)."""
    out = []
    for d in tick.devices:
        row = asdict(d)
        row.pop("node")
        row.pop("idle_energy_j")
        row["holders"] = [{"namespace": h.namespace, "pod": h.pod, "container": h.container,
                           "allocated": h.allocated, "used": h.used} for h in d.holders]
        out.append(row)
    return out


class Agent:
    """Runs a sampler and ships its ledger windows.

    Args:
        sampler: The node sampler.
        cluster: Cluster name.
        send: Called with each post body (e.g. an HTTP POST); a failure is logged and retried next tick.
        window_s: Ledger window.
        prices: Used only for the local copy (the server prices what it receives).
        part: Containers per post (a node-window with more is sent in parts).
        refresh_pods: Returns the node's current pods (e.g. :func:`seedance.telemetry.pods.from_kubernetes`);
            called every ``refresh_every`` ticks, a failure keeps the previous set.
    """

    def __init__(self, sampler: NodeSampler, *, cluster: str, send: Callable[[dict[str, Any]], None],
                 window_s: float = 3600.0, prices: PriceSheet | None = None, part: int = 50,
                 refresh_pods: Callable[[], PodDirectory] | None = None, refresh_every: int = 6) -> None:
        self.sampler = sampler
        self.cluster = cluster
        self.send = send
        self.window_s = window_s
        self.part = max(1, min(part, MAX_CONTAINERS))
        self.refresh_pods = refresh_pods
        self.refresh_every = max(1, refresh_every)
        self._ticks = 0
        self.ingestor = LedgerIngestor(cluster, prices or PriceSheet(), window_s=window_s)
        self.pending: set[tuple[int, str]] = set()
        self.sent = 0
        self.failed = 0

    def bodies(self, tick: Tick) -> list[dict[str, Any]]:
        """The posts of one tick: the GPU state, then each pending window in parts of ≤ ``part`` containers."""
        head = {"cluster": self.cluster, "node": self.sampler.node, "window_s": self.window_s}
        out: list[dict[str, Any]] = [{**head, "windows": [], "gpus": device_json(tick)}]
        for nw in self.ingestor.node_windows(sorted(self.pending)):
            w = from_node_window(nw, self.window_s)
            cs = w["containers"]
            for i in range(0, max(1, len(cs)), self.part):
                out.append({**head, "windows": [{**w, "containers": cs[i:i + self.part]}]})
        return out

    def step(self, t: float | None = None) -> Tick:
        """One tick: sample, accumulate, post the GPU state and the touched windows."""
        if self.refresh_pods is not None and self._ticks % self.refresh_every == 0:
            try:
                self.sampler.pods.replace(self.refresh_pods().pods())
            except Exception as exc:  # the API server may be away: keep the last known pods
                log.warning("pod refresh failed (%s); keeping %d known pods", exc, len(self.sampler.pods.pods()))
        self._ticks += 1
        tick = self.sampler.tick(t)
        usage, assets = batches([tick])
        self.pending |= self.ingestor.add(usage, assets)
        try:
            for body in self.bodies(tick):
                self.send(body)
        except Exception as exc:  # keep sampling; the windows are re-sent next tick
            self.failed += 1
            log.warning("telemetry post failed (%s); will retry", exc)
            return tick
        self.sent += 1
        current = int(tick.t // self.window_s)
        self.pending = {k for k in self.pending if k[0] >= current}
        self.ingestor.drop_before(current)
        return tick

    def run(self, interval_s: float = 5.0, *, ticks: int | None = None) -> None:
        """Tick every ``interval_s`` (forever, or ``ticks`` times)."""
        n = 0
        next_t = time.monotonic()
        while ticks is None or n < ticks:
            self.step()
            n += 1
            next_t += interval_s
            time.sleep(max(0.0, next_t - time.monotonic()))

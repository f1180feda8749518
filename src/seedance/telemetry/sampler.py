"""The node sampler: one tick joins GPUs, MIG slices, processes, containers and pods.

Per tick it reads the GPU collector (nvidia-smi, NVML or a fake), optionally a dcgm-exporter
scrape (MIG ``GR_ENGINE_ACTIVE``), and every process (CPU-seconds, RSS, cgroup). Then:

* process → container → pod via the cgroup container id and the :class:`PodDirectory`;
* each device (a whole GPU, or one MIG instance) gets its holders: the pods that claim it
  (annotation indices, MIG instance of their processes, or simply where their processes run)
  with their *allocated* share (the claim's fraction) and their *used* share: per-process SM %
  where the device reports it (NVML samples, ``pmon``), else the device's utilisation split by
  the processes' memory, else nothing (unknown is not zero: the container is billed its request);
* device active energy over the tick (energy counter, else power × dt, minus the model's idle
  power) is split over processes by used share; the rest stays with the device (Kepler's rule);
* one :class:`ContainerUsage` row per container with its requests and usage goes to the ledger.

Attribution is computed per process and summed to containers and pods, so Σ process =
container and Σ container = pod hold by construction (tests check them on random inputs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from seedance.core.catalog import CATALOG
from seedance.telemetry.attribution import split_by_ratio
from seedance.telemetry.dcgm import engine_active, parse_dcgm
from seedance.telemetry.models import catalog_model
from seedance.telemetry.pods import ContainerMeta, PodDirectory, PodMeta
from seedance.telemetry.procfs import CgroupSampler, ProcessReading, ProcessSampler
from seedance.telemetry.readings import GpuProcess, GpuSnapshot, ParseIssues, SliceReading


class GpuCollector(Protocol):
    """Anything that reads a node's GPUs once per tick."""

    name: str

    def collect(self) -> GpuSnapshot:
        """One tick."""


@dataclass(frozen=True, slots=True)
class Holder:
    """A container's share of one device."""

    namespace: str
    pod: str
    container: str
    allocated: float
    used: float | None
    energy_j: float = 0.0


@dataclass(frozen=True, slots=True)
class DeviceState:
    """One device (whole GPU or MIG instance) after a tick: readings, holders, $/h."""

    node: str
    gpu: int
    uuid: str
    model: str
    slice: str = ""
    profile: str = ""
    fraction: float = 1.0
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    lost: bool = False
    holders: tuple[Holder, ...] = ()
    cost_usd_h: float = 0.0
    idle_energy_j: float = 0.0


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    """One container over one tick: requests and usage (cores, bytes, GPUs) and its tags."""

    namespace: str
    pod: str
    container: str
    uid: str = ""
    controller: str = ""
    controller_kind: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    gpu_model: str = ""
    cpu_request: float = 0.0
    cpu_usage: float = 0.0
    ram_request: float = 0.0
    ram_usage: float = 0.0
    gpu_request: float = 0.0
    gpu_usage: float = 0.0


@dataclass(frozen=True, slots=True)
class ProcessShare:
    """One process's attributed GPU use and energy over a tick."""

    pid: int
    namespace: str
    pod: str
    container: str
    device: str
    used: float
    energy_j: float


@dataclass(frozen=True, slots=True)
class NodeAsset:
    """What the node offers over the tick (for node cost and idle)."""

    node: str
    cpu_cores: float
    ram_bytes: float
    gpus: Mapping[str, float]


@dataclass(slots=True)
class Tick:
    """The result of one sampler tick."""

    t: float
    dt: float
    node: str
    asset: NodeAsset
    containers: list[ContainerUsage]
    devices: list[DeviceState]
    processes: list[ProcessShare]
    issues: ParseIssues


Key = tuple[str, str, str]  # namespace, pod, container


class NodeSampler:
    """Samples one node.

    Args:
        node: Node name.
        gpus: The GPU collector (``None``: a CPU-only node).
        processes: The process sampler (``None``: no per-process data). With ``cgroups`` it reads only
            the processes holding a GPU (for device attribution); without, every process, summed
            to containers for CPU and memory usage.
        cgroups: Container counters from the cgroup files (cAdvisor's way: cost per container, not
            per process); ``None``: container usage from the processes.
        pods: The pod directory of this node.
        cpu_cores, ram_bytes: The node's capacity.
        dcgm_text: Returns a dcgm-exporter scrape (MIG engine activity), or ``None``.
        prices: ``model -> $/GPU-h`` for the heatmap's cost colour.
        tag_keys: Cost-tag keys joined to every container.
    """

    def __init__(self, node: str, *, gpus: GpuCollector | None, processes: ProcessSampler | None,
                 pods: PodDirectory, cpu_cores: float, ram_bytes: float, cgroups: CgroupSampler | None = None,
                 dcgm_text: Callable[[], str | None] | None = None,
                 prices: Callable[[str], float] | None = None, tag_keys: Sequence[str] = ("team", "env")) -> None:
        self.node = node
        self.gpus = gpus
        self.processes = processes
        self.cgroups = cgroups
        self._last_cg: dict[str, float] = {}
        self.pods = pods
        self.cpu_cores = cpu_cores
        self.ram_bytes = ram_bytes
        self.dcgm_text = dcgm_text
        self.prices = prices
        self.tag_keys = tuple(tag_keys)
        self._last_t: float | None = None
        self._last_cpu: dict[tuple[int, float], float] = {}
        self._last_energy: dict[str, float] = {}

    # ------------------------------------------------------------------------------------------
    def tick(self, t: float | None = None, dt: float | None = None) -> Tick:
        """One tick (``t``/``dt`` override the clock, for replays of recorded snapshots)."""
        issues = ParseIssues()
        snap = self.gpus.collect() if self.gpus is not None else GpuSnapshot(t=t or 0.0)
        issues.merge(snap.issues)
        now = t if t is not None else snap.t
        if dt is None:
            dt = (now - self._last_t) if self._last_t is not None and now > self._last_t else 0.0
        self._last_t = now
        if self.processes is None:
            procs = []
        elif self.cgroups is not None:  # only the GPU processes, to attribute devices
            procs = self.processes.sample(pids={p.pid for p in snap.processes})
        else:
            procs = self.processes.sample()
        by_pid = {p.pid: p for p in procs}
        cpu_use = self._cpu_deltas(procs, dt)
        by_container = self._cgroup_usage(dt) if self.cgroups is not None else None
        active = self._engine_active(issues)
        slices = [SliceReading(s.gpu_index, s.parent_uuid, s.gi_id, s.ci_id, s.profile, s.mig_uuid,
                               s.compute_slices, s.total_slices, s.mem_used_mib, s.mem_total_mib,
                               active.get((s.parent_uuid or "", s.gi_id), s.engine_active))
                  for s in snap.slices]
        devices, shares, gpu_usage = self._devices(snap, slices, by_pid, dt)
        containers = self._containers(procs, cpu_use, gpu_usage, devices, by_container)
        models: dict[str, float] = {}
        for g in snap.gpus:
            m = catalog_model(g.name) or (g.name or "unknown")
            models[m] = models.get(m, 0.0) + 1.0
        asset = NodeAsset(node=self.node, cpu_cores=self.cpu_cores, ram_bytes=self.ram_bytes, gpus=models)
        return Tick(t=now, dt=dt, node=self.node, asset=asset, containers=containers, devices=devices,
                    processes=shares, issues=issues)

    def _engine_active(self, issues: ParseIssues) -> dict[tuple[str, int | None], float]:
        if self.dcgm_text is None:
            return {}
        text = self.dcgm_text()
        if not text:
            return {}
        try:
            return engine_active(parse_dcgm(text))
        except ValueError as exc:
            issues.skip("dcgm", str(exc))
            return {}

    def _cpu_deltas(self, procs: list[ProcessReading], dt: float) -> dict[int, float]:
        """Cores used per pid over the tick (0 on a first sight: no previous counter)."""
        out: dict[int, float] = {}
        cur: dict[tuple[int, float], float] = {}
        for p in procs:
            key = (p.pid, p.start)
            cur[key] = p.cpu_s
            prev = self._last_cpu.get(key)
            out[p.pid] = max(0.0, p.cpu_s - prev) / dt if prev is not None and dt > 0 else 0.0
        self._last_cpu = cur
        return out

    def _owner(self, pid: int, by_pid: Mapping[int, ProcessReading]) -> tuple[PodMeta, ContainerMeta] | None:
        p = by_pid.get(pid)
        if p is None or p.cgroup.container_id is None:
            return None
        return self.pods.by_container(p.cgroup.container_id)

    def _devices(self, snap: GpuSnapshot, slices: list[SliceReading], by_pid: Mapping[int, ProcessReading],
                 dt: float) -> tuple[list[DeviceState], list[ProcessShare], dict[Key, float]]:
        gpu_by_uuid = {g.uuid: g for g in snap.gpus if g.uuid}
        procs_on: dict[tuple[str, str], list[GpuProcess]] = {}
        for pr in snap.processes:
            dev = f"{pr.gi_id}/{pr.ci_id}" if pr.gi_id is not None else ""
            procs_on.setdefault((pr.gpu_uuid, dev), []).append(pr)
        claims: dict[tuple[int, str], list[tuple[PodMeta, float]]] = {}
        for pod in self.pods.pods():
            if pod.gpu is not None and pod.gpu.indices and pod.gpu.mig_profile is None:
                for i in pod.gpu.indices:
                    claims.setdefault((i, ""), []).append((pod, pod.gpu.fraction))
        out: list[DeviceState] = []
        shares: list[ProcessShare] = []
        usage: dict[Key, float] = {}
        units: list[tuple[int, str, str, float, SliceReading | None]] = []
        for g in snap.gpus:
            if g.mig:
                units.extend((g.index, g.uuid or "", s.key, s.fraction, s) for s in slices if s.gpu_index == g.index)
            else:
                units.append((g.index, g.uuid or "", "", 1.0, None))
        for idx, uuid, key, fraction, sl in units:
            g = gpu_by_uuid.get(uuid) or next(x for x in snap.gpus if x.index == idx)
            model = catalog_model(g.name) or (g.name or "unknown")
            here = procs_on.get((uuid, key), [])
            util = (sl.engine_active * 100.0 if sl is not None and sl.engine_active is not None else None) \
                if sl is not None else g.util_pct
            per_proc = _used_shares(here, util, whole=sl is None)
            energy = self._device_energy(uuid + key, g.energy_mj, g.power_w, dt, model, fraction,
                                         share_power=sl is not None)
            holders: dict[Key, list[float]] = {}  # key -> [allocated, used, energy, used known]
            busy = sum(v for v in per_proc.values() if v is not None)
            _, _, per_e = split_by_ratio(energy[0], 1.0, busy, {p: v for p, v in per_proc.items() if v is not None})
            for pr in here:
                own = self._owner(pr.pid, by_pid)
                used = per_proc.get(pr.pid)
                e = per_e.get(pr.pid, 0.0)
                if own is None:
                    continue
                pod, cont = own
                k = (pod.namespace, pod.name, cont.name)
                h = holders.setdefault(k, [0.0, 0.0, 0.0, 0.0])
                if used is not None:
                    h[1] += used
                    h[3] = 1.0
                h[2] += e
                shares.append(ProcessShare(pr.pid, *k, device=f"{uuid}/{key}" if key else uuid,
                                           used=used or 0.0, energy_j=e))
            claimed = claims.get((idx, key), [])
            for pod, frac in claimed:
                cont_name = pod.containers[0].name if pod.containers else ""
                holders.setdefault((pod.namespace, pod.name, cont_name), [0.0, 0.0, 0.0, 0.0])[0] += frac
            for k, h in holders.items():
                if h[0] == 0.0:  # no explicit claim: a MIG slice (all of it) or a GPU is held by whoever runs on it
                    h[0] = 1.0 if sl is not None else self._implicit(k)
            attributed = sum(h[2] for h in holders.values())
            hs = tuple(Holder(k[0], k[1], k[2], allocated=h[0], used=h[1] if h[3] else None, energy_j=h[2])
                       for k, h in sorted(holders.items()))
            for hd in hs:
                if hd.used is not None:
                    k = (hd.namespace, hd.pod, hd.container)
                    usage[k] = usage.get(k, 0.0) + hd.used * (fraction if sl is not None else 1.0)
            price = self.prices(model) if self.prices is not None else CATALOG.resolve(model).price_usd_per_hour \
                if model in CATALOG else 0.0
            out.append(DeviceState(
                node=self.node, gpu=idx, uuid=uuid, model=model, slice=key, profile=sl.profile if sl else "",
                fraction=fraction, util_pct=util,
                mem_used_mib=sl.mem_used_mib if sl is not None else g.mem_used_mib,
                mem_total_mib=sl.mem_total_mib if sl is not None else g.mem_total_mib,
                power_w=g.power_w if sl is None else None, temp_c=g.temp_c, sm_clock_mhz=g.sm_clock_mhz,
                holders=hs, cost_usd_h=price * fraction, idle_energy_j=energy[0] - attributed + energy[1],
            ))
        for lost in snap.lost:
            out.append(DeviceState(node=self.node, gpu=-1, uuid=lost.where, model="unknown", lost=True))
        return out, shares, usage

    def _implicit(self, key: Key) -> float:
        pod = next((p for p in self.pods.pods() if (p.namespace, p.name) == key[:2]), None)
        if pod is not None and pod.gpu is not None:
            return pod.gpu.fraction
        return 1.0

    def _device_energy(self, dev: str, energy_mj: float | None, power_w: float | None, dt: float, model: str,
                       fraction: float, *, share_power: bool) -> tuple[float, float]:
        """(active J, idle J) of a device over the tick; MIG slices share the GPU's by fraction."""
        total = None
        if energy_mj is not None:
            prev = self._last_energy.get(dev)
            self._last_energy[dev] = energy_mj
            if prev is not None and energy_mj >= prev:  # a smaller value: counter reset (driver reload)
                total = (energy_mj - prev) / 1000.0
        if total is None:
            total = (power_w or 0.0) * dt
        total *= fraction if share_power else 1.0
        idle_w = CATALOG.resolve(model).idle_w if model in CATALOG else 0.0
        idle = min(total, idle_w * dt * fraction)
        return total - idle, idle

    def _cgroup_usage(self, dt: float) -> dict[str, tuple[float, float]]:
        """``{container id: (cores used over the tick, working-set bytes)}`` from the cgroup counters."""
        assert self.cgroups is not None
        now = self.cgroups.sample()
        out = {}
        for cid, r in now.items():
            prev = self._last_cg.get(cid)
            cores = max(0.0, r.cpu_s - prev) / dt if prev is not None and dt > 0 else 0.0
            out[cid] = (cores, r.working_set_bytes)
        self._last_cg = {cid: r.cpu_s for cid, r in now.items()}
        return out

    def _containers(self, procs: list[ProcessReading], cpu_use: Mapping[int, float],
                    gpu_usage: Mapping[Key, float], devices: list[DeviceState],
                    by_container: Mapping[str, tuple[float, float]] | None = None) -> list[ContainerUsage]:
        cpu: dict[Key, float] = {}
        ram: dict[Key, float] = {}
        cg = by_container or {}
        for pod in self.pods.pods() if by_container is not None else ():
            for c in pod.containers:
                if c.container_id and c.container_id in cg:
                    cpu[(pod.namespace, pod.name, c.name)], ram[(pod.namespace, pod.name, c.name)] = cg[c.container_id]
        for p in procs if by_container is None else ():
            if p.cgroup.container_id is None:
                continue
            own = self.pods.by_container(p.cgroup.container_id)
            if own is None:
                continue
            k = (own[0].namespace, own[0].name, own[1].name)
            cpu[k] = cpu.get(k, 0.0) + cpu_use.get(p.pid, 0.0)
            ram[k] = ram.get(k, 0.0) + p.rss_bytes
        gpu_model: dict[Key, str] = {}
        for d in devices:
            for h in d.holders:
                gpu_model.setdefault((h.namespace, h.pod, h.container), d.model)
        out = []
        for pod in self.pods.pods():
            first = True
            for c in pod.containers or (ContainerMeta(name=""),):
                k = (pod.namespace, pod.name, c.name)
                gpu_req = pod.gpu.gpus if (pod.gpu is not None and first) else 0.0
                model = gpu_model.get(k) or gpu_model.get((pod.namespace, pod.name, pod.containers[0].name)
                                                          if pod.containers else k, "")
                out.append(ContainerUsage(
                    namespace=pod.namespace, pod=pod.name, container=c.name, uid=pod.uid,
                    controller=pod.controller, controller_kind=pod.controller_kind, labels=pod.tags(self.tag_keys),
                    gpu_model=model if gpu_req or gpu_usage.get(k) else "", cpu_request=c.cpu_request,
                    cpu_usage=cpu.get(k, 0.0), ram_request=c.ram_request, ram_usage=ram.get(k, 0.0),
                    gpu_request=gpu_req, gpu_usage=gpu_usage.get(k, 0.0),
                ))
                first = False
        return out


def _used_shares(procs: Sequence[GpuProcess], util_pct: float | None, *, whole: bool) -> dict[int, float | None]:
    """Each process's share of the device's time (0..1), or ``None`` when nothing tells it.

    Per-process SM % wins (time-slicing and MPS report it); else the device's utilisation is split
    by the processes' memory (MIG instances: their engine activity); else unknown.
    """
    if not procs:
        return {}
    if whole and all(p.sm_util_pct is not None for p in procs):
        return {p.pid: min(1.0, (p.sm_util_pct or 0.0) / 100.0) for p in procs}
    if util_pct is None or math.isnan(util_pct):
        return {p.pid: None for p in procs}
    mem = [p.used_mib or 0.0 for p in procs]
    total = sum(mem)
    out: dict[int, float | None] = {}
    for p, m in zip(procs, mem, strict=True):
        out[p.pid] = util_pct / 100.0 * (m / total if total > 0 else 1.0 / len(procs))
    return out

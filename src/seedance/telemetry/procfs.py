"""Per-process sampling from ``/proc`` and cgroups (psutil): CPU-seconds, RSS, container → pod.

Each tick reads every process's CPU times (user + system, seconds) and resident memory through
``psutil.process_iter``; ``/proc/<pid>/cgroup`` is read once per process (cached by pid and start
time, so a reused pid is re-read) and parsed by :func:`parse_cgroup` into the container id, the pod
UID and the QoS class. CPU use over a tick is the difference of CPU-seconds between two ticks
(counters are monotonic per process; a process that restarted is a new key).

Cgroup layouts recognised (cgroup v2 ``0::<path>`` and v1 ``N:<controllers>:<path>``):
systemd driver ``kubepods[-<qos>].slice/kubepods-<qos>-pod<uid with _>.slice/<runtime>-<id>.scope``
with ``cri-containerd-``, ``crio-`` or ``docker-`` runtimes; cgroupfs driver
``/kubepods/<qos>/pod<uid>/<id>``; plain Docker ``/docker/<id>``; anything else is a host process
(no container). Guaranteed pods have no QoS level in the path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_CONTAINER = re.compile(r"(?:(cri-containerd|crio|docker)-)?([0-9a-f]{64})(?:\.scope)?$")
_QOS = re.compile(r"kubepods[-/](burstable|besteffort)")


@dataclass(frozen=True, slots=True)
class CgroupIdentity:
    """Who a process belongs to, from its cgroup path."""

    container_id: str | None
    pod_uid: str | None
    qos: str | None
    runtime: str | None
    path: str


def parse_cgroup(text: str) -> CgroupIdentity:
    """The container and pod of a ``/proc/<pid>/cgroup`` content (host process: both ``None``).

    >>> c = parse_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod4b1f4f77_49e6_"
    ...                  "4e30_98db_e98055c8a54f.slice/cri-containerd-" + "ab" * 32 + ".scope")
    >>> c.pod_uid, c.qos, c.runtime, c.container_id[:6]
    ('4b1f4f77-49e6-4e30-98db-e98055c8a54f', 'burstable', 'containerd', 'ababab')
    """
    best = ""
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        path = parts[2]
        if "kubepods" in path or "/docker/" in path or "docker-" in path:
            if parts[0] == "0" or not best or "name=systemd" in parts[1]:
                best = path
        elif not best and parts[0] == "0":
            best = path
    if not best:
        best = next((ln.split(":", 2)[2] for ln in text.splitlines() if ln.count(":") >= 2), "")
    leaf = best.rstrip("/").rsplit("/", 1)[-1]
    m = _CONTAINER.search(leaf)
    pod = _POD.search(best)
    kube = "kubepods" in best
    container = m.group(2) if m and (kube or "docker" in best) else None
    runtime = None
    if m and container:
        runtime = {"cri-containerd": "containerd", "crio": "cri-o", "docker": "docker"}.get(m.group(1) or "")
        if runtime is None and "/docker/" in best:
            runtime = "docker"
    qos_m = _QOS.search(best)
    qos = qos_m.group(1) if qos_m else ("guaranteed" if kube and pod else None)
    return CgroupIdentity(
        container_id=container, pod_uid=pod.group(1).replace("_", "-") if pod else None, qos=qos,
        runtime=runtime, path=best,
    )


@dataclass(frozen=True, slots=True)
class ProcessReading:
    """One process at one tick: cumulative CPU-seconds and resident memory."""

    pid: int
    start: float
    cpu_s: float
    rss_bytes: int
    cgroup: CgroupIdentity


class ProcessSampler:
    """Reads every process once per tick; caches cgroup identities by (pid, start time).

    Args:
        psutil_module: ``psutil`` (tests may pass a fake with ``process_iter``).
        read_cgroup: Reads ``/proc/<pid>/cgroup`` (tests pass a fake).
    """

    def __init__(self, psutil_module: Any | None = None, read_cgroup: Any | None = None) -> None:
        if psutil_module is None:
            import psutil

            psutil_module = psutil
        self.ps: Any = psutil_module
        self.read_cgroup = read_cgroup or _read_cgroup
        self._ids: dict[tuple[int, float], CgroupIdentity] = {}

    def sample(self, pids: Iterable[int] | None = None) -> list[ProcessReading]:
        """Every process (or only ``pids``, read one by one without walking ``/proc``)."""
        ps = self.ps
        out: list[ProcessReading] = []
        seen: set[tuple[int, float]] = set()
        wanted = set(pids) if pids is not None else None
        attrs = ["pid", "cpu_times", "memory_info", "create_time"]
        if wanted is not None:
            it: Iterable[Any] = []
            for pid in sorted(wanted):
                try:
                    it = [*it, _Info(ps.Process(pid).as_dict(attrs))]
                except (ps.NoSuchProcess, ps.AccessDenied, ps.ZombieProcess):
                    continue
        else:
            it = ps.process_iter(attrs)
        for p in it:
            info = p.info
            pid = info["pid"]
            if wanted is not None and pid not in wanted:
                continue
            ct, mi = info.get("cpu_times"), info.get("memory_info")
            if ct is None or mi is None:  # gone, or access denied
                continue
            key = (pid, float(info.get("create_time") or 0.0))
            seen.add(key)
            ident = self._ids.get(key)
            if ident is None:
                text = self.read_cgroup(pid)
                if text is None:
                    continue
                ident = self._ids[key] = parse_cgroup(text)
            out.append(ProcessReading(pid=pid, start=key[1], cpu_s=float(ct.user + ct.system),
                                      rss_bytes=int(mi.rss), cgroup=ident))
        if wanted is None:
            for key in [k for k in self._ids if k not in seen]:
                del self._ids[key]
        return out


@dataclass(frozen=True, slots=True)
class _Info:
    info: dict[str, Any]


def _read_cgroup(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class ContainerReading:
    """One container's cgroup counters: cumulative CPU-seconds and working-set bytes."""

    container_id: str
    cpu_s: float
    working_set_bytes: float


class CgroupSampler:
    """Container CPU and memory straight from the container cgroups — what cAdvisor exports as
    ``container_cpu_usage_seconds_total`` and ``container_memory_working_set_bytes`` (OpenCost's
    inputs, its specification's Appendix B).

    Cost per tick is two small file reads per container, whatever the number of processes, which
    is why the agent uses it by default; per-process reads are kept for the GPU processes only.
    cgroup v2: ``cpu.stat`` ``usage_usec``, ``memory.current`` − ``memory.stat`` ``inactive_file``;
    cgroup v1: ``cpuacct.usage`` (ns), ``memory.usage_in_bytes`` − ``total_inactive_file``.

    Args:
        root: The cgroup mount (``/sys/fs/cgroup``).
        rescan_every: Ticks between walks of the hierarchy for new containers.
    """

    def __init__(self, root: str = "/sys/fs/cgroup", *, rescan_every: int = 6) -> None:
        import os

        self.root = root
        self.rescan_every = max(1, rescan_every)
        self._os = os
        self._paths: dict[str, tuple[str, str | None]] = {}  # container id -> (cpu dir, memory dir)
        self._ticks = 0

    def scan(self) -> dict[str, tuple[str, str | None]]:
        """Find every container cgroup under the ``kubepods`` hierarchies (v2, or v1 cpuacct + memory)."""
        os = self._os
        found: dict[str, dict[str, str]] = {}
        tops = [(self.root, "v2")]
        for ctl in ("cpuacct", "cpu,cpuacct", "memory"):
            p = os.path.join(self.root, ctl)
            if os.path.isdir(p):
                tops.append((p, ctl))
        for top, kind in tops:
            for base in ("kubepods.slice", "kubepods"):
                start = os.path.join(top, base)
                if not os.path.isdir(start):
                    continue
                for dirpath, dirnames, _ in os.walk(start):
                    leaf = dirpath.rstrip("/").rsplit("/", 1)[-1]
                    m = _CONTAINER.search(leaf)
                    if m and "pod" in dirpath:
                        slot = "mem" if kind == "memory" else "cpu"
                        found.setdefault(m.group(2), {})[slot] = dirpath
                        if kind == "v2":
                            found[m.group(2)]["mem"] = dirpath
                        dirnames[:] = []
        self._paths = {cid: (p["cpu"], p.get("mem")) for cid, p in found.items() if "cpu" in p}
        return self._paths

    def sample(self) -> dict[str, ContainerReading]:
        """Every container's counters (a container whose files vanished is left out)."""
        if self._ticks % self.rescan_every == 0:
            self.scan()
        self._ticks += 1
        out: dict[str, ContainerReading] = {}
        for cid, (cpu_dir, mem_dir) in self._paths.items():
            try:
                cpu = _cpu_seconds(cpu_dir)
                mem = _working_set(mem_dir) if mem_dir else 0.0
            except (OSError, ValueError):
                continue
            out[cid] = ContainerReading(cid, cpu, mem)
        return out


def _kv(path: str) -> dict[str, str]:
    with open(path, encoding="utf-8") as f:
        return dict(line.split(None, 1) for line in f if " " in line)


def _cpu_seconds(d: str) -> float:
    try:
        return int(_kv(f"{d}/cpu.stat")["usage_usec"]) / 1e6
    except FileNotFoundError:
        with open(f"{d}/cpuacct.usage", encoding="utf-8") as f:
            return int(f.read().strip()) / 1e9


def _working_set(d: str) -> float:
    try:
        with open(f"{d}/memory.current", encoding="utf-8") as f:
            cur = int(f.read().strip())
        inactive = int(_kv(f"{d}/memory.stat").get("inactive_file", "0"))
    except FileNotFoundError:
        with open(f"{d}/memory.usage_in_bytes", encoding="utf-8") as f:
            cur = int(f.read().strip())
        inactive = int(_kv(f"{d}/memory.stat").get("total_inactive_file", "0"))
    return float(max(0, cur - inactive))

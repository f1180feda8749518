"""Test doubles: a fake NVML module (Kepler-style canned devices), a fake psutil, pod documents.

``FakeNvml`` answers the ``pynvml`` calls the collector makes from a device table. The default
table replays the H100 MIG capture (fixtures/README.md): GPU 0 in MIG mode with instances GI 2
(3g.40gb, 11091/40448 MiB, the three processes), GI 3 (2g.20gb), GI 9 and GI 10 (1g.10gb); GPU 1 a whole
H100 with two time-sliced processes and per-process SM samples; GPU 2 lost (``GPU_IS_LOST``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

MIB = 2**20


class NVMLError(Exception):
    """Same shape as pynvml's: ``.value`` is the NVML return code."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class Dev:
    name: str
    uuid: str
    bus: str
    util: int | None = None  # None: NOT_SUPPORTED
    temp: int = 40
    used_mib: float = 0
    total_mib: float = 81559
    power_mw: int | None = 100_000
    energy_mj: int | None = 1_000_000
    sm_clock: int = 1980
    mig: bool = False
    migs: list[Dev] = field(default_factory=list)
    gi: int = 0
    ci: int = 0
    gi_slices: int = 0
    ci_slices: int = 0
    procs: list[tuple[int, float | None]] = field(default_factory=list)  # (pid, used MiB)
    samples: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, timestamp, sm %)
    lost: bool = False


def h100_mig_table() -> list[Dev]:
    mig = Dev("NVIDIA H100 80GB HBM3", "GPU-00000000-0000-0000-0000-000000000000", "00000000:00:09.0", util=None,
              temp=53, used_mib=11125, total_mib=81559, power_mw=433_780, mig=True)
    for i, (gi, prof, sl, used, total) in enumerate([(2, "3g.40gb", 3, 11091, 40448), (3, "2g.20gb", 2, 17, 20096),
                                                     (9, "1g.10gb", 1, 9, 9984), (10, "1g.10gb", 1, 9, 9984)]):
        mig.migs.append(Dev(f"NVIDIA H100 80GB HBM3 MIG {prof}", f"MIG-0000000{i}-0000-0000-0000-00000000000{i}",
                            mig.bus, used_mib=used, total_mib=total, gi=gi, ci=0, gi_slices=sl, ci_slices=sl,
                            procs=[(21180, 2296), (21181, 1272), (21198, 7484)] if gi == 2 else []))
    shared = Dev("NVIDIA H100 80GB HBM3", "GPU-00000000-0000-0000-0000-000000000001", "00000000:00:0A.0", util=60,
                 temp=59, used_mib=19818, power_mw=400_000, procs=[(30001, 8000), (30002, 4000)],
                 samples=[(30001, 10, 40), (30001, 20, 50), (30002, 15, 15)])
    lost = Dev("NVIDIA H100 80GB HBM3", "GPU-00000000-0000-0000-0000-000000000002", "00000000:00:0B.0", lost=True)
    return [mig, shared, lost]


class FakeNvml:
    """The subset of ``pynvml`` the collector calls, over a table of :class:`Dev`."""

    NVMLError = NVMLError
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
    NVML_ERROR_NOT_FOUND = pynvml.NVML_ERROR_NOT_FOUND
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE

    def __init__(self, devices: list[Dev] | None = None, *, fail_init: bool = False) -> None:
        self.devices = devices if devices is not None else h100_mig_table()
        self.fail_init = fail_init
        self.calls: list[str] = []
        self.initialised = False

    def _h(self, h: Dev) -> Dev:
        if h.lost:
            raise NVMLError(self.NVML_ERROR_GPU_IS_LOST)
        return h

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if self.fail_init:
            raise NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
        self.initialised = True

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Dev:  # noqa: N802
        return self._h(self.devices[i])

    def nvmlDeviceGetUUID(self, h: Dev) -> str:  # noqa: N802
        return self._h(h).uuid

    def nvmlDeviceGetName(self, h: Dev) -> bytes:  # noqa: N802
        return self._h(h).name.encode()  # older bindings return bytes

    def nvmlDeviceGetPciInfo(self, h: Dev) -> Any:  # noqa: N802
        return SimpleNamespace(busId=self._h(h).bus.encode())

    def nvmlDeviceGetMigMode(self, h: Dev) -> tuple[int, int]:  # noqa: N802
        return (1, 1) if self._h(h).mig else (0, 0)

    def nvmlDeviceGetUtilizationRates(self, h: Dev) -> Any:  # noqa: N802
        if self._h(h).util is None:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpu=h.util, memory=10)

    def nvmlDeviceGetMemoryInfo(self, h: Dev) -> Any:  # noqa: N802
        d = self._h(h)
        return SimpleNamespace(used=int(d.used_mib * MIB), total=int(d.total_mib * MIB), free=0)

    def nvmlDeviceGetPowerUsage(self, h: Dev) -> int:  # noqa: N802
        if self._h(h).power_mw is None:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return int(h.power_mw)  # type: ignore[arg-type]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Dev) -> int:  # noqa: N802
        if self._h(h).energy_mj is None:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return int(h.energy_mj)  # type: ignore[arg-type]

    def nvmlDeviceGetTemperature(self, h: Dev, sensor: int) -> int:  # noqa: N802
        return self._h(h).temp

    def nvmlDeviceGetClockInfo(self, h: Dev, kind: int) -> int:  # noqa: N802
        return self._h(h).sm_clock

    def nvmlDeviceGetMaxMigDeviceCount(self, h: Dev) -> int:  # noqa: N802
        return 7 if self._h(h).mig else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Dev, k: int) -> Dev:  # noqa: N802
        if k >= len(h.migs):
            raise NVMLError(self.NVML_ERROR_NOT_FOUND)
        return h.migs[k]

    def nvmlDeviceGetGpuInstanceId(self, h: Dev) -> int:  # noqa: N802
        return h.gi

    def nvmlDeviceGetComputeInstanceId(self, h: Dev) -> int:  # noqa: N802
        return h.ci

    def nvmlDeviceGetAttributes(self, h: Dev) -> Any:  # noqa: N802
        return SimpleNamespace(gpuInstanceSliceCount=h.gi_slices, computeInstanceSliceCount=h.ci_slices)

    def nvmlDeviceGetComputeRunningProcesses(self, h: Dev) -> list[Any]:  # noqa: N802
        return [SimpleNamespace(pid=p, usedGpuMemory=None if m is None else int(m * MIB)) for p, m in self._h(h).procs]

    def nvmlDeviceGetProcessUtilization(self, h: Dev, ts: int) -> list[Any]:  # noqa: N802
        s = [x for x in self._h(h).samples if x[1] > ts]
        if not s:
            raise NVMLError(self.NVML_ERROR_NOT_FOUND)
        return [SimpleNamespace(pid=p, timeStamp=t, smUtil=u, memUtil=0) for p, t, u in s]


class FakePsutil:
    """``process_iter`` and ``Process`` over a mutable table ``{pid: (create_time, cpu_s, rss)}``."""

    class NoSuchProcess(Exception):
        pass

    AccessDenied = ZombieProcess = NoSuchProcess

    def __init__(self, table: dict[int, tuple[float, float, int]]) -> None:
        self.table = table
        self.iterations = 0

    def Process(self, pid: int) -> Any:  # noqa: N802 - psutil's name
        if pid not in self.table:
            raise self.NoSuchProcess(pid)
        info = self._info(pid)
        return SimpleNamespace(as_dict=lambda attrs: info)

    def _info(self, pid: int) -> dict[str, Any]:
        ct, cpu, rss = self.table[pid]
        return {"pid": pid, "create_time": ct, "cpu_times": SimpleNamespace(user=cpu * 0.75, system=cpu * 0.25),
                "memory_info": SimpleNamespace(rss=rss)}

    def process_iter(self, attrs: list[str]) -> list[Any]:
        self.iterations += 1
        return [SimpleNamespace(info=self._info(pid)) for pid in sorted(self.table)]


def cgroup_tree(root: Any, containers: dict[str, tuple[str, int, int, int]]) -> None:
    """A cgroup v2 tree under ``root``: ``{container id: (pod uid, usage_usec, memory.current, inactive_file)}``."""
    for cid, (uid, usec, cur, inactive) in containers.items():
        d = (root / "kubepods.slice" / "kubepods-burstable.slice" /
             f"kubepods-burstable-pod{uid.replace('-', '_')}.slice" / f"cri-containerd-{cid}.scope")
        d.mkdir(parents=True, exist_ok=True)
        (d / "cpu.stat").write_text(f"usage_usec {usec}\nuser_usec {usec // 2}\nsystem_usec {usec // 2}\n")
        (d / "memory.current").write_text(f"{cur}\n")
        (d / "memory.stat").write_text(f"anon {cur - inactive}\ninactive_file {inactive}\nactive_file 0\n")


def cgroup_of(pod_uid: str, container_id: str, qos: str = "burstable") -> str:
    """A cgroup v2 path of a containerd container in a pod."""
    u = pod_uid.replace("-", "_")
    return (f"0::/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{u}.slice/"
            f"cri-containerd-{container_id}.scope\n")


def pod_doc(name: str, uid: str, container_ids: list[str], *, namespace: str = "default",
            labels: dict[str, str] | None = None, cpu: str = "4", memory: str = "16Gi", gpus: int = 0,
            annotations: dict[str, str] | None = None, mig: str | None = None, node: str = "n1") -> dict[str, Any]:
    """A Pod document with one container per id."""
    limits: dict[str, str] = {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    if mig:
        limits[f"nvidia.com/mig-{mig}"] = "1"
    containers = []
    for i, _ in enumerate(container_ids):
        res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
        if limits and i == 0:
            res["limits"] = dict(limits)
        containers.append({"name": f"c{i}", "image": "x", "resources": res})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": labels or {},
                     "annotations": annotations or {}},
        "spec": {"nodeName": node, "containers": containers},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": f"c{i}", "containerID": f"containerd://{cid}"} for i, cid in enumerate(container_ids)]},
    }

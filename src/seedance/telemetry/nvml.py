"""NVML collector through ``nvidia-ml-py`` (import name ``pynvml``), MIG instances included.

Per GPU: UUID, name, bus id, utilisation, temperature, memory, power (mW → W), SM clock, MIG mode
and the energy counter (mJ). Per MIG instance: GPU/compute instance ids, profile, slice counts
(``nvmlDeviceGetAttributes``) and memory. Per process: memory, MIG instance ids and SM % from
``nvmlDeviceGetProcessUtilization`` samples.

NOTE(seedance): MIG utilisation semantics.
  NVML answers ``NOT_SUPPORTED`` for ``nvmlDeviceGetUtilizationRates`` on a MIG-enabled GPU and
  on its MIG devices, and ``nvidia-smi`` prints ``[N/A]``. The per-instance activity signal is
  DCGM's profiling field ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (share of time the graphics engine
  of the instance was busy, 0..1; dcgm-exporter labels it with the parent ``UUID`` and
  ``GPU_I_ID``). :mod:`seedance.telemetry.dcgm` reads it from a dcgm-exporter scrape and the
  sampler fills :attr:`SliceReading.engine_active` with it; without one it stays ``None`` and
  the slice is billed by its allocation only (which is what a MIG slice costs anyway: it is
  dedicated hardware). Kepler's GPU proposal (EP-003) makes the same choice.

Any NVML call may fail: ``NOT_SUPPORTED`` gives ``None`` for that value, ``GPU_IS_LOST`` (and a
failing handle) records the GPU as lost, other errors are counted skips. The module is passed
in, so tests drive every path with a fake NVML object.
"""

from __future__ import annotations

import contextlib
import re
import time
from types import ModuleType
from typing import Any

from seedance.telemetry.nvsmi import CollectorUnavailable
from seedance.telemetry.readings import GpuProcess, GpuReading, GpuSnapshot, LostGpu, ParseIssues, SliceReading

_PROFILE = re.compile(r"MIG\s+((?:(\d+)c\.)?(\d+)g\.\d+gb(?:\+\w+)?)", re.IGNORECASE)


def profile_of(name: str) -> tuple[str, int] | None:
    """``("1c.3g.71gb", 1)`` from a MIG device name: the profile and its compute slices.

    >>> profile_of("NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    ('1g.10gb', 1)
    >>> profile_of("NVIDIA H200 MIG 2c.3g.71gb")
    ('2c.3g.71gb', 2)
    """
    m = _PROFILE.search(name)
    if m is None:
        return None
    return m.group(1), int(m.group(2) or m.group(3))


def total_slices_of(name: str) -> int:
    """Compute slices of a whole GPU: 4 on A30, else 7 (A100, H100, H200, B200)."""
    return 4 if "A30" in name.upper() else 7


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class NvmlCollector:
    """Reads GPUs, MIG instances and GPU processes through NVML.

    Args:
        nvml: The ``pynvml`` module (default: imported; a missing library is
            :class:`~seedance.telemetry.nvsmi.CollectorUnavailable`).
        process_util: Also read per-process SM % samples.
    """

    name = "nvml"

    def __init__(self, nvml: ModuleType | Any | None = None, *, process_util: bool = True) -> None:
        if nvml is None:
            try:
                import pynvml as nvml_mod
            except ImportError:
                raise CollectorUnavailable("nvidia-ml-py is not installed", source="nvml") from None
            nvml = nvml_mod
        self.nv = nvml
        self.process_util = process_util
        self._last_sample_ts: dict[int, int] = {}
        try:
            self.nv.nvmlInit()
        except self.nv.NVMLError as exc:
            raise CollectorUnavailable(f"NVML did not initialise: {exc}", source="nvml") from None

    def close(self) -> None:
        """Shut NVML down."""
        with contextlib.suppress(self.nv.NVMLError):
            self.nv.nvmlShutdown()

    # ------------------------------------------------------------------------------------------
    def _call(self, issues: ParseIssues, what: str, fn: Any, *args: Any) -> Any:
        """``fn(*args)``; ``None`` when not supported, re-raises GPU-lost, counts other errors."""
        try:
            return fn(*args)
        except self.nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == self.nv.NVML_ERROR_NOT_SUPPORTED:
                return None
            if code == self.nv.NVML_ERROR_GPU_IS_LOST:
                raise
            issues.skip("nvml-error", f"{what}: {exc}")
            return None

    def collect(self) -> GpuSnapshot:
        """One tick."""
        nv = self.nv
        t = time.time()
        issues = ParseIssues()
        gpus: list[GpuReading] = []
        slices: list[SliceReading] = []
        procs: list[GpuProcess] = []
        lost: list[LostGpu] = []
        count = nv.nvmlDeviceGetCount()
        for i in range(count):
            try:
                h = nv.nvmlDeviceGetHandleByIndex(i)
                g, s, p = self._device(i, h, issues)
            except nv.NVMLError as exc:
                lost.append(LostGpu(where=f"GPU {i}", reason=str(exc)))
                continue
            gpus.append(g)
            slices.extend(s)
            procs.extend(p)
        return GpuSnapshot(t=t, gpus=tuple(gpus), slices=tuple(slices), processes=tuple(procs), lost=tuple(lost),
                           issues=issues)

    def _device(self, i: int, h: Any, issues: ParseIssues
                ) -> tuple[GpuReading, list[SliceReading], list[GpuProcess]]:
        nv = self.nv
        c = self._call
        uuid = _text(nv.nvmlDeviceGetUUID(h))
        name = _text(nv.nvmlDeviceGetName(h))
        pci = c(issues, "pci", nv.nvmlDeviceGetPciInfo, h)
        mig_mode = c(issues, "mig mode", nv.nvmlDeviceGetMigMode, h)
        mig = None if mig_mode is None else bool(mig_mode[0] == nv.NVML_DEVICE_MIG_ENABLE)
        util = None if mig else c(issues, "utilization", nv.nvmlDeviceGetUtilizationRates, h)
        mem = c(issues, "memory", nv.nvmlDeviceGetMemoryInfo, h)
        power = c(issues, "power", nv.nvmlDeviceGetPowerUsage, h)
        energy = c(issues, "energy", nv.nvmlDeviceGetTotalEnergyConsumption, h)
        reading = GpuReading(
            index=i, uuid=uuid, name=name, bus_id=_text(pci.busId) if pci is not None else None,
            util_pct=float(util.gpu) if util is not None else None,
            temp_c=_num(c(issues, "temperature", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)),
            mem_used_mib=mem.used / 2**20 if mem is not None else None,
            mem_total_mib=mem.total / 2**20 if mem is not None else None,
            power_w=power / 1000.0 if power is not None else None,
            sm_clock_mhz=_num(c(issues, "sm clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)),
            mig=mig, energy_mj=float(energy) if energy is not None else None,
        )
        slices: list[SliceReading] = []
        procs: list[GpuProcess] = []
        if mig:
            total = total_slices_of(name)
            n = c(issues, "mig count", nv.nvmlDeviceGetMaxMigDeviceCount, h) or 0
            for k in range(int(n)):
                try:
                    mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
                except nv.NVMLError:
                    continue  # an empty MIG slot answers NOT_FOUND
                sl, sp = self._mig(i, uuid, mh, total, issues)
                slices.append(sl)
                procs.extend(sp)
        else:
            sm = self._process_sm(i, h, issues) if self.process_util else {}
            for pr in c(issues, "processes", nv.nvmlDeviceGetComputeRunningProcesses, h) or []:
                used = getattr(pr, "usedGpuMemory", None)
                procs.append(GpuProcess(pid=int(pr.pid), gpu_uuid=uuid, used_mib=used / 2**20 if used else None,
                                        sm_util_pct=sm.get(int(pr.pid))))
        return reading, slices, procs

    def _mig(self, i: int, parent: str, mh: Any, total: int, issues: ParseIssues
             ) -> tuple[SliceReading, list[GpuProcess]]:
        nv = self.nv
        c = self._call
        mname = _text(nv.nvmlDeviceGetName(mh))
        gi = int(nv.nvmlDeviceGetGpuInstanceId(mh))
        ci = int(nv.nvmlDeviceGetComputeInstanceId(mh))
        attrs = c(issues, "mig attributes", nv.nvmlDeviceGetAttributes, mh)
        prof = profile_of(mname)
        # a compute instance's own slices (a full-GI instance has all of the GI's)
        slices_ci = int(attrs.computeInstanceSliceCount) if attrs is not None else (prof[1] if prof else 1)
        mem = c(issues, "mig memory", nv.nvmlDeviceGetMemoryInfo, mh)
        sl = SliceReading(
            gpu_index=i, parent_uuid=parent, gi_id=gi, ci_id=ci, profile=prof[0] if prof else mname,
            mig_uuid=_text(nv.nvmlDeviceGetUUID(mh)), compute_slices=slices_ci, total_slices=total,
            mem_used_mib=mem.used / 2**20 if mem is not None else None,
            mem_total_mib=mem.total / 2**20 if mem is not None else None,
        )
        procs = []
        for pr in c(issues, "mig processes", nv.nvmlDeviceGetComputeRunningProcesses, mh) or []:
            used = getattr(pr, "usedGpuMemory", None)
            procs.append(GpuProcess(pid=int(pr.pid), gpu_uuid=parent, used_mib=used / 2**20 if used else None,
                                    gi_id=gi, ci_id=ci))
        return sl, procs

    def _process_sm(self, i: int, h: Any, issues: ParseIssues) -> dict[int, float]:
        """Mean SM % per pid over the samples since the last tick (NVML keeps a ring buffer)."""
        nv = self.nv
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(h, self._last_sample_ts.get(i, 0))
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) not in (nv.NVML_ERROR_NOT_FOUND, nv.NVML_ERROR_NOT_SUPPORTED):
                issues.skip("nvml-error", f"process utilization: {exc}")
            return {}
        acc: dict[int, list[float]] = {}
        last = self._last_sample_ts.get(i, 0)
        for s in samples:
            acc.setdefault(int(s.pid), []).append(float(s.smUtil))
            last = max(last, int(s.timeStamp))
        self._last_sample_ts[i] = last
        return {pid: sum(v) / len(v) for pid, v in acc.items()}


def _num(v: Any) -> float | None:
    return None if v is None else float(v)

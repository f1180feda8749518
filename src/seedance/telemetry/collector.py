"""Collector registry (``nvidia-smi``, ``nvml``, ``fake``, ``file``) and the fake collector for tests.

``make_collector(name, **options)`` builds one; unknown names list the valid ones. The ``fake``
collector produces deterministic readings for a chosen GPU model and count (a sine of utilisation
per GPU, memory and power that follow it), so everything downstream — sampler, exporter, ledger,
heatmap — runs without a GPU. ``file`` replays recorded ``nvidia-smi`` output files.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from seedance.core.catalog import CATALOG
from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.telemetry.nvml import NvmlCollector
from seedance.telemetry.nvsmi import QUERY_FIELDS, NvidiaSmiCollector
from seedance.telemetry.readings import GpuProcess, GpuReading, GpuSnapshot
from seedance.telemetry.sampler import GpuCollector

COLLECTORS: Registry[Callable[..., GpuCollector]] = Registry("GPU collector")

_PRODUCT = {"H100-80GB": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200", "A100-80GB": "NVIDIA A100-SXM4-80GB",
            "A100-40GB": "NVIDIA A100-SXM4-40GB", "L40S": "NVIDIA L40S", "T4": "Tesla T4"}


class FakeCollector:
    """Deterministic GPUs for tests and demos.

    Args:
        gpus: Number of GPUs.
        model: Catalog model (its memory, idle power and TDP shape the readings).
        period_s: Period of the utilisation wave.
        phase: Per-node phase shift (so nodes differ).
        processes: ``[(pid, gpu index, used MiB, SM %)]`` reported as GPU processes.
        clock: Returns the time (tests pin it).
    """

    name = "fake"

    def __init__(self, *, gpus: int = 8, model: str = "H100-80GB", period_s: float = 600.0, phase: float = 0.0,
                 processes: Sequence[tuple[int, int, float, float | None]] = (),
                 clock: Callable[[], float] = time.time) -> None:
        if gpus < 0:
            raise InputError("must be >= 0", source="fake collector", field="gpus")
        self.n = gpus
        self.model = CATALOG.resolve(model)
        self.period_s = period_s
        self.phase = phase
        self.procs = tuple(processes)
        self.clock = clock
        self._energy = [0.0] * gpus
        self._last: float | None = None

    def utilization(self, i: int, t: float) -> float:
        """Utilisation % of GPU ``i`` at ``t`` (0..100)."""
        x = math.sin(2 * math.pi * (t / self.period_s) + self.phase + 0.7 * i)
        return round(50.0 + 50.0 * x, 1)

    def collect(self) -> GpuSnapshot:
        """One tick."""
        t = self.clock()
        m = self.model
        dt = 0.0 if self._last is None else max(0.0, t - self._last)
        self._last = t
        total_mib = m.memory_gib * 1024.0
        gpus = []
        for i in range(self.n):
            u = self.utilization(i, t)
            power = m.idle_w + (m.tdp_w - m.idle_w) * u / 100.0
            self._energy[i] += power * dt * 1000.0
            gpus.append(GpuReading(
                index=i, uuid=f"GPU-fake-{i:04d}", name=_PRODUCT.get(m.name, m.name), bus_id=f"00000000:{i:02X}:00.0",
                util_pct=u, temp_c=round(30 + 0.4 * u, 1), mem_used_mib=round(total_mib * u / 100.0 * 0.8),
                mem_total_mib=total_mib, power_w=round(power, 2), sm_clock_mhz=1980.0 if u > 0 else 345.0,
                mig=False, energy_mj=self._energy[i],
            ))
        procs = tuple(GpuProcess(pid=pid, gpu_uuid=f"GPU-fake-{g:04d}", used_mib=mib, sm_util_pct=sm)
                      for pid, g, mib, sm in self.procs)
        return GpuSnapshot(t=t, gpus=tuple(gpus), processes=procs)


class FileCollector:
    """Replays recorded ``nvidia-smi`` output: a ``--query-gpu`` file and, optionally, a compute-apps file."""

    name = "file"

    def __init__(self, *, query: str | Path, apps: str | Path | None = None,
                 fields: Sequence[str] = QUERY_FIELDS, strict: bool = False) -> None:
        self.files = {"--query-gpu": Path(query), "--query-compute-apps": Path(apps) if apps else None}
        for p in self.files.values():
            if p is not None and not p.is_file():
                raise InputError("cannot open file", source=str(p))
        self.inner = NvidiaSmiCollector(fields=fields, runner=self._run, strict=strict)

    def _run(self, argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
        flag = argv[1].split("=", 1)[0]
        path = self.files.get(flag)
        return (0, path.read_text(encoding="utf-8")) if path is not None else (0, "")

    def collect(self) -> GpuSnapshot:
        """One tick (the same recorded output every time)."""
        return self.inner.collect()


def _nvidia_smi(**kw: Any) -> GpuCollector:
    return NvidiaSmiCollector(**kw)


def _nvml(**kw: Any) -> GpuCollector:
    return NvmlCollector(**kw)


def _fake(**kw: Any) -> GpuCollector:
    return FakeCollector(**kw)


def _file(**kw: Any) -> GpuCollector:
    return FileCollector(**kw)


COLLECTORS.add("nvidia-smi", _nvidia_smi, aliases=("smi",))
COLLECTORS.add("nvml", _nvml)
COLLECTORS.add("fake", _fake)
COLLECTORS.add("file", _file)


def make_collector(name: str, **options: Any) -> GpuCollector:
    """The collector registered as ``name``, built with ``options``."""
    return COLLECTORS.get(name)(**options)

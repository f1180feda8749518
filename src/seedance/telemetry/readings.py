"""What a collector reads on one node in one tick: GPUs, MIG instances, GPU processes, lost GPUs.

Records are frozen ``__slots__`` dataclasses; a value a device does not report (``[N/A]``,
``[Not Supported]``, NVML ``NOT_SUPPORTED``) is ``None``, never 0, so that "idle" and "unknown"
stay apart. :class:`ParseIssues` counts what a parser skipped and why (every skip is logged).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

MAX_KEPT_MESSAGES = 50


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One physical GPU at one instant.

    Attributes:
        index: nvidia-smi / NVML index on the node.
        uuid: ``GPU-...`` UUID (``None`` if not reported).
        name: Product name, e.g. ``"NVIDIA H100 80GB HBM3"``.
        bus_id: PCI bus id, e.g. ``"00000000:19:00.0"``.
        util_pct: ``utilization.gpu`` (% of time a kernel ran); ``None`` on MIG-enabled GPUs.
        temp_c: GPU temperature (°C).
        mem_used_mib, mem_total_mib: Frame buffer used and total (MiB).
        power_w: Board power draw (W).
        sm_clock_mhz: Current SM clock (MHz).
        mig: MIG mode is enabled (``None`` when the GPU has no MIG).
        energy_mj: Total energy since the driver loaded (mJ; NVML only).
    """

    index: int
    uuid: str | None = None
    name: str | None = None
    bus_id: str | None = None
    util_pct: float | None = None
    temp_c: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    mig: bool | None = None
    energy_mj: float | None = None


@dataclass(frozen=True, slots=True)
class SliceReading:
    """One MIG instance (GPU instance + compute instance) of a GPU.

    Attributes:
        gpu_index: Index of the parent GPU.
        parent_uuid: UUID of the parent GPU (dcgm-exporter labels MIG series with it).
        gi_id, ci_id: GPU instance and compute instance ids.
        profile: Profile name, e.g. ``"1g.10gb"`` or ``"1c.3g.71gb"``.
        mig_uuid: ``MIG-...`` UUID (``None`` if not reported).
        compute_slices: Compute slices this instance holds (the ``Nc``/``Ng`` of its profile).
        total_slices: Compute slices of the whole GPU (7 on A100/H100/H200, 4 on A30).
        mem_used_mib, mem_total_mib: Memory of the instance.
        engine_active: Share of time the graphics engine was active (DCGM ``GR_ENGINE_ACTIVE``,
            0..1); NVML answers "Not Supported" for utilisation of a MIG instance, so this
            comes from dcgm-exporter when one is configured, else ``None``.
    """

    gpu_index: int
    parent_uuid: str | None
    gi_id: int
    ci_id: int
    profile: str
    mig_uuid: str | None = None
    compute_slices: int = 1
    total_slices: int = 7
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    engine_active: float | None = None

    @property
    def fraction(self) -> float:
        """Share of the GPU this instance is billed as: compute slices / total slices."""
        return self.compute_slices / self.total_slices

    @property
    def key(self) -> str:
        """``"<gi>/<ci>"``, the instance's id on its GPU."""
        return f"{self.gi_id}/{self.ci_id}"


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding a GPU context.

    Attributes:
        pid: Process id (host PID namespace).
        gpu_uuid: UUID of the GPU it runs on (the parent GPU for MIG, as nvidia-smi reports it).
        used_mib: Memory it holds (MiB); ``None`` where not available.
        sm_util_pct: Its SM utilisation over the last sample period (NVML process samples or
            ``nvidia-smi pmon``); ``None`` where not available (e.g. MIG).
        gi_id, ci_id: The MIG instance it runs in (NVML only), else ``None``.
    """

    pid: int
    gpu_uuid: str
    used_mib: float | None = None
    sm_util_pct: float | None = None
    gi_id: int | None = None
    ci_id: int | None = None


@dataclass(frozen=True, slots=True)
class LostGpu:
    """A GPU the driver could not reach ("fell off the bus", "GPU is lost", "Unknown Error")."""

    where: str
    reason: str


@dataclass(slots=True)
class ParseIssues:
    """Skipped lines and values of one parse, by kind, with the first messages kept.

    Every skip is also logged at WARNING with its source and line, so a collector never
    drops data silently.
    """

    counts: Counter[str] = field(default_factory=Counter)
    messages: list[str] = field(default_factory=list)

    def skip(self, kind: str, message: str) -> None:
        """Count one skip of ``kind`` and log ``message``."""
        self.counts[kind] += 1
        if len(self.messages) < MAX_KEPT_MESSAGES:
            self.messages.append(message)
        log.warning("telemetry: skipped (%s): %s", kind, message)

    @property
    def total(self) -> int:
        """Number of skips."""
        return sum(self.counts.values())

    def merge(self, other: ParseIssues) -> None:
        """Add ``other``'s counts and messages."""
        self.counts.update(other.counts)
        room = MAX_KEPT_MESSAGES - len(self.messages)
        self.messages.extend(other.messages[:max(0, room)])


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """Everything one GPU collector read on a node in one tick."""

    t: float
    gpus: tuple[GpuReading, ...] = ()
    slices: tuple[SliceReading, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    lost: tuple[LostGpu, ...] = ()
    issues: ParseIssues = field(default_factory=ParseIssues)

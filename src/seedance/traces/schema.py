"""The canonical columnar pod trace.

One row per pod, numpy columns. Time columns are seconds since the trace start and ``nan``
where the trace has no value (the 5-column ``multigpu`` files carry no times at all).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from seedance.core.resources import ResourceRequest


@dataclass(frozen=True, slots=True, eq=False)
class PodTrace:
    """A columnar list of pods.

    Attributes:
        source: Where the trace came from (a path), used in messages.
        name: Pod names.
        cpu_milli, memory_mib, num_gpu, gpu_milli: Requests (see ``ResourceRequest``).
        gpu_spec: Raw GPU-type constraint strings as in the file ("" = any).
        gpu_types: Per distinct ``gpu_spec``, the canonical model names it allows.
        qos: QoS class strings ("" where absent).
        phase: Pod phase when the trace was cut ("" where absent).
        creation, deletion, scheduled: Times in seconds (``nan`` where absent).
    """

    source: str
    name: NDArray[np.str_]
    cpu_milli: NDArray[np.int64]
    memory_mib: NDArray[np.int64]
    num_gpu: NDArray[np.int64]
    gpu_milli: NDArray[np.int64]
    gpu_spec: NDArray[np.object_]
    gpu_types: dict[str, tuple[str, ...]]
    qos: NDArray[np.object_]
    phase: NDArray[np.object_]
    creation: NDArray[np.float64]
    deletion: NDArray[np.float64]
    scheduled: NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.name)

    @property
    def has_times(self) -> bool:
        """Whether every pod has creation and deletion times (needed by replay)."""
        return bool(len(self)) and not (np.isnan(self.creation).any() or np.isnan(self.deletion).any())

    @property
    def total_gpu_milli(self) -> int:
        """Sum of GPU requests over all pods, in milli-GPU."""
        return int((self.num_gpu * self.gpu_milli).sum())

    def request(self, i: int) -> ResourceRequest:
        """The resource request of pod ``i``."""
        return ResourceRequest(
            cpu_milli=int(self.cpu_milli[i]),
            memory_mib=int(self.memory_mib[i]),
            num_gpu=int(self.num_gpu[i]),
            gpu_milli=int(self.gpu_milli[i]),
            gpu_types=self.gpu_types[str(self.gpu_spec[i])],
        )

    def request_keys(self) -> tuple[NDArray[np.int64], list[ResourceRequest]]:
        """Deduplicate requests: ``(key per pod, distinct requests)``; equal requests share a key."""
        index: dict[tuple[int, int, int, int, str], int] = {}
        keys = np.empty(len(self), dtype=np.int64)
        reqs: list[ResourceRequest] = []
        cpu, mem, k, milli, spec = (
            self.cpu_milli.tolist(),
            self.memory_mib.tolist(),
            self.num_gpu.tolist(),
            self.gpu_milli.tolist(),
            self.gpu_spec.tolist(),
        )
        for i in range(len(self)):
            key = (cpu[i], mem[i], k[i], milli[i], spec[i])
            kid = index.get(key)
            if kid is None:
                kid = len(reqs)
                index[key] = kid
                reqs.append(self.request(i))
            keys[i] = kid
        return keys, reqs

    def take(self, idx: NDArray[np.int64], *, source: str | None = None) -> PodTrace:
        """A new trace made of rows ``idx`` (repeats allowed)."""
        return PodTrace(
            source=source or self.source,
            name=self.name[idx],
            cpu_milli=self.cpu_milli[idx],
            memory_mib=self.memory_mib[idx],
            num_gpu=self.num_gpu[idx],
            gpu_milli=self.gpu_milli[idx],
            gpu_spec=self.gpu_spec[idx],
            gpu_types=self.gpu_types,
            qos=self.qos[idx],
            phase=self.phase[idx],
            creation=self.creation[idx],
            deletion=self.deletion[idx],
            scheduled=self.scheduled[idx],
        )

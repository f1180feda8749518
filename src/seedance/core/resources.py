"""Resource requests: CPU, memory, and whole, multi or fractional GPUs with a GPU-type constraint.

GPU amounts are in milli-GPU (1000 = one whole GPU). A request asks for ``num_gpu`` GPUs with
``gpu_milli`` of each; a fractional ("GPU-sharing") request has ``num_gpu == 1`` and
``gpu_milli < 1000``. A fractional share spread over several GPUs is not a thing any backend
offers (MIG, MPS and time-slicing all bind a share to one device), so it is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MILLI_PER_GPU = 1000


class SliceBackend(StrEnum):
    """How a GPU (or a share of one) is given to a pod."""

    WHOLE = "whole"  # whole, exclusive GPUs
    MIG = "mig"  # a hardware MIG slice (isolated memory and SMs)
    MPS = "mps"  # an MPS share (isolated compute quota, shared memory)
    TIME_SLICING = "time-slicing"  # time-shared GPU (no isolation)


class PodClass:
    """Small integer classes of requests used by indexes and scores.

    ``CPU_ONLY`` (0), ``SHARE`` (1), and ``WHOLE + k`` for a request of ``k`` whole GPUs.
    """

    CPU_ONLY = 0
    SHARE = 1
    WHOLE = 1  # class of k whole GPUs is WHOLE + k (2 for 1 GPU, 3 for 2 GPUs, ...)


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """What one pod (or job replica) asks for. Immutable; use ``dataclasses.replace`` to vary.

    Attributes:
        cpu_milli: CPU in milli-cores.
        memory_mib: Memory in MiB.
        num_gpu: Number of GPUs (0 for a CPU-only request).
        gpu_milli: Share of each GPU in milli-GPU (1..1000; 0 when ``num_gpu == 0``).
        gpu_types: Canonical catalog names of acceptable GPU models; empty means any.
        backends: Slice backends the request accepts for a fractional share; empty means any
            (a policy input: the SLA tier of the pod decides it).

    >>> r = ResourceRequest(cpu_milli=4000, memory_mib=8192, num_gpu=1, gpu_milli=250)
    >>> r.is_sharing, r.total_gpu_milli, r.pod_class
    (True, 250, 1)
    """

    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_types: tuple[str, ...] = ()
    backends: tuple[SliceBackend, ...] = ()

    def __post_init__(self) -> None:
        if self.cpu_milli < 0:
            raise ValueError("cpu_milli must be >= 0")
        if self.memory_mib < 0:
            raise ValueError("memory_mib must be >= 0")
        if self.num_gpu < 0:
            raise ValueError("num_gpu must be >= 0")
        if not 0 <= self.gpu_milli <= MILLI_PER_GPU:
            raise ValueError("gpu_milli must be within 0..1000")
        if self.num_gpu == 0 and self.gpu_milli != 0:
            raise ValueError("gpu_milli must be 0 when num_gpu is 0")
        if self.num_gpu > 0 and self.gpu_milli == 0:
            raise ValueError("gpu_milli must be > 0 when num_gpu > 0")
        if self.num_gpu > 1 and self.gpu_milli != MILLI_PER_GPU:
            raise ValueError("a fractional share (gpu_milli < 1000) needs num_gpu == 1")

    @property
    def is_sharing(self) -> bool:
        """True for a fractional request on one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI_PER_GPU

    @property
    def total_gpu_milli(self) -> int:
        """GPU amount over all GPUs, in milli-GPU."""
        return self.num_gpu * self.gpu_milli

    @property
    def pod_class(self) -> int:
        """Class index: 0 CPU-only, 1 sharing, 1 + k for k whole GPUs."""
        if self.num_gpu == 0:
            return PodClass.CPU_ONLY
        if self.is_sharing:
            return PodClass.SHARE
        return PodClass.WHOLE + self.num_gpu

"""Online task-type estimation: the workload mix learned from the pods seen so far.

The ``seedance`` packer may only use the past. ``OnlineMix`` counts every arriving pod's request
type (CPU, memory, GPU count, per-GPU milli, GPU-type constraint) and turns the counts into a
:class:`~seedance.scheduling.tasktypes.TaskTypes`-like distribution on demand.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from seedance.core.resources import ResourceRequest

MixKey = tuple[int, int, int, tuple[str, ...]]  # (cpu, per-GPU milli, num_gpu, gpu_types)


@dataclass(frozen=True, slots=True, eq=False)
class Mix:
    """A learned request mix: one row per request type (columns), frequencies sum to 1."""

    cpu: NDArray[np.int64]
    mem: NDArray[np.float64]
    milli: NDArray[np.int64]
    k: NDArray[np.int64]
    gpu_types: tuple[tuple[str, ...], ...]
    freq: NDArray[np.float64]
    seen: int

    def __len__(self) -> int:
        return len(self.cpu)


class OnlineMix:
    """Counts request types as pods arrive (nothing about future pods is known).

    Args:
        coverage: Keep the most frequent types covering this share of the pods seen.
    """

    def __init__(self, coverage: float = 1.0) -> None:
        self.coverage = coverage
        self._counts: Counter[MixKey] = Counter()
        self._mem_sum: Counter[MixKey] = Counter()
        self.seen = 0

    def observe(self, req: ResourceRequest) -> None:
        """Record one arriving pod."""
        key = (req.cpu_milli, req.gpu_milli, req.num_gpu, req.gpu_types)
        self._counts[key] += 1
        self._mem_sum[key] += req.memory_mib
        self.seen += 1

    def snapshot(self) -> Mix:
        """The current estimate (empty when nothing was seen)."""
        items = sorted(self._counts.items(), key=lambda kv: (-kv[1], kv[0]))
        total = sum(c for _, c in items)
        kept: list[tuple[MixKey, int]] = []
        cum = 0
        for key, c in items:
            kept.append((key, c))
            cum += c
            if cum >= self.coverage * total:
                break
        cnt = np.array([c for _, c in kept], dtype=np.float64)
        freq = cnt / cnt.sum() if cnt.size else cnt
        return Mix(
            cpu=np.array([k[0] for k, _ in kept], dtype=np.int64),
            mem=np.array([self._mem_sum[k] / c for k, c in kept], dtype=np.float64),
            milli=np.array([k[1] for k, _ in kept], dtype=np.int64),
            k=np.array([k[2] for k, _ in kept], dtype=np.int64),
            gpu_types=tuple(k[3] for k, _ in kept),
            freq=freq,
            seen=self.seen,
        )

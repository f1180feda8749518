"""Task types: the (CPU, per-GPU milli, GPU count, GPU-type constraint) mix of a workload.

FGD measures fragmentation against a *target workload* given as task types with frequencies.
:meth:`TaskTypes.from_trace` computes it exactly as the FGD paper's simulator does ("typical
pods"): count pods per type, keep the most popular types until they cover 95% of pods, and
renormalise their frequencies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from seedance.traces.schema import PodTrace

TypeKey = tuple[int, int, int, str]  # (cpu_milli, per-GPU milli, num_gpu, raw gpu_spec)


@dataclass(frozen=True, slots=True, eq=False)
class TaskTypes:
    """A task-type distribution (column arrays, one entry per type).

    Attributes:
        cpu: CPU milli-cores per type.
        milli: Per-GPU milli per type (0 = CPU-only type).
        k: GPU count per type.
        spec: Raw GPU-type constraint string per type ("" = any).
        gpu_types: Canonical models each spec allows (empty = any).
        freq: Frequencies (sum to 1).
        count: Pod counts behind the frequencies.
    """

    cpu: NDArray[np.int64]
    milli: NDArray[np.int64]
    k: NDArray[np.int64]
    spec: tuple[str, ...]
    gpu_types: tuple[tuple[str, ...], ...]
    freq: NDArray[np.float64]
    count: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.cpu)

    @classmethod
    def from_counts(
        cls,
        counts: Iterable[tuple[TypeKey, int]],
        spec_types: dict[str, tuple[str, ...]],
        *,
        threshold: float = 0.95,
    ) -> TaskTypes:
        """Popular types covering ``threshold`` of the counted pods, frequencies renormalised.

        Types are sorted by count, then by larger cpu, milli, k and spec (FGD's order); the cut
        takes whole types until the cumulative count reaches ``threshold`` of the total.
        """
        items = sorted(((c, key) for key, c in counts if c > 0), reverse=True)
        total = sum(c for c, _ in items)
        if total == 0:
            raise ValueError("no pods to build task types from")
        kept: list[tuple[int, TypeKey]] = []
        cum = 0
        for c, key in items:
            kept.append((c, key))
            cum += c
            if cum >= threshold * total:
                break
        cnt = np.array([c for c, _ in kept], dtype=np.int64)
        freq = (cnt / total) / (cum / total)
        freq = freq / freq.sum()
        return cls(
            cpu=np.array([k[0] for _, k in kept], dtype=np.int64),
            milli=np.array([k[1] for _, k in kept], dtype=np.int64),
            k=np.array([k[2] for _, k in kept], dtype=np.int64),
            spec=tuple(k[3] for _, k in kept),
            gpu_types=tuple(spec_types.get(k[3], ()) for _, k in kept),
            freq=freq.astype(np.float64),
            count=cnt,
        )

    @classmethod
    def from_trace(cls, trace: PodTrace, *, threshold: float = 0.95) -> TaskTypes:
        """FGD's typical pods of ``trace`` (CPU-only pods included)."""
        keys = Counter(
            zip(
                trace.cpu_milli.tolist(),
                trace.gpu_milli.tolist(),
                trace.num_gpu.tolist(),
                trace.gpu_spec.tolist(),
                strict=True,
            )
        )
        return cls.from_counts(keys.items(), trace.gpu_types, threshold=threshold)

"""``packing``: GPU packing in integer tiers (FGD paper baseline).

CPU-only pods score 0 everywhere. An idle node scores ``max(33 - F, F)`` (``F`` its idle GPUs, so
small idle nodes first). Otherwise, taking the ``k`` tightest fitting GPUs: if ``u > 0`` of them
are idle the score is ``max(50 - u, 33)``; if all are already shared it is
``max(100 - (Σ free*100//1000)//10, 50)``, so the fullest shared GPU wins. GPUs by best fit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from seedance.core.cluster import ClusterState
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest
from seedance.scheduling.framework import PLACEMENT_POLICIES, LocalScorePolicy, Nodes, Scores


@PLACEMENT_POLICIES.register("packing", aliases=("gpu-packing", "gpupacking"))
class GpuPacking(LocalScorePolicy):
    """Shared GPUs first, then partly used nodes, then the smallest idle node."""

    name = "packing"
    summary = "fill shared GPUs, then used nodes, then small idle nodes (FGD paper baseline)"

    def score_key(self, req: ResourceRequest) -> Hashable:
        return ("packing", req.is_sharing, req.gpu_milli, req.num_gpu)

    def node_score_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        if req.num_gpu == 0:
            return _zeros
        sharing, milli, k = req.is_sharing, req.gpu_milli, req.num_gpu
        n_full, count, free = view.n_full, view.gpu_count, view.gpu_free

        def compute(idx: Nodes) -> Scores:
            full = n_full[idx].astype(np.int64)
            idle = full == count[idx]
            if sharing:
                rows = free[idx]
                tight = np.where(rows >= milli, rows, np.iinfo(np.int32).max).min(axis=1).astype(np.int64)
                shared = np.maximum(100 - (tight * 100 // MILLI_PER_GPU) // 10, 50)
                busy = np.where(tight == MILLI_PER_GPU, max(50 - 1, 33), shared)
            else:
                busy = np.full(idx.size, max(50 - k, 33), dtype=np.int64)
            return np.where(idle, np.maximum(33 - full, full), busy).astype(np.int64)

        return compute


def _zeros(idx: Nodes) -> Scores:
    return np.zeros(idx.size, dtype=np.int64)

"""``clustering``: GPU clustering, keeping pods of one kind together (FGD paper baseline).

A GPU pod's tag is "share" or "k whole GPUs". ``base = 25 * (8000 - gpu_free) // 8000``; the score
adds 75 when the node hosts only this tag, 50 when it hosts this tag among others, 25 when it hosts
no GPU pod, 0 otherwise. CPU-only pods score 0. GPUs by best fit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from seedance.core.cluster import ClusterState
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import PLACEMENT_POLICIES, LocalScorePolicy, Nodes, Scores


@PLACEMENT_POLICIES.register("clustering", aliases=("gpu-clustering", "gpuclustering"))
class GpuClustering(LocalScorePolicy):
    """Same-kind GPU pods on the same nodes."""

    name = "clustering"
    summary = "co-locate GPU pods of the same kind (FGD paper baseline)"

    def score_key(self, req: ResourceRequest) -> Hashable:
        return ("clustering", req.pod_class if req.num_gpu else 0)

    def node_score_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        if req.num_gpu == 0:
            return _zeros
        cls = req.pod_class
        gpu_free, counts = view.gpu_free_total, view.class_counts

        def compute(idx: Nodes) -> Scores:
            base = 25 * (8000 - gpu_free[idx]) // 8000
            tags = counts[idx, 1:] > 0  # column 0 is CPU-only pods: not a tag
            n_tags = tags.sum(axis=1)
            mine = tags[:, cls - 1]
            bonus = np.where(mine & (n_tags == 1), 75, np.where(mine, 50, np.where(n_tags == 0, 25, 0)))
            return (base + bonus).astype(np.int64)

        return compute


def _zeros(idx: Nodes) -> Scores:
    return np.zeros(idx.size, dtype=np.int64)

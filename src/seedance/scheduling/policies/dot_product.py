"""``dot-product``: Tetris-style alignment of the request and the node's free vector.

Node vector ``[cpu_free/128000, gpu_free/8000]``, pod vector ``[cpu/128000, gpu/8000]`` (fixed
normalisers, as in the FGD paper's simulator); score ``int(100 * (1 - dot/2))``, so the node with the
*smallest* dot product wins. GPUs by best fit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from seedance.core.cluster import ClusterState
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import PLACEMENT_POLICIES, LocalScorePolicy, Nodes, Scores

MAX_CPU = 128000.0
MAX_GPU = 8000.0


@PLACEMENT_POLICIES.register("dot-product", aliases=("dotprod", "tetris"))
class DotProduct(LocalScorePolicy):
    """Prefers nodes whose free resources align least with the request."""

    name = "dot-product"
    summary = "Tetris dot product of free and requested CPU/GPU, smallest first (FGD paper baseline)"

    def score_key(self, req: ResourceRequest) -> Hashable:
        return ("dot-product", req.cpu_milli, req.total_gpu_milli)

    def node_score_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        cpu, gpu = req.cpu_milli, req.total_gpu_milli
        cpu_free, gpu_free = view.cpu_free, view.gpu_free_total

        def compute(idx: Nodes) -> Scores:
            dot = cpu_free[idx] / MAX_CPU * (cpu / MAX_CPU) + gpu_free[idx] / MAX_GPU * (gpu / MAX_GPU)
            return np.trunc(100.0 * (1.0 - dot / 2.0)).astype(np.int64)

        return compute

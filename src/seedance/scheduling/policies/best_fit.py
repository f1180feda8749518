"""``best-fit``: the node left with the least CPU and GPU after placement.

``acc = 0.5 * (cpu_free - cpu)/128000 + 0.5 * (gpu_free - gpu)/8000``; score ``int(100 * (1 - acc))``.
GPUs by best fit.
"""

from __future__ import annotations

import numpy as np

from seedance.core.cluster import ClusterState
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import PLACEMENT_POLICIES, Nodes, PlacementPolicy, Scores
from seedance.scheduling.policies.dot_product import MAX_CPU, MAX_GPU


@PLACEMENT_POLICIES.register("best-fit", aliases=("bestfit", "bf"))
class BestFit(PlacementPolicy):
    """Tightest node by leftover CPU and GPU, equally weighted."""

    name = "best-fit"
    summary = "least leftover CPU+GPU after placement (FGD paper baseline)"

    def score(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> Scores:
        cpu, gpu = req.cpu_milli, req.total_gpu_milli
        cpu_free, gpu_free = view.cpu_free, view.gpu_free_total

        def compute(idx: Nodes) -> Scores:
            acc = (cpu_free[idx] - cpu) / MAX_CPU * 0.5
            acc = acc + (gpu_free[idx] - gpu) / MAX_GPU * 0.5
            return np.trunc((1.0 - acc) * 100.0).astype(np.int64)

        # the scores of every node, kept current where binds change nodes (the hot-path index)
        return view.column_of(("best-fit", cpu, gpu), compute).take(nodes)

"""``best-fit``: the node left with the least CPU and GPU after placement.

``acc = 0.5 * (cpu_free - cpu)/128000 + 0.5 * (gpu_free - gpu)/8000``; score ``int(100 * (1 - acc))``.
GPUs by best fit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable

import numpy as np

from seedance.core.cluster import ClusterState
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import PLACEMENT_POLICIES, LocalScorePolicy, Nodes, Scores
from seedance.scheduling.policies.dot_product import MAX_CPU, MAX_GPU


@PLACEMENT_POLICIES.register("best-fit", aliases=("bestfit", "bf"))
class BestFit(LocalScorePolicy):
    """Tightest node by leftover CPU and GPU, equally weighted."""

    name = "best-fit"
    summary = "least leftover CPU+GPU after placement (FGD paper baseline)"

    def score_key(self, req: ResourceRequest) -> Hashable:
        return ("best-fit", req.cpu_milli, req.total_gpu_milli)

    def node_score_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        cpu, gpu = req.cpu_milli, req.total_gpu_milli
        cpu_free, gpu_free = view.cpu_free, view.gpu_free_total

        def compute(idx: Nodes) -> Scores:
            acc = (cpu_free[idx] - cpu) / MAX_CPU * 0.5
            acc = acc + (gpu_free[idx] - gpu) / MAX_GPU * 0.5
            return np.trunc((1.0 - acc) * 100.0).astype(np.int64)

        return compute

    def node_score_one(self, view: ClusterState, req: ResourceRequest) -> Callable[[int], int] | None:
        cpu, gpu = req.cpu_milli, req.total_gpu_milli
        cpu_free, gpu_free = view.cpu_free.item, view.gpu_free_total.item
        trunc = math.trunc

        def one(node: int) -> int:
            # ``compute`` with Python floats: the same IEEE-754 double operations in the same order
            acc = (cpu_free(node) - cpu) / MAX_CPU * 0.5
            acc = acc + (gpu_free(node) - gpu) / MAX_GPU * 0.5
            return trunc((1.0 - acc) * 100.0)

        return one

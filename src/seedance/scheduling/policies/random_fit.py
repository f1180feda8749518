"""``random``: a uniformly random feasible node and, for a share, a random fitting GPU.

The FGD paper's weakest baseline. Its draws come from a generator seeded by ``PolicyContext.seed``,
so a run is reproducible.
"""

from __future__ import annotations

import numpy as np

from seedance.core.cluster import ClusterState
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import (
    PLACEMENT_POLICIES,
    Nodes,
    PlacementPolicy,
    PolicyContext,
    Scores,
    best_fit_gpus,
)
from seedance.scheduling.index import CandidateIndex


@PLACEMENT_POLICIES.register("random", aliases=("random-fit",))
class RandomFit(PlacementPolicy):
    """One random feasible node scores 100, the rest 0."""

    name = "random"
    indexable = True
    summary = "uniformly random feasible node (FGD paper baseline)"

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        self._rng = np.random.default_rng(ctx.seed)

    def score(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> Scores:
        out = np.zeros(nodes.size, dtype=np.int64)
        out[self._rng.integers(nodes.size)] = 100
        return out

    def pick(self, view: ClusterState, req: ResourceRequest, index: CandidateIndex) -> tuple[int, int]:
        # the same draw as ``score``: the j-th feasible node in node order
        return index.nth_feasible(int(self._rng.integers(index.count))), 100

    def select_gpus(self, view: ClusterState, req: ResourceRequest, node: int) -> tuple[int, ...]:
        if req.is_sharing:
            fits = np.flatnonzero(view.gpu_free[node] >= req.gpu_milli)
            return (int(fits[self._rng.integers(fits.size)]),)
        return best_fit_gpus(view, req, node)

"""``fgd``: Fragmentation Gradient Descent (Weng et al., USENIX ATC '23).

NOTE(seedance): place each pod where it increases the expected GPU fragmentation of the node the
least. Fragmentation is measured against the target workload's task-type distribution, which
FGD is *given* (``PolicyContext.task_types``: oracle knowledge of the workload). The node score
is ``int(100 * sigmoid((frag_before - frag_after) / 1000))``; for a share it is the best over the
node's fitting GPUs, and that GPU (lowest index among equal integer scores) is the one used.
Scores are memoised per (request, node shape), which changes no decision.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState, NodeColumn
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest
from seedance.scheduling.fragmentation import FragModel
from seedance.scheduling.framework import (
    PLACEMENT_POLICIES,
    LocalScorePolicy,
    Nodes,
    PolicyContext,
    Scores,
    best_fit_gpus,
)
from seedance.scheduling.memo import ShapeMemo
from seedance.scheduling.tasktypes import TaskTypes

ScoreKey = tuple[int, int, int]


def sigmoid_score(delta_milli: NDArray[np.float64]) -> NDArray[np.int64]:
    """FGD's integer score of a fragmentation decrease given in milli-GPU."""
    return np.trunc(100.0 / (1.0 + np.exp(-delta_milli / 1000.0))).astype(np.int64)


class FragmentationScorer:
    """Scores placements by fragmentation change; shared by FGD and its online variants.

    Args:
        model: The fragmentation model (bound to one cluster state).
    """

    def __init__(self, model: FragModel) -> None:
        self.model = model
        self._cache: dict[ScoreKey, ShapeMemo] = {}
        self._columns: dict[ScoreKey, NodeColumn] = {}

    def node_scores(self, req: ResourceRequest, nodes: Nodes) -> Scores:
        """Integer score of each node in ``nodes`` for ``req`` (memoised per node shape).

        The scores of every node are kept per request and recomputed only where binds changed
        nodes (the state's change log), so a decision costs what changed, not the cluster's size.
        """
        key = (req.cpu_milli, req.num_gpu, req.gpu_milli)
        col = self._columns.get(key)
        if col is None:
            col = self._columns[key] = NodeColumn(self.model.state, self.score_fn(req))
        return col.take(nodes)

    def score_fn(self, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        """``fn(nodes)``: the scores of ``nodes`` for ``req`` (through the per-request shape memo)."""
        key = (req.cpu_milli, req.num_gpu, req.gpu_milli)
        memo = self._cache.get(key)
        if memo is None:
            memo = self._cache[key] = ShapeMemo(np.int16, -1)
        state = self.model.state
        shape_id = state.shape_id

        def compute(idx: Nodes) -> Scores:
            return memo.lookup(shape_id[idx], state.n_shapes, lambda todo: self._score_shapes(req, todo)).astype(
                np.int64
            )

        return compute

    def _score_shapes(self, req: ResourceRequest, sids: NDArray[np.int64]) -> NDArray[np.int64]:
        model, cpu, free = self.model.state.shapes()
        m, c, f = model[sids], cpu[sids], free[sids]
        before = self.model.shape_frag(sids)
        if req.is_sharing:
            s, g = f.shape
            # candidate j of shape i: take the share from GPU j (free sorted descending)
            after_free = np.repeat(f[:, None, :], g, axis=1)  # S, G(candidate), G
            idx = np.arange(g)
            after_free[:, idx, idx] -= req.gpu_milli
            valid = f >= req.gpu_milli  # S, G
            after = self.model.frag(
                np.repeat(c - req.cpu_milli, g), after_free.reshape(s * g, g), np.repeat(m, g)
            ).reshape(s, g)
            scores = sigmoid_score(before[:, None] - after)
            return np.where(valid, scores, -1).max(axis=1)
        after_free = f.copy()
        if req.num_gpu:
            # free is sorted descending, so the first k columns are the idle GPUs taken
            after_free[:, : req.num_gpu] -= MILLI_PER_GPU
        after = self.model.frag(c - req.cpu_milli, after_free, m)
        return sigmoid_score(before - after)

    def gpu_for_share(self, req: ResourceRequest, node: int) -> int:
        """The GPU of ``node`` whose use scores highest (lowest index among equal integers)."""
        state = self.model.state
        row = state.gpu_free[node]
        g = row.size
        before = self.model.shape_frag(state.shape_id[node : node + 1])[0]
        after_free = np.repeat(row[None, :], g, axis=0).copy()
        after_free[np.arange(g), np.arange(g)] -= req.gpu_milli
        after = self.model.frag(
            np.full(g, state.cpu_free[node] - req.cpu_milli, dtype=np.int64),
            after_free,
            np.full(g, state.model[node], dtype=np.int16),
        )
        scores = np.where(row >= req.gpu_milli, sigmoid_score(before - after), -1)
        return int(np.argmax(scores))


@PLACEMENT_POLICIES.register("fgd")
class Fgd(LocalScorePolicy):
    """Fragmentation gradient descent over the given target workload."""

    name = "fgd"
    needs_task_types = True
    summary = "fragmentation gradient descent, told the workload's task types in advance (ATC'23)"

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        if ctx.task_types is None:
            raise ValueError("fgd needs the target workload's task types (PolicyContext.task_types)")
        self.task_types: TaskTypes = ctx.task_types
        self._scorer: FragmentationScorer | None = None

    def scorer(self, view: ClusterState) -> FragmentationScorer:
        """The scorer bound to ``view`` (rebuilt if a different state is passed)."""
        if self._scorer is None or self._scorer.model.state is not view:
            self._scorer = FragmentationScorer(FragModel(self.task_types, view))
        return self._scorer

    def score(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> Scores:
        return self.scorer(view).node_scores(req, nodes)

    def node_score_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        return self.scorer(view).score_fn(req)

    def select_gpus(self, view: ClusterState, req: ResourceRequest, node: int) -> tuple[int, ...]:
        if req.is_sharing:
            return (self.scorer(view).gpu_for_share(req, node),)
        return best_fit_gpus(view, req, node)

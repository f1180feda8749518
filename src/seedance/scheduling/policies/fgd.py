"""``fgd``: Fragmentation Gradient Descent (Weng et al., USENIX ATC '23).

NOTE(seedance): place each pod where it increases the expected GPU fragmentation of the node the
least. Fragmentation is measured against the target workload's task-type distribution, which
FGD is *given* (``PolicyContext.task_types``: oracle knowledge of the workload). The node score
is ``int(100 * sigmoid((frag_before - frag_after) / 1000))``; for a share it is the best over the
node's fitting GPUs, and that GPU (lowest index among equal integer scores) is the one used.
Scores are memoised per (request, fragmentation class, CPU level after): exact, since a score
reads nothing else of the node (``FragmentationScorer``); it changes no decision.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState, NodeColumn
from seedance.core.resources import ResourceRequest
from seedance.scheduling.fragmentation import FragModel
from seedance.scheduling.framework import (
    PLACEMENT_POLICIES,
    LocalScorePolicy,
    Nodes,
    PolicyContext,
    Scores,
    best_fit_gpus,
)
from seedance.scheduling.tasktypes import TaskTypes

ScoreKey = tuple[int, int, int]
#: Up to this many shapes, memo keys are computed with Python scalars (no array passes).
_FEW = 4
#: From this many shapes on, distinct memo keys are found with one sort (``np.unique``).
_MANY = 64


def sigmoid_score(delta_milli: NDArray[np.float64]) -> NDArray[np.int64]:
    """FGD's integer score of a fragmentation decrease given in milli-GPU."""
    return np.trunc(100.0 / (1.0 + np.exp(-delta_milli / 1000.0))).astype(np.int64)


class FragmentationScorer:
    """Scores placements by fragmentation change; shared by FGD and its online variants.

    Args:
        model: The fragmentation model (bound to one cluster state).

    A node's score for a request depends only on its fragmentation class and the CPU level it
    is left with (``FragModel.cpu_level(free CPU - request CPU)``): the class fixes the
    fragmentation before and the free-GPU multiset after, the level the CPU after. Scores are
    therefore memoised per (request, class, level after); a share's per-GPU scores, which pick
    its GPU, are kept the same way.
    """

    def __init__(self, model: FragModel) -> None:
        self.model = model
        self._columns: dict[ScoreKey, NodeColumn] = {}
        self._known: dict[ScoreKey, dict[int, int]] = {}
        self._share_gpus: dict[ScoreKey, dict[int, NDArray[np.int64]]] = {}

    def node_scores(self, req: ResourceRequest, nodes: Nodes) -> Scores:
        """Integer score of each node in ``nodes`` for ``req`` (memoised per class).

        The scores of every node are kept per request and recomputed only where binds changed
        nodes (the state's change log), so a decision costs what changed, not the cluster's size.
        """
        key = (req.cpu_milli, req.num_gpu, req.gpu_milli)
        col = self._columns.get(key)
        if col is None:
            col = self._columns[key] = NodeColumn(self.model.state, self.score_fn(req))
        return col.take(nodes)

    def score_fn(self, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        """``fn(nodes)``: the scores of ``nodes`` for ``req`` (through the per-request class memo)."""
        state = self.model.state
        shape_id = state.shape_id

        def compute(idx: Nodes) -> Scores:
            return self.shape_scores(req, shape_id[idx])

        return compute

    def shape_scores(self, req: ResourceRequest, sids: NDArray[np.int64]) -> Scores:
        """Scores of shapes ``sids`` of the bound state for ``req``; computed once per memo key."""
        key = (req.cpu_milli, req.num_gpu, req.gpu_milli)
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = {}
        if sids.size > _MANY:  # a rescoring of many nodes: look up each distinct key once
            uniq, first_at, inverse = np.unique(self._key_array(req, sids), return_index=True, return_inverse=True)
            return self._scores_of(req, key, known, uniq.tolist(), sids[first_at])[inverse.ravel()]
        return self._scores_of(req, key, known, self._class_keys(req, sids), sids)

    def _scores_of(
        self, req: ResourceRequest, key: ScoreKey, known: dict[int, int], keys: list[int], sids: NDArray[np.int64]
    ) -> Scores:
        """The scores of memo keys ``keys`` (``sids[i]``: a shape of ``keys[i]``), computing unknown ones."""
        first: dict[int, int] = {}
        for i, k in enumerate(keys):
            if k not in known and k not in first:
                first[k] = i
        if first:
            todo = sids[np.fromiter(first.values(), dtype=np.int64, count=len(first))]
            scores, per_gpu = self._compute(req, todo)
            known.update(zip(first, scores.tolist(), strict=True))
            if per_gpu is not None:
                self._share_gpus.setdefault(key, {}).update(zip(first, per_gpu, strict=True))
        return np.fromiter((known[k] for k in keys), dtype=np.int64, count=len(keys))

    def _class_keys(self, req: ResourceRequest, sids: NDArray[np.int64]) -> list[int]:
        """The memo key of each shape for ``req``: its class and the CPU level it is left with."""
        if sids.size > _FEW:
            return self._key_array(req, sids).tolist()
        fm = self.model
        cpu = fm.state.shapes()[1]
        nl, rcpu = fm.n_levels, req.cpu_milli
        return [fm.class_of(s) * nl + fm.cpu_level_of(int(cpu[s]) - rcpu) for s in sids.tolist()]

    def _key_array(self, req: ResourceRequest, sids: NDArray[np.int64]) -> NDArray[np.int64]:
        """:meth:`_class_keys` as an array (array passes, for many shapes)."""
        fm = self.model
        cpu = fm.state.shapes()[1]
        return fm.shape_class(sids) * fm.n_levels + fm.cpu_level(cpu[sids] - req.cpu_milli)

    def _compute(
        self, req: ResourceRequest, sids: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64] | None]:
        """Scores of shapes ``sids`` for ``req`` and, for a share, the score of each GPU (sorted order).

        The state after the placement is itself a fragmentation class (the free GPUs changed, the
        CPU level of what is left), so before and after are both class values.
        """
        fm = self.model
        cpu = fm.state.shapes()[1]
        rcpu, k, milli = req.cpu_milli, req.num_gpu, req.gpu_milli
        before: list[int] = []
        after: list[int] = []
        for s in sids.tolist():
            cid = fm.class_of(s)
            model, _, free = fm.class_key(cid)
            level = fm.cpu_level_of(int(cpu[s]) - rcpu)
            before.append(cid)
            if req.is_sharing:
                # candidate j: take the share from GPU j (free sorted descending); a GPU that
                # cannot hold it is no candidate (its entry is masked below)
                for j, v in enumerate(free):
                    if v >= milli:
                        taken = list(free)
                        taken[j] = v - milli
                        taken.sort(reverse=True)
                        after.append(fm.intern(model, level, tuple(taken)))
                    else:
                        after.append(cid)
            else:
                # free is sorted descending, so the first k GPUs are the idle ones taken
                after.append(fm.intern(model, level, free[k:] + (0,) * k))
        vb = fm.class_frag(before)
        va = fm.class_frag(after)
        if req.is_sharing:
            valid = np.array([fm.class_key(c)[2] for c in before], dtype=np.int64) >= milli  # S, G
            per_gpu = np.where(valid, sigmoid_score(vb[:, None] - va.reshape(valid.shape)), -1)
            return per_gpu.max(axis=1), per_gpu
        return sigmoid_score(vb - va), None

    def gpu_for_share(self, req: ResourceRequest, node: int) -> int:
        """The GPU of ``node`` whose use scores highest (lowest index among equal integers).

        A GPU's score depends only on its free milli (the multiset after is the node's with that
        value lowered), so each GPU reads the score of its value's first position in the node's
        sorted free GPUs.
        """
        state = self.model.state
        sid = state.shape_id[node : node + 1]
        key = (req.cpu_milli, req.num_gpu, req.gpu_milli)
        k = self._class_keys(req, sid)[0]
        per_gpu = self._share_gpus.get(key, {}).get(k)
        if per_gpu is None:
            self.shape_scores(req, sid)
            per_gpu = self._share_gpus[key][k]
        ordered = state.shapes()[2][int(sid[0])]  # free GPUs sorted descending
        pos = np.searchsorted(-ordered, -state.gpu_free[node])  # first position of each GPU's value
        return int(np.argmax(per_gpu[pos]))


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
            self._scorer = FragmentationScorer(FragModel.of(self.task_types, view))
        return self._scorer

    def score(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> Scores:
        return self.scorer(view).node_scores(req, nodes)

    def node_score_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        return self.scorer(view).score_fn(req)

    def select_gpus(self, view: ClusterState, req: ResourceRequest, node: int) -> tuple[int, ...]:
        if req.is_sharing:
            return (self.scorer(view).gpu_for_share(req, node),)
        return best_fit_gpus(view, req, node)

"""``seedance``: a fragmentation-aware packer that learns the workload mix online.

NOTE(seedance): like FGD, each pod goes where it increases the node's expected fragmentation
the least, but (1) the mix is learned from the pods seen so far (``observe``), never given;
(2) fragmentation counts how many *copies* of each request type the node can still host,
limited by its GPUs, CPU and memory together, so idle GPU that CPU or memory can no longer feed
is fragment too, and idle GPU beyond what the node's free CPU and memory can feed at the mix's
average CPU and memory per GPU is counted again (the *balance* term); FGD's single-pod measure
over the learned mix is added, and so is the *gap loss*: each partly used GPU's free milli that
no sum of common share sizes (>= ``gap_share_min`` of the shares seen) can fill, weighted by
``gap_loss``, so a share is not put where it leaves a gap only rare pods fit; (3) inside the
node, a share goes to the GPU that leaves the least fragment, then the tightest one. Scores are
``int(100 * sigmoid(Δ / scale))`` so near-equal nodes tie; ties go to the tightest gap for
shares, the most spare CPU for CPU-only pods, then the per-cluster rank (consolidation, as in
FGD). Memo tables are keyed on (request, node shape) and dropped whenever the learned mix is
refreshed. The refreshes follow one schedule in pods seen per 1,024 nodes of the cluster (its whole
1,024s, at least one): after 32, 64, 128, ... pods, doubling up to 1,024, then every 1,024. A refresh
makes every node's score stale, so its cost grows with the cluster; a schedule in pods per node keeps
the refreshes at the same fill of any fleet, and their cost per pod the same (below 2,048 nodes the
schedule is 32, 64, ..., 1,024, 2,048, 3,072, ... pods, as before fleets grew).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from seedance.core.cluster import ClusterState, NodeColumn
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest
from seedance.scheduling.framework import (
    PLACEMENT_POLICIES,
    LocalScorePolicy,
    Nodes,
    PolicyContext,
    Scores,
    best_fit_gpus,
)
from seedance.scheduling.memo import ShapeMemo
from seedance.scheduling.online import Mix, OnlineMix

F64 = NDArray[np.float64]
ReqKey = tuple[int, int, int, int]


class CopiesFragModel:
    """Fragmentation measured as idle GPU that future copies of each request type cannot use.

    Args:
        mix: Learned request mix.
        state: Cluster (model ids, shapes).
        use_memory: Limit copies by free memory too.
        fgd_weight: Weight of FGD's single-pod measure added to the copies measure.
        gpu_weight: Types weighted by pod count x (GPU request) ** gpu_weight.
        balance: Weight of the CPU/memory balance term.
        balance_mode: "min" (CPU and memory together) or "sum" (each on its own).
        gap_loss: Weight of the gap loss (0: off).
        gap_share_min: Share of the shared pods seen a size needs to count as a filler.
    """

    def __init__(
        self,
        mix: Mix,
        state: ClusterState,
        *,
        use_memory: bool = True,
        fgd_weight: float = 0.0,
        gpu_weight: float = 0.0,
        balance: float = 0.0,
        balance_mode: str = "min",
        gap_loss: float = 0.0,
        gap_share_min: float = 0.03,
    ) -> None:
        self.state = state
        self.gap_loss = gap_loss
        self.loss = self._gap_loss_table(mix, gap_share_min) if gap_loss else None
        self.use_memory = use_memory
        self.fgd_weight = fgd_weight
        gpu = mix.milli > 0
        # weight types by pod count × (GPU request)^gpu_weight; CPU-only types keep their count
        size = np.where(gpu, mix.k * mix.milli / MILLI_PER_GPU, 1.0)
        w = mix.freq * size**gpu_weight
        w = w / w.sum() if w.sum() > 0 else w
        self.f_cpu_only = float(w[~gpu].sum())
        self.f = w[gpu]
        self.cpu = mix.cpu[gpu]
        self.mem = mix.mem[gpu]
        self.milli = mix.milli[gpu]
        self.k = mix.k[gpu]
        self.u, self.ui = np.unique(self.milli, return_inverse=True)
        # expected CPU and memory per milli-GPU of the GPU pods in the mix (for the balance term)
        gpu_milli = float((self.f * self.k * self.milli).sum())
        self.cpu_per_milli = float((self.f * self.cpu).sum()) / gpu_milli if gpu_milli else 0.0
        self.mem_per_milli = float((self.f * self.mem).sum()) / gpu_milli if gpu_milli else 0.0
        self.balance = balance
        self.balance_mode = balance_mode
        acc = np.zeros((len(state.models) + 1, int(gpu.sum())), dtype=np.bool_)
        types = [gt for gt, g in zip(mix.gpu_types, gpu.tolist(), strict=True) if g]
        for j, allowed in enumerate(types):
            for i, m in enumerate(state.models):
                acc[i + 1, j] = (not allowed) or (m in allowed)
        self.access = acc
        self._memo = ShapeMemo()

    @staticmethod
    def _gap_loss_table(mix: Mix, share_min: float) -> NDArray[np.float64]:
        """``loss[f]``: milli of a GPU with ``f`` free that common shares cannot fill (0 for idle GPUs).

        Common shares: per-GPU sizes below one GPU holding at least ``share_min`` of the shared
        pods seen; the fill is the best sum of such sizes (any number of each) that fits ``f``.
        """
        sharing = (mix.milli > 0) & (mix.milli < MILLI_PER_GPU) & (mix.k == 1)
        sizes: dict[int, float] = {}
        for m, f in zip(mix.milli[sharing].tolist(), mix.freq[sharing].tolist(), strict=True):
            sizes[int(m)] = sizes.get(int(m), 0.0) + float(f)
        total = sum(sizes.values())
        common = [m for m, f in sizes.items() if total and f / total >= share_min]
        fill = np.zeros(MILLI_PER_GPU + 1, dtype=np.int64)
        for f in range(1, MILLI_PER_GPU + 1):
            fill[f] = max([fill[f - 1]] + [fill[f - m] + m for m in common if m <= f])
        loss = (np.arange(MILLI_PER_GPU + 1) - fill).astype(np.float64)
        loss[MILLI_PER_GPU] = 0.0
        return loss

    def frag(
        self, model: NDArray[np.int16], cpu: NDArray[np.int64], mem: NDArray[np.int64], free: NDArray[np.int32]
    ) -> F64:
        """Fragment (milli-GPU) of the states given column-wise."""
        free64 = free.astype(np.int64, copy=False)
        total = free64.sum(axis=1).astype(np.float64)
        if self.loss is not None:
            return self._frag(model, cpu, mem, free64, total) + self.gap_loss * self.loss[free64].sum(axis=1)
        return self._frag(model, cpu, mem, free64, total)

    def _frag(
        self, model: NDArray[np.int16], cpu: NDArray[np.int64], mem: NDArray[np.int64], free64: NDArray[np.int64],
        total: F64,
    ) -> F64:
        if self.f.size == 0:
            return total * self.f_cpu_only
        per_u = (free64[:, :, None] // self.u[None, None, :]).sum(axis=1)  # S, U: copies by GPU
        gpu_copies = per_u[:, self.ui] // self.k  # whole types: idle GPUs // k (u = 1000)
        big = np.iinfo(np.int64).max // 4
        cpu_copies = np.where(self.cpu > 0, cpu[:, None] // np.maximum(self.cpu, 1), big)
        n = np.minimum(gpu_copies, cpu_copies)
        if self.use_memory:
            mem_copies = np.where(self.mem > 0, mem[:, None] // np.maximum(self.mem, 1.0), big).astype(np.int64)
            n = np.minimum(n, mem_copies)
        n = n * self.access[model.astype(np.intp) + 1]
        usable = np.minimum(n * (self.milli * self.k), total[:, None])
        frag = total * (self.f_cpu_only + float(self.f.sum())) - usable @ self.f
        if self.fgd_weight:
            ge = free64[:, :, None] >= self.u[None, None, :]
            cnt = ge.sum(axis=1)
            below = np.where(ge, 0, free64[:, :, None]).sum(axis=1)
            ok = (cnt[:, self.ui] >= self.k) & (cpu[:, None] >= self.cpu) & self.access[model.astype(np.intp) + 1]
            if self.use_memory:
                ok &= mem[:, None] >= self.mem
            fgd = total * (self.f_cpu_only + float(self.f.sum())) - ((total[:, None] - below[:, self.ui]) * ok) @ self.f
            frag = frag + self.fgd_weight * fgd
        if self.balance and self.cpu_per_milli > 0:
            if self.balance_mode == "sum":
                frag = frag + self.balance * np.maximum(0.0, total - cpu / self.cpu_per_milli)
                if self.use_memory and self.mem_per_milli > 0:
                    frag = frag + self.balance * np.maximum(0.0, total - mem / self.mem_per_milli)
            else:
                feedable = cpu / self.cpu_per_milli
                if self.use_memory and self.mem_per_milli > 0:
                    feedable = np.minimum(feedable, mem / self.mem_per_milli)
                frag = frag + self.balance * np.maximum(0.0, total - feedable)
        return frag

    def shape_frag(self, sids: NDArray[np.int64]) -> F64:
        """Memoised fragment of shape ids of the bound state."""
        state = self.state

        def compute(todo: NDArray[np.int64]) -> F64:
            model, cpu, free = state.shapes()
            return self.frag(model[todo], cpu[todo], state.shape_mem()[todo], free[todo])

        return self._memo.lookup(sids, state.n_shapes, compute)  # type: ignore[return-value]


class SeedanceOptions(BaseModel):
    """Options of the ``seedance`` policy (a profile's ``placement.options``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: bool = Field(default=True, description="Count memory in the fragmentation model.")
    fgd_weight: float = Field(default=1.0, description="Weight of the GPU fragmentation increase.")
    gpu_weight: float = Field(default=0.0, description="Weight of the GPU best-fit term.")
    balance: float = Field(default=2.0, description="Weight of the CPU/memory balance term.")
    balance_mode: str = Field(default="min", description="How CPU and memory balance combine.")
    gap_loss: float = Field(default=12.0, description="Loss charged for a gap no learned pod fills.")
    gap_share_min: float = Field(default=0.03, description="Smallest learned share that fills a gap.")
    scale: float = Field(default=3000.0, description="Sigmoid scale of the score.")
    score: Literal["sigmoid+fit", "sigmoid+gap", "sigmoid", "float"] = Field(
        default="sigmoid+gap", description="Score mode."
    )
    coverage: float = Field(default=1.0, description="Share of the learned mix the model keeps.")


#: the refresh schedule's unit of cluster size (nodes) and its longest step (pods per unit)
REFRESH_UNIT = 1024
#: the first refresh (pods per unit)
FIRST_REFRESH = 32


def refresh_scale(n_nodes: int) -> int:
    """Units of :data:`REFRESH_UNIT` nodes in a cluster of ``n_nodes`` (whole ones, at least one).

    >>> [refresh_scale(n) for n in (10, 1213, 2048, 4852, 19408)]
    [1, 1, 2, 4, 18]
    """
    return max(1, n_nodes // REFRESH_UNIT)


@PLACEMENT_POLICIES.register("seedance")
class SeedancePacker(LocalScorePolicy):
    """Online-learned, CPU- and memory-aware fragmentation packer."""

    name = "seedance"
    summary = "learns the workload mix online; packs to keep GPUs, CPU and memory usable together"
    Options = SeedanceOptions

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        opts = ctx.options
        self.use_memory = bool(opts.get("memory", True))
        self.fgd_weight = float(opts.get("fgd_weight", 1.0))  # type: ignore[arg-type]
        self.gpu_weight = float(opts.get("gpu_weight", 0.0))  # type: ignore[arg-type]
        self.balance = float(opts.get("balance", 2.0))  # type: ignore[arg-type]
        self.balance_mode = str(opts.get("balance_mode", "min"))
        self.gap_loss = float(opts.get("gap_loss", 12.0))  # type: ignore[arg-type]
        self.gap_share_min = float(opts.get("gap_share_min", 0.03))  # type: ignore[arg-type]
        self.scale = float(opts.get("scale", 3000.0))  # type: ignore[arg-type]
        self.score_mode = str(opts.get("score", "sigmoid+gap"))
        if self.score_mode not in ("sigmoid+fit", "sigmoid+gap", "sigmoid", "float"):
            raise ValueError(f"unknown score mode {self.score_mode!r}; valid: sigmoid+fit, sigmoid+gap, sigmoid, float")
        self.mix = OnlineMix(coverage=float(opts.get("coverage", 1.0)))  # type: ignore[arg-type]
        self._next_refresh = FIRST_REFRESH  # pods per unit of cluster size
        self._scale = 1  # units of cluster size (``refresh_scale`` of the cluster the model is built on)
        self._model: CopiesFragModel | None = None
        self._generation = 0  # models built so far (the epoch of every node's scores)
        self._cache: dict[ReqKey, ShapeMemo] = {}
        self._columns: dict[ReqKey, NodeColumn] = {}

    def observe(self, req: ResourceRequest) -> None:
        self.mix.observe(req)
        if self.mix.seen >= self._next_refresh * self._scale:
            self._next_refresh += min(self._next_refresh, REFRESH_UNIT)
            self._model = None

    def model(self, view: ClusterState) -> CopiesFragModel:
        """The fragmentation model for the current learned mix on ``view``."""
        if self._model is None or self._model.state is not view:
            self._model = CopiesFragModel(
                self.mix.snapshot(),
                view,
                use_memory=self.use_memory,
                fgd_weight=self.fgd_weight,
                gpu_weight=self.gpu_weight,
                balance=self.balance,
                balance_mode=self.balance_mode,
                gap_loss=self.gap_loss,
                gap_share_min=self.gap_share_min,
            )
            self._scale = refresh_scale(view.n_nodes)
            self._generation += 1
            self._cache = {}
            self._columns = {}
        return self._model

    # ------------------------------------------------------------------ scoring
    def deltas(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> F64:
        """Fragment decrease (milli-GPU) of placing ``req`` on each node (best GPU for a share)."""
        m = self.model(view)
        key = (req.cpu_milli, req.memory_mib, req.num_gpu, req.gpu_milli)
        memo = self._cache.get(key)
        if memo is None:
            memo = self._cache[key] = ShapeMemo()
        sids = view.shape_id[nodes]
        return memo.lookup(sids, view.n_shapes, lambda todo: self._shape_deltas(m, req, todo))  # type: ignore[return-value]

    def _shape_deltas(self, m: CopiesFragModel, req: ResourceRequest, sids: NDArray[np.int64]) -> F64:
        model, cpu, free = m.state.shapes()
        mem = m.state.shape_mem()
        md, c, me, f = model[sids], cpu[sids] - req.cpu_milli, mem[sids] - req.memory_mib, free[sids]
        before = m.shape_frag(sids)
        if req.is_sharing:
            # candidates: one GPU per distinct free value that fits (free is sorted descending, so
            # GPUs with equal free milli give the same after-state)
            fits = f >= req.gpu_milli
            fits[:, 1:] &= f[:, 1:] != f[:, :-1]
            rows, cols = np.nonzero(fits)
            after_free = f[rows].copy()
            after_free[np.arange(rows.size), cols] -= req.gpu_milli
            after = m.frag(md[rows], c[rows], me[rows], after_free)
            best = np.full(len(sids), -np.inf)
            np.maximum.at(best, rows, before[rows] - after)
            return best
        after_free = f.copy()
        if req.num_gpu:
            after_free[:, : req.num_gpu] -= MILLI_PER_GPU
        return before - m.frag(md, c, me, after_free)

    def score(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> Scores:
        self.model(view)  # a refreshed mix drops the columns below with the memo tables
        key = (req.cpu_milli, req.memory_mib, req.num_gpu, req.gpu_milli)
        col = self._columns.get(key)
        if col is None:
            # the scores of every node, kept current where binds change nodes (the hot-path index)
            col = self._columns[key] = NodeColumn(view, lambda idx: self.node_scores(view, req, idx))
        return col.take(nodes)

    def score_epoch(self, view: ClusterState) -> object:
        self.model(view)  # where ``score`` would refresh the model, the index does too
        return self._generation

    def node_score_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        return lambda idx: self.node_scores(view, req, idx)

    def node_scores(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> Scores:
        """The scores of ``nodes`` for ``req`` computed afresh (``score`` keeps them per request)."""
        d = self.deltas(view, req, nodes)
        if self.score_mode == "float":
            return np.round(d).astype(np.int64)
        primary = np.trunc(100.0 / (1.0 + np.exp(-d / self.scale))).astype(np.int64)
        if self.score_mode == "sigmoid":
            return primary

        # Among nodes with equal integer score: a share takes the tightest gap; a CPU-only pod the
        # node with the most CPU to spare beyond what its idle GPUs will need (``cpu_per_milli``
        # of the mix); whole GPUs keep the rank order ("sigmoid+gap", the default), or go to the
        # node with the fewest idle GPUs ("sigmoid+fit": better on unconstrained traces, worse
        # where GPU-type constraints make some models scarce).
        if req.is_sharing:
            rows = view.gpu_free[nodes]
            gap = np.where(rows >= req.gpu_milli, rows - req.gpu_milli, 10**6).min(axis=1)
            return primary * 10**7 - gap
        if req.num_gpu and self.score_mode == "sigmoid+fit":
            return primary * 10**7 - view.n_full[nodes].astype(np.int64)
        if req.num_gpu:
            return primary
        rho = self.model(view).cpu_per_milli
        surplus = view.cpu_free[nodes] - req.cpu_milli - view.gpu_free_total[nodes] * rho
        return primary * 10**9 + np.clip(surplus, -(10**8), 10**8).astype(np.int64)

    def select_gpus(self, view: ClusterState, req: ResourceRequest, node: int) -> tuple[int, ...]:
        if not req.is_sharing:
            return best_fit_gpus(view, req, node)
        m = self.model(view)
        row = view.gpu_free[node]
        g = row.size
        after_free = np.repeat(row[None, :], g, axis=0).copy()
        after_free[np.arange(g), np.arange(g)] -= req.gpu_milli
        after = m.frag(
            np.full(g, view.model[node], dtype=np.int16),
            np.full(g, view.cpu_free[node] - req.cpu_milli, dtype=np.int64),
            np.full(g, view.mem_free[node] - req.memory_mib, dtype=np.int64),
            after_free,
        )
        val = np.where(row >= req.gpu_milli, -after, -math.inf)
        best = val.max()
        cand = np.flatnonzero(val >= best - 1e-9)
        return (int(cand[np.argmin(row[cand])]),)

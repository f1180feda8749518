"""GPU fragmentation of nodes under a task-type distribution (the FGD paper's measure).

For a node with free CPU ``c``, free milli-GPU per GPU ``f_g`` and total idle ``L = Σ f_g``, and a
task type ``t`` (CPU ``c_t``, per-GPU milli ``m_t``, count ``k_t``, allowed models), the part of
``L`` that type ``t`` cannot use is:

* all of ``L`` if ``t`` is CPU-only, if the node's model is not allowed, if fewer than ``k_t``
  GPUs have ``f_g >= m_t``, or if ``c < c_t``;
* otherwise only ``Σ f_g`` over GPUs with ``f_g < m_t``.

The node's fragmentation is the frequency-weighted sum over types. It depends only on the node's
*shape* (model, free CPU, multiset of free GPU), so values are memoised per shape id of the
:class:`~seedance.core.cluster.ClusterState`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.scheduling.memo import ShapeMemo
from seedance.scheduling.tasktypes import TaskTypes

F64 = NDArray[np.float64]


class FragModel:
    """Vectorised fragmentation for one task-type distribution on one cluster state.

    Args:
        types: The task-type distribution.
        state: The cluster whose model ids and shape ids this model reads (memo per shape).
        freq: Optional frequencies replacing ``types.freq`` (online estimates).
    """

    def __init__(self, types: TaskTypes, state: ClusterState, freq: F64 | None = None) -> None:
        self.state = state
        models = state.models
        f = types.freq if freq is None else np.asarray(freq, dtype=np.float64)
        gpu = types.milli > 0
        self.f_total = float(f.sum())
        self.f_gpu = f[gpu]
        # with the pod counts behind the frequencies, the weighted sum is exact integer arithmetic
        # (count-weighted milli, divided once): the same on every CPU, where a float matmul rounds
        # differently under different BLAS kernels and flips near-ties
        self.c_gpu: NDArray[np.int64] | None = types.count[gpu].astype(np.int64) if freq is None else None
        self.c_div = float(types.count.sum()) if freq is None else 1.0
        self.cpu_t = types.cpu[gpu]
        self.k_t = types.k[gpu]
        milli_t = types.milli[gpu]
        self.thresholds, self.u_idx = np.unique(milli_t, return_inverse=True)
        # access[model_id + 1, t]: row 0 is "no GPU model" (CPU-only node)
        acc = np.zeros((len(models) + 1, int(gpu.sum())), dtype=np.bool_)
        gpu_types = [gt for gt, g in zip(types.gpu_types, gpu.tolist(), strict=True) if g]
        for j, allowed in enumerate(gpu_types):
            for i, m in enumerate(models):
                acc[i + 1, j] = (not allowed) or (m in allowed)
        self.access = acc
        self._by_shape = ShapeMemo()

    def frag(self, cpu: NDArray[np.int64], free: NDArray[np.int32], model: NDArray[np.int16]) -> F64:
        """Fragmentation (milli-GPU) of states given as arrays ``(S,)``, ``(S, G)``, ``(S,)``."""
        free = free.astype(np.int64, copy=False)
        total_i = free.sum(axis=1)
        total = total_i.astype(np.float64)
        if self.f_gpu.size == 0:
            return total * self.f_total
        ge = free[:, :, None] >= self.thresholds[None, None, :]  # S, G, U
        cnt = ge.sum(axis=1)  # S, U
        below = np.where(ge, 0, free[:, :, None]).sum(axis=1)  # S, U: idle on GPUs too small
        ok = (cnt[:, self.u_idx] >= self.k_t) & (cpu[:, None] >= self.cpu_t) & self.access[model.astype(np.intp) + 1]
        if self.c_gpu is not None:
            usable_i = (total_i[:, None] - below[:, self.u_idx]) * ok  # S, T (int64)
            return total * self.f_total - (usable_i @ self.c_gpu) / self.c_div
        usable = (total[:, None] - below[:, self.u_idx]) * ok  # S, T
        return total * self.f_total - usable @ self.f_gpu

    def shape_frag(self, shape_ids: NDArray[np.int64]) -> F64:
        """Fragmentation of the given shape ids of the bound state (memoised)."""
        state = self.state

        def compute(todo: NDArray[np.int64]) -> F64:
            model, cpu, free = state.shapes()
            return self.frag(cpu[todo], free[todo], model[todo])

        return self._by_shape.lookup(shape_ids, state.n_shapes, compute)  # type: ignore[return-value]

    def node_frag(self) -> F64:
        """Fragmentation of every node of the bound state."""
        return self.shape_frag(self.state.shape_id)

    def total(self) -> float:
        """Cluster fragmentation in milli-GPU (sum over nodes)."""
        return float(self.node_frag().sum())

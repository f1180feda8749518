"""GPU fragmentation of nodes under a task-type distribution (the FGD paper's measure).

For a node with free CPU ``c``, free milli-GPU per GPU ``f_g`` and total idle ``L = Σ f_g``, and a
task type ``t`` (CPU ``c_t``, per-GPU milli ``m_t``, count ``k_t``, allowed models), the part of
``L`` that type ``t`` cannot use is:

* all of ``L`` if ``t`` is CPU-only, if the node's model is not allowed, if fewer than ``k_t``
  GPUs have ``f_g >= m_t``, or if ``c < c_t``;
* otherwise only ``Σ f_g`` over GPUs with ``f_g < m_t``.

The node's fragmentation is the frequency-weighted sum over types. It depends only on the node's
*fragmentation class*: its model, its *CPU level* (how many of the GPU types' CPU thresholds ``c``
reaches: free CPU is read only through ``c >= c_t``) and its multiset of free GPU. Every shape of
the :class:`~seedance.core.cluster.ClusterState` (which also tells apart exact free CPU and free
memory) is classified once, in shape-id order, and every class is valued once, when it first
appears. With the count-weighted integer sums a value is the same bits whatever batch computes
it, so the value computed for the first shape of a class is exactly what any other shape of the
class would give (``tests/scheduling/test_fragmentation.py``).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.scheduling.tasktypes import TaskTypes

F64 = NDArray[np.float64]
#: Most classes valued in one call of :meth:`FragModel.frag` (its temporaries are classes x GPUs x sizes).
_VALUE_BATCH = 4096
#: A fragmentation class: (model id, CPU level, free milli per GPU sorted descending).
ClassKey = tuple[int, int, tuple[int, ...]]


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
        #: the GPU types' CPU thresholds, sorted: a node's CPU level is how many of them it reaches
        self.cpu_cuts: NDArray[np.int64] = np.unique(self.cpu_t).astype(np.int64)
        self._cuts: list[int] = self.cpu_cuts.tolist()
        #: number of distinct CPU levels (``0 .. len(cpu_cuts)``)
        self.n_levels = len(self._cuts) + 1
        # a free CPU of each level (what a class is valued with)
        self._level_cpu = [self._cuts[0] - 1 if self._cuts else 0] + self._cuts
        self._class_index: dict[ClassKey, int] = {}
        self._class_keys: list[ClassKey] = []  # class id -> (model id, CPU level, free GPUs sorted descending)
        self._class_frag: list[float] = []  # class id -> fragmentation (classes valued so far)
        self._frag_arr: F64 = np.zeros(64, dtype=np.float64)  # the same, as an array
        self._class_of: list[int] = []  # shape id -> class id
        self._class_arr: NDArray[np.int64] = np.zeros(64, dtype=np.int64)  # the same, as an array

    @classmethod
    def of(cls, types: TaskTypes, state: ClusterState) -> FragModel:
        """The model of ``types`` on ``state`` that the state keeps (one per pair, shared by its
        readers: FGD's scores and the simulator's fragmentation metric value each class once)."""
        return state.derived(("FragModel", types), lambda: cls(types, state), cls)

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

    def cpu_level(self, cpu: NDArray[np.int64]) -> NDArray[np.int64]:
        """How many CPU thresholds of the GPU types each of ``cpu`` reaches (all ``frag`` reads of CPU)."""
        return np.searchsorted(self.cpu_cuts, cpu, side="right").astype(np.int64)

    def cpu_level_of(self, cpu: int) -> int:
        """:meth:`cpu_level` of one value."""
        return bisect_right(self._cuts, cpu)

    @property
    def n_classes(self) -> int:
        """Number of fragmentation classes seen so far (ids are ``0..n_classes-1``)."""
        return len(self._class_keys)

    def intern(self, model: int, level: int, free: tuple[int, ...]) -> int:
        """The class id of a state: model id, CPU level and free milli per GPU sorted descending
        (padded to the state's GPU columns). A new class is valued on the next read of values."""
        key = (model, level, free)
        cid = self._class_index.get(key)
        if cid is None:
            cid = self._class_index[key] = len(self._class_keys)
            self._class_keys.append(key)
        return cid

    def class_key(self, class_id: int) -> ClassKey:
        """``(model id, CPU level, free GPUs sorted descending)`` of a class."""
        return self._class_keys[class_id]

    def class_frag(self, class_ids: list[int]) -> F64:
        """Fragmentation of the given classes."""
        self._value()
        return self._frag_arr[class_ids]

    def _value(self) -> None:
        """Value the classes interned since the last call, in one batch."""
        start, end = len(self._class_frag), len(self._class_keys)
        if start == end:
            return
        if end > self._frag_arr.size:
            self._frag_arr = np.resize(self._frag_arr, max(end, 2 * self._frag_arr.size))
        level_cpu = self._level_cpu
        for lo in range(start, end, _VALUE_BATCH):  # bounded temporaries; the bits do not depend on the batch
            hi = min(end, lo + _VALUE_BATCH)
            keys = self._class_keys[lo:hi]
            vals = self.frag(
                np.array([level_cpu[k[1]] for k in keys], dtype=np.int64),
                np.array([k[2] for k in keys], dtype=np.int32).reshape(hi - lo, self.state.max_gpus),
                np.array([k[0] for k in keys], dtype=np.int16),
            )
            self._class_frag.extend(vals.tolist())
            self._frag_arr[lo:hi] = vals

    def sync(self) -> None:
        """Classify the shapes the state named since the last call (new classes are valued when read)."""
        state = self.state
        start, end = len(self._class_of), state.n_shapes
        if start < end:
            model, cpu, free = state.shapes()
            of, intern, cuts = self._class_of, self.intern, self._cuts
            for m, c, row in zip(model[start:end].tolist(), cpu[start:end].tolist(), free[start:end].tolist(),
                                 strict=True):
                of.append(intern(m, bisect_right(cuts, c), tuple(row)))
            if end > self._class_arr.size:
                self._class_arr = np.resize(self._class_arr, max(end, 2 * self._class_arr.size))
            self._class_arr[start:end] = of[start:end]

    def shape_class(self, shape_ids: NDArray[np.int64]) -> NDArray[np.int64]:
        """Fragmentation class id of each of ``shape_ids`` (shapes of the bound state)."""
        self.sync()
        return self._class_arr[shape_ids]

    def class_of(self, shape_id: int) -> int:
        """Fragmentation class id of one shape of the bound state."""
        if shape_id >= len(self._class_of):
            self.sync()
        return self._class_of[shape_id]

    def shape_frag(self, shape_ids: NDArray[np.int64]) -> F64:
        """Fragmentation of the given shape ids of the bound state (valued once per class)."""
        self.sync()
        self._value()
        return self._frag_arr[self._class_arr[shape_ids]]

    def shape_frag_of(self, shape_id: int) -> float:
        """:meth:`shape_frag` of one shape id."""
        cid = self.class_of(shape_id)
        if cid >= len(self._class_frag):
            self._value()
        return self._class_frag[cid]

    def node_frag(self) -> F64:
        """Fragmentation of every node of the bound state."""
        return self.shape_frag(self.state.shape_id)

    def total(self) -> float:
        """Cluster fragmentation in milli-GPU (sum over nodes)."""
        return float(self.node_frag().sum())

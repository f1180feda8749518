"""Nodes, cluster specifications and the columnar cluster state.

``ClusterState`` owns every hot array (free milli-GPU per GPU, free CPU and memory per node) and
is the only place they change: ``apply`` binds a :class:`~seedance.core.decision.Placement`,
``release`` gives it back. Policies read the state through the read-only views it exposes
(``gpu_free``, ``cpu_free``, ...) and never write.

NOTE(seedance): invariants kept by every mutation, and checked there:
  * 0 <= gpu_free[n, g] <= 1000 for real GPUs; padding columns (g >= gpu_count[n]) stay 0;
  * 0 <= cpu_free[n] <= cpu capacity, same for memory;
  * used_gpu_milli == sum over nodes of (capacity - free), i.e. allocation is conserved;
  * version[n] grows by one on every change of node n, so derived caches can key on it;
  * shape_id[n] names the node's (model, free CPU, free memory, sorted free-GPU multiset): two
    nodes with the same shape score alike under every fragmentation measure, so caches key on it;
  * every change of node n appends n to the change log, so a :class:`NodeColumn` (a per-node
    array derived from the state: a filter mask, a policy's scores for one request) recomputes
    only the nodes changed since it was last read. Filters and scores then cost what changed,
    not the cluster's size (the hot-path index; docs/scale.md).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import CATALOG, GpuCatalog
from seedance.core.decision import Placement
from seedance.core.errors import SeedanceError
from seedance.core.resources import MILLI_PER_GPU, PodClass, ResourceRequest

I64 = NDArray[np.int64]
I32 = NDArray[np.int32]
BoolA = NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node's capacity and identity.

    Attributes:
        name: Unique node name.
        cpu_milli: Allocatable CPU in milli-cores.
        memory_mib: Allocatable memory in MiB.
        gpu_count: Number of GPUs.
        gpu_model: Canonical catalog name of its GPUs (``None`` for a CPU-only node).
        labels: Node labels (e.g. ``gpu.sla.level``, ``gpu.mode``).
    """

    name: str
    cpu_milli: int
    memory_mib: int
    gpu_count: int = 0
    gpu_model: str | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """An ordered, immutable set of nodes. Node index = position in ``nodes``."""

    nodes: tuple[NodeSpec, ...]
    name: str = "cluster"

    def __post_init__(self) -> None:
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique")

    @property
    def total_gpus(self) -> int:
        """Number of GPUs in the cluster."""
        return sum(n.gpu_count for n in self.nodes)

    @property
    def models(self) -> tuple[str, ...]:
        """GPU models present, sorted; their positions are the model ids used in arrays."""
        return tuple(sorted({n.gpu_model for n in self.nodes if n.gpu_model is not None}))


class ClusterState:
    """Columnar, mutable state of a cluster; the single owner of its arrays.

    Args:
        spec: The nodes.
        catalog: GPU catalog used to resolve GPU-type constraints.
    """

    #: Whether ``NodeColumn`` reads update only changed nodes (``False``: recompute every node on
    #: every read, the plain scan the index is tested against).
    indexed: bool = True
    #: Clusters with fewer nodes read every ``NodeColumn`` as a plain scan (the same threshold as
    #: ``Scheduler.INDEX_MIN_NODES``): there recomputing a column costs less than the change-log
    #: bookkeeping, since a column read after other requests' binds has many changed nodes and
    #: its stored array is cold (default trace, 1,213 nodes: inflation 7-9% faster as a scan).
    index_min_nodes: int = 2048

    def __init__(self, spec: ClusterSpec, *, catalog: GpuCatalog = CATALOG) -> None:
        self.spec = spec
        self.catalog = catalog
        n = len(spec.nodes)
        g = max([node.gpu_count for node in spec.nodes] + [1])
        self.n_nodes = n
        self.max_gpus = g
        self.models: tuple[str, ...] = spec.models
        model_ids = {m: i for i, m in enumerate(self.models)}
        self.gpu_count: NDArray[np.int32] = np.array([x.gpu_count for x in spec.nodes], dtype=np.int32)
        self.cpu_capacity: I64 = np.array([x.cpu_milli for x in spec.nodes], dtype=np.int64)
        self.mem_capacity: I64 = np.array([x.memory_mib for x in spec.nodes], dtype=np.int64)
        self.model: NDArray[np.int16] = np.array(
            [model_ids[x.gpu_model] if x.gpu_model is not None else -1 for x in spec.nodes], dtype=np.int16
        )
        self._gpu_free: I32 = np.zeros((n, g), dtype=np.int32)
        for i, node in enumerate(spec.nodes):
            self._gpu_free[i, : node.gpu_count] = MILLI_PER_GPU
        self._cpu_free: I64 = self.cpu_capacity.copy()
        self._mem_free: I64 = self.mem_capacity.copy()
        self._version: I64 = np.zeros(n, dtype=np.int64)
        self._free_total: I64 = self._gpu_free.sum(axis=1).astype(np.int64)
        self._n_full: I32 = (self._gpu_free == MILLI_PER_GPU).sum(axis=1).astype(np.int32)
        self._max_free: I32 = self._gpu_free.max(axis=1).astype(np.int32)
        self._gpu_level: I64 = gpu_level(self._n_full, self._max_free)
        self._class_counts: I32 = np.zeros((n, 2 + g), dtype=np.int32)
        self._schedulable: BoolA = np.ones(n, dtype=np.bool_)
        self._rank: I64 = np.arange(n, dtype=np.int64)
        #: grows by one on every ``set_rank`` (indexes ordered by rank key on it)
        self.rank_epoch = 0
        #: grows by one on every ``set_schedulable`` (indexes skip cordon-only filters while it stays)
        self.cordon_count = 0
        self.used_gpu_milli = 0
        self.capacity_gpu_milli = int(self.gpu_count.sum()) * MILLI_PER_GPU
        # shape registry: id -> (model, cpu_free, mem_free, free GPUs sorted descending)
        self._shape_index: dict[tuple[int, int, int, tuple[int, ...]], int] = {}
        self._shape_model: NDArray[np.int16] = np.zeros(16, dtype=np.int16)
        self._shape_cpu: I64 = np.zeros(16, dtype=np.int64)
        self._shape_mem: I64 = np.zeros(16, dtype=np.int64)
        self._shape_free: I32 = np.zeros((16, g), dtype=np.int32)
        self._shape_id: I64 = np.zeros(n, dtype=np.int64)
        # (n_shapes, the views of shapes()) of the last call
        self._shapes_view: tuple[int, tuple[NDArray[np.int16], I64, I32]] = (
            -1, (self._shape_model, self._shape_cpu, self._shape_free)
        )
        for i in range(n):
            self._shape_id[i] = self._intern(i)
        self._model_masks: dict[tuple[str, ...], BoolA] = {}
        self._label_masks: dict[tuple[str, tuple[str, ...]], BoolA] = {}
        self._name_index = {node.name: i for i, node in enumerate(spec.nodes)}
        self._live: dict[Placement, int] = {}
        self._log: I64 = np.zeros(1024, dtype=np.int64)
        self._log_len = 0
        self._columns: dict[Hashable, NodeColumn] = {}
        self._derived: dict[Hashable, object] = {}
        self._ever: dict[tuple[int, int, int, tuple[str, ...]], bool] = {}
        self._all: BoolA = _ro(np.ones(n, dtype=np.bool_))
        # read-only views handed to policies (they track the arrays they view)
        self.gpu_free = _ro(self._gpu_free)
        self.cpu_free = _ro(self._cpu_free)
        self.mem_free = _ro(self._mem_free)
        self.version = _ro(self._version)
        self.gpu_free_total = _ro(self._free_total)
        self.n_full = _ro(self._n_full)
        self.max_free = _ro(self._max_free)
        #: ``n_full * 1001 + max_free`` per node: one monotone key of whole-GPU and share fits
        #: (:func:`gpu_level`)
        self.gpu_level = _ro(self._gpu_level)
        self.class_counts = _ro(self._class_counts)
        self.schedulable = _ro(self._schedulable)
        self.rank = _ro(self._rank)
        self.shape_id = _ro(self._shape_id)

    # ------------------------------------------------------------------ lookups
    def node_index(self, name: str) -> int:
        """Index of the node called ``name``."""
        return self._name_index[name]

    @property
    def n_shapes(self) -> int:
        """Number of distinct node shapes seen so far (ids are ``0..n_shapes-1``)."""
        return len(self._shape_index)

    def shapes(self) -> tuple[NDArray[np.int16], I64, I32]:
        """Read-only arrays ``(model, cpu_free, sorted free GPUs)`` indexed by shape id."""
        k = self.n_shapes
        cached = self._shapes_view
        if cached[0] != k:  # views are rebuilt only when a shape was added (the arrays may have grown)
            views = (_ro(self._shape_model[:k]), _ro(self._shape_cpu[:k]), _ro(self._shape_free[:k]))
            cached = self._shapes_view = (k, views)
        return cached[1]

    def shape_mem(self) -> I64:
        """Read-only free memory (MiB) indexed by shape id."""
        return _ro(self._shape_mem[: self.n_shapes])

    def model_mask(self, gpu_types: tuple[str, ...]) -> BoolA:
        """Nodes whose GPU model is one of ``gpu_types`` (all GPU nodes when empty)."""
        cached = self._model_masks.get(gpu_types)
        if cached is not None:
            return cached
        if gpu_types:
            wanted = {self.catalog.resolve(t).name for t in gpu_types}
            ids = [i for i, m in enumerate(self.models) if m in wanted]
            mask: BoolA = np.isin(self.model, np.array(ids, dtype=np.int16))
        else:
            mask = self.model >= 0
        mask = _ro(mask)
        self._model_masks[gpu_types] = mask
        return mask

    def label_mask(self, key: str, values: Iterable[str]) -> BoolA:
        """Nodes whose label ``key`` has one of ``values``."""
        vals = tuple(sorted(values))
        cache_key = (key, vals)
        cached = self._label_masks.get(cache_key)
        if cached is not None:
            return cached
        mask: BoolA = _ro(np.array([node.labels.get(key) in vals for node in self.spec.nodes], dtype=np.bool_))
        self._label_masks[cache_key] = mask
        return mask

    # ------------------------------------------------------------------ index
    @property
    def change_count(self) -> int:
        """Number of node changes so far (positions in the change log)."""
        return self._log_len

    def changed_since(self, pos: int) -> NDArray[np.int64]:
        """Distinct nodes changed after change-log position ``pos``, sorted."""
        return np.unique(self._log[pos : self._log_len])

    def change_log(self, pos: int) -> NDArray[np.int64]:
        """The nodes changed after change-log position ``pos``, in order of change (with repeats)."""
        return self._log[pos : self._log_len]

    def column_of(self, key: Hashable, compute: Callable[[NDArray[np.intp]], NDArray[Any]]) -> NodeColumn:
        """The state-owned per-node column named ``key`` (``compute(nodes)`` gives its values)."""
        col = self._columns.get(key)
        if col is None:
            col = self._columns[key] = NodeColumn(self, compute)
        return col

    def derived(self, key: Hashable, build: Callable[[], _T], kind: type[_T]) -> _T:
        """The state-owned object named ``key``, built by ``build()`` on first use.

        For models derived from the state that several readers share (one fragmentation model for
        a policy and the simulator's metric, say): each is built once per state and lives as long
        as it. ``kind`` is the type the object must have.
        """
        obj = self._derived.get(key)
        if obj is None:
            obj = self._derived[key] = build()
        if not isinstance(obj, kind):
            raise TypeError(f"state-owned object {key!r} is a {type(obj).__name__}, not a {kind.__name__}")
        return obj

    def column(self, key: Hashable, compute: Callable[[NDArray[np.intp]], NDArray[Any]]) -> NDArray[Any]:
        """Every node's current value of the state-owned column named ``key``."""
        return self.column_of(key, compute).get()

    @property
    def all_nodes(self) -> BoolA:
        """A read-only mask with every node set."""
        return self._all

    def fit_mask(self, cpu_milli: int, memory_mib: int) -> BoolA:
        """Nodes whose free CPU and memory cover ``cpu_milli`` and ``memory_mib`` (kept current by the index)."""
        cpu, mem = self._cpu_free, self._mem_free
        if self.n_nodes < self.index_min_nodes:  # a small cluster: the scan, without the column's bookkeeping
            return (cpu >= cpu_milli) & (mem >= memory_mib)
        return self.column(
            ("fit", cpu_milli, memory_mib), lambda idx: (cpu[idx] >= cpu_milli) & (mem[idx] >= memory_mib)
        )

    def gpu_fit_mask(self, req: ResourceRequest) -> BoolA:
        """Nodes with one GPU of ``gpu_milli`` free (a share) or ``num_gpu`` idle GPUs (whole GPUs)."""
        if req.num_gpu == 0:
            return self._all
        scan = self.n_nodes < self.index_min_nodes  # a small cluster: the scan, without the column's bookkeeping
        if req.is_sharing:
            milli = req.gpu_milli
            mx = self._max_free
            return mx >= milli if scan else self.column(("share", milli), lambda idx: mx[idx] >= milli)
        k = req.num_gpu
        full = self._n_full
        return full >= k if scan else self.column(("whole", k), lambda idx: full[idx] >= k)

    def node_pods_view(self, node: int) -> tuple[int, int, int, tuple[int, ...]]:
        """Human-sized snapshot of one node: (cpu free, memory free, model id, free per GPU)."""
        gc = int(self.gpu_count[node])
        return (
            int(self._cpu_free[node]),
            int(self._mem_free[node]),
            int(self.model[node]),
            tuple(int(x) for x in self._gpu_free[node, :gc]),
        )

    # ------------------------------------------------------------------ control
    def set_rank(self, rank: Sequence[int] | NDArray[np.int64]) -> None:
        """Set the tie-break rank of every node (lower wins ties); a permutation of 0..n-1."""
        arr = np.asarray(rank, dtype=np.int64)
        if arr.shape != (self.n_nodes,) or not np.array_equal(np.sort(arr), np.arange(self.n_nodes)):
            raise ValueError("rank must be a permutation of 0..n_nodes-1")
        self._rank[:] = arr
        self.rank_epoch += 1

    def set_schedulable(self, node: int, schedulable: bool) -> None:
        """Cordon (``False``) or uncordon (``True``) a node."""
        self._schedulable[node] = schedulable
        self.cordon_count += 1
        self._version[node] += 1
        self._log_change(node)

    # ------------------------------------------------------------------ mutation
    def apply(self, p: Placement) -> None:
        """Take the resources of placement ``p``; raise (changing nothing) if they are not free."""
        n = p.node
        row = self._gpu_free[n]
        gc = int(self.gpu_count[n])
        free = row.tolist()
        for g in p.gpus:
            if not 0 <= g < gc:
                raise SeedanceError(f"node {n} has no GPU {g}")
            if free[g] < p.gpu_milli:
                raise SeedanceError(f"GPU {g} of node {n} has {free[g]} milli free, {p.gpu_milli} asked")
        if len(set(p.gpus)) != len(p.gpus):
            raise SeedanceError("a placement names the same GPU twice")
        if self._cpu_free[n] < p.cpu_milli or self._mem_free[n] < p.memory_mib:
            raise SeedanceError(f"node {n} lacks CPU or memory for the placement")
        for g in p.gpus:
            row[g] -= p.gpu_milli
        self._cpu_free[n] -= p.cpu_milli
        self._mem_free[n] -= p.memory_mib
        self.used_gpu_milli += p.gpu_milli * len(p.gpus)
        self._class_counts[n, _placement_class(p)] += 1
        self._live[p] = self._live.get(p, 0) + 1
        self._touch(n)

    def release(self, p: Placement) -> None:
        """Give back the resources of a placement made earlier by ``apply``."""
        n = p.node
        count = self._live.get(p, 0)
        if count <= 0:
            raise SeedanceError(f"release of a placement never applied on node {n}")
        row = self._gpu_free[n]
        cls = _placement_class(p)
        if count == 1:
            del self._live[p]
        else:
            self._live[p] = count - 1
        for g in p.gpus:
            row[g] += p.gpu_milli
        self._cpu_free[n] += p.cpu_milli
        self._mem_free[n] += p.memory_mib
        self.used_gpu_milli -= p.gpu_milli * len(p.gpus)
        self._class_counts[n, cls] -= 1
        self._touch(n)

    def live_placements(self) -> int:
        """Number of placements applied and not yet released."""
        return sum(self._live.values())

    def fits_anywhere_ever(self, req: ResourceRequest) -> bool:
        """Whether an empty node of this cluster could host ``req`` at all (memoised: capacities never change)."""
        key = (req.cpu_milli, req.memory_mib, req.num_gpu, req.gpu_types if req.num_gpu else ())
        known = self._ever.get(key)
        if known is not None:
            return known
        ok = (self.cpu_capacity >= req.cpu_milli) & (self.mem_capacity >= req.memory_mib)
        if req.num_gpu:
            ok &= self.model_mask(req.gpu_types) & (self.gpu_count >= req.num_gpu)
        self._ever[key] = answer = bool(ok.any())
        return answer

    # ------------------------------------------------------------------ internals
    def _touch(self, n: int) -> None:
        free = self._gpu_free[n].tolist()  # Python ints: a node's few GPUs cost less than array passes
        self._free_total[n] = sum(free)
        self._n_full[n] = full = free.count(MILLI_PER_GPU)
        self._max_free[n] = top = max(free)
        self._gpu_level[n] = full * _LEVEL + top
        self._version[n] += 1
        self._shape_id[n] = self._intern(n, free)
        self._log_change(n)

    def _log_change(self, n: int) -> None:
        if self._log_len == len(self._log):
            self._log = np.resize(self._log, 2 * len(self._log))
        self._log[self._log_len] = n
        self._log_len += 1

    def _intern(self, n: int, row: list[int] | None = None) -> int:
        free = tuple(sorted(self._gpu_free[n].tolist() if row is None else row, reverse=True))
        key = (int(self.model[n]), int(self._cpu_free[n]), int(self._mem_free[n]), free)
        sid = self._shape_index.get(key)
        if sid is None:
            sid = len(self._shape_index)
            if sid >= len(self._shape_cpu):
                self._grow_shapes()
            self._shape_index[key] = sid
            self._shape_model[sid] = key[0]
            self._shape_cpu[sid] = key[1]
            self._shape_mem[sid] = key[2]
            self._shape_free[sid] = free
        return sid

    def _grow_shapes(self) -> None:
        cap = 2 * len(self._shape_cpu)
        self._shape_model = np.resize(self._shape_model, cap)
        self._shape_cpu = np.resize(self._shape_cpu, cap)
        self._shape_mem = np.resize(self._shape_mem, cap)
        grown = np.zeros((cap, self.max_gpus), dtype=np.int32)
        grown[: len(self._shape_free)] = self._shape_free
        self._shape_free = grown


class NodeColumn:
    """A per-node array derived from a :class:`ClusterState`, recomputed only where nodes changed.

    Args:
        state: The state it is derived from.
        compute: ``compute(nodes)`` returns the values of ``nodes`` (an index array) from the
            state as it is now; it must depend only on those nodes' own data.

    ``get()`` gives every node's value for the state as it is now (a read-only view, current until
    the next change); ``take(nodes)`` the values of ``nodes`` only. A column is read with one of
    the two, never both. A value, once computed, is reused until its node appears in the change
    log; ``take`` computes only the asked nodes whose value is missing or stale, in one call (so a
    shape memo behind ``compute`` sees the same batches as a scan of ``nodes`` would give it).
    With ``state.indexed`` off, or on a cluster below ``state.index_min_nodes``, every read
    recomputes what it returns (the plain scan).
    """

    __slots__ = ("_compute", "_pos", "_state", "_valid", "_values")

    def __init__(self, state: ClusterState, compute: Callable[[NDArray[np.intp]], NDArray[Any]]) -> None:
        self._state = state
        self._compute = compute
        self._values: NDArray[Any] | None = None
        self._valid: BoolA = np.zeros(state.n_nodes, dtype=np.bool_)
        self._pos = 0

    def get(self) -> NDArray[Any]:
        """Every node's value (the array is reused and updated in place by later reads)."""
        st = self._state
        if not st.indexed or st.n_nodes < st.index_min_nodes:
            return np.asarray(self._compute(np.arange(st.n_nodes, dtype=np.intp)))
        end = st.change_count
        vals = self._values
        if vals is None:
            vals = self._values = np.asarray(self._compute(np.arange(st.n_nodes, dtype=np.intp)))
        elif self._pos < end:
            dirty = st.change_log(self._pos)  # repeats are harmless: values are per node
            if 4 * dirty.size >= st.n_nodes:
                vals[:] = self._compute(np.arange(st.n_nodes, dtype=np.intp))
            else:
                vals[dirty] = self._compute(dirty)
        self._pos = end
        return _ro(vals)

    def take(self, nodes: NDArray[np.intp]) -> NDArray[Any]:
        """The values of ``nodes`` (a sorted index array), computing only missing or stale ones."""
        st = self._state
        if not st.indexed or st.n_nodes < st.index_min_nodes:
            return np.asarray(self._compute(nodes))
        end = st.change_count
        if self._pos < end:
            self._valid[st.change_log(self._pos)] = False
            self._pos = end
        vals = self._values
        if vals is None:
            first = np.asarray(self._compute(nodes))
            vals = self._values = np.zeros(self._state.n_nodes, dtype=first.dtype)
            vals[nodes] = first
            self._valid[nodes] = True
            return first
        need = nodes[~self._valid[nodes]]
        if need.size:
            vals[need] = self._compute(need)
            self._valid[need] = True
        return vals[nodes]


def _placement_class(p: Placement) -> int:
    if not p.gpus:
        return PodClass.CPU_ONLY
    if len(p.gpus) == 1 and p.gpu_milli < MILLI_PER_GPU:
        return PodClass.SHARE
    return PodClass.WHOLE + len(p.gpus)


_A = TypeVar("_A", bound="np.ndarray[Any, Any]")
_T = TypeVar("_T")


def _ro(a: _A) -> _A:
    v = a.view()
    v.flags.writeable = False
    return v


#: Steps of :func:`gpu_level` per idle GPU (one more than a GPU's milli).
_LEVEL = MILLI_PER_GPU + 1


def gpu_level(n_full: NDArray[np.integer[Any]], max_free: NDArray[np.integer[Any]]) -> I64:
    """``n_full * 1001 + max_free``: a node has ``k`` idle GPUs exactly when its level is at least
    ``1001 k``, and a GPU with ``m < 1000`` milli free exactly when its level is at least ``m`` (a
    node with an idle GPU is above 1000), so both kinds of GPU fit are one lower bound on it."""
    return n_full.astype(np.int64) * _LEVEL + max_free.astype(np.int64)


def gpu_level_bound(num_gpu: int, gpu_milli: int, sharing: bool) -> int:
    """The :func:`gpu_level` a node needs for a request of ``num_gpu`` GPUs (``gpu_milli`` each)."""
    return gpu_milli if sharing else num_gpu * _LEVEL

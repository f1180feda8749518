"""Slice-aware placement: node pools that offer MIG slices, composed around any placement policy.

NOTE(seedance): the algorithm, once.
  * Every node belongs to a pool: a *shared* pool (offers whole GPUs, MPS and time-slicing: the
    FGD paper's free fractional sharing) or a *MIG pool* of one MIG geometry (offers whole GPUs
    and MIG instances only). Pools come from a map ``node GPU model -> MIG GPU model``
    (``{"G2": "A100-80GB"}`` treats the trace's G2 nodes as MIG-mode A100-80GB).
  * A request resolves per pool to a slice (:func:`~seedance.slicing.slices.resolve_slice`,
    honouring ``req.backends``): on a MIG pool a share books the smallest covering profile's
    compute (``slices * 1000 // 7`` milli), on a shared pool it books what it asked.
  * Filter: on MIG pools a share needs a GPU where its profile has a free legal start (an 8-bit
    occupancy mask per GPU and a 256-entry table per geometry, :class:`MigLedger`); everywhere
    else the usual milli test. Score: the wrapped policy scores each pool's nodes with the
    request *as booked there*. GPU: the policy's GPU if the profile fits there, else the fitting
    GPU with the least free milli; the start is the table's (most compute left placeable).
  * The driver applies the decision to the ``ClusterState`` (booked milli) and to the ledger
    (the instance), so no GPU exceeds 1000 milli and MIG instances never overlap.
  With no MIG pool every decision equals the wrapped policy's own (a test checks this).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import CATALOG
from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision
from seedance.core.errors import InputError, SeedanceError, UnknownNameError
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest, SliceBackend
from seedance.scheduling.framework import (
    FilterPlugin,
    Nodes,
    PlacementPolicy,
    Scores,
)
from seedance.slicing.mig import FULL_MASK, Instance, MigGpu, OccupancyTables, mig_gpu
from seedance.slicing.slices import Slice, resolve_slice

BoolA = NDArray[np.bool_]

#: Backends offered by a shared (non-MIG) pool.
SHARED_POOL: tuple[SliceBackend, ...] = (SliceBackend.WHOLE, SliceBackend.MPS, SliceBackend.TIME_SLICING)
#: Backends offered by a MIG pool.
MIG_POOL: tuple[SliceBackend, ...] = (SliceBackend.WHOLE, SliceBackend.MIG)

# how a request is served in a pool
_NONE, _WHOLE, _SHARE, _MIG = 0, 1, 2, 3

DEFAULT_MIG_MAP: Mapping[str, str] = {"G2": "A100-80GB"}


def parse_mig_map(items: list[str] | None, *, source: str = "--mig-map") -> dict[str, str]:
    """``["G2=A100-80GB"]`` → ``{"G2": "A100-80GB"}`` (canonical names; bad input raises InputError)."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in (x.strip() for x in item.split(",")):
            if not part:
                continue
            node_model, sep, mig_model = part.partition("=")
            if not sep or not node_model.strip() or not mig_model.strip():
                raise InputError(f"expected NODE_MODEL=MIG_GPU (e.g. G2=A100-80GB), got {part!r}", source=source)
            try:
                key = CATALOG.resolve(node_model).name
                out[key] = mig_gpu(mig_model).model
            except UnknownNameError as exc:
                raise InputError(str(exc), source=source) from None
    return out


@dataclass(frozen=True, slots=True)
class PoolSlice:
    """How one request is served in one pool (cached per request)."""

    kind: int
    request: ResourceRequest  # the request as booked in this pool
    profile: int = -1  # MIG profile index in the pool's tables
    slice: Slice | None = None


class MigLedger:
    """Pools of a cluster and the MIG occupancy of every GPU of its MIG pools.

    The ledger owns its arrays and changes them only in :meth:`apply` / :meth:`release`, called by
    the driver right after the matching ``ClusterState`` call.

    Args:
        state: The cluster (expected idle on MIG pools; partly used GPUs there count as full).
        mig_map: Node GPU model → MIG GPU model. Nodes whose own model is MIG-capable are MIG pools
            of that model when ``native`` is true.
        native: Treat nodes of MIG-capable catalog models as MIG pools too.
    """

    def __init__(self, state: ClusterState, mig_map: Mapping[str, str], *, native: bool = True) -> None:
        self.state = state
        pool_of_model: dict[str, MigGpu] = {}
        for m in state.models:
            target = mig_map.get(m)
            if target is not None:
                pool_of_model[m] = mig_gpu(target)
            elif native and CATALOG.resolve(m).mig:
                pool_of_model[m] = mig_gpu(m)
        self.gpus: tuple[MigGpu, ...] = tuple(dict.fromkeys(pool_of_model.values()))
        shared = [m for m in state.models if m not in pool_of_model]
        self._shared_model = shared[0] if shared else "A100-80GB"
        self.tables: tuple[OccupancyTables, ...] = tuple(OccupancyTables.build(g) for g in self.gpus)
        spec_of_model = np.full(len(state.models) + 1, -1, dtype=np.int16)
        for i, m in enumerate(state.models):
            if m in pool_of_model:
                spec_of_model[i] = self.gpus.index(pool_of_model[m])
        self.pool: NDArray[np.int16] = spec_of_model[state.model.astype(np.intp)]  # model -1 -> last: -1
        self.is_mig: BoolA = self.pool >= 0
        self.any_mig = bool(self.is_mig.any())
        n, g = state.gpu_free.shape
        self.occ: NDArray[np.uint8] = np.full((n, g), FULL_MASK, dtype=np.uint8)
        for node in np.flatnonzero(self.is_mig):
            gc = int(state.gpu_count[node])
            idle = state.gpu_free[node, :gc] == MILLI_PER_GPU
            self.occ[node, :gc] = np.where(idle, 0, FULL_MASK)
        self.node_fits: NDArray[np.uint16] = np.zeros(n, dtype=np.uint16)
        for node in np.flatnonzero(self.is_mig):
            self._refresh(int(node))
        self.instances: dict[tuple[int, int], list[Instance]] = {}
        self._resolved: dict[ResourceRequest, tuple[PoolSlice, ...]] = {}
        self._node_arrays: dict[ResourceRequest, tuple[NDArray[np.uint8], NDArray[np.uint16], int]] = {}

    # ---------------------------------------------------------------- resolution (cached)
    def resolve(self, req: ResourceRequest) -> tuple[PoolSlice, ...]:
        """How ``req`` is served in each pool: index 0 = shared pools, ``1 + s`` = MIG geometry ``s``."""
        cached = self._resolved.get(req)
        if cached is not None:
            return cached
        out = [self._resolve_pool(req, -1)]
        out.extend(self._resolve_pool(req, s) for s in range(len(self.gpus)))
        res = tuple(out)
        self._resolved[req] = res
        return res

    def _resolve_pool(self, req: ResourceRequest, spec: int) -> PoolSlice:
        if req.num_gpu == 0:
            return PoolSlice(_WHOLE, req)
        # shared pools give the same answer on every model (no memory need is known), so one
        # resolution serves them all; ``decide`` names the node's own model in the explanation
        model = self.gpus[spec].model if spec >= 0 else self._shared_model
        s = resolve_slice(req, model, MIG_POOL if spec >= 0 else SHARED_POOL)
        if s is None:
            return PoolSlice(_NONE, req)
        if s.backend is SliceBackend.WHOLE:
            whole = req if not req.is_sharing else replace(req, gpu_milli=MILLI_PER_GPU)
            return PoolSlice(_WHOLE, whole, slice=s if req.is_sharing else None)
        booked = replace(req, gpu_milli=s.booked_milli) if s.booked_milli != req.gpu_milli else req
        if s.backend is SliceBackend.MIG:
            assert s.profile is not None
            j = self.tables[spec].index[s.profile]
            if s.booked_milli >= MILLI_PER_GPU:  # a 7g instance is the whole GPU
                booked = replace(req, gpu_milli=MILLI_PER_GPU)
            return PoolSlice(_MIG, booked, profile=j, slice=s)
        return PoolSlice(_SHARE, booked, slice=s)

    def node_arrays(self, req: ResourceRequest) -> tuple[NDArray[np.uint8], NDArray[np.uint16], int]:
        """Per node: serving kind, required MIG profile bit, and the shared pools' booked milli."""
        cached = self._node_arrays.get(req)
        if cached is not None:
            return cached
        res = self.resolve(req)
        kinds = np.array([r.kind for r in res], dtype=np.uint8)
        bits = np.array([(1 << r.profile) if r.kind == _MIG else 0 for r in res], dtype=np.uint16)
        idx = (self.pool + 1).astype(np.intp)
        out = (kinds[idx], bits[idx], res[0].request.gpu_milli)
        self._node_arrays[req] = out
        return out

    # ---------------------------------------------------------------- queries
    def gpu_fit(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        """Nodes where ``req`` has GPU room, pool by pool (the filter)."""
        if req.num_gpu == 0:
            return np.ones(view.n_nodes, dtype=np.bool_)
        kind, bits, shared_milli = self.node_arrays(req)
        whole: BoolA = view.n_full >= req.num_gpu
        if not req.is_sharing:
            only: BoolA = whole & (kind == _WHOLE)
            return only
        ok: BoolA = (kind == _SHARE) & (view.max_free >= shared_milli)
        ok |= (kind == _WHOLE) & whole
        if self.any_mig:
            ok |= (kind == _MIG) & ((self.node_fits & bits) != 0)
        return ok

    def fits(self, node: int, gpu: int, profile: int) -> bool:
        """Whether ``profile`` has a free legal start on that GPU."""
        spec = int(self.pool[node])
        return bool(self.tables[spec].fits[self.occ[node, gpu]] >> profile & 1)

    def start_for(self, node: int, gpu: int, profile: int) -> int:
        """The start Seedance uses for ``profile`` on that GPU (``-1`` if it does not fit)."""
        spec = int(self.pool[node])
        return int(self.tables[spec].start[self.occ[node, gpu], profile])

    def choose_gpu(self, view: ClusterState, node: int, profile: int, preferred: int | None) -> int:
        """``preferred`` if the profile fits there, else the fitting GPU with least free milli."""
        if preferred is not None and self.fits(node, preferred, profile):
            return preferred
        spec = int(self.pool[node])
        gc = int(view.gpu_count[node])
        ok = (self.tables[spec].fits[self.occ[node, :gc]] >> profile & 1).astype(np.bool_)
        if not ok.any():
            raise SeedanceError(f"no GPU of node {node} can host MIG profile {profile}")
        free = np.where(ok, view.gpu_free[node, :gc], np.iinfo(np.int32).max)
        return int(free.argmin())

    def layout(self, node: int, gpu: int) -> tuple[Instance, ...]:
        """Instances on one GPU, by start."""
        return tuple(sorted(self.instances.get((node, gpu), ()), key=lambda i: i.start))

    def gpu_of(self, node: int) -> MigGpu | None:
        """MIG geometry of ``node``'s pool (``None`` for a shared pool)."""
        spec = int(self.pool[node])
        return self.gpus[spec] if spec >= 0 else None

    # ---------------------------------------------------------------- mutation
    def apply(self, decision: Decision) -> None:
        """Record the MIG instance (or whole GPUs) of an applied decision on a MIG pool."""
        p = decision.placement
        if p is None or not p.gpus or not self.is_mig[p.node]:
            return
        info = decision.explanation.get("slice")
        if info is not None and info.get("backend") == SliceBackend.MIG.value:
            self._occupy(p.node, p.gpus[0], Instance(str(info["profile"]), int(info["start"])))
            return
        if p.gpu_milli != MILLI_PER_GPU:
            raise SeedanceError(f"a share without a MIG instance on MIG node {p.node}")
        seven = self.tables[int(self.pool[p.node])].profiles[-1].name
        for g in p.gpus:
            self._occupy(p.node, g, Instance(seven, 0))

    def release(self, decision: Decision) -> None:
        """Give back what :meth:`apply` recorded for ``decision``."""
        p = decision.placement
        if p is None or not p.gpus or not self.is_mig[p.node]:
            return
        info = decision.explanation.get("slice")
        if info is not None and info.get("backend") == SliceBackend.MIG.value:
            self._free(p.node, p.gpus[0], Instance(str(info["profile"]), int(info["start"])))
            return
        seven = self.tables[int(self.pool[p.node])].profiles[-1].name
        for g in p.gpus:
            self._free(p.node, g, Instance(seven, 0))

    def _occupy(self, node: int, gpu: int, inst: Instance) -> None:
        spec = int(self.pool[node])
        prof = self.gpus[spec].profile(inst.profile)
        m = prof.mask(inst.start)
        if inst.start not in prof.starts or int(self.occ[node, gpu]) & m:
            raise SeedanceError(f"illegal MIG instance {inst} on node {node} GPU {gpu}")
        self.occ[node, gpu] |= m
        self.instances.setdefault((node, gpu), []).append(inst)
        self._refresh(node)

    def _free(self, node: int, gpu: int, inst: Instance) -> None:
        spec = int(self.pool[node])
        lst = self.instances.get((node, gpu), [])
        if inst not in lst:
            raise SeedanceError(f"release of MIG instance {inst} never created on node {node} GPU {gpu}")
        lst.remove(inst)
        self.occ[node, gpu] &= ~np.uint8(self.gpus[spec].profile(inst.profile).mask(inst.start))
        self._refresh(node)

    def _refresh(self, node: int) -> None:
        spec = int(self.pool[node])
        gc = int(self.state.gpu_count[node])
        self.node_fits[node] = np.bitwise_or.reduce(self.tables[spec].fits[self.occ[node, :gc]]) if gc else 0


class SliceFit(FilterPlugin):
    """GPU room by pool: MIG pools need a free legal start for the request's profile."""

    name = "SliceFit"

    def reason(self, req: ResourceRequest) -> str:
        """Why a node has no room for the request's slice."""
        return "no GPU with room for the request (as a MIG instance on MIG pools)"

    def __init__(self, ledger: MigLedger) -> None:
        self.ledger = ledger

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        return self.ledger.gpu_fit(view, req)


class MigAwarePolicy(PlacementPolicy):
    """Wraps a placement policy: each pool's nodes are scored with the request as booked there."""

    name = "mig-aware"
    summary = "any policy, scoring MIG pools with the MIG slice the request would take"

    def __init__(self, base: PlacementPolicy, ledger: MigLedger) -> None:
        super().__init__(base.ctx)
        self.base = base
        self.ledger = ledger

    def observe(self, req: ResourceRequest) -> None:
        self.base.observe(req)

    def score(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> Scores:
        if req.num_gpu == 0:
            return self.base.score(view, req, nodes)
        res = self.ledger.resolve(req)
        pools = self.ledger.pool[nodes]
        first = int(pools[0])
        if (pools == first).all():
            return self.base.score(view, res[first + 1].request, nodes)
        out = np.empty(nodes.size, dtype=np.int64)
        for pid in np.unique(pools).tolist():
            sel = pools == pid
            out[sel] = self.base.score(view, res[pid + 1].request, nodes[sel])
        return out

    def select_gpus(self, view: ClusterState, req: ResourceRequest, node: int) -> tuple[int, ...]:
        pid = int(self.ledger.pool[node])
        ps = self.ledger.resolve(req)[pid + 1]
        pref = self.base.select_gpus(view, ps.request, node)
        if ps.kind != _MIG:
            return pref
        return (self.ledger.choose_gpu(view, node, ps.profile, pref[0] if pref else None),)


def served_as_mig(ps: PoolSlice) -> bool:
    """Whether a pool's answer is a MIG instance (rather than whole GPUs or a free share)."""
    return ps.kind == _MIG


class SliceScheduler:
    """A profile over slice pools (``seedance.profile`` with the MIG stage); same ``decide`` contract.

    Kept for callers of the slicing API; every driver builds its profile with ``build_profile``.

    Args:
        policy: The placement policy to wrap.
        ledger: Pools and MIG occupancy of the cluster ``decide`` is called with.
        explain: As for :class:`Scheduler`.
    """

    def __init__(self, policy: PlacementPolicy, ledger: MigLedger, *, explain: bool = False) -> None:
        from seedance.profile.build import slice_profile

        self.ledger = ledger
        self.profile = slice_profile(policy, ledger, explain=explain)
        self.policy = self.profile.policy

    def decide(self, view: ClusterState, req: ResourceRequest, pod: int = -1) -> Decision:
        """Decide where ``req`` goes; the placement books the slice's milli, the explanation names it."""
        return self.profile.decide(view, req, pod)

    def apply(self, view: ClusterState, decision: Decision) -> None:
        """Bind ``decision``: cluster state first, then the MIG ledger."""
        self.profile.apply(view, decision)

    def release(self, view: ClusterState, decision: Decision) -> None:
        """Undo :meth:`apply` (a departure)."""
        self.profile.release(view, decision)

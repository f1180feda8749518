"""Tier filter plug-ins and request adaptation: where a pod of an SLA tier may run, and as what.

NOTE(seedance): what a tier changes about placement, stated once.
  * Node pools: a tier's pods run on nodes whose labels satisfy the tier's ``node_labels`` (the
    whitepaper's nodeAffinity, e.g. ``gpu.sla.level In [gold]`` AND ``gpu.mode In [exclusive]``);
    a tier with ``borrow_labels`` may also run, as a preemptible guest, on those nodes.
    :class:`TierFilter` is that nodeAffinity as a vectorised filter plug-in.
  * GPU mode of a node (label ``gpu.mode``): ``exclusive`` nodes host whole GPUs only, so no GPU
    there is ever shared; ``mig`` nodes host shares as MIG slices (MIG-capable models only);
    ``shared`` nodes host shares by MPS or time-slicing; unlabelled nodes host anything.
    :class:`GpuModeFit` enforces it, whatever the request says.
  * Slice backends: a tier's ``allowed_backends`` decide what a fractional request becomes.
    Gold allows only ``whole``: a share is rounded up to one whole, exclusive GPU
    (:func:`adapt_request`). On an exclusive node every share is rounded up the same way
    (:func:`whole_gpu_request`), which is how a Bronze share borrows a Gold node.
  Filters read the snapshot only; the masks they build are cached by ``ClusterState``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest, SliceBackend
from seedance.scheduling.framework import FilterPlugin
from seedance.tiers.config import TierSpec

BoolA = NDArray[np.bool_]

#: Node label naming the SLA level of the pool a node belongs to (whitepaper §2.2).
LABEL_LEVEL = "gpu.sla.level"
#: Node label naming how a node's GPUs are handed out (whitepaper §2.2).
LABEL_MODE = "gpu.mode"
MODE_EXCLUSIVE = "exclusive"
MODE_MIG = "mig"
MODE_SHARED = "shared"

_SHARING_BACKENDS = (SliceBackend.MIG, SliceBackend.MPS, SliceBackend.TIME_SLICING)
_ALL_BACKENDS = tuple(SliceBackend)


class TierFilter(FilterPlugin):
    """Nodes whose labels satisfy a tier's label requirements (nodeAffinity ``In`` per key, ANDed).

    Args:
        labels: ``{label key: accepted values}``; an empty mapping admits every node.
        tier: The tier's name (for explanations).
        borrow: Whether these are the tier's borrow labels rather than its own pool's.
    """

    name: ClassVar[str] = "TierNodeAffinity"
    resolvable: ClassVar[bool] = False

    def __init__(self, labels: Mapping[str, tuple[str, ...]], *, tier: str = "", borrow: bool = False) -> None:
        self.labels = dict(labels)
        self.tier = tier
        self.borrow = borrow

    @classmethod
    def own(cls, tier: str, spec: TierSpec) -> TierFilter:
        """The filter of a tier's own pool (``node_labels``)."""
        return cls(spec.node_labels, tier=tier)

    @classmethod
    def borrowed(cls, tier: str, spec: TierSpec) -> TierFilter:
        """The filter of the nodes a tier may borrow (``borrow_labels``)."""
        return cls(spec.borrow_labels, tier=tier, borrow=True)

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        """Called once per scheduling attempt; AND of one cached label mask per key (read only)."""
        out: BoolA = view.all_nodes
        for key, values in self.labels.items():
            out = out & view.label_mask(key, values)
        return out

    def reason(self, req: ResourceRequest) -> str:
        """Why a node outside the pool is rejected."""
        what = "may borrow only" if self.borrow else "needs"
        return f"tier {self.tier} {what} {self.describe()}"

    def describe(self) -> str:
        """The requirement in words, e.g. ``gpu.sla.level in [gold] and gpu.mode in [exclusive]``."""
        return " and ".join(f"{k} in [{', '.join(v)}]" for k, v in self.labels.items()) or "any node"


class GpuModeFit(FilterPlugin):
    """A fractional request fits only nodes whose ``gpu.mode`` offers one of its slice backends.

    ``exclusive`` nodes take no share at all; ``mig`` nodes take a share that accepts MIG, on
    MIG-capable GPU models; ``shared`` nodes take a share that accepts MPS or time-slicing; nodes
    without the label take any share they can serve (one accepting MPS or time-slicing, or MIG on
    a MIG-capable model: a MIG-only share never lands on a T4). Whole-GPU and CPU-only requests
    pass everywhere.
    """

    name: ClassVar[str] = "GpuModeFit"
    resolvable: ClassVar[bool] = False

    def reason(self, req: ResourceRequest) -> str:
        """Why a node's ``gpu.mode`` rejects the request."""
        return "the node's gpu.mode offers none of the request's slice backends"

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        """Called once per scheduling attempt (read only)."""
        if not req.is_sharing:
            return view.all_nodes
        backends = req.backends or _ALL_BACKENDS
        return view.derived(("GpuModeFit", backends), lambda: _pool_fit(view, backends), np.ndarray)


def _pool_fit(view: ClusterState, backends: tuple[SliceBackend, ...]) -> BoolA:
    """Nodes whose pool offers a share one of ``backends`` (read only; labels and models are static)."""
    offered = offered_backends(view)
    out: BoolA = np.zeros(view.n_nodes, dtype=np.bool_)
    for b in backends:
        out |= offered[b]
    out.setflags(write=False)
    return out


def offered_backends(view: ClusterState) -> dict[SliceBackend, BoolA]:
    """Per slice backend, the nodes whose ``gpu.mode`` pool offers it to a *share* (the one rule).

    ``mig`` nodes offer MIG on MIG-capable models; ``shared`` nodes offer MPS and time-slicing;
    ``exclusive`` nodes offer nothing to a share; unlabelled GPU nodes offer every backend they
    can serve (MIG only on MIG-capable models). :class:`GpuModeFit` and the trust stage
    ``IsolationGrade`` both read this, so the two never disagree on what a pool offers. Built once
    per state (labels, models and GPU counts do not change within one); the masks are read only.
    """
    return view.derived("offered_backends", lambda: _offered(view), dict)


def _offered(view: ClusterState) -> dict[SliceBackend, BoolA]:
    labelled = view.label_mask(LABEL_MODE, (MODE_EXCLUSIVE, MODE_MIG, MODE_SHARED))
    gpu = view.gpu_count > 0
    free = ~labelled & gpu
    shared = view.label_mask(LABEL_MODE, (MODE_SHARED,)) & gpu | free
    mig = (view.label_mask(LABEL_MODE, (MODE_MIG,)) & gpu | free) & mig_capable(view)
    for a in (free, shared, mig):
        a.setflags(write=False)
    B = SliceBackend
    return {B.WHOLE: free, B.MIG: mig, B.MPS: shared, B.TIME_SLICING: shared}


def mig_capable(view: ClusterState) -> BoolA:
    """Nodes whose GPU model supports MIG (per the catalog)."""
    mig = tuple(m for m in view.models if view.catalog.resolve(m).mig)
    if not mig:
        return np.zeros(view.n_nodes, dtype=np.bool_)
    return view.model_mask(mig)


def whole_gpu_request(req: ResourceRequest) -> ResourceRequest:
    """``req`` with a fractional share rounded up to one whole GPU (unchanged otherwise).

    >>> r = ResourceRequest(cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=460)
    >>> whole_gpu_request(r).gpu_milli
    1000
    """
    if not req.is_sharing:
        return req
    return dataclasses.replace(req, gpu_milli=MILLI_PER_GPU, backends=(SliceBackend.WHOLE,))


def adapt_request(req: ResourceRequest, spec: TierSpec) -> ResourceRequest:
    """What a pod of tier ``spec`` asks the scheduler for.

    The request accepts exactly the tier's ``allowed_backends``. A share whose tier allows no
    sharing backend (Gold: whole GPUs only), or whose tier is ``exclusive``, becomes one whole GPU.
    """
    allowed = tuple(spec.allowed_backends)
    if req.is_sharing and (spec.exclusive or not any(b in allowed for b in _SHARING_BACKENDS)):
        return whole_gpu_request(req)
    if req.num_gpu == 0:
        return req
    return dataclasses.replace(req, backends=allowed)

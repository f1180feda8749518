"""The CUDA pre-flight of a heterogeneous fleet as a profile filter: ``CudaCompat``.

NOTE(seedance): the same check as the hetero stage ``cuda-compat`` (``topology.compat.check``), for
every driver of a scheduling profile.
  * The job's build comes from its labels in the driver's pod directory (``StageServices``):
    ``seedance.io/cuda`` (toolkit, e.g. ``12.4``), optionally ``seedance.io/cuda-sass`` and
    ``seedance.io/cuda-ptx`` (comma lists, ``sm_80,sm_90``); with neither list the build is a fat
    binary of its toolkit (``CudaBuild.of``). A pod without ``seedance.io/cuda`` passes every node.
  * A node's compute capability and driver come from the GPU feature discovery labels
    (``nvidia.com/gpu.compute.major|minor``, ``nvidia.com/cuda.driver.major|minor|rev``); without
    them, the capability of the node's catalog GPU model and the newest driver supporting it (as
    ``hetero.fleet.make_fleet`` assumes). A node whose capability cannot be known is rejected.
  * A build whose labels do not parse is admitted nowhere (fail closed), with the parse error as
    the reason. Waiting never changes the answer (``resolvable = False``); per node the reason is
    the check's (driver too old, no code for the capability, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterSpec, ClusterState
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.hetero.labels import NODE_CC, NODE_DRIVER
from seedance.profile.build import BuildContext
from seedance.profile.context import AttemptFilter, StageServices
from seedance.profile.stages import FILTERS, Attempt
from seedance.topology.compat import CudaBuild, check, newest_driver

BoolA = NDArray[np.bool_]

LABEL_CUDA = "seedance.io/cuda"
LABEL_SASS = "seedance.io/cuda-sass"
LABEL_PTX = "seedance.io/cuda-ptx"

NodeKey = tuple[tuple[int, int], tuple[int, ...]] | str
"""A node's ``(compute capability, driver)``, or why it cannot be known."""


def build_of(labels: Mapping[str, str], *, source: str = "pod labels") -> CudaBuild | None:
    """The job's CUDA build from its labels (``None``: the job names no toolkit)."""
    cuda = labels.get(LABEL_CUDA)
    if cuda is None:
        return None

    def arches(key: str) -> list[str]:
        return [a.strip() for a in labels.get(key, "").split(",") if a.strip()]

    return CudaBuild.of(cuda, arches(LABEL_SASS), arches(LABEL_PTX), source=source)


def _ints(labels: Mapping[str, str], keys: tuple[str, ...]) -> tuple[int, ...] | None:
    vals = [labels.get(k) for k in keys]
    if vals[0] is None:
        return None
    out = []
    for v in vals:
        if v is None or not v.strip().isdigit():
            break
        out.append(int(v))
    return tuple(out) if len(out) >= 2 else None


def node_key(labels: Mapping[str, str], gpu_model: str | None) -> NodeKey:
    """``(compute capability, driver)`` of one node (see the module docstring), or why unknown."""
    cc = _ints(labels, NODE_CC)
    if cc is None:
        if gpu_model is None:
            return "node has no GPU"
        from seedance.hetero.fleet import gpu_type

        try:
            cc = gpu_type(gpu_model).compute_capability
        except InputError:
            return f"compute capability of GPU model {gpu_model} unknown (no {NODE_CC[0]} label)"
    cap = (cc[0], cc[1])
    drv = _ints(labels, NODE_DRIVER)
    try:
        return cap, drv if drv is not None else newest_driver(cap)
    except InputError as exc:
        return exc.message


class CudaCompat(AttemptFilter):
    """Filter stage ``CudaCompat`` (see the module docstring).

    Args:
        services: The driver's services (the pod directory gives the job's labels).
    """

    name: ClassVar[str] = "CudaCompat"
    resolvable: ClassVar[bool] = False

    def __init__(self, services: StageServices) -> None:
        self.services = services
        self._build: CudaBuild | None = None
        self._bad: str | None = None
        self._spec: ClusterSpec | None = None
        self._keys: list[NodeKey] = []

    def begin(self, att: Attempt, req: ResourceRequest) -> None:
        info = self.services.info(att)
        self._build, self._bad = None, None
        if info is None:
            return
        try:
            self._build = build_of(info.labels, source=f"labels of {info.name}")
        except InputError as exc:  # fail closed: a build that does not parse goes nowhere
            self._bad = f"CUDA labels of {info.name} do not parse: {exc.message}"

    @property
    def build(self) -> CudaBuild | None:
        """The build of the attempt in progress (``None``: no requirement)."""
        return self._build

    def _node_keys(self, view: ClusterState) -> list[NodeKey]:
        if self._spec is not view.spec:  # node labels and models are static per spec
            self._spec = view.spec
            self._keys = [node_key(n.labels, n.gpu_model) for n in view.spec.nodes]
        return self._keys

    def _reasons(self, view: ClusterState) -> list[str | None]:
        assert self._build is not None
        memo: dict[NodeKey, str | None] = {}
        out: list[str | None] = []
        for key in self._node_keys(view):
            if key not in memo:
                if isinstance(key, str):
                    memo[key] = key
                else:
                    v = check(self._build, *key)
                    memo[key] = None if v.ok else v.reason
            out.append(memo[key])
        return out

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        if self._bad is not None:
            return np.zeros(view.n_nodes, dtype=np.bool_)
        if self._build is None:
            return np.ones(view.n_nodes, dtype=np.bool_)
        return np.array([r is None for r in self._reasons(view)], dtype=np.bool_)

    def reason(self, req: ResourceRequest) -> str:
        if self._bad is not None:
            return self._bad
        what = self._build.describe() if self._build is not None else "the job's build"
        return f"no node can run {what}"

    def node_reasons(self, view: ClusterState, req: ResourceRequest) -> list[str | None] | None:
        if self._bad is not None or self._build is None:
            return None
        return [None if r is None else f"CUDA pre-flight: {r}" for r in self._reasons(view)]


def _cuda_compat(b: BuildContext) -> CudaCompat:
    return CudaCompat(b.services)


FILTERS.add("CudaCompat", _cuda_compat)

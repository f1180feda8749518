"""Isolation grades: what a placement actually isolates, per job, node and tenant; and a grade requirement stage.

NOTE(seedance): the grades, strongest first (whitepaper §4.1's hardware / driver / runtime levels).
  * ``hardware`` — MIG: own SMs, L2 slices, memory controllers, DRAM and bandwidth (NVIDIA MIG User
    Guide: "separate and isolated paths through the entire memory system"); also a whole GPU that
    no other tenant shares.
  * ``driver`` — capped by the driver: MPS with both ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` and
    ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``, or two compute instances of one MIG GPU instance (own SMs,
    shared memory and L2); contexts are bound to their share, bandwidth and L2 are shared.
  * ``runtime`` — time slicing: separate contexts switched by the driver, nothing capped
    (NVIDIA's time-slicing docs: "no memory or fault-isolation between replicas").
  * ``none`` — MPS clients without a memory limit (a fatal fault in one client reaches every
    client of the server, memory is not capped), or two jobs on one GPU without a sharing backend.
  A job's grade is the weakest pair grade against any *other tenant's* job on the same physical
  GPU (its own slice's grade when no other tenant is there); a node's and a tenant's grade is the
  weakest of their jobs'. A pair on one GPU: different GIs → hardware; one GI, different CIs →
  driver; one MIG device shared → runtime; MPS+MPS → driver if both limited else none; MPS or
  time-slicing with time-slicing → runtime; anything with a whole-GPU job → none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.errors import UnknownNameError
from seedance.core.resources import ResourceRequest, SliceBackend
from seedance.scheduling.framework import FilterPlugin
from seedance.tiers.filters import offered_backends

BoolA = NDArray[np.bool_]


class Grade(IntEnum):
    """Isolation grades, ordered: a larger value isolates more."""

    NONE = 0
    RUNTIME = 1
    DRIVER = 2
    HARDWARE = 3

    @property
    def label(self) -> str:
        """``"hardware"``, ``"driver"``, ``"runtime"`` or ``"none"``."""
        return self.name.lower()

    @classmethod
    def parse(cls, name: str) -> Grade:
        """The grade called ``name`` (case-insensitive; unknown names list the valid ones)."""
        key = name.strip().upper()
        if key not in cls.__members__:
            raise UnknownNameError(
                f"unknown isolation grade {name!r}; valid names: {', '.join(g.label for g in reversed(cls))}"
            )
        return cls[key]


def backend_grade(backend: SliceBackend, *, mps_limited: bool = False) -> Grade:
    """The grade a slice of ``backend`` gives by itself (``mps_limited``: thread % and memory limit both set)."""
    if backend in (SliceBackend.MIG, SliceBackend.WHOLE):
        return Grade.HARDWARE
    if backend is SliceBackend.MPS:
        return Grade.DRIVER if mps_limited else Grade.NONE
    return Grade.RUNTIME


def backends_for_grade(required: Grade, *, mps_limited: bool = False) -> tuple[SliceBackend, ...]:
    """Backends whose slices give at least ``required`` (MPS counts as ``driver`` only when limited)."""
    return tuple(b for b in SliceBackend if backend_grade(b, mps_limited=mps_limited) >= required)


def adapt_request(req: ResourceRequest, required: Grade, *, mps_limited: bool = False) -> ResourceRequest:
    """``req`` accepting only backends that give ``required`` (a request adapter stage).

    When none of the request's backends gives the grade the request is returned unchanged (an
    empty ``backends`` would mean "any"); :class:`IsolationGradeFilter` then rejects every node.
    """
    import dataclasses

    if req.num_gpu == 0:
        return req
    allowed = backends_for_grade(required, mps_limited=mps_limited)
    accepted = req.backends or tuple(SliceBackend)
    keep = tuple(b for b in accepted if b in allowed)
    return dataclasses.replace(req, backends=keep) if keep else req


# ---------------------------------------------------------------------------- running jobs


@dataclass(frozen=True, slots=True)
class SliceShare:
    """One running job's share of one physical GPU.

    Attributes:
        job: Job (or pod) name.
        tenant: Tenant owning the job.
        node: Node name.
        gpu: GPU index on the node.
        backend: How the share is given.
        gi: MIG GPU-instance id (MIG only).
        ci: MIG compute-instance id (MIG only).
        mps_limited: MPS client with both a thread percentage and a pinned-memory limit.
    """

    job: str
    tenant: str
    node: str
    gpu: int
    backend: SliceBackend
    gi: int | None = None
    ci: int | None = None
    mps_limited: bool = False


def pair_grade(a: SliceShare, b: SliceShare) -> tuple[Grade, str]:
    """Isolation between two jobs on the same physical GPU, and why."""
    ka, kb = a.backend, b.backend
    if SliceBackend.WHOLE in (ka, kb):
        return Grade.NONE, "a whole-GPU job shares its GPU"
    if ka is SliceBackend.MIG and kb is SliceBackend.MIG:
        if a.gi != b.gi:
            return Grade.HARDWARE, "different MIG GPU instances"
        if a.ci != b.ci:
            return Grade.DRIVER, f"compute instances {a.ci} and {b.ci} of one GPU instance (memory and L2 shared)"
        return Grade.RUNTIME, "one MIG device time-shared"
    if SliceBackend.MIG in (ka, kb):
        return Grade.NONE, "MIG and non-MIG shares on one GPU"
    if ka is SliceBackend.MPS and kb is SliceBackend.MPS:
        if a.mps_limited and b.mps_limited:
            return Grade.DRIVER, "MPS clients with thread and memory limits"
        return Grade.NONE, "MPS clients without a memory limit (faults reach every client)"
    return Grade.RUNTIME, "time-sliced contexts"


@dataclass(frozen=True, slots=True)
class JobGrade:
    """The grade a running job gets, with the neighbour that sets it."""

    job: str
    tenant: str
    node: str
    gpu: int
    backend: str
    grade: Grade
    slice_grade: Grade
    weakest_with: str | None
    reason: str

    def to_json(self) -> dict[str, object]:
        """A JSON-ready record."""
        return {
            "job": self.job,
            "tenant": self.tenant,
            "node": self.node,
            "gpu": self.gpu,
            "backend": self.backend,
            "grade": self.grade.label,
            "slice_grade": self.slice_grade.label,
            "weakest_with": self.weakest_with,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class GradeReport:
    """Grades of every running job, and the weakest grade per node and per tenant."""

    jobs: tuple[JobGrade, ...]
    nodes: Mapping[str, Grade]
    tenants: Mapping[str, Grade]

    def to_json(self) -> dict[str, object]:
        """A JSON-ready record."""
        return {
            "jobs": [j.to_json() for j in self.jobs],
            "nodes": {k: v.label for k, v in self.nodes.items()},
            "tenants": {k: v.label for k, v in self.tenants.items()},
        }


def grade_shares(shares: Iterable[SliceShare]) -> GradeReport:
    """Grades per job, node and tenant of what shares each GPU right now (a pure function)."""
    items = list(shares)
    by_gpu: dict[tuple[str, int], list[SliceShare]] = {}
    for s in items:
        by_gpu.setdefault((s.node, s.gpu), []).append(s)
    jobs: list[JobGrade] = []
    for s in items:
        own = backend_grade(s.backend, mps_limited=s.mps_limited)
        grade, reason, other = Grade.HARDWARE, "no other tenant on this GPU", None
        if s.backend is SliceBackend.MPS and not s.mps_limited:
            reason = "MPS without a memory limit, but no other tenant on this GPU"
        for o in by_gpu[(s.node, s.gpu)]:
            if o is s or o.tenant == s.tenant:
                continue
            g, why = pair_grade(s, o)
            if g < grade:
                grade, reason, other = g, why, o.job
        jobs.append(JobGrade(s.job, s.tenant, s.node, s.gpu, s.backend.value, grade, own, other, reason))
    nodes: dict[str, Grade] = {}
    tenants: dict[str, Grade] = {}
    for j in jobs:
        nodes[j.node] = min(nodes.get(j.node, Grade.HARDWARE), j.grade)
        tenants[j.tenant] = min(tenants.get(j.tenant, Grade.HARDWARE), j.grade)
    return GradeReport(tuple(jobs), nodes, tenants)


# ---------------------------------------------------------------------------- requirement


@dataclass(frozen=True, slots=True)
class GradePolicy:
    """Minimum grades required by SLA tier and by tenant; a job needs the stronger of the two."""

    tiers: Mapping[str, Grade]
    tenants: Mapping[str, Grade]

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Mapping[str, str]]) -> GradePolicy:
        """``{"tiers": {"gold": "hardware"}, "tenants": {"bank": "hardware"}}`` (unknown grade names raise)."""
        return cls(
            {k: Grade.parse(v) for k, v in (doc.get("tiers") or {}).items()},
            {k: Grade.parse(v) for k, v in (doc.get("tenants") or {}).items()},
        )

    def required(self, tier: str | None, tenant: str | None) -> Grade:
        """The grade a job of ``tier`` and ``tenant`` must get."""
        return max(self.tiers.get(tier or "", Grade.NONE), self.tenants.get(tenant or "", Grade.NONE))


class IsolationGradeFilter(FilterPlugin):
    """Nodes where a share can get a slice of at least the required grade (vectorised over nodes).

    Whole-GPU and CPU-only requests pass everywhere (a whole GPU of one tenant is ``hardware``).
    A share passes a node whose pool offers one of its accepted backends that gives the grade.
    Pair it with :func:`adapt_request` so the slice resolved on the node is one of those backends.

    Args:
        required: The grade the request needs.
        mps_limited: Whether MPS slices here carry a memory limit (then MPS counts as ``driver``).
    """

    name: ClassVar[str] = "IsolationGrade"

    def __init__(self, required: Grade, *, mps_limited: bool = False) -> None:
        self.required = required
        self.mps_limited = mps_limited

    def _allowed(self, req: ResourceRequest) -> tuple[SliceBackend, ...]:
        accepted = req.backends or tuple(SliceBackend)
        ok = backends_for_grade(self.required, mps_limited=self.mps_limited)
        return tuple(b for b in accepted if b in ok)

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        """Called once per scheduling attempt."""
        if not req.is_sharing:
            return np.ones(view.n_nodes, dtype=np.bool_)
        offered = offered_backends(view)
        out: BoolA = np.zeros(view.n_nodes, dtype=np.bool_)
        for b in self._allowed(req):
            out = out | offered[b]
        return out

    def reasons(self, view: ClusterState, req: ResourceRequest) -> list[str | None]:
        """Per node, why it is rejected (``None`` where it passes)."""
        ok = self.mask(view, req)
        offered = offered_backends(view)
        out: list[str | None] = []
        for n in range(view.n_nodes):
            have = [b for b in SliceBackend if offered[b][n]]
            if ok[n]:
                out.append(None)
            elif not have:
                out.append("no GPU")
            else:
                allowed = ", ".join(b.value for b in self._allowed(req)) or "none of its backends"
                out.append(
                    f"pool offers {'/'.join(b.value for b in have)}; the request may use only {allowed} "
                    f"to get {self.required.label} isolation"
                )
        return out

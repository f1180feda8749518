"""Slices: what a request gets on the GPU once its node is chosen.

A request names how much of one GPU it wants (``gpu_milli``, 1..1000) and, through
``ResourceRequest.backends``, which slice backends it accepts (the SLA tier decides: gold whole
GPUs only, silver whole or MIG, bronze any). A node pool offers some backends (a MIG-mode pool
offers ``whole`` + ``mig``; a shared pool ``whole`` + ``mps`` + ``time-slicing``). After the
node is chosen, :func:`resolve_slice` walks the preference order and asks each backend's
:class:`SliceProvider` for a slice:

* **MIG** — the smallest GPU instance profile whose compute covers the share,
  ``compute_slices >= ceil(7 * milli / 1000)``, and whose usable memory covers the memory need
  when one is given; the scheduler books the profile's compute share (``slices * 1000 // 7``).
  Hardware isolation of SMs, L2, memory and memory bandwidth.
* **MPS** — ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = ceil(milli / 10)`` (a cap on the SMs the client
  may use) and, when a memory need is given, ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` of that size;
  the scheduler books the requested milli. Compute is capped, memory is a limit, not a partition:
  bandwidth, L2 and faults are shared (a fatal fault can take down the other clients).
* **Time-slicing** — the GPU is advertised as several replicas; the client gets whole-GPU time
  slices with no compute cap, no memory limit and no fault isolation. The scheduler books the
  requested milli as a planning figure only; nothing enforces it.
* **Whole** — one exclusive GPU (``1000`` milli), the fallback of a tier that allows no sharing.

Providers are stateless and registered by name in :data:`SLICE_PROVIDERS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from seedance.core.catalog import CATALOG
from seedance.core.errors import UnknownNameError
from seedance.core.registry import Registry
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest, SliceBackend
from seedance.slicing.mig import COMPUTE_SLICES, MigGpu, MigProfile, mig_gpu


class Isolation:
    """Isolation grades of a slice, strongest first (strings, shown in reports)."""

    EXCLUSIVE = "exclusive"  # a whole GPU
    HARDWARE = "hardware"  # MIG: own SMs, L2, memory controllers, memory
    COMPUTE_CAP = "compute-cap"  # MPS: capped SM share, shared memory system and faults
    NONE = "none"  # time-slicing


@dataclass(frozen=True, slots=True)
class Slice:
    """The GPU share a request resolves to on a chosen node.

    Attributes:
        backend: The slice backend.
        gpu_model: Catalog name of the GPU model the slice lives on.
        requested_milli: What the request asked for.
        booked_milli: What the scheduler takes from the GPU's 1000 milli for it.
        isolation: Isolation grade (:class:`Isolation`).
        profile: MIG profile name (MIG only).
        memory_gib: Memory the slice owns (MIG) or is limited to (MPS, when asked); ``None`` if
            the memory is shared without a limit.
        sm_count: SMs of the MIG instance (MIG only).
        thread_pct: ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (MPS only).

    >>> s = resolve_slice(ResourceRequest(4000, 8192, 1, 250), "A100-80GB", (SliceBackend.MIG,))
    >>> s.backend.value, s.profile, s.booked_milli
    ('mig', '2g.20gb', 285)
    """

    backend: SliceBackend
    gpu_model: str
    requested_milli: int
    booked_milli: int
    isolation: str
    profile: str | None = None
    memory_gib: float | None = None
    sm_count: int | None = None
    thread_pct: int | None = None

    @property
    def waste_milli(self) -> int:
        """Booked but not requested (MIG rounding; whole GPUs given to small requests)."""
        return self.booked_milli - self.requested_milli

    def to_json(self) -> dict[str, object]:
        """A JSON-ready record."""
        return {
            "backend": self.backend.value,
            "gpu_model": self.gpu_model,
            "requested_milli": self.requested_milli,
            "booked_milli": self.booked_milli,
            "isolation": self.isolation,
            "profile": self.profile,
            "memory_gib": self.memory_gib,
            "sm_count": self.sm_count,
            "thread_pct": self.thread_pct,
        }


class SliceProvider(ABC):
    """Turns a share of one GPU into a concrete slice of one backend (stateless)."""

    backend: ClassVar[SliceBackend]

    @abstractmethod
    def resolve(self, milli: int, gpu_model: str, memory_gib: float | None = None) -> Slice | None:
        """Called once per placed share, after the node is chosen; ``None`` if it cannot serve it."""


SLICE_PROVIDERS: Registry[type[SliceProvider]] = Registry("slice backend")


@SLICE_PROVIDERS.register("whole", aliases=("exclusive",))
class WholeProvider(SliceProvider):
    """One exclusive GPU, whatever the share."""

    backend = SliceBackend.WHOLE

    def resolve(self, milli: int, gpu_model: str, memory_gib: float | None = None) -> Slice | None:
        model = CATALOG.resolve(gpu_model)
        if memory_gib is not None and memory_gib > model.memory_gib:
            return None
        return Slice(SliceBackend.WHOLE, model.name, milli, MILLI_PER_GPU, Isolation.EXCLUSIVE)


@SLICE_PROVIDERS.register("mig")
class MigProvider(SliceProvider):
    """The smallest MIG profile covering the compute share (and memory); MIG-capable GPUs only."""

    backend = SliceBackend.MIG

    def resolve(self, milli: int, gpu_model: str, memory_gib: float | None = None) -> Slice | None:
        try:
            gpu = mig_gpu(gpu_model)
        except UnknownNameError:
            return None
        p = smallest_profile(gpu, milli, memory_gib)
        if p is None:
            return None
        return Slice(
            SliceBackend.MIG,
            gpu.model,
            milli,
            p.milli,
            Isolation.HARDWARE,
            profile=p.name,
            memory_gib=p.memory_gib,
            sm_count=p.sm_count,
        )


@SLICE_PROVIDERS.register("mps")
class MpsProvider(SliceProvider):
    """An MPS client capped at ``ceil(milli / 10)`` % of the SMs."""

    backend = SliceBackend.MPS

    def resolve(self, milli: int, gpu_model: str, memory_gib: float | None = None) -> Slice | None:
        model = CATALOG.resolve(gpu_model)
        if memory_gib is not None and memory_gib > model.memory_gib:
            return None
        pct = min(100, -(-milli // 10))
        return Slice(
            SliceBackend.MPS,
            model.name,
            milli,
            milli,
            Isolation.COMPUTE_CAP,
            memory_gib=memory_gib,
            thread_pct=pct,
        )


@SLICE_PROVIDERS.register("time-slicing", aliases=("timeslicing", "ts"))
class TimeSlicingProvider(SliceProvider):
    """A time-shared replica of the GPU: nothing is capped or isolated."""

    backend = SliceBackend.TIME_SLICING

    def resolve(self, milli: int, gpu_model: str, memory_gib: float | None = None) -> Slice | None:
        model = CATALOG.resolve(gpu_model)
        if memory_gib is not None and memory_gib > model.memory_gib:
            return None
        return Slice(SliceBackend.TIME_SLICING, model.name, milli, milli, Isolation.NONE)


#: Default order in which backends are tried for a share: the strongest isolation the request
#: accepts and the pool offers wins (a pool normally offers one sharing backend anyway).
DEFAULT_PREFERENCE: tuple[SliceBackend, ...] = (
    SliceBackend.MIG,
    SliceBackend.MPS,
    SliceBackend.TIME_SLICING,
    SliceBackend.WHOLE,
)

ALL_BACKENDS: tuple[SliceBackend, ...] = tuple(SliceBackend)


def smallest_profile(
    gpu: MigGpu, milli: int, memory_gib: float | None = None, *, media: bool = False
) -> MigProfile | None:
    """Smallest profile of ``gpu`` covering ``milli`` of compute and ``memory_gib`` (``None`` if none).

    Profiles are ordered by compute slices, then memory slices; ``+me`` profiles only with ``media``.

    >>> smallest_profile(mig_gpu("A100-80GB"), 140).name, smallest_profile(mig_gpu("A100-80GB"), 143).name
    ('1g.10gb', '2g.20gb')
    """
    if not 0 < milli <= MILLI_PER_GPU:
        raise ValueError("milli must be within 1..1000")
    need = -(-COMPUTE_SLICES * milli // MILLI_PER_GPU)
    for p in gpu.planning_profiles(media=media):
        if p.compute_slices >= need and (memory_gib is None or p.memory_gib >= memory_gib):
            return p
    return None


def accepted_backends(req: ResourceRequest) -> tuple[SliceBackend, ...]:
    """Backends ``req`` accepts (all of them when it names none)."""
    return req.backends or ALL_BACKENDS


def resolve_slice(
    req: ResourceRequest,
    gpu_model: str,
    offered: Iterable[SliceBackend],
    *,
    preference: Sequence[SliceBackend] = DEFAULT_PREFERENCE,
    memory_gib: float | None = None,
) -> Slice | None:
    """The slice ``req`` gets on a GPU of ``gpu_model`` in a pool offering ``offered`` backends.

    Whole- and multi-GPU requests resolve to ``whole``. A share tries ``preference`` in order,
    skipping backends the request does not accept or the pool does not offer; ``whole`` last
    (a gold pod asking for 0.3 GPU gets a whole GPU). ``None`` when nothing fits.

    Args:
        req: The request (``req.backends`` is the tier's allowed set).
        gpu_model: Catalog name or alias of the node's GPUs.
        offered: Backends the node's pool offers.
        preference: Order to try backends in.
        memory_gib: GPU memory the request needs, when known.
    """
    if req.num_gpu == 0:
        return None
    offered_set = set(offered)
    accepted = set(accepted_backends(req))
    if not req.is_sharing:
        if SliceBackend.WHOLE in offered_set and SliceBackend.WHOLE in accepted:
            return SLICE_PROVIDERS.get("whole")().resolve(MILLI_PER_GPU, gpu_model, memory_gib)
        return None
    for backend in preference:
        if backend in offered_set and backend in accepted:
            s = SLICE_PROVIDERS.get(backend.value)().resolve(req.gpu_milli, gpu_model, memory_gib)
            if s is not None:
                return s
    return None

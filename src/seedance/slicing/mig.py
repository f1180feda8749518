"""MIG facts: GPU instance profiles, their legal placements, and layout legality.

Sources (checked, June 2026 copies):

* NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
  (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html):
  per GPU the profile names, fraction of memory, fraction of SMs and the number of instances
  available (A100-SXM4-40GB/80GB, H100 80GB, H200 141GB).
* The same guide, "Getting Started with MIG" (``nvidia-smi mig -lgipp``), and the same listing
  printed on H100 machines: the placement start positions within the 8 memory slices,
  ``{0..6}:1`` for the 1-slice profiles (IDs 19, 20), ``{0,2,4,6}:2`` for the 1-compute-slice,
  2-memory-slice profile (ID 15), ``{0,2,4}:2`` for 2g (ID 14), ``{0,4}:4`` for 3g (ID 9),
  ``{0}:4`` for 4g (ID 5) and ``{0}:8`` for 7g (ID 0).
* ``nvidia-smi mig -lgip`` outputs published in public READMEs (SM counts and usable GiB, which
  move a little between drivers): A100-40GB 14/28/42/56/98 SMs; A100-80GB 14/28/42/56/98;
  H100-80GB 16/16/26/32/60/64/132; H200 16/16/-/32/60/64/132 (1g.35gb not seen: assumed 26 as on
  H100, see ``unconfirmed``).
* NVML ``nvmlDeviceGetGpuInstancePossiblePlacements_v2``: "Creation of new GPU instance will fail if
  there is overlap with the already occupied memory slices" — the legality rule used here, together
  with each profile's maximum instance count.

NOTE(seedance): a layout (a set of GPU instances on one GPU) is legal iff every instance starts at
one of its profile's listed positions, no two instances share a memory slice, and no profile
exceeds its instance count. That implies at most 7 compute slices in use (checked by the tests
over every enumerated layout). Occupancy is an 8-bit mask over the memory slices, so per-GPU
state is one byte and every question ("can profile p go here, and where") is a table lookup.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import CATALOG
from seedance.core.errors import InputError, UnknownNameError

MEMORY_SLICES = 8
COMPUTE_SLICES = 7
FULL_MASK = (1 << MEMORY_SLICES) - 1

GUIDE_URL = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html"


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU instance profile of one GPU model.

    Attributes:
        name: Profile name as ``nvidia-smi`` prints it after ``MIG`` (``"3g.40gb"``).
        profile_id: GPU instance profile ID (``nvidia-smi mig -lgip``).
        compute_slices: Compute slices (sevenths of the GPU's SMs).
        memory_slices: Memory slices (eighths of the memory) the instance occupies.
        sm_count: Streaming multiprocessors of the instance (``-lgip``).
        memory_gib: Usable memory in GiB (``-lgip``; a few hundred MiB vary across drivers).
        max_instances: Maximum instances of this profile on one GPU.
        starts: Legal start positions (memory-slice index) of an instance.
        media: ``+me`` variant (owns the media engines; at most one per GPU).

    >>> p = MigProfile("3g.40gb", 9, 3, 4, 42, 39.25, 2, (0, 4))
    >>> p.milli, p.masks()
    (428, (15, 240))
    """

    name: str
    profile_id: int
    compute_slices: int
    memory_slices: int
    sm_count: int
    memory_gib: float
    max_instances: int
    starts: tuple[int, ...]
    media: bool = False

    @property
    def milli(self) -> int:
        """Compute share in milli-GPU, rounded down (1g = 142, 2g = 285, ..., 7g = 1000)."""
        return self.compute_slices * 1000 // COMPUTE_SLICES

    def mask(self, start: int) -> int:
        """Memory-slice bitmask of an instance starting at ``start``."""
        return ((1 << self.memory_slices) - 1) << start

    def masks(self) -> tuple[int, ...]:
        """Bitmask of every legal placement, in ``starts`` order."""
        return tuple(self.mask(s) for s in self.starts)


@dataclass(frozen=True, slots=True)
class MigGpu:
    """The MIG geometry of one GPU model.

    Attributes:
        model: Canonical catalog name (``"A100-80GB"``).
        product: NVIDIA's product name used in the guide (``"A100-SXM4-80GB"``).
        profiles: Profiles, smallest first.
        source: Where the figures come from.
        unconfirmed: Figures taken by analogy rather than read from a source (said in docs).
    """

    model: str
    product: str
    profiles: tuple[MigProfile, ...]
    source: str
    unconfirmed: tuple[str, ...] = ()

    def profile(self, name: str) -> MigProfile:
        """The profile called ``name`` (``"MIG 3g.40gb"`` and ``"3g.40gb"`` both work)."""
        key = name.strip().removeprefix("MIG ").strip().lower()
        for p in self.profiles:
            if p.name == key:
                return p
        raise UnknownNameError(f"unknown MIG profile {name!r} for {self.model}; valid names: {', '.join(self.names())}")

    def names(self) -> list[str]:
        """Profile names, smallest first."""
        return [p.name for p in self.profiles]

    def planning_profiles(self, *, media: bool = False) -> tuple[MigProfile, ...]:
        """Profiles a planner or placer considers (``+me`` variants only when ``media``)."""
        return tuple(p for p in self.profiles if media or not p.media)

    def placements(self, *, media: bool = True) -> tuple[tuple[MigProfile, int], ...]:
        """Every legal ``(profile, start)`` on an empty GPU."""
        return tuple((p, s) for p in self.planning_profiles(media=media) for s in p.starts)


def _p(name: str, pid: int, c: int, m: int, sm: int, gib: float, n: int, starts: Sequence[int]) -> MigProfile:
    return MigProfile(name, pid, c, m, sm, gib, n, tuple(starts), media=name.endswith("+me"))


_ONE = range(7)  # {0,1,2,3,4,5,6}:1
_TWO_1G = (0, 2, 4, 6)  # {0,2,4,6}:2
_TWO_2G = (0, 2, 4)  # {0,2,4}:2
_FOUR_3G = (0, 4)  # {0,4}:4


def _family(
    sizes: tuple[str, str, str, str, str, str], sms: tuple[int, ...], gib: tuple[float, ...]
) -> tuple[MigProfile, ...]:
    one, one_big, two, three, four, seven = sizes
    return (
        _p(one, 19, 1, 1, sms[0], gib[0], 7, _ONE),
        _p(f"{one}+me", 20, 1, 1, sms[1], gib[1], 1, _ONE),
        _p(one_big, 15, 1, 2, sms[2], gib[2], 4, _TWO_1G),
        _p(two, 14, 2, 2, sms[3], gib[3], 3, _TWO_2G),
        _p(three, 9, 3, 4, sms[4], gib[4], 2, _FOUR_3G),
        _p(four, 5, 4, 4, sms[5], gib[5], 1, (0,)),
        _p(seven, 0, 7, 8, sms[6], gib[6], 1, (0,)),
    )


_LGIPP = "placements: nvidia-smi mig -lgipp (MIG User Guide, Getting Started; H100 listings)"

_GPUS: tuple[MigGpu, ...] = (
    MigGpu(
        model="A100-40GB",
        product="A100-SXM4-40GB",
        profiles=_family(
            ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
            (14, 14, 14, 28, 42, 56, 98),
            (4.75, 4.75, 9.62, 9.62, 19.50, 19.50, 39.25),
        ),
        source=f"{GUIDE_URL} (A100 table; 1g.10gb needs driver R525+); -lgip on A100-SXM4-40GB; {_LGIPP}",
    ),
    MigGpu(
        model="A100-80GB",
        product="A100-SXM4-80GB",
        profiles=_family(
            ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (14, 14, 14, 28, 42, 56, 98),
            (9.50, 9.50, 19.50, 19.50, 39.25, 39.25, 79.00),
        ),
        source=f"{GUIDE_URL} (A100 table, 80GB names); -lgip on A100-SXM4-80GB; {_LGIPP}",
    ),
    MigGpu(
        model="H100-80GB",
        product="H100-SXM5-80GB",
        profiles=_family(
            ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (16, 16, 26, 32, 60, 64, 132),
            (9.75, 9.75, 19.62, 19.62, 39.50, 39.50, 79.25),
        ),
        source=f"{GUIDE_URL} (H100 80GB table); -lgip on H100 80GB HBM3; {_LGIPP}",
    ),
    MigGpu(
        model="H200",
        product="H200-SXM5-141GB",
        profiles=_family(
            ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
            (16, 16, 26, 32, 60, 64, 132),
            (16.00, 16.00, 32.50, 32.50, 65.00, 65.00, 140.00),
        ),
        source=(
            f"{GUIDE_URL} (H200 141GB table); -lgip on H200 for 1g.18gb, 2g.35gb, 7g.141gb; "
            f"3g.71gb = 60 SMs and 4g.71gb = 64 SMs as reported by H200 users; {_LGIPP} (same layout as H100)"
        ),
        unconfirmed=(
            "1g.35gb SM count (26, as H100's 1g.20gb) and usable GiB (32.50, as 2g.35gb)",
            "3g.71gb / 4g.71gb usable GiB (65.00 = 4 x the 2g.35gb slice)",
            "placements (not seen in an H200 -lgipp listing; taken equal to H100's)",
        ),
    ),
)

_BY_MODEL: MappingProxyType[str, MigGpu] = MappingProxyType({g.model: g for g in _GPUS})


def mig_gpus() -> tuple[MigGpu, ...]:
    """Every MIG-capable GPU model Seedance knows, in catalog order."""
    return _GPUS


def mig_gpu(model: str) -> MigGpu:
    """MIG geometry of ``model`` (catalog name or alias, case-insensitive).

    Raises:
        UnknownNameError: the model is unknown or not MIG-capable (the message lists valid ones).
    """
    try:
        name = CATALOG.resolve(model).name
    except UnknownNameError:
        name = model
    gpu = _BY_MODEL.get(name)
    if gpu is None:
        raise UnknownNameError(f"{model!r} is not a MIG-capable GPU model; valid names: {', '.join(_BY_MODEL)}")
    return gpu


# ---------------------------------------------------------------------------- layouts


@dataclass(frozen=True, slots=True, order=True)
class Instance:
    """One GPU instance of a layout: profile name and start slice (``nvidia-smi mig -lgi`` Start)."""

    profile: str
    start: int

    def __str__(self) -> str:
        return f"{self.profile}@{self.start}"

    @classmethod
    def parse(cls, text: str, *, source: str = "layout") -> Instance:
        """``"3g.40gb@4"`` → ``Instance("3g.40gb", 4)``."""
        name, sep, start = text.strip().partition("@")
        if not sep or not start.strip().isdigit():
            raise InputError(f"expected PROFILE@START (e.g. 3g.40gb@4), got {text!r}", source=source)
        return cls(name.strip().removeprefix("MIG ").strip().lower(), int(start))


Layout = tuple[Instance, ...]


def layout_problems(gpu: MigGpu, layout: Iterable[Instance]) -> list[str]:
    """Why ``layout`` is not legal on ``gpu`` (empty list when it is legal)."""
    problems: list[str] = []
    used = 0
    counts: dict[str, int] = {}
    compute = 0
    for inst in layout:
        try:
            p = gpu.profile(inst.profile)
        except UnknownNameError as exc:
            problems.append(str(exc))
            continue
        if inst.start not in p.starts:
            problems.append(f"{inst}: {p.name} may start only at {list(p.starts)}")
            continue
        m = p.mask(inst.start)
        if used & m:
            problems.append(f"{inst}: overlaps memory slices already taken")
        used |= m
        counts[p.name] = counts.get(p.name, 0) + 1
        compute += p.compute_slices
    for name, n in counts.items():
        limit = gpu.profile(name).max_instances
        if n > limit:
            problems.append(f"{n} x {name} exceeds its limit of {limit} per GPU")
    if compute > COMPUTE_SLICES:
        problems.append(f"{compute} compute slices in use, more than {COMPUTE_SLICES}")
    return problems


def is_legal(gpu: MigGpu, layout: Iterable[Instance]) -> bool:
    """Whether ``layout`` is a legal set of GPU instances on one ``gpu``."""
    return not layout_problems(gpu, layout)


def check_layout(gpu: MigGpu, layout: Iterable[Instance], *, source: str = "layout") -> None:
    """Raise :class:`InputError` naming every problem if ``layout`` is not legal."""
    problems = layout_problems(gpu, layout)
    if problems:
        raise InputError("; ".join(problems), source=source)


def enumerate_layouts(gpu: MigGpu, *, media: bool = False, maximal: bool = False) -> list[Layout]:
    """Every legal layout of ``gpu`` (the empty one included unless ``maximal``).

    Args:
        gpu: The GPU model.
        media: Include the ``+me`` profiles.
        maximal: Only layouts to which no further instance can be added ("geometries").
    """
    cands = [(p, s, p.mask(s)) for p, s in gpu.placements(media=media)]
    out: list[Layout] = []

    def rec(i: int, used: int, counts: dict[str, int], acc: list[Instance]) -> None:
        if i == len(cands):
            if not maximal or not _extendable(cands, used, counts):
                out.append(tuple(sorted(acc, key=lambda x: (x.start, x.profile))))
            return
        p, s, m = cands[i]
        if not used & m and counts.get(p.name, 0) < p.max_instances:
            counts[p.name] = counts.get(p.name, 0) + 1
            acc.append(Instance(p.name, s))
            rec(i + 1, used | m, counts, acc)
            acc.pop()
            counts[p.name] -= 1
        rec(i + 1, used, counts, acc)

    rec(0, 0, {}, [])
    return out


def _extendable(cands: list[tuple[MigProfile, int, int]], used: int, counts: dict[str, int]) -> bool:
    return any(not used & m and counts.get(p.name, 0) < p.max_instances for p, _, m in cands)


def layout_mask(gpu: MigGpu, layout: Iterable[Instance]) -> int:
    """Memory-slice bitmask occupied by ``layout`` (no legality check)."""
    mask = 0
    for inst in layout:
        mask |= gpu.profile(inst.profile).mask(inst.start)
    return mask


def format_layout(layout: Iterable[Instance]) -> str:
    """``"4g.40gb@0 + 2g.20gb@4 + 1g.10gb@6"`` (``"(empty)"`` for no instance)."""
    items = sorted(layout, key=lambda x: (x.start, x.profile))
    return " + ".join(str(i) for i in items) if items else "(empty)"


def geometry_name(layout: Iterable[Instance]) -> str:
    """Profiles of a layout, largest first, without positions: ``"4g.40gb+2g.20gb+1g.10gb"``."""
    items = sorted(layout, key=lambda x: (-_compute_of(x.profile), x.profile, x.start))
    return "+".join(i.profile for i in items) if items else "(empty)"


def _compute_of(name: str) -> int:
    head = name.split("g.", 1)[0]
    return int(head) if head.isdigit() else 0


# ---------------------------------------------------------------------------- occupancy tables


@dataclass(frozen=True, slots=True, eq=False)
class OccupancyTables:
    """Lookup tables over the 256 occupancy masks of one GPU model (media profiles excluded).

    Built once per simulation or planner (``OccupancyTables.build``), never at module level.

    Attributes:
        gpu: The GPU model.
        profiles: Profiles indexed ``0..P-1`` (smallest first, no ``+me``).
        fits: ``fits[mask]`` has bit ``p`` set when profile ``p`` has a free legal start.
        start: ``start[mask, p]`` = the start Seedance uses for profile ``p`` (``-1`` if none): the
            legal free start leaving the most compute placeable, then the most free legal
            placements, then the highest start (small instances go high, as the driver places
            them, keeping slice 0 free for 4g/7g).
        potential: ``potential[mask]`` = most compute slices still placeable in the free slices.
    """

    gpu: MigGpu
    profiles: tuple[MigProfile, ...]
    fits: NDArray[np.uint16]
    start: NDArray[np.int8]
    potential: NDArray[np.int8]
    index: MappingProxyType[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def build(cls, gpu: MigGpu) -> OccupancyTables:
        """Compute the tables for ``gpu`` (a few milliseconds)."""
        profiles = gpu.planning_profiles(media=False)
        masks = [[p.mask(s) for s in p.starts] for p in profiles]
        n = 1 << MEMORY_SLICES
        fits = np.zeros(n, dtype=np.uint16)
        potential = np.zeros(n, dtype=np.int8)
        free_count = np.zeros(n, dtype=np.int16)
        # potential: DP from full masks downwards (adding an instance only sets bits)
        for mask in range(n - 1, -1, -1):
            best = 0
            count = 0
            bits = 0
            for j, (p, ms) in enumerate(zip(profiles, masks, strict=True)):
                for m in ms:
                    if not mask & m:
                        count += 1
                        bits |= 1 << j
                        best = max(best, p.compute_slices + int(potential[mask | m]))
            potential[mask] = best
            fits[mask] = bits
            free_count[mask] = count
        start = np.full((n, len(profiles)), -1, dtype=np.int8)
        for mask in range(n):
            for j, (p, ms) in enumerate(zip(profiles, masks, strict=True)):
                options = [
                    (int(potential[mask | m]), int(free_count[mask | m]), s)
                    for s, m in zip(p.starts, ms, strict=True)
                    if not mask & m
                ]
                if options:
                    start[mask, j] = max(options)[2]
        return cls(
            gpu=gpu,
            profiles=profiles,
            fits=fits,
            start=start,
            potential=potential,
            index=MappingProxyType({p.name: j for j, p in enumerate(profiles)}),
        )

    def smallest_covering(self, milli: int, memory_gib: float | None = None) -> int:
        """Index of the smallest profile whose compute covers ``milli`` (and memory), else ``-1``.

        "Smallest" orders by compute slices, then memory slices: a request that states no memory
        need gets the 1-memory-slice 1g profile, not the 2-slice one.
        """
        need = -(-COMPUTE_SLICES * milli // 1000)  # ceil(7 * milli / 1000)
        for j, p in enumerate(self.profiles):
            if p.compute_slices >= need and (memory_gib is None or p.memory_gib >= memory_gib):
                return j
        return -1


def profile_table(gpu: MigGpu) -> list[dict[str, Any]]:
    """One JSON-ready row per profile (``seedancectl mig profiles``)."""
    return [
        {
            "gpu": gpu.model,
            "profile": p.name,
            "id": p.profile_id,
            "compute_slices": p.compute_slices,
            "memory_slices": p.memory_slices,
            "sms": p.sm_count,
            "memory_gib": p.memory_gib,
            "max_instances": p.max_instances,
            "placements": "{" + ",".join(str(s) for s in p.starts) + f"}}:{p.memory_slices}",
            "milli": p.milli,
        }
        for p in gpu.profiles
    ]

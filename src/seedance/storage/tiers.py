"""Storage tiers as node resources: GPU HBM, host DRAM, CXL memory pool, local NVMe, remote object store.

Each tier has a capacity and read/write bandwidths (GB/s, decimal). The defaults are public figures,
named on each tier (theoretical peaks where no measured figure is public; a planner's estimate, not a
measurement):

* HBM: the GPU's own memory (capacity and bandwidth from the GPU catalog); a checkpoint staged here
  does not survive the process.
* DRAM: host DDR4-3200, 8 channels per socket: 8 x 25.6 GB/s = 204.8 GB/s (JEDEC DDR4-3200); a GPU
  reaches it over its PCIe link, which is the binding rate (see ``seedance.topology.links``).
* CXL: a CXL 2.0 Type-3 memory expander on a PCIe 5.0 x16 link: 63 GB/s per direction (PCI-SIG
  PCIe 5.0 x16 raw rate; CXL.mem runs on the PCIe 5.0 PHY); 512 GB pool assumed.
* NVMe: Samsung PM1733 3.84 TB (PCIe 4.0 x4): sequential read 7.0 GB/s, write 3.8 GB/s (Samsung
  PM1733 datasheet; Samsung's 2019 launch figures were 6.4 GB/s read for the U.2 drive, 8.0 GB/s for the
  HHHL card, 3.8 GB/s write for both). The read rate enters only a cross-node restore, which the network bounds.
* remote: an object store reached through the node's network: 10 Gbit/s = 1.25 GB/s per node (AWS EC2
  p3.8xlarge, 4x V100, "10 Gigabit", the size of the replay's 4-GPU nodes; p3.2xlarge, 1x V100, is "up to
  10 Gigabit", p3.16xlarge, 8x V100, 25 Gigabit; AWS P3 launch table, 2017); capacity unbounded. A checkpoint
  is costed at the whole node rate: GPUs of a node writing at once are not made to share it (in the
  remote-only baseline's favour).

``remote-only`` is the same node without DRAM/CXL/NVMe staging: checkpoints are written synchronously
to the remote store. ``dram-remote`` is CheckFreq's own setting on such a node: snapshot to host DRAM,
persist to the remote store in the background (no NVMe, no CXL).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from seedance.core.errors import InputError
from seedance.core.registry import Registry

HBM, DRAM, CXL, NVME, REMOTE = "hbm", "dram", "cxl", "nvme", "remote"
VOLATILE = frozenset({HBM, DRAM, CXL})
"""Tiers whose content does not survive a node failure (a snapshot there must still be persisted)."""


@dataclass(frozen=True, slots=True)
class Tier:
    """One storage tier of a node."""

    name: str
    capacity_gb: float
    read_gbs: float
    write_gbs: float
    source: str

    def __post_init__(self) -> None:
        for f in ("capacity_gb", "read_gbs", "write_gbs"):
            v = getattr(self, f)
            if not v > 0:
                raise InputError(f"must be > 0, got {v!r}", source=f"tier {self.name}", field=f)

    def write_s(self, size_gb: float) -> float:
        """Seconds to write ``size_gb``."""
        return size_gb / self.write_gbs

    def read_s(self, size_gb: float) -> float:
        """Seconds to read ``size_gb``."""
        return size_gb / self.read_gbs


DRAM_TIER = Tier(DRAM, 512.0, 204.8, 204.8, "JEDEC DDR4-3200, 8 channels x 25.6 GB/s per socket; 512 GB assumed")
CXL_TIER = Tier(CXL, 512.0, 63.0, 63.0, "CXL 2.0 Type-3 expander on PCIe 5.0 x16 (63 GB/s raw per direction); "
                                         "512 GB pool assumed")
NVME_TIER = Tier(NVME, 3840.0, 7.0, 3.8, "Samsung PM1733 3.84 TB datasheet: 7.0 GB/s read, 3.8 GB/s write")
REMOTE_TIER = Tier(REMOTE, float("inf"), 1.25, 1.25, "node network 10 Gbit/s (AWS EC2 p3.8xlarge, 4x V100, "
                                                      "'10 Gigabit'), object store behind it")


@dataclass(frozen=True, slots=True)
class TierSet:
    """The storage tiers of one node, fastest write first (HBM excluded: it is the GPU's own memory)."""

    name: str
    tiers: tuple[Tier, ...]

    def __post_init__(self) -> None:
        if not any(t.name == REMOTE for t in self.tiers) and not any(t.name == NVME for t in self.tiers):
            raise InputError("a node needs a persistent tier (nvme or remote)", source=f"storage {self.name}")

    def get(self, name: str) -> Tier:
        """The tier called ``name``."""
        for t in self.tiers:
            if t.name == name:
                return t
        raise InputError(f"node storage {self.name!r} has no tier {name!r}; it has "
                         f"{', '.join(t.name for t in self.tiers)}", field="tier")

    def has(self, name: str) -> bool:
        """Whether the node has tier ``name``."""
        return any(t.name == name for t in self.tiers)

    def snapshot_tier(self, size_gb: float) -> Tier:
        """Where the scheduler stages a checkpoint: the fastest-writing tier with room (volatile or not)."""
        fits = [t for t in self.tiers if t.capacity_gb >= size_gb]
        if not fits:
            raise InputError(f"checkpoint of {size_gb:g} GB fits no tier of {self.name!r} "
                             f"(largest {max(t.capacity_gb for t in self.tiers):g} GB)", field="checkpoint_gb")
        return max(fits, key=lambda t: t.write_gbs)

    def persist_tier(self, size_gb: float) -> Tier:
        """Where it is made durable: the fastest-writing persistent tier with room."""
        fits = [t for t in self.tiers if t.name not in VOLATILE and t.capacity_gb >= size_gb]
        if not fits:
            raise InputError(f"checkpoint of {size_gb:g} GB fits no persistent tier of {self.name!r}",
                             field="checkpoint_gb")
        return max(fits, key=lambda t: t.write_gbs)


STORAGE: Registry[TierSet] = Registry("storage layout")
STORAGE.add("tiered", TierSet("tiered", (CXL_TIER, DRAM_TIER, NVME_TIER, REMOTE_TIER)), aliases=("nvme-cxl",))
STORAGE.add("nvme", TierSet("nvme", (DRAM_TIER, NVME_TIER, REMOTE_TIER)))
STORAGE.add("remote-only", TierSet("remote-only", (REMOTE_TIER,)), aliases=("remote",))
STORAGE.add("dram-remote", TierSet("dram-remote", (DRAM_TIER, REMOTE_TIER)))

BANDWIDTH_SOURCES: Mapping[str, str] = MappingProxyType(
    {t.name: t.source for t in (DRAM_TIER, CXL_TIER, NVME_TIER, REMOTE_TIER)})
"""Where each default figure comes from (for reports)."""


def custom(name: str, tiers: Iterable[Tier]) -> TierSet:
    """A node layout from explicit tiers (fastest write first after sorting)."""
    return TierSet(name, tuple(sorted(tiers, key=lambda t: -t.write_gbs)))

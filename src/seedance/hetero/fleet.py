"""A heterogeneous fleet: nodes of one GPU type each, with a topology, a driver, a power cap and storage.

GPU types are catalog models (``seedance.core.catalog``) or, for Gavel's K80 (not in the catalog), the
entry below. Gavel's worker types map to catalog names: ``v100`` -> ``V100-16GB``, ``p100`` -> ``P100``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from seedance.core.catalog import CATALOG
from seedance.core.errors import InputError, UnknownNameError
from seedance.storage.tiers import STORAGE, TierSet
from seedance.topology.compat import newest_driver, version_tuple
from seedance.topology.links import pcie_gbs


@dataclass(frozen=True, slots=True)
class GpuType:
    """What the fleet needs to know of a GPU type."""

    name: str
    compute_capability: tuple[int, int]
    memory_gib: float
    memory_bw_gbs: float
    tdp_w: float
    price_usd_per_hour: float
    dense_tflops: float
    bf16: bool
    source: str

    @property
    def pcie_gbs(self) -> float:
        """x16 PCIe rate of this GPU (GB/s per direction)."""
        return pcie_gbs(self.compute_capability)


K80 = GpuType("K80", (3, 7), 12.0, 240.0, 150.0, 0.45, 4.37, False,
              "NVIDIA Tesla K80 datasheet, per GK210 GPU (half a board: 12 GB, 240 GB/s, 150 W of 300 W, "
              "4.37 FP32 TFLOPS boost); price: Google Cloud nvidia-tesla-k80 on-demand $0.45/GPU-hour (2020)")
GAVEL_NAMES = {"k80": "K80", "p100": "P100", "v100": "V100-16GB"}
"""Gavel worker type -> fleet GPU type name."""


def gpu_type(name: str) -> GpuType:
    """A GPU type by catalog name, alias, Gavel name or ``K80``; unknown names list the valid ones."""
    key = GAVEL_NAMES.get(name.strip().lower(), name)
    if key.upper() == "K80":
        return K80
    try:
        m = CATALOG.resolve(key)
    except UnknownNameError as exc:
        raise InputError(f"unknown GPU type {name!r}; valid: K80, {', '.join(CATALOG.known_names())}",
                         field="gpu_type") from exc
    a, b = (int(x) for x in m.compute_capability.split("."))
    return GpuType(m.name, (a, b), m.memory_gib, m.memory_bw_gbs, m.tdp_w, m.price_usd_per_hour,
                   m.dense_tflops, m.bf16_tflops is not None, m.spec_source)


@dataclass(frozen=True, slots=True)
class FleetNode:
    """One node: ``gpus`` GPUs of ``gpu``; driver, power cap (W per GPU), storage layout, network."""

    name: str
    gpu: GpuType
    gpus: int
    driver: tuple[int, ...]
    power_cap_w: float
    storage: TierSet
    network_gbs: float = 1.25
    topology: str | None = None

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise InputError("must be >= 1", source=f"node {self.name}", field="gpus")
        if not self.power_cap_w > 0:
            raise InputError("must be > 0", source=f"node {self.name}", field="power_cap_w")

    @property
    def power_factor(self) -> float:
        """Throughput factor of the power cap (linear in cap/TDP up to 1: a stated modelling assumption)."""
        return min(1.0, self.power_cap_w / self.gpu.tdp_w)


@dataclass(frozen=True, slots=True)
class Fleet:
    """Nodes of a heterogeneous cluster."""

    nodes: tuple[FleetNode, ...]
    types: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.nodes:
            raise InputError("a fleet needs at least one node", field="nodes")
        if not self.types:
            seen: list[str] = []
            for n in self.nodes:
                if n.gpu.name not in seen:
                    seen.append(n.gpu.name)
            object.__setattr__(self, "types", tuple(seen))

    def gpus_of(self, type_name: str) -> int:
        """GPUs of ``type_name`` in the fleet."""
        return sum(n.gpus for n in self.nodes if n.gpu.name == type_name)


def make_fleet(counts: Sequence[tuple[str, int]], *, gpus_per_node: int = 4, storage: str = "tiered",
               driver: str | None = None, network_gbs: float = 1.25) -> Fleet:
    """``[("v100", 12), ("p100", 12), ("k80", 12)]`` -> nodes of ``gpus_per_node`` GPUs each."""
    layout = STORAGE.get(storage)
    nodes: list[FleetNode] = []
    for type_name, count in counts:
        g = gpu_type(type_name)
        if count % gpus_per_node:
            raise InputError(f"{count} {type_name} GPUs are not whole nodes of {gpus_per_node}", field="gpus")
        drv = version_tuple(driver, field="driver") if driver else newest_driver(g.compute_capability)
        for k in range(count // gpus_per_node):
            nodes.append(FleetNode(f"{g.name.lower()}-{k}", g, gpus_per_node, drv, g.tdp_w, layout,
                                   network_gbs))
    return Fleet(tuple(nodes))

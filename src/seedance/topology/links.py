"""Bandwidth of the links of a node's topology, from the path class and the GPU's generation.

Per direction, theoretical peaks (a planner's lower bound on time; measured rates are lower):

* NVLink: links x per-link rate of the generation (NVLink 1 20 GB/s; NVLink 2/3/4 25 GB/s per link
  per direction: V100 6 links = 150 GB/s, A100 12 = 300 GB/s, H100 18 = 450 GB/s; NVIDIA datasheets).
* PCIe x16: gen3 15.75 GB/s, gen4 31.5 GB/s, gen5 63 GB/s (PCI-SIG, 128b/130b encoding); a path
  through bridges (PIX, PXB, PHB, NODE) runs at the x16 rate of the slower endpoint.
* SYS (across the SMP interconnect): GPU peer traffic is staged through host memory, two PCIe
  transfers: half the PCIe rate (a modelling assumption, stated wherever it is used).

``hop_latency_s`` (1 us per PCIe hop) only matters for tiny transfers.
"""

from __future__ import annotations

from seedance.topology.compat import arch_of
from seedance.topology.topo import NVLINK, PCIE_HOPS, SELF, SYS, Topology

PCIE_X16_GBS: dict[int, float] = {3: 15.75, 4: 31.5, 5: 63.0}
HOP_LATENCY_S = 1e-6


def pcie_gbs(cc: tuple[int, int]) -> float:
    """x16 PCIe rate (GB/s per direction) of a GPU of capability ``cc``."""
    return PCIE_X16_GBS[arch_of(cc).pcie_gen]


def link_gbs(topo: Topology, a: int, b: int, cc: tuple[int, int]) -> float:
    """Bandwidth (GB/s per direction) of the path ``a``-``b`` on a node whose GPUs have capability ``cc``."""
    kind = int(topo.kind[a, b])
    if kind == SELF:
        return float("inf")
    if kind == NVLINK:
        return float(topo.nvlinks[a, b]) * arch_of(cc).nvlink_gbs_per_link
    rate = pcie_gbs(cc)
    return rate / 2.0 if kind == SYS else rate


def path_latency_s(topo: Topology, a: int, b: int) -> float:
    """Latency of the path from its PCIe hop count."""
    return PCIE_HOPS[int(topo.kind[a, b])] * HOP_LATENCY_S

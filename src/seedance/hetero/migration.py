"""Migration planner: the whitepaper's four-dimensional migration cost and ``SelectTargetNode``.

For a job on a source node and each candidate target node, :meth:`MigrationPlanner.cost` gives, in
seconds:

* ``checkpoint_s``: the stall to capture the state (GPU -> the source's staging tier, or a synchronous
  write to the remote store on a ``remote-only`` node; ``seedance.storage.checkpoint``);
* ``topology_s`` (dimension 1): state size over the slowest link of the path staging -> source NIC ->
  network -> target NIC -> target GPU (NVLink / PCIe bridges / SYS from the nodes' ``topo -m``;
  ``seedance.topology.links``), plus per-hop latency; from the remote store on ``remote-only`` nodes;
* ``bandwidth_s`` (dimension 2): reading the state out of source HBM and writing it into target HBM;
* ``power_s`` (dimension 3): the extra run time the target's power cap costs over the remaining work
  (throughput taken as linear in cap / TDP, an assumption);
* ``compat_s`` (dimension 4): compatibility penalty: PTX JIT compilation when the target has no SASS
  for its architecture (``jit_s``), re-quantisation when the job trains in BF16 and the target has none
  (state read and written at target HBM rate plus ``requant_s``); an incompatible target is infeasible;
* ``restart_s``: process restart and framework initialisation (an option; the live Ray test measures it).

``gain_s`` is the time saved over the remaining work (remaining steps at the source's rate minus at the
target's uncapped rate; rates from the throughput matrix, else dense TFLOPS as a fallback). A job
migrates only if ``net_s = gain_s - cost_s > 0``. :meth:`select_target` is the argmin of
``cost_s - gain_s`` over feasible targets, with every candidate's breakdown (and, for comparison, the
whitepaper's own argmin of ``topology_s + compat_s``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from seedance.core.errors import InputError
from seedance.hetero.fleet import FleetNode
from seedance.hetero.stages import matrix_column
from seedance.hetero.throughput import ThroughputMatrix
from seedance.storage.checkpoint import checkpoint_cost, is_remote_only
from seedance.storage.tiers import REMOTE
from seedance.topology.compat import CudaBuild, check
from seedance.topology.links import HOP_LATENCY_S, link_gbs
from seedance.topology.topo import PCIE_HOPS, PHB, Topology

GIB = 1024**3 / 1e9


@dataclass(frozen=True, slots=True)
class MigrationRequest:
    """A running job the planner may move."""

    job_id: str
    state_gb: float
    build: CudaBuild
    src: FleetNode
    remaining_steps: float
    job_type: str | None = None
    precision: str = "fp32"
    src_gpu: int = 0

    def __post_init__(self) -> None:
        if not self.state_gb > 0:
            raise InputError(f"state size must be > 0 GB, got {self.state_gb!r}", field="state_gb")
        if self.state_gb > self.src.gpu.memory_gib * GIB * self.src.gpus:
            raise InputError(f"{self.state_gb:g} GB of state cannot be on {self.src.gpus} x {self.src.gpu.name} "
                             f"({self.src.gpu.memory_gib:g} GiB each)", field="state_gb")
        if self.remaining_steps < 0:
            raise InputError("must be >= 0", field="remaining_steps")
        if self.precision not in ("fp32", "fp16", "bf16"):
            raise InputError(f"precision must be fp32, fp16 or bf16, not {self.precision!r}", field="precision")


@dataclass(frozen=True, slots=True)
class Link:
    """One hop of the transfer path."""

    src: str
    dst: str
    kind: str
    gbs: float


@dataclass(frozen=True, slots=True)
class CostBreakdown:
    """Cost and gain of moving a job to one target (seconds)."""

    node: str
    feasible: bool
    reason: str
    checkpoint_s: float = 0.0
    topology_s: float = 0.0
    bandwidth_s: float = 0.0
    power_s: float = 0.0
    compat_s: float = 0.0
    restart_s: float = 0.0
    gain_s: float = 0.0
    path: tuple[Link, ...] = field(default=())

    @property
    def cost_s(self) -> float:
        """Total cost of the move."""
        return self.checkpoint_s + self.topology_s + self.bandwidth_s + self.power_s + self.compat_s + self.restart_s

    @property
    def transfer_s(self) -> float:
        """Time the job is away: checkpoint, transfer, HBM, compatibility and restart (no power term)."""
        return self.cost_s - self.power_s

    @property
    def net_s(self) -> float:
        """Gain minus cost: the move pays off when positive."""
        return self.gain_s - self.cost_s

    @property
    def slowest(self) -> Link | None:
        """The binding link of the path."""
        return min(self.path, key=lambda lk: lk.gbs) if self.path else None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["path"] = [asdict(lk) for lk in self.path]
        slow = self.slowest
        out.update(cost_s=self.cost_s, net_s=self.net_s, transfer_s=self.transfer_s,
                   slowest_link=asdict(slow) if slow else None)
        return out


def _gpu_to_nic(topo: Topology | None, gpu: int, cc: tuple[int, int], node: str) -> tuple[Link, int]:
    """Link from a GPU to its nearest NIC, and the PCIe hops (no topology: one PHB path at the PCIe rate)."""
    if topo is None or topo.nearest_nic(gpu) is None:
        from seedance.topology.links import pcie_gbs

        return Link(f"{node}/GPU{gpu}", f"{node}/NIC", "PHB (no topology)", pcie_gbs(cc)), PCIE_HOPS[PHB]
    nic = topo.nearest_nic(gpu)
    assert nic is not None
    return (Link(f"{node}/{topo.devices[gpu]}", f"{node}/{topo.devices[nic]}", topo.link(gpu, nic),
                 link_gbs(topo, gpu, nic, cc)), topo.hops(gpu, nic))


@dataclass(slots=True)
class MigrationPlanner:
    """Prices moves of running jobs; see the module docstring for the cost model."""

    matrix: ThroughputMatrix | None = None
    topologies: Mapping[str, Topology] = field(default_factory=dict)
    restart_s: float = 10.0
    jit_s: float = 30.0
    requant_s: float = 2.0

    def _rate(self, req: MigrationRequest, node: FleetNode) -> float:
        if self.matrix is not None and req.job_type is not None and req.job_type in self.matrix.job_types:
            col = matrix_column(self.matrix, node.gpu.name)
            if col is not None:
                return self.matrix.rate(req.job_type, 1, self.matrix.gpu_types[col])
        return node.gpu.dense_tflops  # fallback: proportional to dense TFLOPS

    def path(self, req: MigrationRequest, dst: FleetNode, dst_gpu: int | None = None) -> tuple[tuple[Link, ...], int]:
        """The transfer path and its PCIe hop count; without ``dst_gpu``, the target GPU closest to a NIC."""
        src = req.src
        dst_topo = self.topologies.get(dst.topology or "")
        if dst_gpu is None:
            dst_gpu = 0
            if dst_topo is not None and dst_topo.nics and src.name != dst.name:
                cc = dst.gpu.compute_capability
                dst_gpu = max(dst_topo.gpus, key=lambda g: (
                    link_gbs(dst_topo, g, dst_topo.nearest_nic(g) or 0, cc), -g))
        if src.name == dst.name:
            topo = self.topologies.get(src.topology or "")
            if topo is not None:
                return ((Link(f"{src.name}/GPU{req.src_gpu}", f"{dst.name}/GPU{dst_gpu}",
                              topo.link(req.src_gpu, dst_gpu), link_gbs(topo, req.src_gpu, dst_gpu,
                                                                         src.gpu.compute_capability)),),
                        topo.hops(req.src_gpu, dst_gpu))
        a, ha = _gpu_to_nic(self.topologies.get(src.topology or ""), req.src_gpu, src.gpu.compute_capability,
                            src.name)
        b, hb = _gpu_to_nic(dst_topo, dst_gpu, dst.gpu.compute_capability, dst.name)
        b = Link(b.dst, b.src, b.kind, b.gbs)
        net = Link(a.dst, b.src, "network", min(src.network_gbs, dst.network_gbs))
        if is_remote_only(src.storage):
            remote = src.storage.get(REMOTE)
            net = Link(f"{src.name}/remote-store", b.src, "network (remote store)",
                       min(remote.read_gbs, dst.network_gbs))
            return (net, b), hb
        return (a, net, b), ha + hb

    def cost(self, req: MigrationRequest, dst: FleetNode) -> CostBreakdown:
        """Cost breakdown of moving ``req`` to ``dst`` (infeasible targets carry the reason)."""
        verdict = check(req.build, dst.gpu.compute_capability, dst.driver)
        if not verdict.ok:
            return CostBreakdown(dst.name, False, f"incompatible: {verdict.reason}")
        if req.state_gb > dst.gpu.memory_gib * GIB * dst.gpus:
            return CostBreakdown(dst.name, False, f"{req.state_gb:g} GB of state does not fit {dst.gpus} x "
                                                  f"{dst.gpu.name} ({dst.gpu.memory_gib:g} GiB)")
        ck = checkpoint_cost(req.state_gb, req.src.storage, req.src.gpu.pcie_gbs)
        links, hops = self.path(req, dst)
        slow = min(lk.gbs for lk in links)
        topology_s = req.state_gb / slow + hops * HOP_LATENCY_S
        bandwidth_s = req.state_gb / req.src.gpu.memory_bw_gbs + req.state_gb / dst.gpu.memory_bw_gbs
        src_v = check(req.build, req.src.gpu.compute_capability, req.src.driver)
        compat_s = self.jit_s if verdict.jit and not src_v.jit else 0.0
        notes = []
        if verdict.jit and not src_v.jit:
            notes.append(f"PTX JIT on {dst.gpu.name} (+{self.jit_s:g} s)")
        if req.precision == "bf16" and not dst.gpu.bf16:
            compat_s += self.requant_s + 2 * req.state_gb / dst.gpu.memory_bw_gbs
            notes.append(f"re-quantisation BF16 -> FP16 ({dst.gpu.name} has no BF16)")
        rate_src = self._rate(req, req.src) * req.src.power_factor
        rate_dst = self._rate(req, dst)
        remaining_dst = req.remaining_steps / rate_dst if rate_dst > 0 else float("inf")
        power_s = remaining_dst * (1.0 / dst.power_factor - 1.0)
        gain_s = (req.remaining_steps / rate_src if rate_src > 0 else float("inf")) - remaining_dst
        reason = "feasible" + (f"; {'; '.join(notes)}" if notes else "")
        restart = 0.0 if dst.name == req.src.name else self.restart_s
        return CostBreakdown(dst.name, True, reason, ck.snapshot_s, topology_s, bandwidth_s, power_s, compat_s,
                             restart, gain_s, links)

    def select_target(self, req: MigrationRequest, nodes: Sequence[FleetNode]) -> dict[str, Any]:
        """``SelectTargetNode``: the feasible target minimising cost - gain; migrate only if it gains."""
        unique = {n.name: n for n in nodes if n.name != req.src.name}
        rows = [self.cost(req, n) for n in unique.values()]
        feasible = [r for r in rows if r.feasible]
        best = min(feasible, key=lambda r: (r.cost_s - r.gain_s, r.node)) if feasible else None
        wp = min(feasible, key=lambda r: (r.topology_s + r.compat_s, r.node)) if feasible else None
        return {
            "job": req.job_id,
            "source": req.src.name,
            "state_gb": req.state_gb,
            "decision": ("migrate" if best is not None and best.net_s > 0 else "stay"),
            "target": best.node if best is not None and best.net_s > 0 else None,
            "best": best.to_json() if best else None,
            "whitepaper_argmin": wp.node if wp else None,
            "candidates": [r.to_json() for r in sorted(rows, key=lambda r: (not r.feasible, r.cost_s - r.gain_s))],
        }

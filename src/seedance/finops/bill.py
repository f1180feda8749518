"""A placement policy's bill in the inflation experiment: allocated, idle and total $ per hour.

At 100 % arrived (the column the FGD paper reports), the cluster costs the same whatever the
policy; what a policy changes is how much of it is *allocated* (billed to the pods it placed,
OpenCost's max(request, usage) with usage = request) and how much stays *idle*. Prices are the
same as the ledger's: GPU by the fraction placed on each GPU at the node's $/GPU-h, CPU per core,
memory per GiB (:class:`~seedance.finops.prices.PriceSheet`). The offline bound gets a bill too:
the same linear relaxation as ``sim.bound``, solved with the allocated $/h as its objective, is an
upper bound on any policy's allocated $/h (a lower bound on idle $/h).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterSpec
from seedance.core.decision import Placement
from seedance.core.resources import MILLI_PER_GPU
from seedance.finops.prices import GIB, PriceSheet

MIB = float(2**20)


@dataclass(frozen=True, slots=True)
class NodePrices:
    """$/h per unit on every node of a cluster (contract prices normalised per node)."""

    gpu: NDArray[np.float64]  # $/GPU-h of each node's GPUs
    cpu: NDArray[np.float64]  # $/core-h
    ram: NDArray[np.float64]  # $/GiB-h
    cluster_usd_h: float

    @classmethod
    def of(cls, spec: ClusterSpec, prices: PriceSheet | None = None) -> NodePrices:
        """Rates of every node of ``spec``."""
        sheet = prices or PriceSheet()
        g, c, r = [], [], []
        total = 0.0
        for n in spec.nodes:
            rates = sheet.node_rates(n.name, n.cpu_milli / 1000.0, n.memory_mib * MIB,
                                     {n.gpu_model: float(n.gpu_count)} if n.gpu_model and n.gpu_count else {})
            gr = rates.gpu_rate(n.gpu_model) if n.gpu_model else 0.0
            g.append(gr)
            c.append(rates.cpu)
            r.append(rates.ram_gib)
            total += n.gpu_count * gr + n.cpu_milli / 1000.0 * rates.cpu + n.memory_mib / 1024.0 * rates.ram_gib
        return cls(np.array(g), np.array(c), np.array(r), total + sheet.shared_overhead_per_hour)

    def placement_usd_h(self, p: Placement) -> float:
        """$/h billed to a placed pod."""
        n = p.node
        return float(len(p.gpus) * p.gpu_milli / MILLI_PER_GPU * self.gpu[n] + p.cpu_milli / 1000.0 * self.cpu[n]
                     + p.memory_mib * MIB / GIB * self.ram[n])


def column_mean(arrived_milli: NDArray[np.int64], values: NDArray[np.float64], total_gpus: int,
                column: int = 100) -> float | None:
    """Mean of ``values`` over the events of arrived-% column ``column`` (±1 if it has none), as the
    allocation metric selects them (:func:`seedance.sim.metrics.bucket_by_arrival`)."""
    arrive = np.round(arrived_milli / total_gpus / 10.0).astype(np.int64)
    rows = np.flatnonzero(arrive == column)
    if rows.size == 0:
        rows = np.flatnonzero(np.abs(arrive - column) <= 1)
    return float(values[rows].mean()) if rows.size else None


@dataclass(frozen=True, slots=True)
class BillBound:
    """Upper bound on the allocated $/h at 100 % arrived, for one seed's pod sequence."""

    alloc_usd_h: float
    cluster_usd_h: float


def inflation_bill_bound(spec: ClusterSpec, trace: object, seed: int, *, ratio: float = 1.3, column: int = 100,
                         prices: PriceSheet | None = None) -> BillBound:
    """The LP bound of ``seedance.sim.bound`` with the allocated $/h as objective (see module doc)."""
    from seedance.sim.bound import lp_max_allocation
    from seedance.sim.inflation import build_stream, sort_by_name
    from seedance.traces.schema import PodTrace

    assert isinstance(trace, PodTrace)
    np_ = NodePrices.of(spec, prices)
    # highest rates per node class (a class mixes nodes only if their capacity and model agree)
    best: dict[tuple[str | None, int, int, int], tuple[float, float, float]] = {}
    for i, n in enumerate(spec.nodes):
        key = (n.gpu_model, n.gpu_count, n.cpu_milli, n.memory_mib)
        g, c, r = best.get(key, (0.0, 0.0, 0.0))
        best[key] = (max(g, float(np_.gpu[i])), max(c, float(np_.cpu[i])), max(r, float(np_.ram[i])))

    def usd(cpu: int, mem: int, k: int, milli: int, cls: tuple[str | None, int, int, int]) -> float:
        g, c, r = best[cls]
        return k * milli / MILLI_PER_GPU * g + cpu / 1000.0 * c + mem / 1024.0 * r

    tr = sort_by_name(trace)
    capacity = spec.total_gpus * MILLI_PER_GPU
    stream = build_stream(tr, capacity, len(spec.nodes), seed, ratio)
    pods = stream.pods
    per_pod = (tr.num_gpu * tr.gpu_milli)[pods]
    arrived = np.cumsum(per_pod)
    bucket = np.round(arrived / spec.total_gpus / 10.0).astype(np.int64)
    idx = np.flatnonzero(bucket == column)
    if idx.size == 0:
        idx = np.flatnonzero(np.abs(bucket - column) <= 1)
    last = int(idx[-1])
    lp, _, _ = lp_max_allocation(spec, tr, pods[: last + 1], value=usd)
    # a pod can never be billed more than on the dearest class it fits: arrived $ bounds the rest
    g_max = max((v[0] for v in best.values()), default=0.0)
    c_max = max((v[1] for v in best.values()), default=0.0)
    r_max = max((v[2] for v in best.values()), default=0.0)
    pod_ub = (tr.num_gpu * tr.gpu_milli / MILLI_PER_GPU * g_max + tr.cpu_milli / 1000.0 * c_max
              + tr.memory_mib / 1024.0 * r_max)[pods]
    arrived_usd = np.cumsum(pod_ub)
    ub = np.minimum(arrived_usd[idx], lp)
    return BillBound(alloc_usd_h=float(ub.mean()), cluster_usd_h=np_.cluster_usd_h)

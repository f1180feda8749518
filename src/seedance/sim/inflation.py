"""Inflation mode: the FGD paper's experiment.

NOTE(seedance): the arrival stream is built from the trace exactly as the paper's simulator does:
every pod of the (name-sorted) trace once, shuffled with the seed; then, while the arrived GPU
request is below ``ratio`` × cluster capacity, pods resampled with replacement from the trace
are appended, stopping at the first draw whose per-GPU milli would overshoot; a trace already
above the target is thinned by removing random pods instead. Nodes get a random tie-break rank
from the same seed. Pods never depart; a pod that fits nowhere is dropped (it still counts as
arrived). After every event (failed and CPU-only pods included) we record arrived milli-GPU,
allocated milli-GPU and cluster fragmentation; they are bucketed by arrived % afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterSpec, ClusterState
from seedance.core.decision import Decision
from seedance.core.resources import ResourceRequest
from seedance.profile import ProfileConfig, SchedulingProfile, build_profile, profile_of_policy
from seedance.scheduling.fragmentation import FragModel
from seedance.scheduling.framework import PolicyContext
from seedance.scheduling.tasktypes import TaskTypes
from seedance.sim.engine import EventLoop
from seedance.sim.metrics import PairwiseSum, bucket_by_arrival
from seedance.traces.schema import PodTrace

#: Clusters from this many nodes keep the fragmentation sum in a :class:`PairwiseSum` (below, one
#: ``sum`` of the node values per bind costs about as much as a tree update).
PAIRWISE_MIN_NODES = 2048


@dataclass(frozen=True, slots=True)
class ArrivalStream:
    """The pods submitted in an inflation run, in order, and the node ranks for the seed."""

    pods: NDArray[np.int64]  # indices into the name-sorted trace
    node_rank: NDArray[np.int64]


def build_stream(
    trace: PodTrace, capacity_gpu_milli: int, n_nodes: int, seed: int, ratio: float
) -> ArrivalStream:
    """Shuffle, then inflate (or thin) the trace to ``ratio`` × capacity, as FGD's simulator does.

    ``trace`` must already be sorted by pod name (``sort_by_name``).
    """
    rng = np.random.default_rng(seed)
    n = len(trace)
    order = rng.permutation(n)
    total = trace.num_gpu * trace.gpu_milli
    target = int(round(ratio * capacity_gpu_milli))
    current = int(total.sum())
    if current < target:
        extra: list[int] = []
        milli = trace.gpu_milli
        while True:
            draws = rng.integers(n, size=4096)
            for i in draws.tolist():
                if current + int(milli[i]) > target:
                    break
                current += int(total[i])
                extra.append(i)
            else:
                continue
            break
        pods = np.concatenate([order, np.array(extra, dtype=np.int64)])
    else:
        kept = order.tolist()
        while current > target and kept:
            j = int(rng.integers(len(kept)))
            current -= int(total[kept.pop(j)])
        pods = np.array(kept, dtype=np.int64)
    return ArrivalStream(pods=pods.astype(np.int64), node_rank=rng.permutation(n_nodes).astype(np.int64))


def sort_by_name(trace: PodTrace) -> PodTrace:
    """The trace sorted by pod name (the order resampling indexes into)."""
    return trace.take(np.argsort(trace.name, kind="stable"))


@dataclass(frozen=True, slots=True)
class InflationRun:
    """Per-event series of one inflation run plus its bucketed curves."""

    policy: str
    trace: str
    seed: int
    arrived_pct: list[int]
    alloc_pct: list[float | None]
    frag_pct: list[float | None]
    unallocated_pct_at_100: float | None
    placed: int
    failed: int
    events: int
    wall_s: float
    final_alloc_pct: float
    alloc_usd_h_at_100: float | None = None
    cluster_usd_h: float = 0.0

    def to_json(self) -> dict[str, object]:
        """The record of ``seedancectl simulate -o json``."""
        return {
            "policy": self.policy,
            "trace": self.trace,
            "seed": self.seed,
            "mode": "inflation",
            "arrived_pct": self.arrived_pct,
            "alloc_pct": self.alloc_pct,
            "frag_pct": self.frag_pct,
            "unallocated_pct_at_100": self.unallocated_pct_at_100,
            "placed": self.placed,
            "failed": self.failed,
            "events": self.events,
            "final_alloc_pct": self.final_alloc_pct,
            "bill_allocated_usd_h_at_100": self.alloc_usd_h_at_100,
            "bill_cluster_usd_h": self.cluster_usd_h,
            "wall_s": round(self.wall_s, 3),
        }


@dataclass(frozen=True, slots=True, eq=False)
class InflationSetup:
    """Everything an inflation run starts from: the sorted trace, its request keys, the cluster
    with the seed's node ranks, the arrival stream and the fragmentation metric's task types."""

    trace: PodTrace
    types: TaskTypes
    state: ClusterState
    stream: ArrivalStream
    keys: NDArray[np.int64]
    reqs: list[ResourceRequest]

    def context(self, seed: int) -> PolicyContext:
        """The policy context of the run (FGD is given the trace's task types, as in the paper)."""
        return PolicyContext(seed=seed, task_types=self.types)


def prepare_inflation(
    spec: ClusterSpec, trace: PodTrace, seed: int, ratio: float, task_types: TaskTypes | None = None
) -> InflationSetup:
    """Sort the trace, build the seed's arrival stream and a fresh cluster with the seed's node ranks."""
    trace = sort_by_name(trace)
    types = task_types or TaskTypes.from_trace(trace)
    state = ClusterState(spec)
    stream = build_stream(trace, state.capacity_gpu_milli, state.n_nodes, seed, ratio)
    state.set_rank(stream.node_rank)
    keys, reqs = trace.request_keys()
    return InflationSetup(trace, types, state, stream, keys, reqs)


def inflation_record(
    *,
    policy: str,
    trace: str,
    seed: int,
    arrived: NDArray[np.int64],
    used: NDArray[np.int64],
    frag_milli: NDArray[np.float64],
    total_gpus: int,
    top: int,
    placed: int,
    failed: int,
    wall_s: float,
    final_alloc_pct: float,
    alloc_usd_h: NDArray[np.float64] | None = None,
    cluster_usd_h: float = 0.0,
) -> InflationRun:
    """Bucket a run's per-event series by arrived % and wrap them in an :class:`InflationRun`."""
    from seedance.finops.bill import column_mean

    cols, alloc, fragp = bucket_by_arrival(arrived, used, frag_milli, total_gpus, top)
    at100 = alloc[100] if top >= 100 else None
    usd100 = column_mean(arrived, alloc_usd_h, total_gpus) if alloc_usd_h is not None and top >= 100 else None
    return InflationRun(
        policy=policy,
        trace=trace,
        seed=seed,
        arrived_pct=cols,
        alloc_pct=alloc,
        frag_pct=fragp,
        unallocated_pct_at_100=None if at100 is None else round(100.0 - at100, 2),
        placed=placed,
        failed=failed,
        events=len(arrived),
        wall_s=wall_s,
        final_alloc_pct=final_alloc_pct,
        alloc_usd_h_at_100=None if usd100 is None else round(usd100, 2),
        cluster_usd_h=round(cluster_usd_h, 2),
    )


@dataclass(frozen=True, slots=True, eq=False)
class StreamResult:
    """Per-event series of one pass of a profile over an arrival stream."""

    arrived: NDArray[np.int64]  # arrived milli-GPU after each event
    used: NDArray[np.int64]  # milli-GPU the cluster state books after each event
    frag_milli: NDArray[np.float64]
    usd: NDArray[np.float64]  # allocated $/h after each event
    bound: NDArray[np.bool_]
    placed: int
    failed: int
    cluster_usd_h: float


def run_stream(
    setup: InflationSetup,
    profile: SchedulingProfile,
    spec: ClusterSpec,
    on_bind: Callable[[int, ResourceRequest, Decision], None] | None = None,
) -> StreamResult:
    """Submit the setup's arrival stream to ``profile`` (the inflation loop, once for every caller).

    Each pod is observed, decided and, when bound, applied through the profile; a pod that fits
    nowhere is dropped. ``on_bind(event, request, decision)`` is called after every bind.
    """
    from seedance.finops.bill import NodePrices  # the bill: allocated $/h after every event

    state, keys, reqs, pods = setup.state, setup.keys, setup.reqs, setup.stream.pods
    frag = FragModel.of(setup.types, state)  # the one FGD scores with, if the policy is FGD
    n_events = len(pods)
    arrived = np.zeros(n_events, dtype=np.int64)
    used = np.zeros(n_events, dtype=np.int64)
    bound = np.zeros(n_events, dtype=np.bool_)
    node_frag = frag.node_frag().copy()
    # the bound node and its shape after each bind (-1: no bind); the fragmentation series is
    # computed from them after the run (``_frag_series``), every new class valued in one batch
    bound_node = np.full(n_events, -1, dtype=np.int64)
    bound_shape = np.full(n_events, -1, dtype=np.int64)
    shape_id = state.shape_id
    counters = {"arrived": 0, "placed": 0, "failed": 0}
    prices = NodePrices.of(spec)
    usd = np.zeros(n_events, dtype=np.float64)
    billed = [0.0]
    decide, apply, observe = profile.decide, profile.apply, profile.observe

    def on_arrival(t: float, i: int) -> None:
        req = reqs[keys[pods[i]]]
        counters["arrived"] += req.total_gpu_milli
        observe(req)
        d = decide(state, req, i)
        if d.placement is not None:
            apply(state, d)
            n = d.placement.node
            bound_node[i] = n
            bound_shape[i] = shape_id[n]
            counters["placed"] += 1
            bound[i] = True
            billed[0] += prices.placement_usd_h(d.placement)
            if on_bind is not None:
                on_bind(i, req, d)
        else:
            counters["failed"] += 1
        usd[i] = billed[0]
        arrived[i] = counters["arrived"]
        used[i] = state.used_gpu_milli

    EventLoop([on_arrival]).run((float(i), i) for i in range(n_events))
    frag_milli = _frag_series(frag, node_frag, bound_node, bound_shape)
    return StreamResult(arrived, used, frag_milli, usd, bound, counters["placed"], counters["failed"],
                        prices.cluster_usd_h)


def _frag_series(
    frag: FragModel, node_frag: NDArray[np.float64], bound_node: NDArray[np.int64], bound_shape: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Cluster fragmentation after each event: the sum over nodes of their values, the bound node's
    value replaced after each bind (``node_frag``: the values before the first event, updated in
    place). The same sums as computed event by event: a class's value is the same bits in any
    batch, and the sum is ``node_frag.sum()`` (by its pairwise tree on a large cluster)."""
    events = np.flatnonzero(bound_node >= 0)
    values = frag.class_frag(frag.shape_class(bound_shape[events]).tolist()).tolist()
    total = float(node_frag.sum())
    tree = PairwiseSum(node_frag) if node_frag.size >= PAIRWISE_MIN_NODES else None
    sums = np.zeros(events.size + 1, dtype=np.float64)
    sums[0] = total
    for j, (n, value) in enumerate(zip(bound_node[events].tolist(), values, strict=True), start=1):
        if value != node_frag[n]:  # the sum is recomputed only when a node's value changed
            node_frag[n] = value
            if tree is None:
                total = float(node_frag.sum())
            else:
                tree.set(n, value)
                total = tree.total
        sums[j] = total
    # each event reads the sum after the last bind at or before it (0: none yet)
    last = np.cumsum(bound_node >= 0)
    return sums[last]


def run_inflation(
    spec: ClusterSpec,
    trace: PodTrace,
    policy: str,
    seed: int,
    *,
    ratio: float = 1.3,
    arrived_max: int | None = None,
    task_types: TaskTypes | None = None,
    trace_name: str | None = None,
    profile: ProfileConfig | None = None,
) -> InflationRun:
    """One inflation run of ``policy`` on ``trace`` with ``seed``.

    Args:
        spec: The cluster.
        trace: The pod list (any order; it is sorted by name first).
        policy: Registered placement policy name (ignored when ``profile`` is given).
        seed: Seed for the shuffle, the resampling, node ranks and random policies.
        ratio: Submit pods until the arrived GPU request reaches ``ratio`` × capacity.
        arrived_max: Last arrived-% bucket reported (default ``round(ratio * 100)``).
        task_types: Target workload for FGD and the fragmentation metric (default: the trace's
            typical pods, as in the paper).
        trace_name: Name used in results (default: the trace file's stem).
        profile: The scheduling profile (default: ``policy`` with the default stages).
    """
    t0 = time.perf_counter()
    setup = prepare_inflation(spec, trace, seed, ratio, task_types)
    cfg = profile or profile_of_policy(policy)
    prof = build_profile(cfg, setup.state, seed=seed, task_types=setup.types)
    res = run_stream(setup, prof, spec)
    state = setup.state
    return inflation_record(
        policy=cfg.placement.policy,
        trace=trace_name or trace_stem(trace.source),
        seed=seed,
        arrived=res.arrived,
        used=res.used,
        frag_milli=res.frag_milli,
        total_gpus=spec.total_gpus,
        top=int(round(ratio * 100)) if arrived_max is None else arrived_max,
        placed=res.placed,
        failed=res.failed,
        wall_s=time.perf_counter() - t0,
        final_alloc_pct=round(100.0 * state.used_gpu_milli / state.capacity_gpu_milli, 2),
        alloc_usd_h=res.usd,
        cluster_usd_h=res.cluster_usd_h,
    )


def trace_stem(source: str) -> str:
    """Short trace name of a pod-list path (``openb_pod_list_default.csv`` → ``default``)."""
    name = source.replace("\\", "/").rsplit("/", 1)[-1]
    name = name.removesuffix(".csv")
    return name.removeprefix("openb_pod_list_")

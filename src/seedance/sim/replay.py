"""Replay mode: pods arrive at ``creation_time`` and leave at ``deletion_time``; what does not fit waits.

NOTE(seedance): the replay loop.
  * Arrival: the pod is tried at once (best-effort FIFO, as Kueue's BestEffortFIFO: a pod that
    fits does not wait behind one that does not); if nothing fits it joins the pending queue,
    ordered by the queue-sort plug-in.
  * Departure: the pod's resources are released, then the pending queue is retried in order. A
    request that failed in this pass is not retried again in the same pass (same request, same
    state, same answer), which keeps a pass linear in the number of distinct pending requests.
  * With ``end="fixed"``, a pod still pending at its deletion time leaves unserved ("never
    scheduled"); with ``end="shifted"`` it waits as long as it takes.
  * End of a running pod: by default the trace's deletion time (``end="fixed"``: the pod's
    lifetime window is fixed, waiting eats into it); ``end="shifted"`` runs it for its full
    requested duration from whenever it starts.
  Utilisation is the time-weighted allocated GPU share between the first arrival and the last
  departure; queueing delay is start − creation per scheduled pod.
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.decision import Decision, Placement
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.profile import ProfileConfig, build_profile, profile_of_policy
from seedance.profile.context import StageServices
from seedance.scheduling.queueing import QUEUE_ORDERS, QueueItem
from seedance.scheduling.tasktypes import TaskTypes
from seedance.sim.engine import EventLoop
from seedance.traces.schema import PodTrace

ARRIVE, END, EXPIRE = 0, 1, 2


def scale_cluster(spec: ClusterSpec, scale: float, seed: int = 0) -> ClusterSpec:
    """A cluster with about ``scale`` × the nodes of ``spec``, keeping the mix of node kinds.

    Nodes are grouped by (GPU model, GPU count); from each group ``round(scale × size)`` nodes are
    kept (a seeded random sample), at least one per group when ``scale > 0``. A scale above 1
    adds copies named ``<name>-x<i>``.
    """
    if not scale > 0:
        raise InputError(f"must be > 0, got {scale}", source="--capacity-scale")
    rng = np.random.default_rng(seed)
    groups: dict[tuple[str | None, int], list[NodeSpec]] = {}
    for n in spec.nodes:
        groups.setdefault((n.gpu_model, n.gpu_count), []).append(n)
    kept: list[NodeSpec] = []
    for members in groups.values():
        want = max(1, int(round(scale * len(members))))
        copies, rest = divmod(want, len(members))
        for c in range(copies):
            kept.extend(m if c == 0 else _copy(m, c) for m in members)
        if rest:
            idx = sorted(rng.choice(len(members), size=rest, replace=False).tolist())
            kept.extend(members[i] if copies == 0 else _copy(members[i], copies) for i in idx)
    order = {n.name: i for i, n in enumerate(spec.nodes)}
    kept.sort(key=lambda n: (order.get(n.name.split("-x")[0], len(order)), n.name))
    return ClusterSpec(nodes=tuple(kept), name=f"{spec.name}@{scale:g}")


def _copy(n: NodeSpec, i: int) -> NodeSpec:
    return NodeSpec(
        name=f"{n.name}-x{i}",
        cpu_milli=n.cpu_milli,
        memory_mib=n.memory_mib,
        gpu_count=n.gpu_count,
        gpu_model=n.gpu_model,
        labels=n.labels,
    )


@dataclass(slots=True)
class PodRecord:
    """Per-pod outcome of a replay (columnar arrays are built from these at the end)."""

    start: float = math.nan
    end: float = math.nan
    placement: Placement | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ReplayRun:
    """Outcome of one replay."""

    policy: str
    trace: str
    seed: int
    capacity_scale: float
    n_nodes: int
    total_gpus: int
    pods: int
    scheduled: int
    never_scheduled: int
    utilization_pct: float
    queue_delay_s_mean: float
    queue_delay_s_p50: float
    queue_delay_s_p95: float
    queue_delay_s_p99: float
    wall_s: float
    timeline_t: list[float] = field(default_factory=list)
    timeline_alloc_pct: list[float] = field(default_factory=list)
    start: NDArray[np.float64] | None = None
    end: NDArray[np.float64] | None = None

    def to_json(self) -> dict[str, object]:
        """JSON record of ``seedancectl simulate --mode replay -o json``."""
        return {
            "policy": self.policy,
            "trace": self.trace,
            "seed": self.seed,
            "mode": "replay",
            "capacity_scale": self.capacity_scale,
            "nodes": self.n_nodes,
            "gpus": self.total_gpus,
            "pods": self.pods,
            "scheduled": self.scheduled,
            "never_scheduled": self.never_scheduled,
            "utilization_pct": self.utilization_pct,
            "queue_delay_s_mean": self.queue_delay_s_mean,
            "queue_delay_s_p50": self.queue_delay_s_p50,
            "queue_delay_s_p95": self.queue_delay_s_p95,
            "queue_delay_s_p99": self.queue_delay_s_p99,
            "wall_s": round(self.wall_s, 3),
            "timeline": {"t_s": self.timeline_t, "alloc_pct": self.timeline_alloc_pct},
        }


class ReplaySimulation:
    """Arrivals and departures from a trace, a pending queue, and utilisation over time.

    Args:
        spec: The cluster.
        trace: Pods with creation and deletion times.
        policy: Registered placement policy name.
        seed: Seed for random policies.
        queue_order: Registered queue-sort name (default: the profile's).
        profile: The scheduling profile (default: ``policy`` with the default stages).
        end: ``"fixed"`` (leave at deletion time) or ``"shifted"`` (run the full duration).
        task_types: Target workload for FGD (default: the trace's typical pods).
        services: What the stages may know beyond the trace (pod directory, attestation registry, clock).
    """

    def __init__(
        self,
        spec: ClusterSpec,
        trace: PodTrace,
        policy: str,
        *,
        seed: int = 0,
        queue_order: str | None = None,
        profile: ProfileConfig | None = None,
        end: str = "fixed",
        task_types: TaskTypes | None = None,
        services: StageServices | None = None,
    ) -> None:
        if not trace.has_times:
            raise InputError(
                "replay needs creation_time and deletion_time for every pod", source=trace.source
            )
        if end not in ("fixed", "shifted"):
            raise InputError(f"unknown end rule {end!r}; valid: fixed, shifted", source="end")
        self.spec = spec
        self.trace = trace
        self.state = ClusterState(spec)
        types = task_types or TaskTypes.from_trace(trace)
        cfg = profile or profile_of_policy(policy)
        self.profile = build_profile(cfg, self.state, seed=seed, task_types=types, services=services)
        self.order = QUEUE_ORDERS.get(queue_order or cfg.queue)()
        self._decisions: dict[int, Decision] = {}
        self.policy_name = cfg.placement.policy
        self.seed = seed
        self.end_rule = end
        self.keys, self.reqs = trace.request_keys()
        self.records = [PodRecord() for _ in range(len(trace))]
        self._pending_keys: list[tuple[float, ...]] = []
        self._pending_pods: list[int] = []
        self._seq = 0
        self._alloc_t: list[float] = []
        self._alloc_v: list[int] = []
        self.loop = EventLoop([self._on_arrival, self._on_end, self._on_expire])

    # -------------------------------------------------------------- public
    def run(self) -> None:
        """Replay the whole trace."""
        order = np.argsort(self.trace.creation, kind="stable")
        created = self.trace.creation
        self._sample(float(created[order[0]]))
        self.loop.run((float(created[i]), int(i)) for i in order.tolist())

    def request(self, pod: int) -> ResourceRequest:
        """The request of ``pod``."""
        return self.reqs[int(self.keys[pod])]

    # -------------------------------------------------------------- handlers
    def _on_arrival(self, t: float, pod: int) -> None:
        self.profile.observe(self.request(pod))
        if not self._try(t, pod):
            self._enqueue(t, pod)
            if self.end_rule == "fixed":
                self.loop.schedule(float(self.trace.deletion[pod]), EXPIRE, pod)

    def _on_end(self, t: float, pod: int) -> None:
        rec = self.records[pod]
        if rec.placement is None or not math.isnan(rec.end):
            return
        self.profile.release(self.state, self._decisions.pop(pod))
        rec.end = t
        self._sample(t)
        self._retry(t)

    def _on_expire(self, t: float, pod: int) -> None:
        if self._dequeue(pod):
            self.records[pod].reason = "never scheduled: still pending at deletion time"

    # -------------------------------------------------------------- scheduling
    def _try(self, t: float, pod: int) -> bool:
        d = self.profile.decide(self.state, self.request(pod), pod, now=t)
        if d.placement is None:
            self.records[pod].reason = d.reason
            return False
        self._bind(t, pod, d)
        return True

    def _bind(self, t: float, pod: int, d: Decision) -> None:
        placement = d.placement
        assert placement is not None
        self.profile.apply(self.state, d)
        self._decisions[pod] = d
        rec = self.records[pod]
        rec.placement = placement
        rec.start = t
        created, deleted = float(self.trace.creation[pod]), float(self.trace.deletion[pod])
        finish = deleted if self.end_rule == "fixed" else t + (deleted - created)
        self.loop.schedule(max(finish, t), END, pod)
        self._sample(t)

    def _retry(self, t: float) -> None:
        if not self._pending_pods:
            return
        failed: set[int] = set()
        i = 0
        while i < len(self._pending_pods):
            pod = self._pending_pods[i]
            key = int(self.keys[pod])
            if key in failed or not self._try(t, pod):
                failed.add(key)
                i += 1
                continue
            del self._pending_pods[i]
            del self._pending_keys[i]

    def _enqueue(self, t: float, pod: int) -> None:
        req = self.request(pod)
        self._seq += 1
        key = self.order.key(QueueItem(pod, t, self._seq, gpu_milli=req.total_gpu_milli))
        j = bisect.bisect_right(self._pending_keys, key)
        self._pending_keys.insert(j, key)
        self._pending_pods.insert(j, pod)

    def _dequeue(self, pod: int) -> bool:
        try:
            j = self._pending_pods.index(pod)
        except ValueError:
            return False
        del self._pending_pods[j]
        del self._pending_keys[j]
        return True

    def _sample(self, t: float) -> None:
        if self._alloc_t and self._alloc_t[-1] == t:
            self._alloc_v[-1] = self.state.used_gpu_milli
        else:
            self._alloc_t.append(t)
            self._alloc_v.append(self.state.used_gpu_milli)

    # -------------------------------------------------------------- results
    def result(
        self, *, wall_s: float, capacity_scale: float = 1.0, trace_name: str = "", points: int = 400
    ) -> ReplayRun:
        """Summarise the replay (call after ``run``)."""
        start = np.array([r.start for r in self.records])
        end = np.array([r.end for r in self.records])
        ok = ~np.isnan(start)
        delay = (start - self.trace.creation)[ok]
        t = np.array(self._alloc_t)
        v = np.array(self._alloc_v, dtype=np.float64)
        cap = self.state.capacity_gpu_milli
        util = (
            float(np.sum(v[:-1] * np.diff(t)) / (cap * (t[-1] - t[0])))
            if len(t) > 1 and t[-1] > t[0]
            else 0.0
        )
        grid = np.linspace(t[0], t[-1], points) if len(t) > 1 else t
        idx = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(v) - 1)

        def pct(q: float) -> float:
            return round(float(np.percentile(delay, q)), 1) if delay.size else 0.0

        return ReplayRun(
            policy=self.policy_name,
            trace=trace_name,
            seed=self.seed,
            capacity_scale=capacity_scale,
            n_nodes=self.state.n_nodes,
            total_gpus=self.spec.total_gpus,
            pods=len(self.trace),
            scheduled=int(ok.sum()),
            never_scheduled=int((~ok).sum()),
            utilization_pct=round(100.0 * util, 2),
            queue_delay_s_mean=round(float(delay.mean()), 1) if delay.size else 0.0,
            queue_delay_s_p50=pct(50),
            queue_delay_s_p95=pct(95),
            queue_delay_s_p99=pct(99),
            wall_s=wall_s,
            timeline_t=[round(float(x), 1) for x in grid],
            timeline_alloc_pct=[round(100.0 * float(v[i]) / cap, 3) for i in idx],
            start=start,
            end=end,
        )


def run_replay(
    spec: ClusterSpec,
    trace: PodTrace,
    policy: str,
    *,
    seed: int = 0,
    capacity_scale: float = 1.0,
    queue_order: str | None = None,
    end: str = "fixed",
    trace_name: str = "",
    profile: ProfileConfig | None = None,
) -> ReplayRun:
    """Replay ``trace`` on ``spec`` scaled by ``capacity_scale`` under ``policy`` (or ``profile``)."""
    t0 = time.perf_counter()
    cluster = spec if capacity_scale == 1.0 else scale_cluster(spec, capacity_scale, seed)
    sim = ReplaySimulation(cluster, trace, policy, seed=seed, queue_order=queue_order, end=end, profile=profile)
    sim.run()
    return sim.result(wall_s=time.perf_counter() - t0, capacity_scale=capacity_scale, trace_name=trace_name)

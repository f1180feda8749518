"""Tiered replay: the trace under SLA-tier binding, borrowing and explained preemption.

NOTE(seedance): the loop (variant B of the A/B replay).
  * Arrival at ``creation_time``: the pod's tier comes from its QoS class; the profile
    (``build_profile`` with the tier stages) decides (own pool → borrow → preempt). Bound:
    victims are evicted first (each goes back to the pending queue, losing the work since its last checkpoint), then the
    placement is applied, then each victim is tried once more at once (it may fit elsewhere).
    Pending: the pod waits in a queue ordered by the profile's ``QUEUE_ORDERS`` entry (default
    ``priority``: tier priority, then creation time).
    Rejected: no node of its pools could ever host it.
  * Leave at ``deletion_time`` (the requested window is fixed): a running pod releases its
    resources and the pending queue is retried in order; a pending pod leaves unserved.
  * Retry timer: when a decision was pending only because victims were inside their
    min-runtime, the queue is retried at the moment the first of them becomes evictable.
  * A retry pass skips a (tier, request) that already failed in the same pass; a pass after a
    preemption starts that memo afresh, since evictions give capacity back.
  Per run segment the simulator records start, end, node, GPU held and requested, and the work
  lost at its end; availability, utilisation and cost are computed from those rows, and the
  integral of allocated GPU over time is kept separately so GPU-seconds can be checked.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import PriceBook
from seedance.core.cluster import ClusterSpec, ClusterState
from seedance.core.decision import Decision, Outcome
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.profile import ProfileConfig, build_profile, profile_of_policy
from seedance.scheduling.queueing import QUEUE_ORDERS, QueueItem
from seedance.scheduling.tasktypes import TaskTypes
from seedance.sim.engine import EventLoop
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.pools import pod_tiers
from seedance.tiers.preemption import RunningPod, RunningPods
from seedance.traces.schema import PodTrace

ARRIVE, LEAVE, RETRY = 0, 1, 2
NEW, RUNNING, PENDING, DONE, REJECTED = 0, 1, 2, 3, 4


@dataclass(frozen=True, slots=True)
class Segments:
    """Run segments of a replay, columnar (one row per uninterrupted run of a pod).

    Attributes:
        pod: Pod index.
        start, end: When the run started and stopped.
        node: Node index.
        alloc_milli: GPU held (milli-GPU over all its GPUs; a rounded-up share counts in full).
        req_milli: GPU the pod asked for (milli-GPU over all GPUs).
        lost_s: Work lost at the end of the run (time since its last checkpoint when evicted, else 0).
        usd_per_gpu_hour: Price of the node's GPU model.
        gpu_mask: GPUs of the node it held, as a bit mask (bit g = GPU g).
        evicted: Whether the run ended by preemption.
        borrowed: Whether it ran as a guest on another tier's pool.
    """

    pod: NDArray[np.int64]
    start: NDArray[np.float64]
    end: NDArray[np.float64]
    node: NDArray[np.int64]
    alloc_milli: NDArray[np.int64]
    req_milli: NDArray[np.int64]
    lost_s: NDArray[np.float64]
    usd_per_gpu_hour: NDArray[np.float64]
    gpu_mask: NDArray[np.int64]
    evicted: NDArray[np.bool_]
    borrowed: NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.pod)


def gpu_mask(gpus: tuple[int, ...]) -> int:
    """Bit mask of GPU indices (bit g set for GPU g).

    >>> gpu_mask((0, 3))
    9
    """
    return sum(1 << g for g in set(gpus))


def node_prices(spec: ClusterSpec, prices: PriceBook) -> list[float]:
    """$ per GPU-hour of every node's GPU model (0 for CPU-only nodes)."""
    return [prices.usd_per_gpu_hour(n.gpu_model) if n.gpu_model else 0.0 for n in spec.nodes]


class TieredReplay:
    """Replays a trace under tiered binding (see the module docstring).

    Args:
        spec: The cluster, its nodes labelled into tier pools (``seedance.tiers.pools.label_pools``).
        trace: Pods with creation and deletion times and QoS classes.
        tier_config: Tiers and the QoS → tier mapping.
        policy: Registered placement policy scoring nodes inside each stage.
        seed: Seed for random policies.
        prices: GPU prices (preemption cost, reports).
        explain_pod: Record every decision about this pod (``seedancectl explain pod``).
        task_types: Target workload for FGD (default: the trace's).
    """

    def __init__(
        self,
        spec: ClusterSpec,
        trace: PodTrace,
        *,
        tier_config: TierConfig = DEFAULT_TIER_CONFIG,
        policy: str = "best-fit",
        seed: int = 0,
        prices: PriceBook | None = None,
        explain_pod: int | None = None,
        task_types: TaskTypes | None = None,
        profile: ProfileConfig | None = None,
    ) -> None:
        if not trace.has_times:
            raise InputError("replay needs creation_time and deletion_time for every pod", source=trace.source)
        self.spec = spec
        self.trace = trace
        self.tier_config = tier_config
        self.state = ClusterState(spec)
        types = task_types or TaskTypes.from_trace(trace)
        cfg = profile or profile_of_policy(policy, queue="priority")
        cfg = cfg.model_copy(update={"tiers": cfg.tiers.model_copy(update={"enabled": True})})
        self.scheduler = build_profile(cfg, self.state, seed=seed, task_types=types, tier_config=tier_config)
        self.explainer = (
            build_profile(cfg, self.state, policy=self.scheduler.policy, tier_config=tier_config, explain=True)
            if explain_pod is not None and cfg.slices.mode == "free" else None
        )
        self.queue = QUEUE_ORDERS.get(cfg.queue)()
        self._decided: dict[int, Decision] = {}
        self.explain_pod = explain_pod
        self.policy_name = cfg.placement.policy
        self.seed = seed
        self.tier_names = tier_config.names()
        self.tier_of = pod_tiers(trace, tier_config)
        self._tier_specs = [tier_config.tiers[t] for t in self.tier_names]
        self.keys, self.reqs = trace.request_keys()
        self.prices = node_prices(spec, prices or PriceBook())
        n = len(trace)
        self.status = np.zeros(n, dtype=np.int8)
        self.preempted = np.zeros(n, dtype=np.int64)
        self.reason: dict[int, str] = {}
        self.running = RunningPods()
        self.log: list[dict[str, Any]] = []
        self.decisions = 0
        self.preemptions = 0
        self._pending: list[tuple[tuple[float, ...], int]] = []
        self._pending_key: dict[int, tuple[tuple[float, ...], int]] = {}
        self._open: dict[int, tuple[float, int, int, float]] = {}
        self._seg: list[tuple[int, float, float, int, int, int, float, float, int, bool, bool]] = []
        self._retry_at: set[float] = set()
        self._used_t = math.nan
        self.used_gpu_milli_s = 0.0
        self.loop = EventLoop([self._on_arrival, self._on_leave, self._on_retry])

    # ------------------------------------------------------------------ public
    def run(self) -> None:
        """Replay the whole trace."""
        order = np.argsort(self.trace.creation, kind="stable")
        created = self.trace.creation
        self.loop.run((float(created[i]), int(i)) for i in order.tolist())
        self._account(self.loop.now)

    def request(self, pod: int) -> ResourceRequest:
        """The request of ``pod`` as submitted."""
        return self.reqs[int(self.keys[pod])]

    def tier(self, pod: int) -> str:
        """Tier name of ``pod``."""
        return self.tier_names[int(self.tier_of[pod])]

    def segments(self) -> Segments:
        """The run segments so far (closed runs only)."""
        rows = self._seg
        cols = list(zip(*rows, strict=True)) if rows else [()] * 11
        return Segments(
            pod=np.array(cols[0], dtype=np.int64),
            start=np.array(cols[1], dtype=np.float64),
            end=np.array(cols[2], dtype=np.float64),
            node=np.array(cols[3], dtype=np.int64),
            alloc_milli=np.array(cols[4], dtype=np.int64),
            req_milli=np.array(cols[5], dtype=np.int64),
            lost_s=np.array(cols[6], dtype=np.float64),
            usd_per_gpu_hour=np.array(cols[7], dtype=np.float64),
            gpu_mask=np.array(cols[8], dtype=np.int64),
            evicted=np.array(cols[9], dtype=np.bool_),
            borrowed=np.array(cols[10], dtype=np.bool_),
        )

    # ------------------------------------------------------------------ handlers
    def _on_arrival(self, t: float, pod: int) -> None:
        self.loop.schedule(float(self.trace.deletion[pod]), LEAVE, pod)
        self.scheduler.observe(self.request(pod))
        outcome = self._try(t, pod)
        if outcome is Outcome.PENDING:
            self._enqueue(pod)
        elif outcome is Outcome.REJECT:
            self.status[pod] = REJECTED

    def _on_leave(self, t: float, pod: int) -> None:
        st = self.status[pod]
        if st == RUNNING:
            self._stop(t, pod, lost=0.0)
            self.status[pod] = DONE
            self._trace(t, pod, {"event": "ended", "reason": "deletion time reached"})
            self._retry(t)
        elif st == PENDING:
            self._dequeue(pod)
            self.status[pod] = DONE
            self.reason[pod] = "left unserved: still pending at deletion time"
            self._trace(t, pod, {"event": "left-pending", "reason": self.reason[pod]})

    def _on_retry(self, t: float, _: int) -> None:
        self._retry_at.discard(t)
        self._retry(t)

    # ------------------------------------------------------------------ scheduling
    def _try(self, t: float, pod: int) -> Outcome:
        sched = self.explainer if pod == self.explain_pod and self.explainer is not None else self.scheduler
        d = sched.decide(self.state, self.request(pod), pod, tier=self.tier(pod), running=self.running, now=t)
        self.decisions += 1
        if pod == self.explain_pod:
            self._trace_decision(t, pod, d)
        if d.placement is None:
            self.reason[pod] = d.reason
            retry = d.explanation.get("retry_at") if d.outcome is Outcome.PENDING else None
            if retry is not None and retry not in self._retry_at and retry >= t:
                self._retry_at.add(float(retry))
                self.loop.schedule(float(retry), RETRY, -1)
            return d.outcome
        self._apply(t, pod, d)
        return Outcome.BIND

    def _apply(self, t: float, pod: int, d: Decision) -> None:
        assert d.placement is not None
        for p in d.preemptions:
            self._evict(t, p.victim, by=pod, reason=p.reason, cost=p.cost)
        self._account(t)
        self.scheduler.apply(self.state, d)
        self._decided[pod] = d
        spec = self._tier_specs[int(self.tier_of[pod])]
        node = d.placement.node
        self.running.add(
            RunningPod(
                pod,
                self.tier(pod),
                d.placement,
                t,
                borrowed=bool(d.explanation.get("borrowed", False)),
                checkpoint_s=spec.checkpoint_interval_s,
                usd_per_gpu_hour=self.prices[node],
            )
        )
        alloc = len(d.placement.gpus) * d.placement.gpu_milli
        self._open[pod] = (t, node, alloc, self.prices[node])
        self.status[pod] = RUNNING
        self.reason.pop(pod, None)
        for p in d.preemptions:  # an evicted pod is tried again at once (it may fit elsewhere)
            if self.status[p.victim] == PENDING and self._try(t, p.victim) is Outcome.BIND:
                self._dequeue(p.victim)

    def _evict(self, t: float, victim: int, *, by: int, reason: str, cost: float) -> None:
        rp = self.running.get(victim)
        assert rp is not None and self.status[victim] == RUNNING
        lost = max(0.0, t - rp.last_checkpoint(t))
        self._stop(t, victim, lost=lost, evicted=True)
        self.preempted[victim] += 1
        self.preemptions += 1
        self.reason[victim] = f"preempted by pod {by}: {reason}"
        self._trace(t, victim, {"event": "preempted", "by": by, "cost_usd": cost, "lost_work_s": lost,
                                "reason": reason})
        self._enqueue(victim)

    def _stop(self, t: float, pod: int, *, lost: float, evicted: bool = False) -> None:
        rp = self.running.remove(pod)
        self._account(t)
        self.scheduler.release(self.state, self._decided.pop(pod))
        start, node, alloc, price = self._open.pop(pod)
        req = self.request(pod).total_gpu_milli
        mask = gpu_mask(rp.placement.gpus)
        self._seg.append((pod, start, t, node, alloc, req, lost, price, mask, evicted, rp.borrowed))

    def _retry(self, t: float) -> None:
        if not self._pending:
            return
        failed: set[tuple[int, int]] = set()
        for _, pod in list(self._pending):
            if self.status[pod] != PENDING:
                continue
            memo = (int(self.tier_of[pod]), int(self.keys[pod]))
            if memo in failed and pod != self.explain_pod:
                continue
            before = self.preemptions
            outcome = self._try(t, pod)
            if outcome is Outcome.BIND:
                self._dequeue(pod)
                if self.preemptions != before:
                    failed.clear()
            elif outcome is Outcome.REJECT:
                self._dequeue(pod)
                self.status[pod] = REJECTED
            else:
                failed.add(memo)

    def _enqueue(self, pod: int) -> None:
        prio = self._tier_specs[int(self.tier_of[pod])].priority
        req = self.request(pod)
        key = self.queue.key(QueueItem(pod, float(self.trace.creation[pod]), pod, prio, req.total_gpu_milli,
                                       self.tier(pod)))
        entry = (key, pod)
        bisect.insort(self._pending, entry)
        self._pending_key[pod] = entry
        self.status[pod] = PENDING

    def _dequeue(self, pod: int) -> None:
        entry = self._pending_key.pop(pod)
        j = bisect.bisect_left(self._pending, entry)
        del self._pending[j]

    def _account(self, t: float) -> None:
        if not math.isnan(self._used_t):
            self.used_gpu_milli_s += self.state.used_gpu_milli * (t - self._used_t)
        self._used_t = t

    def _trace_decision(self, t: float, pod: int, d: Decision) -> None:
        last = self.log[-1] if self.log else None
        if (
            d.outcome is Outcome.PENDING
            and last is not None
            and last.get("outcome") == str(Outcome.PENDING)
            and last.get("reason") == d.reason
        ):
            last["retries"] = last.get("retries", 0) + 1
            last["last_retry_t_s"] = t
            return
        self._trace(t, pod, _decision_json(d))

    def _trace(self, t: float, pod: int, entry: dict[str, Any]) -> None:
        if pod == self.explain_pod:
            self.log.append({"t_s": t, **entry})


def _decision_json(d: Decision) -> dict[str, Any]:
    out: dict[str, Any] = {"event": "decision", "outcome": str(d.outcome), "reason": d.reason}
    if d.placement is not None:
        p = d.placement
        out["placement"] = {"node": p.node, "gpus": list(p.gpus), "gpu_milli": p.gpu_milli}
    if d.preemptions:
        out["preemptions"] = [
            {"victim": x.victim, "node": x.node, "cost_usd": x.cost, "reason": x.reason} for x in d.preemptions
        ]
    out["explanation"] = _plain(d.explanation)
    return out


def _plain(x: Any) -> Any:
    if isinstance(x, dict) or hasattr(x, "items"):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x

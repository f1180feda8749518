"""The preemption stage: which running pods to evict so that a pod of a higher tier can bind.

NOTE(seedance): the preemption model, stated once (docs/tiers.md has the long form).
  * Rights: a pod of tier T may evict only pods of the tiers in ``T.may_preempt``, only on nodes
    of T's own pool, and never a pod of a tier with ``preemptible=False`` (Gold).
  * Protection: a pod is not evicted before it has run ``min_runtime_s`` of its tier since its
    last (re)start. A pod running on *borrowed* capacity (a guest on another tier's pool) is
    protected for ``reclaim_min_runtime_s`` instead (KAI's preemptMinRuntime/reclaimMinRuntime
    split); the default 0 s means lent capacity is taken back at once: that is the condition of
    borrowing.
  * Cost of a victim = lost work × GPU price + tier penalty, where lost work = GPUs held ×
    (now − last checkpoint), last checkpoint = start + k × ``checkpoint_interval_s`` (k maximal;
    no checkpoints: the start), GPUs held = milli-GPU held / 1000, price = $/GPU-hour of the
    node's GPU model.
  * Search, per candidate node: evictable pods sorted by (cost, more GPU freed first, pod id) are
    added until the request fits; then victims are dropped again, most expensive first, while it
    still fits. The node with the cheapest victim set wins (ties: fewer victims, then node rank).
    Greedy, so not always the cheapest set, but the same snapshot always gives the same answer.
  Nothing here mutates state: the result is a plan (a placement plus frozen ``Preemption``
  records with their reasons) that the driver applies: release each victim, then bind.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.decision import Placement, Preemption
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest
from seedance.tiers.config import TierConfig, TierSpec

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class RunningPod:
    """A running pod as the preemption stage sees it (one record per running pod).

    Attributes:
        pod: The driver's pod id.
        tier: Tier name.
        placement: Where it runs.
        started: When its current run started (seconds).
        borrowed: True when it runs as a guest on another tier's pool.
        checkpoint_s: Checkpoint period (0: never checkpoints).
        usd_per_gpu_hour: Price of one GPU-hour of its node's GPU model.
    """

    __slots__ = ("borrowed", "checkpoint_s", "placement", "pod", "started", "tier", "usd_per_gpu_hour")

    def __init__(
        self,
        pod: int,
        tier: str,
        placement: Placement,
        started: float,
        *,
        borrowed: bool = False,
        checkpoint_s: float = 0.0,
        usd_per_gpu_hour: float = 0.0,
    ) -> None:
        self.pod = pod
        self.tier = tier
        self.placement = placement
        self.started = started
        self.borrowed = borrowed
        self.checkpoint_s = checkpoint_s
        self.usd_per_gpu_hour = usd_per_gpu_hour

    @property
    def gpus_held(self) -> float:
        """GPU held, in GPUs (milli-GPU over all its GPUs / 1000)."""
        return len(self.placement.gpus) * self.placement.gpu_milli / MILLI_PER_GPU

    def last_checkpoint(self, now: float) -> float:
        """Time of its last checkpoint at ``now`` (its start when it never checkpoints)."""
        return last_checkpoint(self.started, self.checkpoint_s, now)


def last_checkpoint(started: float, interval_s: float, now: float) -> float:
    """``started + k × interval_s`` for the largest k with that time ≤ ``now`` (``started`` if no interval).

    >>> last_checkpoint(100.0, 600.0, 1450.0)
    1300.0
    >>> last_checkpoint(100.0, 0.0, 1450.0)
    100.0
    """
    if interval_s <= 0 or now <= started:
        return started
    return started + math.floor((now - started) / interval_s) * interval_s


class RunningPods:
    """The pods running now, indexed by node; owned and updated by the driver (simulator, control plane)."""

    __slots__ = ("_by_node", "_pods")

    def __init__(self) -> None:
        self._pods: dict[int, RunningPod] = {}
        self._by_node: dict[int, dict[int, RunningPod]] = {}

    def add(self, rp: RunningPod) -> None:
        """Record a pod that just started (a pod id runs at most once at a time)."""
        if rp.pod in self._pods:
            raise ValueError(f"pod {rp.pod} is already running")
        self._pods[rp.pod] = rp
        self._by_node.setdefault(rp.placement.node, {})[rp.pod] = rp

    def remove(self, pod: int) -> RunningPod:
        """Forget a pod that stopped (ended or evicted); returns its record."""
        rp = self._pods.pop(pod)
        del self._by_node[rp.placement.node][pod]
        return rp

    def get(self, pod: int) -> RunningPod | None:
        """The record of a running pod, or ``None``."""
        return self._pods.get(pod)

    def on_node(self, node: int) -> list[RunningPod]:
        """Pods running on ``node``, by pod id."""
        pods = self._by_node.get(node)
        return [pods[k] for k in sorted(pods)] if pods else []

    def __contains__(self, pod: object) -> bool:
        return pod in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def __iter__(self) -> Iterator[RunningPod]:
        return iter(self._pods.values())


@dataclass(frozen=True, slots=True)
class VictimCost:
    """Why one pod would be evicted, and what it costs.

    Attributes:
        pod: The victim.
        tier: Its tier.
        node: Its node index.
        kind: ``"reclaim"`` (it borrowed the capacity) or ``"preempt"``.
        ran_s: How long its current run has lasted.
        min_runtime_s: Protection that applied to it (already passed).
        lost_work_s: Time since its last checkpoint.
        gpus: GPUs it holds.
        usd_per_gpu_hour: GPU price used.
        penalty_usd: Its tier's penalty.
        cost_usd: ``lost_work_s / 3600 × gpus × usd_per_gpu_hour + penalty_usd``.
    """

    pod: int
    tier: str
    node: int
    kind: str
    ran_s: float
    min_runtime_s: float
    lost_work_s: float
    gpus: float
    usd_per_gpu_hour: float
    penalty_usd: float
    cost_usd: float

    def reason(self) -> str:
        """One line: why this victim is allowed and what it costs."""
        return (
            f"{self.kind} {self.tier} pod {self.pod}: ran {self.ran_s:.0f} s "
            f"(protected for {self.min_runtime_s:.0f} s), {self.lost_work_s:.0f} s since last checkpoint "
            f"x {self.gpus:g} GPU x ${self.usd_per_gpu_hour:.2f}/h + {self.tier} penalty "
            f"${self.penalty_usd:.2f} = ${self.cost_usd:.4f}"
        )

    def to_json(self) -> dict[str, Any]:
        """Machine-readable form (explanations)."""
        return {
            "pod": self.pod,
            "tier": self.tier,
            "node": self.node,
            "kind": self.kind,
            "ran_s": round(self.ran_s, 3),
            "min_runtime_s": self.min_runtime_s,
            "lost_work_s": round(self.lost_work_s, 3),
            "gpus": self.gpus,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "penalty_usd": self.penalty_usd,
            "cost_usd": round(self.cost_usd, 6),
        }


def victim_cost(rp: RunningPod, spec: TierSpec, now: float) -> VictimCost:
    """The cost of evicting ``rp`` (of tier ``spec``) at ``now``."""
    lost = max(0.0, now - rp.last_checkpoint(now))
    gpus = rp.gpus_held
    cost = lost / 3600.0 * gpus * rp.usd_per_gpu_hour + spec.penalty_usd
    return VictimCost(
        pod=rp.pod,
        tier=rp.tier,
        node=rp.placement.node,
        kind="reclaim" if rp.borrowed else "preempt",
        ran_s=now - rp.started,
        min_runtime_s=protection_s(rp, spec),
        lost_work_s=lost,
        gpus=gpus,
        usd_per_gpu_hour=rp.usd_per_gpu_hour,
        penalty_usd=spec.penalty_usd,
        cost_usd=cost,
    )


def protection_s(rp: RunningPod, spec: TierSpec) -> float:
    """How long ``rp`` is protected after its start: reclaim min-runtime when borrowing, else min-runtime."""
    return spec.reclaim_min_runtime_s if rp.borrowed else spec.min_runtime_s


@dataclass(frozen=True, slots=True)
class PreemptionPlan:
    """Evict ``victims`` (in order), then bind ``placement``."""

    node: int
    placement: Placement
    victims: tuple[VictimCost, ...]

    @property
    def cost_usd(self) -> float:
        """Total cost of the victims."""
        return float(sum(v.cost_usd for v in self.victims))

    def preemptions(self, preemptor: int, preemptor_tier: str, alternatives: int) -> tuple[Preemption, ...]:
        """Frozen ``Preemption`` records with their one-line reasons."""
        why = f"cheapest victim set of {alternatives} candidate node(s)" if alternatives > 1 else "only node"
        return tuple(
            Preemption(
                victim=v.pod,
                node=v.node,
                cost=round(v.cost_usd, 6),
                reason=f"{v.reason()}; for {preemptor_tier} pod {preemptor} ({why})",
            )
            for v in self.victims
        )


@dataclass(frozen=True, slots=True)
class VictimSearch:
    """Outcome of :func:`select_victims`.

    Attributes:
        plan: The chosen plan, or ``None`` when no node can be freed now.
        explanation: Machine-readable account (chosen node, victims, alternatives, protected pods).
        retry_at: When no plan exists only because of min-runtime protection: the earliest time a
            protected pod becomes evictable (the driver retries then); else ``None``.
    """

    plan: PreemptionPlan | None
    explanation: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    retry_at: float | None = None


def _fits(free: NDArray[np.int64], cpu: int, mem: int, req: ResourceRequest) -> bool:
    if cpu < req.cpu_milli or mem < req.memory_mib:
        return False
    if req.num_gpu == 0:
        return True
    if req.is_sharing:
        return bool((free >= req.gpu_milli).any())
    return int((free == MILLI_PER_GPU).sum()) >= req.num_gpu


def _gpus(free: NDArray[np.int64], req: ResourceRequest) -> tuple[int, ...]:
    if req.num_gpu == 0:
        return ()
    if req.is_sharing:
        cand = np.where(free >= req.gpu_milli, free, np.iinfo(np.int64).max)
        return (int(cand.argmin()),)
    return tuple(int(g) for g in np.flatnonzero(free == MILLI_PER_GPU)[: req.num_gpu])


class _NodeState:
    """Free resources of one node plus those of a victim set (scratch, per search)."""

    __slots__ = ("cpu", "free", "mem")

    def __init__(self, view: ClusterState, node: int) -> None:
        gc = int(view.gpu_count[node])
        self.free = view.gpu_free[node, :gc].astype(np.int64)
        self.cpu = int(view.cpu_free[node])
        self.mem = int(view.mem_free[node])

    def give(self, p: Placement, sign: int = 1) -> None:
        for g in p.gpus:
            self.free[g] += sign * p.gpu_milli
        self.cpu += sign * p.cpu_milli
        self.mem += sign * p.memory_mib


def select_victims(
    view: ClusterState,
    req: ResourceRequest,
    *,
    pod: int,
    tier: str,
    tier_config: TierConfig,
    running: RunningPods,
    now: float,
    candidates: NDArray[np.intp],
    max_alternatives: int = 3,
) -> VictimSearch:
    """Find the cheapest set of pods to evict so that ``req`` (tier ``tier``) fits on one node.

    Args:
        view: Cluster snapshot (read only).
        req: The request (already adapted to the tier).
        pod: The preemptor's id (for reasons).
        tier: The preemptor's tier.
        tier_config: Tier rights, protections and penalties.
        running: Pods running now.
        now: Current time.
        candidates: Nodes the preemptor may use at all (its own pool, passing the static filters).
        max_alternatives: How many runner-up nodes the explanation lists.

    Returns:
        The plan (or none) with its explanation; see :class:`VictimSearch`.
    """
    spec = tier_config.tiers[tier]
    rights = frozenset(spec.may_preempt)
    protected = {"not_preemptible": 0, "min_runtime": 0, "no_right": 0}
    retry_at = math.inf
    plans: list[tuple[float, int, int, PreemptionPlan]] = []
    blocked_nodes = 0
    if not rights:
        return VictimSearch(
            None, {"stage": "preemption", "candidates": 0, "why": f"tier {tier} may preempt no tier"}
        )
    for node in candidates.tolist():
        eligible: list[VictimCost] = []
        for rp in running.on_node(node):
            vspec = tier_config.tiers[rp.tier]
            if not vspec.preemptible:
                protected["not_preemptible"] += 1
                continue
            if rp.tier not in rights:
                protected["no_right"] += 1
                continue
            until = rp.started + protection_s(rp, vspec)
            if now < until:
                protected["min_runtime"] += 1
                retry_at = min(retry_at, until)
                continue
            eligible.append(victim_cost(rp, vspec, now))
        if not eligible:
            blocked_nodes += 1
            continue
        plan = _plan_node(view, req, node, eligible, running)
        if plan is None:
            blocked_nodes += 1
            continue
        plans.append((plan.cost_usd, len(plan.victims), int(view.rank[node]), plan))
    plans.sort(key=lambda x: x[:3])
    explanation: dict[str, Any] = {
        "stage": "preemption",
        "candidates": int(candidates.size),
        "nodes_without_plan": blocked_nodes,
        "protected": protected,
    }
    if not plans:
        if candidates.size == 0:
            explanation["why"] = "no node of its own pool could host the request even when empty"
        else:
            explanation["why"] = (
                f"none of {candidates.size} pool node(s) can be freed by evicting pods it may preempt "
                f"(protected: {protected['not_preemptible']} never preempted, {protected['no_right']} "
                f"outside its rights, {protected['min_runtime']} inside min-runtime)"
            )
        has_retry = math.isfinite(retry_at)
        if has_retry:
            explanation["retry_at"] = retry_at
        return VictimSearch(None, explanation, retry_at if has_retry else None)
    best = plans[0][3]
    explanation.update(
        {
            "node": view.spec.nodes[best.node].name,
            "cost_usd": round(best.cost_usd, 6),
            "victims": [v.to_json() for v in best.victims],
            "alternatives": [
                {"node": view.spec.nodes[p.node].name, "cost_usd": round(c, 6), "victims": k}
                for c, k, _, p in plans[1 : 1 + max_alternatives]
            ],
        }
    )
    return VictimSearch(best, explanation)


def _plan_node(
    view: ClusterState, req: ResourceRequest, node: int, eligible: list[VictimCost], running: RunningPods
) -> PreemptionPlan | None:
    st = _NodeState(view, node)
    if _fits(st.free, st.cpu, st.mem, req):
        return PreemptionPlan(node, _placement(st, req, node), ())
    placements = {v.pod: _placement_of(running, v.pod) for v in eligible}
    order = sorted(eligible, key=lambda v: (v.cost_usd, -v.gpus, v.pod))
    chosen: list[VictimCost] = []
    for v in order:
        st.give(placements[v.pod])
        chosen.append(v)
        if _fits(st.free, st.cpu, st.mem, req):
            break
    else:
        return None
    for v in sorted(chosen, key=lambda v: (-v.cost_usd, v.pod)):
        st.give(placements[v.pod], -1)
        if _fits(st.free, st.cpu, st.mem, req):
            chosen.remove(v)
        else:
            st.give(placements[v.pod])
    return PreemptionPlan(node, _placement(st, req, node), tuple(sorted(chosen, key=lambda v: (v.cost_usd, v.pod))))


def _placement_of(running: RunningPods, pod: int) -> Placement:
    rp = running.get(pod)
    if rp is None:  # pragma: no cover - eligible pods come from ``running``
        raise KeyError(pod)
    return rp.placement


def _placement(st: _NodeState, req: ResourceRequest, node: int) -> Placement:
    return Placement(node, _gpus(st.free, req), req.gpu_milli, req.cpu_milli, req.memory_mib)

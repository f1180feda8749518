"""The tiered scheduler: one decision for a pod of an SLA tier, with its explanation.

NOTE(seedance): the stages, in order; the first that yields a placement wins.
  1. Adapt the request to the tier (``adapt_request``: Gold shares become whole GPUs).
  2. Own pool: the framework ``Scheduler`` with the default filters + ``GpuModeFit`` + the tier's
     ``TierFilter`` (its nodeAffinity).
  3. Borrow (tiers with ``borrow_labels``): the same on the lender pools, first with the request
     as is, then, for a share, as one whole GPU (exclusive nodes host only whole GPUs). A pod
     placed here is a guest: the pool's owner may reclaim it (``reclaim_min_runtime_s``).
  4. Preempt (tiers with ``may_preempt``): ``select_victims`` on the tier's own pool.
  5. Otherwise pending (or reject when no node of its pools could ever host it), with each
     stage's reason.
  Every decision says which stage placed the pod and why (``explanation``), the same in the
  simulator and in the control plane; nothing here mutates state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision, Outcome
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import (
    DEFAULT_FILTERS,
    GpuModelMatch,
    PlacementPolicy,
    Schedulable,
    Scheduler,
)
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.filters import GpuModeFit, TierFilter, adapt_request, whole_gpu_request
from seedance.tiers.preemption import RunningPods, select_victims

BoolA = NDArray[np.bool_]

#: ``explanation["stage"]`` values of a bound decision.
STAGE_OWN, STAGE_BORROW, STAGE_PREEMPT = "own-pool", "borrow", "preempt"


class TieredScheduler:
    """Own pool → borrowed pools → preemption, for pods of SLA tiers.

    Args:
        policy: Placement policy scoring the nodes in every stage.
        tier_config: The tiers.
        explain: Add per-filter rejection counts and runner-up nodes to every decision.
    """

    def __init__(
        self, policy: PlacementPolicy, tier_config: TierConfig = DEFAULT_TIER_CONFIG, *, explain: bool = False
    ) -> None:
        self.policy = policy
        self.tier_config = tier_config
        self.explain = explain
        base = (*DEFAULT_FILTERS, GpuModeFit())
        self._own: dict[str, Scheduler] = {}
        self._borrow: dict[str, Scheduler] = {}
        self._static: dict[str, tuple[TierFilter, ...]] = {}
        for name, spec in tier_config.tiers.items():
            own = TierFilter.own(name, spec)
            self._own[name] = Scheduler(policy, (*base, own), explain=explain)
            self._static[name] = (own,)
            if spec.borrow_labels:
                borrow = TierFilter.borrowed(name, spec)
                self._borrow[name] = Scheduler(policy, (*base, borrow), explain=explain)
                self._static[name] = (own, borrow)

    def pools(self, view: ClusterState, tier: str) -> dict[str, BoolA]:
        """Masks of the nodes a tier may use: ``{"own": ..., "borrow": ...}``."""
        filters = self._static[tier]
        out = {"own": filters[0].mask(view, _ANY)}
        if len(filters) > 1:
            out["borrow"] = filters[1].mask(view, _ANY)
        return out

    def decide(
        self,
        view: ClusterState,
        req: ResourceRequest,
        pod: int,
        *,
        tier: str,
        running: RunningPods,
        now: float,
    ) -> Decision:
        """Decide for one pod of ``tier`` (see the module docstring for the stages).

        Args:
            view: Cluster snapshot (read only).
            req: The pod's request as submitted.
            pod: The driver's pod id.
            tier: The pod's tier name.
            running: Pods running now (victim candidates).
            now: Current time in seconds (min-runtime and checkpoints are measured against it).

        Returns:
            A frozen decision: bind (maybe with preemptions), pending, or reject.
        """
        spec = self.tier_config.tiers[tier]
        r = adapt_request(req, spec)
        head: dict[str, Any] = {"tier": tier, "request": _request_json(req, r, tier)}
        own = self._own[tier].decide(view, r, pod)
        if own.placement is not None:
            return _bound(own, head, STAGE_OWN, self._static[tier][0], view, borrowed=False)
        stages: dict[str, Any] = {"own-pool": _pending_json(own, self._static[tier][0])}
        borrow = self._borrow.get(tier)
        if borrow is not None:
            tries = (r, whole_gpu_request(r)) if r.is_sharing else (r,)
            for attempt in tries:
                d = borrow.decide(view, attempt, pod)
                if d.placement is not None:
                    if attempt is not r:
                        head["request"]["borrowed_as_whole_gpu"] = True
                    return _bound(d, head, STAGE_BORROW, self._static[tier][1], view, borrowed=True)
            stages["borrow"] = _pending_json(d, self._static[tier][1])
        if spec.may_preempt:
            cand = self._candidates(view, r, tier)
            search = select_victims(
                view, r, pod=pod, tier=tier, tier_config=self.tier_config, running=running, now=now,
                candidates=cand,
            )
            if search.plan is not None:
                plan = search.plan
                pre = plan.preemptions(pod, tier, int(cand.size))
                reason = (
                    f"{tier}: preempt {len(pre)} pod(s) on {view.spec.nodes[plan.node].name} "
                    f"(victim cost ${plan.cost_usd:.4f}, cheapest of {cand.size} candidate node(s))"
                )
                return Decision(
                    pod,
                    Outcome.BIND,
                    plan.placement,
                    preemptions=pre,
                    reason=reason,
                    explanation={
                        **head,
                        "stage": STAGE_PREEMPT,
                        "borrowed": False,
                        "pool": self._static[tier][0].describe(),
                        "node": view.spec.nodes[plan.node].name,
                        "stages": stages,
                        "preemption": dict(search.explanation),
                    },
                )
            stages["preemption"] = dict(search.explanation)
            if search.retry_at is not None:
                head["retry_at"] = search.retry_at
        ever = self._ever_fits(view, r, tier)
        outcome = Outcome.PENDING if ever else Outcome.REJECT
        reason = (
            f"{tier}: pending: " + "; ".join(_stage_reason(k, v) for k, v in stages.items())
            if ever
            else f"{tier}: no node of its pool(s) could ever host the request"
        )
        return Decision(pod, outcome, reason=reason, explanation={**head, "stage": "pending", "stages": stages})

    def _candidates(self, view: ClusterState, r: ResourceRequest, tier: str) -> NDArray[np.intp]:
        """Own-pool nodes that could host ``r`` once pods leave (static filters and capacity)."""
        m = self._static[tier][0].mask(view, r) & _static_mask(view, r)
        return np.flatnonzero(m)

    def _ever_fits(self, view: ClusterState, r: ResourceRequest, tier: str) -> bool:
        pools = self.pools(view, tier)
        ok = pools["own"] & _static_mask(view, r)
        if "borrow" in pools:
            ok = ok | (pools["borrow"] & _static_mask(view, whole_gpu_request(r)))
        return bool(ok.any())


_ANY = ResourceRequest(cpu_milli=0, memory_mib=0)
_SCHEDULABLE, _MODEL, _MODE = Schedulable(), GpuModelMatch(), GpuModeFit()


def _static_mask(view: ClusterState, r: ResourceRequest) -> BoolA:
    """Nodes that could host ``r`` when empty: schedulable, GPU model, GPU mode, and capacity."""
    m = _SCHEDULABLE.mask(view, r) & _MODEL.mask(view, r) & _MODE.mask(view, r)
    m = m & (view.cpu_capacity >= r.cpu_milli) & (view.mem_capacity >= r.memory_mib)
    if r.num_gpu:
        m = m & (view.gpu_count >= r.num_gpu)
    return m


def _request_json(req: ResourceRequest, r: ResourceRequest, tier: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "num_gpu": r.num_gpu,
        "gpu_milli": r.gpu_milli,
        "cpu_milli": r.cpu_milli,
        "memory_mib": r.memory_mib,
        "backends": [str(b) for b in r.backends],
    }
    if r.gpu_milli != req.gpu_milli:
        out["rounded_up_from_milli"] = req.gpu_milli
        out["why_rounded"] = f"tier {tier} never shares a GPU: a share takes one whole GPU"
    return out


def _bound(
    d: Decision, head: Mapping[str, Any], stage: str, pool: TierFilter, view: ClusterState, *, borrowed: bool
) -> Decision:
    assert d.placement is not None
    reason = f"{head['tier']}: {d.reason} in {'borrowed' if borrowed else 'its own'} pool ({pool.describe()})"
    explanation = {
        **head,
        **d.explanation,
        "stage": stage,
        "borrowed": borrowed,
        "pool": pool.describe(),
        "node": view.spec.nodes[d.placement.node].name,
    }
    return Decision(d.pod, d.outcome, d.placement, score=d.score, reason=reason, explanation=explanation)


def _pending_json(d: Decision, pool: TierFilter) -> dict[str, Any]:
    return {"pool": pool.describe(), "reason": d.reason, "rejected_by": dict(d.explanation.get("rejected_by", {}))}


def _stage_reason(stage: str, info: Mapping[str, Any]) -> str:
    if stage == "preemption":
        return f"preemption: {info.get('why', 'no plan')}"
    return f"{stage}: {info.get('reason', '')}"

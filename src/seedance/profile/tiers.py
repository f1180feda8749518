"""Tier stages: request rounding, the tier pools, borrowing and preemption.

NOTE(seedance): the tier rules, stated once (``docs/tiers.md`` has the long form).
  1. ``tier-request`` (adapter): ``adapt_request``: the request accepts exactly the tier's
     backends; a share of a tier that never shares (Gold) becomes one whole GPU.
  2. Pool stage (:class:`TierPools`): the tier's own pool is its ``node_labels`` (nodeAffinity)
     plus ``GpuModeFit`` (exclusive nodes host whole GPUs only).
  3. ``borrow`` (fallback, tiers with ``borrow_labels`` and pods that accept it): the same on
     the lender pools, first with the request as is, then, for a share, as one whole GPU (an
     exclusive node hosts only whole GPUs). A pod placed here is a guest the owner may reclaim.
  4. ``preempt`` (fallback, tiers with ``may_preempt``): ``select_victims`` on the own pool.
  5. Otherwise pending, or reject when no node of the tier's pools could ever host the request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision, Outcome
from seedance.core.resources import ResourceRequest
from seedance.profile.stages import Attempt, Fallback, RequestAdapter
from seedance.scheduling.framework import FilterPlugin, GpuModelMatch, Schedulable
from seedance.tiers.config import TierConfig
from seedance.tiers.filters import GpuModeFit, TierFilter, adapt_request, whole_gpu_request
from seedance.tiers.preemption import RunningPods, select_victims

if TYPE_CHECKING:
    from seedance.profile.profile import SchedulingProfile

BoolA = NDArray[np.bool_]

#: ``explanation["stage"]`` values of a bound decision.
STAGE_OWN, STAGE_BORROW, STAGE_PREEMPT = "own-pool", "borrow", "preempt"

_ANY = ResourceRequest(cpu_milli=0, memory_mib=0)
_SCHEDULABLE, _MODEL, _MODE = Schedulable(), GpuModelMatch(), GpuModeFit()
_NOBODY = RunningPods()


class TierRequest(RequestAdapter):
    """A pod's request as its tier asks for it (``adapt_request``); pods without a tier pass unchanged."""

    name: ClassVar[str] = "tier-request"

    def __init__(self, config: TierConfig) -> None:
        self.config = config

    def adapt(self, att: Attempt, req: ResourceRequest) -> ResourceRequest:
        spec = self.config.tiers.get(att.tier or "")
        return req if spec is None else adapt_request(req, spec)


class TierPools:
    """The pool stage: per tier, the own-pool filters and the borrow-pool filters."""

    def __init__(self, config: TierConfig) -> None:
        self.config = config
        self._own: dict[str, TierFilter] = {}
        self._borrow: dict[str, TierFilter] = {}
        for name, spec in config.tiers.items():
            self._own[name] = TierFilter.own(name, spec)
            if spec.borrow_labels:
                self._borrow[name] = TierFilter.borrowed(name, spec)

    def has(self, tier: str) -> bool:
        """Whether ``tier`` is one of the configured tiers."""
        return tier in self._own

    def filters(self, tier: str, pool: str) -> tuple[FilterPlugin, ...]:
        """The pool's label filter, then ``GpuModeFit`` (a node outside the pool is told so first)."""
        f = self._own[tier] if pool == "own" else self._borrow[tier]
        return (f, _MODE)

    def pool_filter(self, tier: str, pool: str) -> TierFilter:
        """The label filter of a tier's ``own`` or ``borrow`` pool."""
        return self._own[tier] if pool == "own" else self._borrow[tier]

    def can_borrow(self, tier: str) -> bool:
        """Whether the tier has lender pools."""
        return tier in self._borrow

    def pool_mask(self, view: ClusterState, tier: str, pool: str) -> BoolA:
        """Nodes of a tier's pool (labels only)."""
        if pool != "own" and tier not in self._borrow:
            return np.zeros(view.n_nodes, dtype=np.bool_)
        return self.pool_filter(tier, pool).mask(view, _ANY)

    def borrow_tries(
        self, att: Attempt, r: ResourceRequest, profile: SchedulingProfile
    ) -> Iterator[tuple[ResourceRequest, str]]:
        """The requests the ``borrow`` fallback tries, in order (none if the profile does not borrow)."""
        if att.tier is None or not att.borrow or not self.can_borrow(att.tier):
            return
        if not any(isinstance(f, Borrow) for f in profile.fallbacks):
            return
        yield r, "borrow"
        if r.is_sharing:
            yield whole_gpu_request(r), "borrow"

    # ------------------------------------------------------------------ explanations
    @staticmethod
    def request_json(req: ResourceRequest, r: ResourceRequest, tier: str) -> dict[str, Any]:
        """The request as placed, and why it differs from the one submitted."""
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

    def bound(self, d: Decision, head: Mapping[str, Any], pool: str, view: ClusterState) -> Decision:
        """A stage's bound decision with the tier's explanation around it."""
        assert d.placement is not None
        borrowed = pool != "own"
        f = self.pool_filter(str(head["tier"]), pool)
        reason = f"{head['tier']}: {d.reason} in {'borrowed' if borrowed else 'its own'} pool ({f.describe()})"
        explanation = {
            **head,
            **d.explanation,
            "stage": STAGE_BORROW if borrowed else STAGE_OWN,
            "borrowed": borrowed,
            "pool": f.describe(),
            "node": view.spec.nodes[d.placement.node].name,
        }
        return Decision(d.pod, d.outcome, d.placement, score=d.score, reason=reason, explanation=explanation)

    def pending_json(self, d: Decision, tier: str, pool: str) -> dict[str, Any]:
        """One stage's failure, for the pending decision's ``stages``."""
        return {
            "pool": self.pool_filter(tier, pool).describe(),
            "reason": d.reason,
            "rejected_by": dict(d.explanation.get("rejected_by", {})),
        }

    def pending(self, att: Attempt, r: ResourceRequest, head: dict[str, Any], trail: dict[str, Any]) -> Decision:
        """The decision when no stage placed the pod: pending with every stage's reason, or reject."""
        tier = att.tier
        assert tier is not None
        ever = self.ever_fits(att.view, r, tier, borrow=att.borrow)
        outcome = Outcome.PENDING if ever else Outcome.REJECT
        reason = (
            f"{tier}: pending: " + "; ".join(_stage_reason(k, v) for k, v in trail.items())
            if ever
            else f"{tier}: no node of its pool(s) could ever host the request"
        )
        return Decision(att.pod, outcome, reason=reason, explanation={**head, "stage": "pending", "stages": trail})

    def ever_fits(self, view: ClusterState, r: ResourceRequest, tier: str, *, borrow: bool = True) -> bool:
        """Whether any node of the tier's pools could host ``r`` when empty."""
        ok = self.pool_mask(view, tier, "own") & static_mask(view, r)
        if borrow and tier in self._borrow:
            ok = ok | (self.pool_mask(view, tier, "borrow") & static_mask(view, whole_gpu_request(r)))
        return bool(ok.any())


class Borrow(Fallback):
    """Place on a lender pool as a guest: the request as is, then (a share) as one whole GPU."""

    name: ClassVar[str] = "borrow"

    def attempt(
        self, profile: SchedulingProfile, att: Attempt, req: ResourceRequest, head: dict[str, Any],
        trail: dict[str, Any],
    ) -> Decision | None:
        pools = profile.pools
        assert pools is not None and att.tier is not None
        last: Decision | None = None
        for attempt, pool in pools.borrow_tries(att, req, profile):
            scored = profile.place(att, attempt, pool)
            d = scored.decision
            if d.placement is not None:
                h = head
                if attempt is not req:
                    h = {**head, "request": {**head["request"], "borrowed_as_whole_gpu": True}}
                return pools.bound(d, h, pool, att.view)
            last = d
        if last is not None:
            trail["borrow"] = pools.pending_json(last, att.tier, "borrow")
        return None


class Preempt(Fallback):
    """Evict the cheapest eligible pods on the tier's own pool (``tiers.preemption.select_victims``).

    Args:
        config: The tiers (rights, protection, costs).
        exclude: Nodes never offered to the victim search (e.g. MIG pools for a share: the
            search books milli and knows nothing of MIG instances); ``None`` for none.
    """

    name: ClassVar[str] = "preempt"

    def __init__(self, config: TierConfig, exclude: BoolA | None = None) -> None:
        self.config = config
        self.exclude = exclude

    def attempt(
        self, profile: SchedulingProfile, att: Attempt, req: ResourceRequest, head: dict[str, Any],
        trail: dict[str, Any],
    ) -> Decision | None:
        pools = profile.pools
        tier = att.tier
        assert pools is not None and tier is not None
        if not self.config.tiers[tier].may_preempt:
            return None
        view = att.view
        m = pools.pool_mask(view, tier, "own") & static_mask(view, req)
        if self.exclude is not None and req.is_sharing:
            m &= ~self.exclude
        if att.only is not None:
            m &= att.only
        cand = np.flatnonzero(m)
        search = select_victims(
            view, req, pod=att.pod, tier=tier, tier_config=self.config, running=att.running or _NOBODY,
            now=att.now, candidates=cand,
        )
        if search.plan is None:
            trail["preemption"] = dict(search.explanation)
            if search.retry_at is not None:
                head["retry_at"] = search.retry_at
            return None
        plan = search.plan
        pre = plan.preemptions(att.pod, tier, int(cand.size))
        reason = (
            f"{tier}: preempt {len(pre)} pod(s) on {view.spec.nodes[plan.node].name} "
            f"(victim cost ${plan.cost_usd:.4f}, cheapest of {cand.size} candidate node(s))"
        )
        return Decision(
            att.pod, Outcome.BIND, plan.placement, preemptions=pre, reason=reason,
            explanation={
                **head, "stage": STAGE_PREEMPT, "borrowed": False,
                "pool": pools.pool_filter(tier, "own").describe(),
                "node": view.spec.nodes[plan.node].name, "stages": dict(trail),
                "preemption": dict(search.explanation),
            },
        )


def static_mask(view: ClusterState, r: ResourceRequest) -> BoolA:
    """Nodes that could host ``r`` when empty: schedulable, GPU model, GPU mode, and capacity."""
    m = _SCHEDULABLE.mask(view, r) & _MODEL.mask(view, r) & _MODE.mask(view, r)
    m = m & (view.cpu_capacity >= r.cpu_milli) & (view.mem_capacity >= r.memory_mib)
    if r.num_gpu:
        m = m & (view.gpu_count >= r.num_gpu)
    return m


def _stage_reason(stage: str, info: Mapping[str, Any]) -> str:
    if stage == "preemption":
        return f"preemption: {info.get('why', 'no plan')}"
    return f"{stage}: {info.get('reason', '')}"

"""The tiered scheduler: the tier stages of a scheduling profile, behind the tiers API.

The stages themselves (request rounding, own pool, borrow, preempt) live in
``seedance.profile.tiers``; this class is the profile ``tier_profile(policy, tier_config)`` with
the ``decide(..., tier=, running=, now=)`` signature the tiers API has always had. Drivers build
their profile with ``seedance.profile.build_profile`` instead.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision
from seedance.core.resources import ResourceRequest
from seedance.profile.build import tier_profile
from seedance.profile.tiers import STAGE_BORROW, STAGE_OWN, STAGE_PREEMPT
from seedance.scheduling.framework import PlacementPolicy
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.preemption import RunningPods

BoolA = NDArray[np.bool_]

__all__ = ["STAGE_BORROW", "STAGE_OWN", "STAGE_PREEMPT", "TieredScheduler"]


class TieredScheduler:
    """Own pool → borrowed pools → preemption, for pods of SLA tiers (a profile's tier stages).

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
        self.profile = tier_profile(policy, tier_config, explain=explain)

    def pools(self, view: ClusterState, tier: str) -> dict[str, BoolA]:
        """Masks of the nodes a tier may use: ``{"own": ..., "borrow": ...}``."""
        pools = self.profile.pools
        assert pools is not None
        out = {"own": pools.pool_mask(view, tier, "own")}
        if pools.can_borrow(tier):
            out["borrow"] = pools.pool_mask(view, tier, "borrow")
        return out

    def decide(
        self, view: ClusterState, req: ResourceRequest, pod: int, *, tier: str, running: RunningPods, now: float,
    ) -> Decision:
        """Decide for one pod of ``tier`` (``seedance.profile.tiers`` has the stages)."""
        return self.profile.decide(view, req, pod, tier=tier, running=running, now=now)

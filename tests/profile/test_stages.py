"""The stage API on hand-built clusters: exact decisions, reasons and stage order."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.decision import Decision, Outcome, Placement
from seedance.core.resources import ResourceRequest
from seedance.profile import Attempt, Fallback, SchedulingProfile, build_profile, profile_of_policy
from seedance.profile.config import TiersConfig
from seedance.scheduling import Scheduler, make_policy

GOLD = {"gpu.sla.level": "gold", "gpu.mode": "exclusive"}


def cluster() -> ClusterState:
    return ClusterState(ClusterSpec((
        NodeSpec("bronze", 16_000, 65_536, 1, "T4", {"gpu.sla.level": "bronze"}),
        NodeSpec("gold", 64_000, 262_144, 8, "A100-80GB", GOLD),
        NodeSpec("bare", 8_000, 16_384, 0, None, {}),
    )))


SHARE = ResourceRequest(cpu_milli=2000, memory_mib=4096, num_gpu=1, gpu_milli=250)


def tiered(**kw: Any) -> SchedulingProfile:
    return build_profile(profile_of_policy("best-fit", tiers=TiersConfig(enabled=True, **kw)), cluster())


def test_without_a_tier_the_profile_is_the_framework_scheduler() -> None:
    state = cluster()
    prof = build_profile(profile_of_policy("best-fit"), state)
    assert prof.decide(state, SHARE, 7) == Scheduler(make_policy("best-fit")).decide(state, SHARE, 7)


def test_own_pool_first_then_borrow_as_a_whole_gpu() -> None:
    state = cluster()
    prof = tiered(fallbacks=("borrow",))
    d = prof.decide(state, SHARE, 1, tier="bronze")
    assert (d.placement, d.explanation["stage"]) == (Placement(0, (0,), 250, 2000, 4096), "own-pool")
    prof.apply(state, prof.decide(state, ResourceRequest(cpu_milli=1000, memory_mib=1024, num_gpu=1,
                                                          gpu_milli=1000), 2, tier="bronze"))
    d = prof.decide(state, SHARE, 3, tier="bronze")
    assert d.placement == Placement(1, (0,), 1000, 2000, 4096)
    assert d.explanation["stage"] == "borrow" and d.explanation["request"]["borrowed_as_whole_gpu"] is True
    assert d.reason.startswith("bronze: best-fit: best of 1 feasible node(s) in borrowed pool (gpu.sla.level in [gold")
    # a pod that does not accept borrowing waits, with the own pool's reason
    d = prof.decide(state, SHARE, 4, tier="bronze", borrow=False)
    assert d.outcome is Outcome.PENDING
    assert d.reason == "bronze: pending: own-pool: no node fits now (GpuFit rejects 2 of 3)"


def test_admission_reasons_and_resolvability() -> None:
    state = cluster()
    prof = tiered(fallbacks=("borrow",))
    adm = prof.admit(Attempt(state, SHARE, tier="bronze"))
    assert adm.ok.tolist() == [True, False, False]
    assert adm.reason(1) == "tier bronze needs gpu.sla.level in [bronze]"
    assert adm.reason(2) == "node has no GPU"
    assert adm.resolvable.tolist() == [False, False, False]
    big = ResourceRequest(cpu_milli=32_000, memory_mib=1024, num_gpu=1, gpu_milli=1000)
    adm = prof.admit(Attempt(state, big, tier="bronze", only=np.array([True, False, False])))
    assert adm.reason(0) == "node can never fit 32000m CPU, 1024Mi memory, 1 GPU"
    assert not adm.resolvable[0]


class Reserve(Fallback):
    """A test fallback: books the first idle GPU of any node, explained."""

    name: ClassVar[str] = "reserve"

    def attempt(self, profile: SchedulingProfile, att: Attempt, req: ResourceRequest, head: dict[str, Any],
                trail: dict[str, Any]) -> Decision | None:
        trail[self.name] = {"reason": "tried after borrow"}
        return Decision(att.pod, Outcome.BIND, Placement(1, (7,), 1000, req.cpu_milli, req.memory_mib),
                        reason="reserved", explanation={**head, "stage": self.name, "stages": dict(trail)})


def test_fallbacks_run_in_order_and_compose() -> None:
    state = cluster()
    base = tiered(fallbacks=("borrow",))
    prof = SchedulingProfile(base.policy, base.filters, adapters=base.adapters, pools=base.pools,
                             fallbacks=(*base.fallbacks, Reserve()))
    gold = ResourceRequest(cpu_milli=200_000, memory_mib=1024, num_gpu=1, gpu_milli=1000)
    d = prof.decide(state, gold, 9, tier="gold")
    assert d.reason == "reserved" and d.explanation["stage"] == "reserve"
    assert list(d.explanation["stages"]) == ["own-pool", "reserve"]  # gold has no lender pools

"""The preemption stage and the tiered scheduler on hand-built snapshots, with exact expectations."""

from __future__ import annotations

import numpy as np
import pytest

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.decision import Outcome, Placement
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import make_policy
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.preemption import RunningPod, RunningPods, VictimSearch, last_checkpoint, select_victims
from seedance.tiers.scheduler import TieredScheduler

T4 = 0.35  # catalog $/GPU-hour of the T4 (the price the victims' cost uses)
GOLD_LABELS = {"gpu.sla.level": "gold", "gpu.mode": "exclusive"}
BRONZE_LABELS = {"gpu.sla.level": "bronze", "gpu.mode": "shared"}


def cluster(*nodes: tuple[str, int, dict[str, str]]) -> ClusterState:
    """Nodes ``(name, GPUs, labels)``: T4 GPUs, 64 cores, 256 GiB."""
    return ClusterState(
        ClusterSpec(
            nodes=tuple(
                NodeSpec(name=n, cpu_milli=64000, memory_mib=262144, gpu_count=g, gpu_model="T4", labels=lab)
                for n, g, lab in nodes
            )
        )
    )


def run(
    st: ClusterState, rp: RunningPods, pod: int, tier: str, node: int, gpus: tuple[int, ...], *,
    started: float, borrowed: bool = True, milli: int = 1000, cpu: int = 1000,
) -> None:
    p = Placement(node, gpus, milli if gpus else 0, cpu, 1024)
    st.apply(p)
    spec = DEFAULT_TIER_CONFIG.tiers[tier]
    rp.add(RunningPod(pod, tier, p, started, borrowed=borrowed, checkpoint_s=spec.checkpoint_interval_s,
                      usd_per_gpu_hour=T4))


def whole(k: int) -> ResourceRequest:
    return ResourceRequest(cpu_milli=1000, memory_mib=1024, num_gpu=k, gpu_milli=1000)


def search(
    st: ClusterState, rp: RunningPods, req: ResourceRequest, tier: str, now: float,
    cfg: TierConfig = DEFAULT_TIER_CONFIG,
) -> VictimSearch:
    return select_victims(st, req, pod=99, tier=tier, tier_config=cfg, running=rp, now=now,
                          candidates=np.arange(st.n_nodes))


def test_last_checkpoint() -> None:
    assert last_checkpoint(100.0, 600.0, 1900.0) == 1900.0
    assert last_checkpoint(100.0, 600.0, 1899.0) == 1300.0
    assert last_checkpoint(100.0, 0.0, 5000.0) == 100.0


def test_cheapest_victim_set_wins_and_every_victim_is_explained() -> None:
    st = cluster(("g0", 4, GOLD_LABELS), ("g1", 4, GOLD_LABELS))
    rp = RunningPods()
    run(st, rp, 10, "bronze", 0, (0, 1), started=0.0)  # lost 2000-1800 = 200 s x 2 GPUs
    run(st, rp, 11, "silver", 0, (2,), started=100.0)  # lost 2000-1900 = 100 s, silver penalty $1
    run(st, rp, 12, "gold", 0, (3,), started=0.0, borrowed=False)
    run(st, rp, 20, "bronze", 1, (0, 1, 2, 3), started=0.0)  # one pod on 4 GPUs: 200 s x 4 GPUs
    res = search(st, rp, whole(2), "gold", 2000.0)
    assert res.plan is not None and res.plan.node == 0
    (v,) = res.plan.victims
    assert (v.pod, v.kind, v.lost_work_s, v.gpus) == (10, "reclaim", 200.0, 2.0)
    assert v.cost_usd == pytest.approx(200 / 3600 * 2 * T4 + 0.1)
    assert res.plan.placement == Placement(0, (0, 1), 1000, 1000, 1024)
    assert res.explanation["node"] == "g0"
    assert res.explanation["alternatives"] == [
        {"node": "g1", "cost_usd": round(200 / 3600 * 4 * T4 + 0.1, 6), "victims": 1}
    ]
    (pre,) = res.plan.preemptions(99, "gold", 2)
    assert pre.victim == 10 and pre.node == 0
    assert pre.reason.startswith("reclaim bronze pod 10: ran 2000 s (protected for 0 s), 200 s since last checkpoint")
    assert "for gold pod 99 (cheapest victim set of 2 candidate node(s))" in pre.reason


def test_useless_cheap_victims_are_pruned() -> None:
    st = cluster(("g0", 1, GOLD_LABELS))
    rp = RunningPods()
    run(st, rp, 1, "bronze", 0, (), started=0.0, cpu=1000)  # CPU-only: costs the penalty only
    run(st, rp, 2, "bronze", 0, (0,), started=0.0)
    res = search(st, rp, whole(1), "gold", 2000.0)
    assert res.plan is not None and [v.pod for v in res.plan.victims] == [2]


def test_gold_is_never_a_victim_and_rights_are_respected() -> None:
    st = cluster(("g0", 2, GOLD_LABELS))
    rp = RunningPods()
    run(st, rp, 1, "gold", 0, (0,), started=0.0, borrowed=False)
    run(st, rp, 2, "silver", 0, (1,), started=0.0)
    gold = search(st, rp, whole(2), "gold", 5000.0)
    assert gold.plan is None and gold.explanation["protected"]["not_preemptible"] == 1
    silver = search(st, rp, whole(1), "silver", 5000.0)  # silver may not evict silver (nor gold)
    assert silver.plan is None and silver.explanation["protected"] == {
        "not_preemptible": 1, "min_runtime": 0, "no_right": 1}
    bronze = search(st, rp, whole(1), "bronze", 5000.0)
    assert bronze.plan is None and "may preempt no tier" in bronze.explanation["why"]


def test_min_runtime_protects_and_says_when_it_ends() -> None:
    st = cluster(("g0", 1, GOLD_LABELS))
    rp = RunningPods()
    # not borrowed: bronze's own min-runtime (300 s) applies
    run(st, rp, 1, "bronze", 0, (0,), started=1900.0, borrowed=False)
    res = search(st, rp, whole(1), "gold", 2000.0)
    assert res.plan is None and res.retry_at == 2200.0
    assert res.explanation["protected"]["min_runtime"] == 1
    later = search(st, rp, whole(1), "gold", 2200.0)
    assert later.plan is not None and later.plan.victims[0].min_runtime_s == 300.0
    # a borrowed pod is protected by the reclaim min-runtime of its tier instead
    cfg = DEFAULT_TIER_CONFIG.model_copy(update={"tiers": {
        **DEFAULT_TIER_CONFIG.tiers,
        "bronze": DEFAULT_TIER_CONFIG.tiers["bronze"].model_copy(update={"reclaim_min_runtime_s": 60.0}),
    }})
    rp2 = RunningPods()
    st2 = cluster(("g0", 1, GOLD_LABELS))
    run(st2, rp2, 1, "bronze", 0, (0,), started=1950.0)
    assert search(st2, rp2, whole(1), "gold", 2000.0, cfg=cfg).retry_at == 2010.0
    assert search(st2, rp2, whole(1), "gold", 2010.0, cfg=cfg).plan is not None


# ---------------------------------------------------------------- the tiered scheduler
def scheduler() -> TieredScheduler:
    return TieredScheduler(make_policy("best-fit"), explain=True)


def test_own_pool_first_then_borrow_as_a_whole_gpu() -> None:
    st = cluster(("g0", 2, GOLD_LABELS), ("b0", 1, BRONZE_LABELS))
    rp = RunningPods()
    sch = scheduler()
    share = ResourceRequest(cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=300)
    d = sch.decide(st, share, 1, tier="gold", running=rp, now=0.0)
    assert d.outcome is Outcome.BIND and d.placement == Placement(0, (0,), 1000, 1000, 1024)
    assert d.explanation["stage"] == "own-pool" and d.explanation["request"]["rounded_up_from_milli"] == 300
    b = sch.decide(st, share, 2, tier="bronze", running=rp, now=0.0)
    assert b.placement == Placement(1, (0,), 300, 1000, 1024) and b.explanation["borrowed"] is False
    run(st, rp, 2, "bronze", 1, (0,), started=0.0, borrowed=False, milli=1000)  # bronze pool now full
    b2 = sch.decide(st, share, 3, tier="bronze", running=rp, now=0.0)
    assert b2.explanation["stage"] == "borrow" and b2.explanation["borrowed"] is True
    assert b2.placement is not None and b2.placement.node == 0 and b2.placement.gpu_milli == 1000
    assert b2.explanation["request"]["borrowed_as_whole_gpu"] is True
    assert "in borrowed pool (gpu.sla.level in [gold, silver])" in b2.reason


def test_preempt_then_pending_then_reject() -> None:
    st = cluster(("g0", 2, GOLD_LABELS))
    rp = RunningPods()
    sch = scheduler()
    run(st, rp, 1, "bronze", 0, (0, 1), started=0.0)
    d = sch.decide(st, whole(1), 5, tier="gold", running=rp, now=100.0)
    assert d.outcome is Outcome.BIND and d.explanation["stage"] == "preempt"
    assert [p.victim for p in d.preemptions] == [1] and d.placement == Placement(0, (0,), 1000, 1000, 1024)
    assert d.explanation["preemption"]["victims"][0]["lost_work_s"] == 100.0
    s = sch.decide(st, whole(1), 6, tier="silver", running=rp, now=100.0)  # no silver node, gold full of bronze
    assert s.outcome is Outcome.PENDING
    assert set(s.explanation["stages"]) == {"own-pool", "borrow", "preemption"}
    assert s.reason.startswith("silver: pending: own-pool: no node fits now")
    r = sch.decide(st, whole(4), 7, tier="gold", running=rp, now=100.0)
    assert r.outcome is Outcome.REJECT and "could ever host" in r.reason

"""Exact placements of every built-in policy on tiny hand-built clusters.

Cluster (see ``make_cluster``): n0 = 32 cores, 2×T4; n1 = 64 cores, 4×G2; n2 = 16 cores, 1×T4.
Expected scores are worked out by hand in each test from the policy's documented formula.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.conftest import make_cluster, occupy

from seedance.core.cluster import ClusterState
from seedance.core.decision import Outcome
from seedance.core.errors import UnknownNameError
from seedance.core.resources import ResourceRequest
from seedance.scheduling import PLACEMENT_POLICIES, PolicyContext, Scheduler, make_policy
from seedance.scheduling.tasktypes import TaskTypes

SHARE = ResourceRequest(cpu_milli=4000, memory_mib=1024, num_gpu=1, gpu_milli=500)
WHOLE = ResourceRequest(cpu_milli=4000, memory_mib=1024, num_gpu=1, gpu_milli=1000)


def decide(
    policy: str, state: ClusterState, req: ResourceRequest, **ctx: object
) -> tuple[int, tuple[int, ...], int | None]:
    d = Scheduler(make_policy(policy, PolicyContext(**ctx))).decide(state, req, 0)  # type: ignore[arg-type]
    assert d.outcome is Outcome.BIND and d.placement is not None
    return d.placement.node, d.placement.gpus, d.score


def scores(policy: str, state: ClusterState, req: ResourceRequest, **ctx: object) -> list[int]:
    pol = make_policy(policy, PolicyContext(**ctx))  # type: ignore[arg-type]
    return pol.score(state, req, np.arange(state.n_nodes)).tolist()


def test_registry_names_and_unknown_policy() -> None:
    make_policy("best-fit")
    assert {"random", "dot-product", "best-fit", "packing", "clustering", "fgd"} <= set(
        PLACEMENT_POLICIES.names()
    )
    with pytest.raises(UnknownNameError, match="valid names: .*best-fit"):
        make_policy("worst-fit")


def test_best_fit() -> None:
    st = ClusterState(make_cluster())
    # acc = 0.5*(cpu_free-4000)/128000 + 0.5*(gpu_free-500)/8000
    # n0: 0.109375+0.09375 → 79; n1: 0.234375+0.21875 → 54; n2: 0.046875+0.03125 → 92
    assert scores("best-fit", st, SHARE) == [79, 54, 92]
    assert decide("best-fit", st, SHARE) == (2, (0,), 92)


def test_dot_product_prefers_the_smallest_dot() -> None:
    st = ClusterState(make_cluster())
    # node [cpu_free/128000, gpu_free/8000] · pod [4000/128000, 1000/8000]:
    # n0: .25*.03125+.25*.125=.0390625 → int(100*(1-.01953125))=98; n1: .078125 → 96; n2: .01953125 → 99
    assert scores("dot-product", st, WHOLE) == [98, 96, 99]
    assert decide("dot-product", st, WHOLE) == (2, (0,), 99)


def test_packing_fills_shared_gpus_first() -> None:
    st = ClusterState(make_cluster())
    occupy(st, 1, (0,), 600)  # n1 GPU0 has 400 free
    req = ResourceRequest(4000, 1024, 1, 300)
    # n0 idle, F=2: max(33-2,2)=31; n1 tightest fitting GPU has 400: 100-(400*100//1000)//10=96; n2 idle F=1: 32
    assert scores("packing", st, req) == [31, 96, 32]
    assert decide("packing", st, req) == (1, (0,), 96)
    # whole GPU: n1 busy with u=1 idle GPU taken → max(50-1,33)=49 beats idle nodes 31/32
    assert scores("packing", st, WHOLE) == [31, 49, 32]
    assert decide("packing", st, WHOLE) == (1, (1,), 49)
    # CPU-only pods score 0 everywhere: the rank decides
    st.set_rank([1, 2, 0])
    assert decide("packing", st, ResourceRequest(1000, 10)) == (2, (), 0)


def test_clustering_keeps_kinds_together() -> None:
    st = ClusterState(make_cluster())
    occupy(st, 1, (0,), 600)
    # base = 25*(8000-free)//8000: n0 18, n1 14, n2 21. share: n1 hosts only shares → +75; idle nodes +25
    assert scores("clustering", st, SHARE) == [43, 89, 46]
    assert decide("clustering", st, SHARE) == (1, (1,), 89)  # GPU0 has only 400 free
    # whole GPU: n1 hosts another kind only → +0
    assert scores("clustering", st, WHOLE) == [43, 14, 46]
    assert decide("clustering", st, WHOLE)[0] == 2


def test_random_is_seeded_and_picks_a_random_fitting_gpu() -> None:
    st = ClusterState(make_cluster())
    occupy(st, 0, (0,), 1000)
    occupy(st, 1, (0, 1, 2, 3), 1000)  # only n0 GPU1 and n2 GPU0 can take a whole GPU
    picks = {decide("random", st, WHOLE, seed=s)[:2] for s in range(20)}
    assert picks == {(0, (1,)), (2, (0,))}
    assert decide("random", st, WHOLE, seed=7) == decide("random", st, WHOLE, seed=7)
    big = ClusterState(make_cluster([(64000, 1 << 20, 4, "G2")]))
    gpus = {decide("random", big, SHARE, seed=s)[1] for s in range(30)}
    assert gpus == {(0,), (1,), (2,), (3,)}


def test_fgd_picks_the_node_and_gpu_that_fragment_least() -> None:
    # target workload: half 0.5-GPU pods, half whole-GPU pods (1 core each)
    types = TaskTypes.from_counts(
        [((1000, 500, 1, ""), 1), ((1000, 1000, 1, ""), 1)], {"": ()}, threshold=1.0
    )
    st = ClusterState(make_cluster([(32000, 1 << 20, 2, "T4"), (32000, 1 << 20, 2, "T4")]))
    occupy(st, 1, (0,), 500)  # n1 = [500, 1000]: whole-GPU type cannot use GPU0 → frag 0.5*500 = 250
    req = ResourceRequest(1000, 1, 1, 500)
    # n0 [1000,1000] → [500,1000]: frag 0 → 250, Δ=-250 → int(100*sigmoid(-0.25)) = 43
    # n1 GPU0 → [0,1000]: frag 250 → 0, Δ=+250 → 56; n1 GPU1 → [500,500]: frag → 500, Δ=-250 → 43
    assert scores("fgd", st, req, task_types=types) == [43, 56]
    assert decide("fgd", st, req, task_types=types) == (1, (0,), 56)


def test_fgd_needs_the_target_workload() -> None:
    with pytest.raises(ValueError, match="task types"):
        make_policy("fgd")


def test_ties_go_to_the_lowest_rank() -> None:
    st = ClusterState(make_cluster([(32000, 1 << 20, 2, "T4")] * 4))
    st.set_rank([3, 1, 0, 2])
    assert decide("best-fit", st, SHARE)[0] == 2
    st.set_rank([0, 1, 2, 3])
    assert decide("best-fit", st, SHARE)[0] == 0


def test_filters_and_pending_reasons() -> None:
    st = ClusterState(make_cluster())
    sched = Scheduler(make_policy("best-fit"), explain=True)
    d = sched.decide(st, ResourceRequest(1000, 10, 1, 1000, ("V100-32GB",)), 5)
    assert d.outcome is Outcome.REJECT and "could ever fit" in d.reason
    occupy(st, 1, (0, 1, 2, 3), 1000)
    d = sched.decide(st, ResourceRequest(1000, 10, 4, 1000), 6)
    assert d.outcome is Outcome.PENDING and d.explanation["rejected_by"]["GpuFit"] == 3
    d = sched.decide(st, SHARE, 7)
    assert d.bound and d.explanation["feasible_nodes"] == 2 and d.explanation["node"] == "n2"
    assert [t["node"] for t in d.explanation["top"]] == ["n2", "n0"]
    st.set_schedulable(2, False)
    assert sched.decide(st, SHARE, 8).placement.node == 0  # type: ignore[union-attr]


def test_gpu_type_constraint_and_memory_filter() -> None:
    st = ClusterState(make_cluster())
    assert decide("best-fit", st, ResourceRequest(1000, 10, 1, 1000, ("G2",)))[0] == 1
    with pytest.raises(AssertionError):
        decide("best-fit", st, ResourceRequest(1000, 10**7, 0, 0))

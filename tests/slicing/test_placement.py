"""MIG-aware placement on tiny clusters: exact placements, and invariants under random workloads."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision, Outcome
from seedance.core.resources import ResourceRequest, SliceBackend
from seedance.scheduling.framework import PolicyContext, Scheduler, make_policy
from seedance.slicing.mig import Instance, is_legal, layout_mask, mig_gpu
from seedance.slicing.placement import MigLedger, SliceScheduler, parse_mig_map
from tests.conftest import make_cluster

G2 = {"G2": "A100-80GB"}


def share(milli: int, *backends: SliceBackend, cpu: int = 4000) -> ResourceRequest:
    return ResourceRequest(cpu_milli=cpu, memory_mib=8192, num_gpu=1, gpu_milli=milli, backends=backends)


def whole(k: int = 1) -> ResourceRequest:
    return ResourceRequest(cpu_milli=4000, memory_mib=8192, num_gpu=k, gpu_milli=1000)


def setup(
    nodes: Sequence[tuple[int, int, int, str | None]], mig_map: dict[str, str], policy: str = "best-fit"
) -> tuple[ClusterState, SliceScheduler]:
    state = ClusterState(make_cluster(nodes))
    return state, SliceScheduler(make_policy(policy), MigLedger(state, mig_map))


def place(state: ClusterState, sched: SliceScheduler, req: ResourceRequest) -> Decision:
    d = sched.decide(state, req)
    sched.apply(state, d)
    return d


def mig_of(d: Decision) -> tuple[int, int, str, int]:
    assert d.placement is not None
    info = d.explanation["slice"]
    return d.placement.node, d.placement.gpus[0], info["profile"], info["start"]


def test_a_mig_gpu_takes_4g_then_3g_and_then_nothing() -> None:
    state, sched = setup([(64000, 262144, 1, "G2")], G2)
    a = place(state, sched, share(470))
    b = place(state, sched, share(300))
    assert mig_of(a) == (0, 0, "4g.40gb", 0) and a.placement.gpu_milli == 571  # type: ignore[union-attr]
    assert mig_of(b) == (0, 0, "3g.40gb", 4) and b.placement.gpu_milli == 428  # type: ignore[union-attr]
    c = sched.decide(state, share(100))
    assert c.outcome is Outcome.PENDING and "SliceFit" in c.reason
    # the same three requests fit with free fractional sharing
    free_state, free_sched = setup([(64000, 262144, 1, "G2")], {})
    assert all(place(free_state, free_sched, share(m)).bound for m in (470, 300, 100))
    assert int(free_state.gpu_free[0, 0]) == 130


def test_two_3g_leave_144_milli_that_no_profile_can_use() -> None:
    state, sched = setup([(64000, 262144, 1, "G2")], G2)
    assert [mig_of(place(state, sched, share(300)))[3] for _ in range(2)] == [4, 0]
    assert int(state.gpu_free[0, 0]) == 1000 - 2 * 428  # 144 milli free ...
    assert not sched.decide(state, share(100)).bound  # ... but no free memory slice


def test_2g_shares_pack_high_first_and_spill_to_the_next_gpu() -> None:
    state, sched = setup([(64000, 262144, 2, "G2")], G2)
    got = [mig_of(place(state, sched, share(250)))[1:] for _ in range(4)]
    assert got == [(0, "2g.20gb", 4), (0, "2g.20gb", 2), (0, "2g.20gb", 0), (1, "2g.20gb", 4)]
    assert mig_of(place(state, sched, share(100)))[1:] == (0, "1g.10gb", 6)  # the last 1g slot of GPU 0
    led = sched.ledger
    assert led.layout(0, 0) == tuple(
        Instance(p, s) for p, s in (("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.10gb", 6))
    )
    assert int(led.occ[0, 0]) == 0x7F  # slice 7 stays empty: no 1-slice profile may start there


def test_whole_gpus_on_a_mig_pool_are_7g_instances() -> None:
    state, sched = setup([(64000, 262144, 2, "G2")], G2)
    place(state, sched, share(100))
    d = place(state, sched, whole())
    assert d.placement is not None and d.placement.gpus == (1,)
    assert sched.ledger.layout(0, 1) == (Instance("7g.80gb", 0),)
    assert not sched.decide(state, whole()).bound  # GPU 0 holds a 1g instance
    assert not sched.decide(state, share(600)).bound  # a 7g needs an idle GPU
    assert sched.decide(state, share(400)).bound  # 3g@0 still fits on GPU 0


def test_shares_go_where_the_policy_scores_them_and_tiers_restrict_pools() -> None:
    nodes = [(64000, 262144, 1, "G2"), (16000, 65536, 1, "T4")]
    state, sched = setup(nodes, G2)
    d = place(state, sched, share(250))
    assert d.placement is not None and d.placement.node == 1  # best-fit: the tighter T4 node
    assert d.explanation["slice"]["backend"] == "mps" and d.explanation["slice"]["gpu_model"] == "T4"
    # silver (whole or MIG) cannot use MPS on the T4: a MIG slice on G2
    d2 = place(state, sched, share(250, SliceBackend.WHOLE, SliceBackend.MIG))
    assert mig_of(d2)[:3] == (0, 0, "2g.20gb")
    # gold (whole only) gets a whole GPU: none idle any more
    assert sched.decide(state, share(250, SliceBackend.WHOLE)).outcome is Outcome.PENDING
    # MPS-only shares never land on the MIG pool
    state2, sched2 = setup([(64000, 262144, 1, "G2")], G2)
    assert sched2.decide(state2, share(250, SliceBackend.MPS)).outcome is Outcome.PENDING


def test_release_gives_everything_back() -> None:
    state, sched = setup([(64000, 262144, 2, "G2"), (32000, 65536, 2, "T4")], G2)
    decisions = [place(state, sched, r) for r in (share(470), share(250), whole(), share(300), share(100))]
    assert all(d.bound for d in decisions)
    for d in reversed(decisions):
        sched.release(state, d)
    assert (state.gpu_free[state.gpu_free > 0] == 1000).all() and state.used_gpu_milli == 0
    assert not sched.ledger.occ[0].any() and all(not v for v in sched.ledger.instances.values())


def test_parse_mig_map() -> None:
    assert parse_mig_map(["G2=a100-sxm4-80gb", "V100M32=H100"]) == {"G2": "A100-80GB", "V100-32GB": "H100-80GB"}
    from seedance.core.errors import InputError

    for bad in ("G2", "G2=T4", "X9=A100-80GB"):
        with pytest.raises(InputError, match="--mig-map"):
            parse_mig_map([bad])


# ---------------------------------------------------------------------------- properties

MILLI = st.sampled_from([50, 110, 140, 160, 230, 250, 320, 370, 470, 550, 590, 810, 1000])
REQS = st.lists(st.tuples(MILLI, st.integers(1, 3), st.integers(0, 2)), min_size=1, max_size=60)
NODES = [(32000, 131072, 4, "G2"), (16000, 65536, 2, "T4"), (32000, 131072, 2, "G2"), (8000, 32768, 1, "A100-80GB")]


def _request(milli: int, k: int, tier: int) -> ResourceRequest:
    backends = ((), (SliceBackend.WHOLE, SliceBackend.MIG), (SliceBackend.WHOLE,))[tier]
    if milli == 1000:
        return ResourceRequest(cpu_milli=2000, memory_mib=4096, num_gpu=k, gpu_milli=1000, backends=backends)
    return share(milli, *backends, cpu=2000)


def _check_invariants(state: ClusterState, led: MigLedger) -> None:
    assert (state.gpu_free >= 0).all() and (state.gpu_free <= 1000).all()
    for node in np.flatnonzero(led.is_mig):
        g = led.gpu_of(int(node))
        assert g is not None
        for gpu in range(int(state.gpu_count[node])):
            lay = led.layout(int(node), gpu)
            assert is_legal(g, lay)
            masks = [g.profile(i.profile).mask(i.start) for i in lay]
            assert sum(bin(m).count("1") for m in masks) == bin(layout_mask(g, lay)).count("1")  # no overlap
            assert int(led.occ[node, gpu]) == layout_mask(g, lay)
            booked = sum(g.profile(i.profile).milli for i in lay)
            assert booked == 1000 - int(state.gpu_free[node, gpu])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=REQS, policy=st.sampled_from(["best-fit", "packing", "dot-product"]), releases=st.randoms())
def test_no_gpu_over_1000_milli_and_mig_slices_never_overlap(
    reqs: list[tuple[int, int, int]], policy: str, releases: object
) -> None:
    state, sched = setup(NODES, G2, policy)
    live: list[Decision] = []
    for milli, k, tier in reqs:
        d = sched.decide(state, _request(milli, k, tier))
        if d.bound:
            sched.apply(state, d)
            live.append(d)
        _check_invariants(state, sched.ledger)
        if live and len(live) % 5 == 0:  # some departures
            sched.release(state, live.pop(releases.randrange(len(live))))  # type: ignore[attr-defined]
            _check_invariants(state, sched.ledger)
    for d in live:
        sched.release(state, d)
    assert state.used_gpu_milli == 0 and not any(sched.ledger.instances.values())


@settings(max_examples=30, deadline=None)
@given(reqs=REQS, policy=st.sampled_from(["best-fit", "packing", "clustering", "dot-product"]))
def test_without_mig_pools_every_decision_equals_the_plain_scheduler(
    reqs: list[tuple[int, int, int]], policy: str
) -> None:
    spec = make_cluster(NODES)
    a, b = ClusterState(spec), ClusterState(spec)
    plain = Scheduler(make_policy(policy, PolicyContext(seed=1)))
    sliced = SliceScheduler(make_policy(policy, PolicyContext(seed=1)), MigLedger(b, {}, native=False))
    for milli, k, _ in reqs:
        req = _request(milli, k, 0)
        da, db = plain.decide(a, req), sliced.decide(b, req)
        assert da.placement == db.placement and da.outcome == db.outcome
        if da.placement is not None:
            a.apply(da.placement)
            sliced.apply(b, db)


def test_native_mig_models_are_pools_unless_disabled() -> None:
    state = ClusterState(make_cluster(NODES))
    assert MigLedger(state, {}).is_mig.tolist() == [False, False, False, True]
    assert MigLedger(state, G2).is_mig.tolist() == [True, False, True, True]
    assert not MigLedger(state, {}, native=False).any_mig
    assert MigLedger(state, {"G2": "H200"}).gpu_of(0) is mig_gpu("H200")

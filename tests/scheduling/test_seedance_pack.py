"""The ``seedance`` packer: online learning only, CPU/memory awareness, packing tie-breaks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import make_cluster, occupy

from seedance.core.cluster import ClusterState
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.scheduling import PolicyContext, Scheduler, make_policy
from seedance.scheduling.online import OnlineMix
from seedance.scheduling.policies.seedance_pack import SeedancePacker, refresh_scale


def packer(**options: object) -> Scheduler:
    return Scheduler(make_policy("seedance", PolicyContext(options=dict(options))))


def teach(sched: Scheduler, reqs: list[ResourceRequest], times: int = 1) -> None:
    for _ in range(times):
        for r in reqs:
            sched.policy.observe(r)


def test_online_mix_counts_only_what_it_saw() -> None:
    mix = OnlineMix()
    assert len(mix.snapshot()) == 0
    for r in [ResourceRequest(4000, 1000, 1, 500)] * 3 + [ResourceRequest(8000, 3000, 1, 1000)]:
        mix.observe(r)
    snap = mix.snapshot()
    assert snap.seen == 4 and snap.freq.tolist() == [0.75, 0.25]
    assert snap.milli.tolist() == [500, 1000] and snap.mem.tolist() == [1000.0, 3000.0]


def test_cpu_only_pod_goes_where_it_strands_no_gpu() -> None:
    # n0: 8 GPUs with 96 cores (12 per GPU); n1: 2 GPUs with 104 cores. GPU pods need 10 cores per GPU.
    st_ = ClusterState(make_cluster([(96000, 1 << 20, 8, "G2"), (104000, 1 << 20, 2, "T4")]))
    sched = packer()
    teach(sched, [ResourceRequest(10000, 1024, 1, 1000)], times=20)
    d = sched.decide(st_, ResourceRequest(40000, 1024), 0)
    assert d.placement is not None and d.placement.node == 1


def test_cpu_heavy_gpu_pod_goes_to_the_cpu_rich_node() -> None:
    st_ = ClusterState(make_cluster([(96000, 1 << 20, 8, "G2"), (104000, 1 << 20, 2, "T4")]))
    sched = packer()
    teach(sched, [ResourceRequest(10000, 1024, 1, 1000)] * 9 + [ResourceRequest(40000, 1024, 1, 1000)], times=5)
    d = sched.decide(st_, ResourceRequest(40000, 1024, 1, 1000), 0)
    assert d.placement is not None and (d.placement.node, d.placement.gpus) == (1, (0,))


def test_share_fills_the_gap_it_fits_best() -> None:
    st_ = ClusterState(make_cluster([(64000, 1 << 20, 4, "G2")] * 3))
    occupy(st_, 0, (1,), 810, cpu=4000)  # n0 GPU1 has a 190 gap
    occupy(st_, 1, (2,), 530, cpu=4000)  # n1 GPU2 has a 470 gap
    sched = packer()
    teach(sched, [ResourceRequest(4000, 1024, 1, m) for m in (810, 470, 470, 160, 1000)], times=10)
    d = sched.decide(st_, ResourceRequest(4000, 1024, 1, 470), 0)
    assert d.placement is not None and (d.placement.node, d.placement.gpus) == (1, (2,))
    d = sched.decide(st_, ResourceRequest(2000, 1024, 1, 160), 1)
    assert d.placement is not None and (d.placement.node, d.placement.gpus) == (0, (1,))


def test_unknown_score_mode_is_refused() -> None:
    with pytest.raises(InputError, match="'sigmoid\\+fit'"):
        make_policy("seedance", PolicyContext(options={"score": "magic"}))


def test_unknown_option_names_the_valid_ones() -> None:
    with pytest.raises(InputError, match="unknown option 'balanse'.*valid options: memory, fgd_weight"):
        make_policy("seedance", PolicyContext(options={"balanse": 1.0}))


REQ = st.one_of(
    st.tuples(st.integers(1000, 16000), st.just(1), st.sampled_from([160, 320, 470, 810])),
    st.tuples(st.integers(1000, 16000), st.sampled_from([1, 2]), st.just(1000)),
    st.tuples(st.integers(1000, 16000), st.just(0), st.just(0)),
).map(lambda t: ResourceRequest(t[0], 2048, t[1], t[2]))


@settings(max_examples=25, deadline=None)
@given(
    prefix=st.lists(REQ, min_size=1, max_size=25), tail_a=st.lists(REQ, max_size=10), tail_b=st.lists(REQ, max_size=10)
)
def test_decisions_never_depend_on_future_pods(
    prefix: list[ResourceRequest], tail_a: list[ResourceRequest], tail_b: list[ResourceRequest]
) -> None:
    spec = make_cluster([(64000, 1 << 20, 4, "G2")] * 3 + [(104000, 1 << 20, 2, "T4")] * 2)

    def run(reqs: list[ResourceRequest]) -> list[tuple[int, tuple[int, ...]] | None]:
        state, sched = ClusterState(spec), packer()
        out: list[tuple[int, tuple[int, ...]] | None] = []
        for i, r in enumerate(reqs):
            sched.policy.observe(r)
            d = sched.decide(state, r, i)
            if d.placement is not None:
                state.apply(d.placement)
                out.append((d.placement.node, d.placement.gpus))
            else:
                out.append(None)
        assert (state.gpu_free >= 0).all() and (state.gpu_free <= 1000).all()
        return out

    a, b = run(prefix + tail_a), run(prefix + tail_b)
    assert a[: len(prefix)] == b[: len(prefix)]
    assert np.array_equal(
        np.array([x is None for x in a[: len(prefix)]]), np.array([x is None for x in b[: len(prefix)]])
    )


def test_gap_loss_table_counts_what_common_shares_cannot_fill() -> None:
    from seedance.scheduling.policies.seedance_pack import CopiesFragModel

    mix = OnlineMix()
    for m, n in ((470, 40), (320, 30), (650, 25), (160, 2), (1000, 50)):  # 160: 2 of 97 shares, not common
        for _ in range(n):
            mix.observe(ResourceRequest(4000, 1024, 1, m))
    loss = CopiesFragModel._gap_loss_table(mix.snapshot(), 0.03)
    assert [loss[f] for f in (0, 210, 350, 530, 680, 1000)] == [0, 210, 30, 60, 30, 0]
    assert loss[190] == 190  # the 160s are too rare to count on
    assert CopiesFragModel._gap_loss_table(mix.snapshot(), 0.01)[190] == 30


def test_a_share_avoids_a_gap_that_common_shares_cannot_fill_afterwards() -> None:
    # GPU0 holds a 320 (680 free): a 470 there leaves 210, which no common share fills; on the idle
    # GPU1 it leaves 530, which the next 470 fills to 60.
    st_ = ClusterState(make_cluster([(64000, 1 << 20, 2, "G2")]))
    occupy(st_, 0, (0,), 320, cpu=4000)
    mix = [ResourceRequest(4000, 1024, 1, m) for m in (470, 470, 320, 650, 1000, 1000)]
    sched = packer()
    teach(sched, mix, times=10)
    d = sched.decide(st_, ResourceRequest(4000, 1024, 1, 470), 0)
    assert d.placement is not None and d.placement.gpus == (1,)
    old = packer(gap_loss=0.0)  # without the term, the tightest gap wins
    teach(old, mix, times=10)
    d = old.decide(st_, ResourceRequest(4000, 1024, 1, 470), 0)
    assert d.placement is not None and d.placement.gpus == (0,)


def refreshes(n_nodes: int, pods: int) -> list[int]:
    """The pods seen at each refresh of the learned mix on a cluster of ``n_nodes`` one-GPU nodes."""
    view = ClusterState(make_cluster([(8000, 1 << 16, 1, "T4")] * n_nodes))
    policy = packer().policy
    assert isinstance(policy, SeedancePacker)
    req = ResourceRequest(1000, 1024, 1, 500)
    policy.model(view)
    out = []
    for _ in range(pods):
        policy.observe(req)
        if policy._model is None:  # the refresh drops the model; the next decision rebuilds it on the cluster
            out.append(policy.mix.seen)
            policy.model(view)
    return out


def test_mix_refreshes_on_one_schedule_per_1024_nodes() -> None:
    assert [refresh_scale(n) for n in (1, 1023, 1024, 1213, 2047, 2048, 19408)] == [1, 1, 1, 1, 1, 2, 18]
    # below 2,048 nodes: as the count doubles from 32 up to 1,024 pods, then every 1,024 pods
    assert refreshes(1213, 5000) == [32, 64, 128, 256, 512, 1024, 2048, 3072, 4096]
    assert refreshes(3, 2100) == [32, 64, 128, 256, 512, 1024, 2048]
    # 2,048-4,095 nodes: the same schedule, twice the pods
    assert refreshes(2048, 9000) == [64, 128, 256, 512, 1024, 2048, 4096, 6144, 8192]

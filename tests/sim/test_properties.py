"""Hypothesis properties of the scheduling core and the simulators.

* free capacity is never negative and no GPU exceeds 1000 milli;
* allocated milli-GPU always equals the sum of what was placed (and released) so far;
* the same seed gives the same result; two simulations in one process do not interact.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import make_cluster, make_trace

from seedance.core.cluster import ClusterState
from seedance.core.resources import ResourceRequest
from seedance.scheduling import PolicyContext, Scheduler, make_policy
from seedance.scheduling.tasktypes import TaskTypes
from seedance.sim.inflation import run_inflation
from seedance.sim.replay import ReplaySimulation

POLICIES = ("random", "dot-product", "best-fit", "packing", "clustering", "fgd")

node_st = st.tuples(
    st.integers(1000, 96000),
    st.integers(1024, 1 << 20),
    st.integers(0, 8),
    st.sampled_from(["T4", "G2", "V100M32"]),
).map(lambda t: (t[0], t[1], t[2], t[3] if t[2] else None))
req_st = st.one_of(
    st.tuples(st.integers(0, 32000), st.integers(0, 65536), st.just(0), st.just(0)),
    st.tuples(st.integers(0, 32000), st.integers(0, 65536), st.just(1), st.integers(1, 1000)),
    st.tuples(st.integers(0, 32000), st.integers(0, 65536), st.sampled_from([1, 2, 4, 8]), st.just(1000)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(node_st, min_size=1, max_size=6),
    reqs=st.lists(req_st, min_size=1, max_size=40),
    policy=st.sampled_from(POLICIES),
    seed=st.integers(0, 2**16),
    releases=st.lists(st.integers(0, 39), max_size=15),
)
def test_capacity_never_negative_and_allocation_conserved(
    nodes: list[tuple[int, int, int, str | None]],
    reqs: list[tuple[int, int, int, int]],
    policy: str,
    seed: int,
    releases: list[int],
) -> None:
    state = ClusterState(make_cluster(nodes))
    requests = [ResourceRequest(*r) for r in reqs]
    types = TaskTypes.from_counts(
        [((r.cpu_milli, r.gpu_milli, r.num_gpu, ""), 1) for r in requests], {"": ()}, threshold=1.0
    )
    sched = Scheduler(make_policy(policy, PolicyContext(seed=seed, task_types=types)))
    placed = {}
    for i, req in enumerate(requests):
        d = sched.decide(state, req, i)
        if d.placement is not None:
            p = d.placement
            assert state.gpu_count[p.node] >= len(p.gpus)
            state.apply(p)
            placed[i] = p
        if i in releases and releases.index(i) % 2 == 0 and placed:
            victim = next(iter(placed))
            state.release(placed.pop(victim))
        assert (state.gpu_free >= 0).all() and (state.gpu_free <= 1000).all()
        assert (state.cpu_free >= 0).all() and (state.mem_free >= 0).all()
        assert state.used_gpu_milli == sum(p.gpu_milli * len(p.gpus) for p in placed.values())
        assert state.used_gpu_milli == state.capacity_gpu_milli - int(state.gpu_free.sum())
        assert state.live_placements() == len(placed)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(POLICIES))
def test_same_seed_same_inflation_result(seed: int, policy: str) -> None:
    spec = make_cluster([(64000, 1 << 20, 4, "G2")] * 3 + [(32000, 1 << 19, 2, "T4")] * 3)
    tr = make_trace(
        [(4000, 1024, 1, 500), (8000, 2048, 1, 1000), (2000, 512, 0, 0), (4000, 1024, 1, 250)] * 5
    )
    a = run_inflation(spec, tr, policy, seed)
    b = run_inflation(spec, tr, policy, seed)
    assert (a.alloc_pct, a.frag_pct, a.placed, a.failed) == (b.alloc_pct, b.frag_pct, b.placed, b.failed)


def test_two_replays_interleaved_in_one_process_do_not_interact() -> None:
    spec = make_cluster([(16000, 1 << 16, 2, "T4")] * 2)
    rng = np.random.default_rng(0)
    n = 60
    created = np.sort(rng.uniform(0, 1000, n))
    times = [(float(c), float(c + rng.uniform(10, 300))) for c in created]
    rows = [(int(rng.integers(1000, 8000)), 1024, 1, int(rng.choice([250, 500, 1000]))) for _ in range(n)]
    tr = make_trace(rows, times=times)

    def fresh(policy: str) -> ReplaySimulation:
        return ReplaySimulation(spec, tr, policy, seed=3)

    alone = {}
    for pol in ("best-fit", "random"):
        s = fresh(pol)
        s.run()
        alone[pol] = [(r.start, r.end) for r in s.records]
    a, b = fresh("best-fit"), fresh("random")
    order = np.argsort(tr.creation, kind="stable")
    arrivals = [(float(tr.creation[i]), int(i)) for i in order]
    for k in range(0, n, 7):  # alternate between the two simulations chunk by chunk
        chunk = arrivals[k : k + 7]
        until = chunk[-1][0]
        a.loop.run(chunk, until=until)
        b.loop.run(chunk, until=until)
    a.loop.run()
    b.loop.run()
    assert [(r.start, r.end) for r in a.records] == alone["best-fit"]
    assert [(r.start, r.end) for r in b.records] == alone["random"]

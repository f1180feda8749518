"""The scheduler's candidate index decides exactly as the scan (``Scheduler.decide_scored``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import make_cluster
from tests.sim.decisions import GOLDEN, POLICIES, default_inputs, inflation_digest, replay_digest, replay_slice

from seedance.core.cluster import ClusterState
from seedance.core.decision import Placement
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import Scheduler, make_policy
from seedance.scheduling.index import BLOCK, CandidateIndex
from seedance.scheduling.tasktypes import TaskTypes


def _state(n: int) -> ClusterState:
    kinds = [(16000, 32768, 4, "G2"), (8000, 16384, 2, "T4"), (4000, 8192, 0, None)]
    return ClusterState(make_cluster([kinds[i % 3] for i in range(n)]))


def test_best_is_the_highest_score_then_the_lowest_rank_across_blocks() -> None:
    state = _state(3 * BLOCK)
    state.set_rank(np.arange(state.n_nodes)[::-1])  # the last node has rank 0
    req = ResourceRequest(cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=500)
    sched = Scheduler(make_policy("best-fit"))
    index = sched.index(state, req)
    assert index.refresh() == 2 * BLOCK  # the CPU-only nodes have no GPU
    # every G2 node scores alike, every T4 node alike and higher (less left): lowest rank of the T4s
    node, score = index.best(0, lambda: make_policy("best-fit").node_score_fn(state, req))  # type: ignore[attr-defined]
    t4 = [i for i in range(state.n_nodes) if i % 3 == 1]
    assert node == max(t4) and score == int(100 * (1 - 0.5 * 7000 / 128000 - 0.5 * 1500 / 8000))
    assert index.nth_feasible(0) == 0 and index.nth_feasible(2 * BLOCK - 1) == 3 * BLOCK - 2
    assert index.rejections() == {"NodeSchedulable": 0, "NodeResourcesFit": 0, "GpuModelMatch": BLOCK,
                                  "GpuFit": BLOCK}


def test_refresh_follows_binds_cordons_and_new_ranks() -> None:
    state = _state(6)
    req = ResourceRequest(cpu_milli=8000, memory_mib=1024, num_gpu=2, gpu_milli=1000)
    index = CandidateIndex(state, req, Scheduler(make_policy("best-fit")).filters)
    assert index.refresh() == 4 and index.feasible_nodes().tolist() == [0, 1, 3, 4]
    d = Scheduler(make_policy("best-fit")).decide_scored(state, req)[0]
    assert d.placement is not None
    state.apply(d.placement)
    state.set_schedulable(0, False)
    assert index.refresh() == 3 - (d.placement.node != 0)
    assert index.rejections()["NodeSchedulable"] == 1
    state.set_rank([5, 4, 3, 2, 1, 0])
    fn = make_policy("best-fit").node_score_fn(state, req)  # type: ignore[attr-defined]
    node, _ = index.best(0, lambda: fn)
    scan = Scheduler(make_policy("best-fit")).decide_scored(state, req)[0]
    assert scan.placement is not None and node == scan.placement.node


REQS = [
    ResourceRequest(cpu_milli=2000, memory_mib=2048, num_gpu=1, gpu_milli=300),
    ResourceRequest(cpu_milli=4000, memory_mib=4096, num_gpu=1, gpu_milli=1000),
    ResourceRequest(cpu_milli=6000, memory_mib=8192, num_gpu=2, gpu_milli=1000),
    ResourceRequest(cpu_milli=1000, memory_mib=1024),
]


@settings(max_examples=15, deadline=None)
@given(
    policy=st.sampled_from(["random", "best-fit", "dot-product", "clustering", "packing", "fgd", "seedance"]),
    steps=st.lists(st.tuples(st.integers(0, len(REQS) - 1), st.integers(0, 9)), min_size=1, max_size=60),
    seed=st.integers(0, 3),
)
def test_decide_equals_the_scan_through_binds_releases_and_cordons(
    policy: str, steps: list[tuple[int, int]], seed: int
) -> None:
    """Two states, one decided through the index and one through the scan, stay equal decision by decision."""
    from seedance.scheduling.framework import PolicyContext

    states = [_state(2 * BLOCK + 5), _state(2 * BLOCK + 5)]
    rank = np.random.default_rng(seed).permutation(states[0].n_nodes)
    scheds = []
    for s in states:
        s.set_rank(rank)
        ctx = PolicyContext(seed=seed, task_types=_types())
        scheds.append(Scheduler(make_policy(policy, ctx), index_min_nodes=0))
    live: list[list[object]] = [[], []]
    for r, action in steps:
        req = REQS[r]
        for sched in scheds:
            sched.policy.observe(req)
        a = scheds[0].decide(states[0], req)
        b = scheds[1].decide_scored(states[1], req)[0]
        assert a == b
        if a.placement is not None:
            for s, lv in zip(states, live, strict=True):
                s.apply(a.placement)
                lv.append(a.placement)
        if action == 0 and live[0]:
            for s, lv in zip(states, live, strict=True):
                s.release(lv.pop(0))  # type: ignore[arg-type]
        elif action == 1:
            node = (r * 7 + len(live[0])) % states[0].n_nodes
            for s in states:
                s.set_schedulable(node, not bool(s.schedulable[node]))
        elif action == 2:  # a new tie-break rank: every index of the state reads the shared maps again
            rank = np.roll(rank, 1 + r)
            for s in states:
                s.set_rank(rank)
    indexes = list(scheds[0]._indexes.values())
    if indexes:
        shared = indexes[0]._ranks
        assert all(ix._ranks is shared for ix in indexes)  # one copy of the rank maps per state


def _types() -> TaskTypes:
    from tests.conftest import make_trace

    return TaskTypes.from_trace(make_trace([(r.cpu_milli, r.memory_mib, r.num_gpu, r.gpu_milli) for r in REQS]))


def test_small_clusters_take_the_scan() -> None:
    state = _state(6)
    req = REQS[0]
    sched = Scheduler(make_policy("best-fit"))
    assert sched.decide(state, req) == sched.decide_scored(state, req)[0]
    assert sched._indexes == {}  # below index_min_nodes: no index built
    forced = Scheduler(make_policy("best-fit"), index_min_nodes=0)
    assert forced.decide(state, req) == sched.decide_scored(state, req)[0] and len(forced._indexes) == 1


@pytest.mark.parametrize("policy", POLICIES)
def test_the_index_reproduces_the_golden_replay(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    """The decision-sequence goldens, with the index forced on at the default trace's size."""
    monkeypatch.setattr(Scheduler, "INDEX_MIN_NODES", 0)
    spec, trace = default_inputs()
    gold = json.loads(GOLDEN.read_text())
    assert replay_digest(spec, replay_slice(trace), policy, 42) == gold["replay"][f"{policy}/42"]


@pytest.mark.bench  # 21 inflation runs: off the default suite
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", [42, 43, 44])
def test_the_index_reproduces_the_golden_inflation(monkeypatch: pytest.MonkeyPatch, policy: str, seed: int) -> None:
    monkeypatch.setattr(Scheduler, "INDEX_MIN_NODES", 0)
    spec, trace = default_inputs()
    gold = json.loads(GOLDEN.read_text())
    assert inflation_digest(spec, trace, policy, seed) == gold["inflation"][f"{policy}/{seed}"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3 * BLOCK - 1), max_size=400))
def test_distinct_nodes_of_a_change_log_are_np_unique(log: list[int]) -> None:
    state = _state(3 * BLOCK)
    req = ResourceRequest(cpu_milli=1000, memory_mib=1024)
    index = CandidateIndex(state, req, Scheduler(make_policy("best-fit")).filters)
    arr = np.array(log, dtype=np.int64)
    for _ in range(2):  # the scratch stamps of the first call do not leak into the second
        got = index._distinct(arr)
        assert got.dtype == np.intp and got.tolist() == np.unique(arr).tolist()
        arr = arr[::-1].copy()


def test_many_flips_in_one_refresh_keep_the_block_counts() -> None:
    """More than a few nodes turning infeasible between two reads (the array path's signed block counts)."""
    state = _state(3 * BLOCK)
    req = ResourceRequest(cpu_milli=8000, memory_mib=8192, num_gpu=1, gpu_milli=1000)
    sched = Scheduler(make_policy("random"), index_min_nodes=0)
    index = sched.index(state, req)
    assert index.refresh() == 2 * BLOCK
    full = ResourceRequest(cpu_milli=16000, memory_mib=1024, num_gpu=1, gpu_milli=100)
    g2 = [i for i in range(state.n_nodes) if i % 3 == 0][:40]  # 40 G2 nodes lose every free CPU
    for node in g2:
        state.apply(Placement(node, (0,), full.gpu_milli, full.cpu_milli, full.memory_mib))
    assert index.refresh() == 2 * BLOCK - 40
    feas = np.flatnonzero(sched.feasible(state, req))
    assert index.feasible_nodes().tolist() == feas.tolist()
    assert [index.nth_feasible(j) for j in range(feas.size)] == feas.tolist()  # block counts exact
    rej = index.rejections()
    assert rej == sched.rejections(state, req)


@settings(max_examples=200, deadline=None)
@given(
    cpu=st.integers(0, 128000), num=st.integers(0, 8), milli=st.integers(1, 1000),
    cpu_free=st.integers(0, 128000), gpu_free=st.integers(0, 8000),
)
def test_best_fit_one_node_score_is_its_array_score(
    cpu: int, num: int, milli: int, cpu_free: int, gpu_free: int
) -> None:
    """``node_score_one`` (Python floats) gives the array score bit for bit."""
    state = _state(3)
    state._cpu_free[0] = cpu_free  # type: ignore[attr-defined]
    state._free_total[0] = gpu_free  # type: ignore[attr-defined]
    share = 0 if num == 0 else milli if num == 1 else 1000
    req = ResourceRequest(cpu_milli=cpu, memory_mib=1, num_gpu=num, gpu_milli=share)
    pol = make_policy("best-fit")
    one = pol.node_score_one(state, req)  # type: ignore[attr-defined]
    assert one is not None
    arr = pol.node_score_fn(state, req)(np.arange(3, dtype=np.intp))  # type: ignore[attr-defined]
    assert [one(i) for i in range(3)] == arr.tolist()


@pytest.mark.parametrize("table", [True, False])
@pytest.mark.parametrize("policy", ["best-fit", "random", "fgd", "seedance"])
def test_long_change_logs_of_few_and_many_nodes_decide_as_the_scan(policy: str, table: bool) -> None:
    """A request decided again after a long change log: logs naming few nodes (rescored one by one),
    some, many (a full pass) and more than twice the nodes, with the table and with own indexes."""
    from seedance.scheduling.framework import PolicyContext

    n = 6 * BLOCK + 7
    states = [_state(n), _state(n)]
    rank = np.random.default_rng(5).permutation(n)
    scheds = []
    for s in states:
        s.set_rank(rank)
        scheds.append(Scheduler(make_policy(policy, PolicyContext(seed=5, task_types=_types())), index_min_nodes=0))
    scheds[0]._table_on = table

    def churn(nodes: list[int], cycles: int) -> None:
        """Bind and release a placement ``cycles`` times on each node, then bind it for good."""
        for node in nodes:
            if states[0].cpu_free[node] < 3000 or states[0].mem_free[node] < 4096:
                continue
            p = Placement(node, (), 0, 3000, 4096)  # moves the node's scores; REQS[2] stops fitting some
            for s in states:
                for _ in range(cycles):
                    s.apply(p)
                    s.release(p)
                s.apply(p)

    def decide_all() -> int:
        placed = 0
        for req in REQS:
            a = scheds[0].decide(states[0], req)
            assert a == scheds[1].decide_scored(states[1], req)[0]
            if a.placement is not None:
                placed += 1
                for s in states:
                    s.apply(a.placement)
        return placed

    assert decide_all() == len(REQS)
    churn([n - 2], 25)  # 51 changes of a CPU-only node, now the tightest for REQS[3]: rescored one by one
    decide_all()
    churn(list(range(100, 160)), 0)  # 60 nodes: a rescore of the changed nodes
    decide_all()
    churn(list(range(160, 160 + 2 * n // 5)), 0)  # 2n/5 nodes, a log under 2n: a full pass
    decide_all()
    churn([18, 21, 24], 140)  # more than 2n changes: a full pass without dedup
    decide_all()
    assert (scheds[0]._table is not None) == table

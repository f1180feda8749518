"""The hot-path index changes no decision: full decision sequences, bit for bit.

* Golden: every registered policy, seeds 42-44, on the default Alibaba trace (inflation to 130%)
  and on a replay slice, digests equal to those recorded from the code before the index
  (``tests/sim/decisions.py`` records them).
* Reference scan: the same runs with the index switched off (``ClusterState.indexed = False``:
  every read recomputes every node) on hand-built replays with contention, departures and
  pending retries, and on random small traces (hypothesis).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import make_cluster, make_trace
from tests.sim.decisions import (
    GOLDEN,
    POLICIES,
    SEEDS,
    default_inputs,
    inflation_digest,
    recording,
    replay_digest,
    replay_slice,
)

from seedance.core.cluster import ClusterState
from seedance.scheduling.framework import PLACEMENT_POLICIES, make_policy
from seedance.sim.inflation import run_inflation
from seedance.sim.replay import run_replay
from seedance.traces.schema import PodTrace

GOLD = json.loads(GOLDEN.read_text())
CASES = [(p, s) for p in POLICIES for s in SEEDS]


def test_the_golden_file_covers_every_registered_policy() -> None:
    make_policy("random")  # imports the built-in policies
    assert sorted(PLACEMENT_POLICIES.names()) == sorted(POLICIES)
    assert set(GOLD["inflation"]) == set(GOLD["replay"]) == {f"{p}/{s}" for p, s in CASES}


@pytest.fixture(scope="module")
def inputs() -> tuple[object, PodTrace, PodTrace]:
    spec, trace = default_inputs()
    return spec, trace, replay_slice(trace)


@pytest.mark.slow
@pytest.mark.parametrize(("policy", "seed"), CASES)
def test_inflation_decisions_equal_the_golden_sequence(
    inputs: tuple[object, PodTrace, PodTrace], policy: str, seed: int
) -> None:
    spec, trace, _ = inputs
    got = inflation_digest(spec, trace, policy, seed)  # type: ignore[arg-type]
    assert got == GOLD["inflation"][f"{policy}/{seed}"]


@pytest.mark.parametrize(("policy", "seed"), CASES)
def test_replay_decisions_equal_the_golden_sequence(
    inputs: tuple[object, PodTrace, PodTrace], policy: str, seed: int
) -> None:
    spec, _, sliced = inputs
    got = replay_digest(spec, sliced, policy, seed)  # type: ignore[arg-type]
    assert got == GOLD["replay"][f"{policy}/{seed}"]
    assert got["released"] == got["applied"] > 0


def _contended() -> tuple[object, PodTrace]:
    spec = make_cluster([(32000, 65536, 4, "G2")] * 3 + [(16000, 32768, 2, "T4")] * 3)
    rows = [(4000, 4096, 1, 500), (8000, 8192, 1, 1000), (2000, 2048, 0, 0), (6000, 4096, 2, 1000),
            (3000, 2048, 1, 250), (12000, 16384, 4, 1000)] * 12
    times = [(float(i * 7 % 50), float(i * 7 % 50 + 40 + i % 9 * 10)) for i in range(len(rows))]
    return spec, make_trace(rows, times=times)


def _both(monkeypatch: pytest.MonkeyPatch, run: object) -> tuple[dict[str, object], dict[str, object]]:
    out = []
    monkeypatch.setattr(ClusterState, "index_min_nodes", 0)  # these clusters are small: force the index on
    for indexed in (True, False):
        monkeypatch.setattr(ClusterState, "indexed", indexed)
        with recording() as rec:
            res = run()  # type: ignore[operator]
        body = {k: v for k, v in res.to_json().items() if k != "wall_s"}
        out.append({**rec.summary(), "result": body})
    return out[0], out[1]


@pytest.mark.parametrize("policy", POLICIES)
def test_indexed_replay_equals_the_plain_scan_under_contention(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    spec, trace = _contended()
    fast, scan = _both(monkeypatch, lambda: run_replay(spec, trace, policy, seed=3))  # type: ignore[arg-type]
    assert fast == scan
    result = fast["result"]
    assert isinstance(result, dict) and result["queue_delay_s_mean"] > 0  # pods waited: retries ran


@settings(max_examples=12, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from([1000, 4000, 9000]), st.sampled_from([1024, 8192]), st.sampled_from([0, 1, 2]),
                  st.sampled_from([200, 500, 1000])),
        min_size=5, max_size=40,
    ),
    policy=st.sampled_from(POLICIES),
    seed=st.integers(0, 5),
)
def test_indexed_inflation_equals_the_plain_scan(rows: list[tuple[int, int, int, int]], policy: str, seed: int) -> None:
    rows = [(c, m, k, 1000 if k != 1 else g) if k else (c, m, 0, 0) for c, m, k, g in rows]
    rows.append((1000, 1024, 1, 300))  # inflation needs a GPU pod to reach its target
    spec = make_cluster([(16000, 32768, 4, "G2")] * 4 + [(8000, 16384, 2, "T4")] * 3)
    trace = make_trace(rows)
    with pytest.MonkeyPatch.context() as mp:
        fast, scan = _both(mp, lambda: run_inflation(spec, trace, policy, seed))
    assert fast == scan


def test_a_column_recomputes_only_the_nodes_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    from seedance.core.cluster import NodeColumn
    from seedance.core.decision import Placement

    monkeypatch.setattr(ClusterState, "index_min_nodes", 0)
    state = ClusterState(make_cluster([(8000, 8192, 2, "T4")] * 10))
    asked: list[list[int]] = []

    def compute(idx: np.ndarray) -> np.ndarray:
        asked.append(sorted(set(idx.tolist())))
        return state.cpu_free[idx] // 1000

    col = NodeColumn(state, compute)
    assert col.get().tolist() == [8] * 10 and asked == [list(range(10))]
    state.apply(Placement(3, (0,), 500, 2000, 1024))
    state.apply(Placement(3, (1,), 500, 1000, 1024))
    assert col.get().tolist() == [8, 8, 8, 5] + [8] * 6 and asked[-1] == [3]
    assert len(col.get()) == 10 and len(asked) == 2  # nothing changed: nothing computed
    took = NodeColumn(state, compute)
    assert took.take(np.array([1, 3])).tolist() == [8, 5] and asked[-1] == [1, 3]
    state.release(Placement(3, (1,), 500, 1000, 1024))
    assert took.take(np.array([0, 1, 3])).tolist() == [8, 8, 6] and asked[-1] == [0, 3]


def test_a_small_cluster_reads_its_columns_as_a_plain_scan() -> None:
    from seedance.core.cluster import NodeColumn

    state = ClusterState(make_cluster([(8000, 8192, 2, "T4")] * 10))
    assert state.n_nodes < ClusterState.index_min_nodes
    asked: list[list[int]] = []

    def compute(idx: np.ndarray) -> np.ndarray:
        asked.append(idx.tolist())
        return state.cpu_free[idx] // 1000

    col = NodeColumn(state, compute)
    assert col.get().tolist() == [8] * 10 and col.get().tolist() == [8] * 10
    assert asked == [list(range(10))] * 2  # nothing cached: every read scans every node
    assert col.take(np.array([2, 5])).tolist() == [8, 8] and asked[-1] == [2, 5]

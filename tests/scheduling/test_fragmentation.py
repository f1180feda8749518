"""FGD's fragmentation measure on hand-computed states, and the typical-pod construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.conftest import make_cluster, occupy

from seedance.core.cluster import ClusterState
from seedance.core.resources import ResourceRequest
from seedance.scheduling.fragmentation import FragModel
from seedance.scheduling.policies.fgd import FragmentationScorer, sigmoid_score
from seedance.scheduling.tasktypes import TaskTypes
from seedance.traces import load_pods
from seedance.traces.paths import DEFAULT_PODS, data_file


def model_for(state: ClusterState) -> FragModel:
    types = TaskTypes.from_counts(
        [
            ((0, 0, 0, ""), 1),  # CPU-only type (cpu 0): every idle GPU is fragment for it
            ((2000, 300, 1, ""), 1),  # 0.3-GPU type
            ((4000, 1000, 2, ""), 1),  # 2 whole GPUs
            ((1000, 1000, 1, "V100M32"), 1),  # needs a V100-32GB
        ],
        {"": (), "V100M32": ("V100-32GB",)},
        threshold=1.0,
    )
    return FragModel(types, state)


def test_fragmentation_by_hand() -> None:
    st = ClusterState(make_cluster([(8000, 1, 2, "T4"), (3000, 1, 2, "T4"), (8000, 1, 1, "T4")]))
    occupy(st, 0, (0,), 800, cpu=0, mem=0)  # n0 = [200, 1000], cpu 8000
    fm = model_for(st)
    f = fm.node_frag()
    # n0: L=1200. cpu-only: 1200; 0.3 type fits, GPUs below 300: 200; 2-GPU type: one idle GPU → 1200;
    #     V100 type: no access → 1200. mean = (1200+200+1200+1200)/4 = 950
    # n1: L=2000, cpu 3000: cpu-only 2000; 0.3 fits → 0; 2-GPU needs 4000 cpu → 2000; V100 → 2000 → 1500
    # n2: L=1000: 1000 + 0 + 1000 (one GPU) + 1000 → 750
    assert f.tolist() == pytest.approx([950.0, 1500.0, 750.0])
    assert fm.total() == pytest.approx(3200.0)
    occupy(st, 2, (0,), 1000, cpu=0, mem=0)
    assert fm.node_frag()[2] == 0.0  # a node with no idle GPU has no fragment


def test_memoised_per_shape_matches_direct_computation() -> None:
    st = ClusterState(make_cluster([(8000, 1, 4, "G2")] * 3))
    fm = model_for(st)
    occupy(st, 1, (2,), 450, cpu=2000, mem=0)
    model, cpu, free = st.shapes()
    direct = fm.frag(st.cpu_free.astype(np.int64), st.gpu_free.copy(), st.model.copy())
    assert fm.node_frag().tolist() == pytest.approx(direct.tolist())


def test_typical_pods_of_the_default_trace(alibaba: Path) -> None:
    types = TaskTypes.from_trace(load_pods(alibaba / "openb_pod_list_default.csv"))
    # FGD's semantics note: 91 types, the top 35 cover 95.26% of pods
    assert len(types) == 35
    assert int(types.count.sum()) / 8152 == pytest.approx(0.9526, abs=1e-4)
    assert types.freq.sum() == pytest.approx(1.0)
    assert list(types.count) == sorted(types.count, reverse=True)


def test_fragmentation_of_a_state_is_the_same_bits_alone_or_in_any_batch() -> None:
    """Count-weighted integer sums: no BLAS rounding, so a row never depends on its batch or the CPU."""
    rng = np.random.default_rng(7)
    st = ClusterState(make_cluster([(8000, 1, 8, "T4")] * 4))
    pods = load_pods(data_file(DEFAULT_PODS))
    fm = FragModel(TaskTypes.from_trace(pods), st)
    free = rng.integers(0, 1001, size=(300, 8)).astype(np.int32)
    cpu = rng.integers(0, 96001, size=300).astype(np.int64)
    model = np.zeros(300, dtype=np.int16)
    batch = fm.frag(cpu, free, model)
    alone = np.array([fm.frag(cpu[i:i + 1], free[i:i + 1], model[i:i + 1])[0] for i in range(300)])
    assert batch.tobytes() == alone.tobytes()
    assert np.array_equal(fm.frag(cpu[::-1], free[::-1], model[::-1])[::-1], batch)


def _random_state(seed: int) -> tuple[ClusterState, FragModel]:
    """Nodes of two models and several sizes after random shares, whole GPUs and CPU-only pods."""
    rng = np.random.default_rng(seed)
    st = ClusterState(make_cluster([(96000, 1 << 20, 8, "G2"), (64000, 1 << 20, 4, "G2"), (32000, 1 << 20, 2, "T4")]
                                   * 6))
    fm = FragModel(TaskTypes.from_trace(load_pods(data_file(DEFAULT_PODS))), st)
    for _ in range(120):
        n = int(rng.integers(st.n_nodes))
        row = st.gpu_free[n, : st.gpu_count[n]]
        cpu = int(rng.choice([0, 1000, 2000, 4000, 6000, 8000]))
        if cpu > st.cpu_free[n]:
            continue
        kind = rng.integers(3)
        if kind == 0 and (row > 0).any():
            g = int(rng.choice(np.flatnonzero(row > 0)))
            occupy(st, n, (g,), int(rng.integers(1, row[g] + 1)), cpu=cpu, mem=1)
        elif kind == 1 and (row == 1000).any():
            idle = np.flatnonzero(row == 1000)
            occupy(st, n, tuple(int(g) for g in idle[: int(rng.integers(1, idle.size + 1))]), 1000, cpu=cpu, mem=1)
        else:
            occupy(st, n, (), 0, cpu=cpu, mem=1)
        fm.shape_frag(st.shape_id[n : n + 1])  # classes appear in the order the shapes do
    return st, fm


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_shape_gets_the_bits_of_its_own_computation_through_its_class(seed: int) -> None:
    """A class is valued once, with its first shape's CPU level; every shape reads exactly its own value."""
    st, fm = _random_state(seed)
    model, cpu, free = st.shapes()
    sids = np.arange(st.n_shapes)
    assert fm.shape_frag(sids).tobytes() == fm.frag(cpu, free, model).tobytes()
    assert fm.node_frag().tobytes() == fm.frag(st.cpu_free.astype(np.int64), st.gpu_free, st.model).tobytes()
    # shapes that differ only in free memory or in free CPU within one level share a class
    keys = {(int(model[s]), fm.cpu_level_of(int(cpu[s])), tuple(free[s].tolist())) for s in sids.tolist()}
    assert fm.n_classes == len(keys) < st.n_shapes
    assert [fm.class_of(s) for s in sids.tolist()] == fm.shape_class(sids).tolist()


def _reference_scores(fm: FragModel, st: ClusterState, req: ResourceRequest, n: int) -> tuple[int, int]:
    """FGD's score of node ``n`` and the GPU of a share, computed from the node's own row (no memo)."""
    row = st.gpu_free[n : n + 1].copy()
    model = st.model[n : n + 1].copy()
    before = fm.frag(st.cpu_free[n : n + 1].astype(np.int64), row, model)
    cpu_after = st.cpu_free[n : n + 1].astype(np.int64) - req.cpu_milli
    if req.is_sharing:
        g = row.shape[1]
        after_rows = np.repeat(row, g, axis=0)
        after_rows[np.arange(g), np.arange(g)] -= req.gpu_milli
        after = fm.frag(np.repeat(cpu_after, g), after_rows, np.repeat(model, g))
        per_gpu = np.where(row[0] >= req.gpu_milli, sigmoid_score(before - after), -1)
        return int(per_gpu.max()), int(np.argmax(per_gpu))
    after_row = row.copy()
    idle = np.flatnonzero(row[0] == 1000)[: req.num_gpu]
    after_row[0, idle] = 0
    return int(sigmoid_score(before - fm.frag(cpu_after, after_row, model))[0]), -1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fgd_scores_memoised_per_class_equal_the_direct_computation(seed: int) -> None:
    st, _ = _random_state(seed)
    fm = FragModel(TaskTypes.from_trace(load_pods(data_file(DEFAULT_PODS))), st)
    scorer = FragmentationScorer(fm)
    reqs = [ResourceRequest(cpu_milli=c, memory_mib=1, num_gpu=k, gpu_milli=m)
            for c in (0, 2000, 6000, 16000) for k, m in ((0, 0), (1, 250), (1, 500), (1, 1000), (2, 1000), (4, 1000))]
    for req in reqs:
        nodes = np.flatnonzero(
            (st.cpu_free >= req.cpu_milli)
            & ((st.max_free >= req.gpu_milli) if req.is_sharing else (st.n_full >= req.num_gpu))
        )
        ref = [_reference_scores(fm, st, req, int(n)) for n in nodes]
        # twice: computed, then read back from the memo (scores of one node alone, too)
        for _ in range(2):
            assert scorer.node_scores(req, nodes).tolist() == [s for s, _ in ref]
        assert [int(scorer.score_fn(req)(nodes[i : i + 1])[0]) for i in range(nodes.size)] == [s for s, _ in ref]
        if req.is_sharing:
            assert [scorer.gpu_for_share(req, int(n)) for n in nodes] == [g for _, g in ref]

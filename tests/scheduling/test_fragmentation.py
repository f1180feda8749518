"""FGD's fragmentation measure on hand-computed states, and the typical-pod construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.conftest import make_cluster, occupy

from seedance.core.cluster import ClusterState
from seedance.scheduling.fragmentation import FragModel
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

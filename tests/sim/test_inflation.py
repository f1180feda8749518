"""Inflation mode: stream construction, bucketing, determinism, and a golden slice of the real trace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tests.conftest import make_cluster, make_trace

from seedance.sim.inflation import build_stream, run_inflation, sort_by_name
from seedance.sim.metrics import bucket_by_arrival
from seedance.traces import load_nodes, load_pods

GOLDEN = Path(__file__).parent / "golden_inflation_slice.json"


def test_stream_appends_resamples_until_the_first_overflow() -> None:
    tr = sort_by_name(make_trace([(1000, 1, 1, 1000), (1000, 1, 1, 500), (1000, 1, 0, 0)]))
    s = build_stream(tr, capacity_gpu_milli=4000, n_nodes=3, seed=1, ratio=1.3)
    assert sorted(s.pods[:3].tolist()) == [0, 1, 2]  # every pod once, shuffled, first
    total = (tr.num_gpu * tr.gpu_milli)[s.pods].sum()
    assert total <= 5200
    # the draw after the last one (per-GPU milli) would have overshot: at most 1000 below the target
    assert total > 5200 - 1000
    assert sorted(s.node_rank.tolist()) == [0, 1, 2]


def test_stream_thins_a_trace_above_the_target() -> None:
    tr = sort_by_name(make_trace([(1000, 1, 8, 1000)] * 10))
    s = build_stream(tr, capacity_gpu_milli=40000, n_nodes=5, seed=3, ratio=1.3)
    assert len(set(s.pods.tolist())) == len(s.pods) == 6  # 6 × 8000 = 48000 ≤ 52000


def test_bucketing_follows_the_paper_scripts() -> None:
    total_gpus = 10  # 1% = 100 milli
    arrived = np.array([100, 200, 200, 400, 700], dtype=np.int64)
    used = np.array([100, 150, 200, 300, 300], dtype=np.int64)
    frag = np.array([0, 0, 10, 10, 20], dtype=np.float64)
    cols, alloc, fragp = bucket_by_arrival(arrived, used, frag, total_gpus, 8)
    assert cols == list(range(9))
    # col 2 = mean(1.5, 2.0); col 3 is empty → rows of cols 2..4 = mean(1.5, 2, 3); col 5 ← col 4; col 8 ← col 7
    assert alloc == [1.0, 1.0, 1.75, 2.17, 3.0, 3.0, 3.0, 3.0, 3.0]
    assert fragp[2] == 0.05 and fragp[7] == 0.2


def test_same_seed_same_result_and_different_seeds_differ() -> None:
    spec = make_cluster([(64000, 1 << 20, 4, "G2")] * 6 + [(32000, 1 << 19, 2, "T4")] * 4)
    tr = make_trace(
        [
            (4000, 1024, 1, 500),
            (8000, 2048, 1, 1000),
            (2000, 512, 0, 0),
            (4000, 1024, 1, 300),
            (16000, 4096, 2, 1000),
        ]
        * 8
    )
    a = run_inflation(spec, tr, "fgd", 5)
    b = run_inflation(spec, tr, "fgd", 5)
    c = run_inflation(spec, tr, "fgd", 6)
    assert a.alloc_pct == b.alloc_pct and a.frag_pct == b.frag_pct and a.placed == b.placed
    assert (a.alloc_pct, a.placed) != (c.alloc_pct, c.placed) or a.frag_pct != c.frag_pct
    assert a.arrived_pct == list(range(131))


def _slice_results(alibaba: Path) -> dict[str, float | None]:
    spec = load_nodes(alibaba / "openb_node_list_gpu_node.csv")
    trace = load_pods(alibaba / "openb_pod_list_default.csv")
    from seedance.core.cluster import ClusterSpec

    small = ClusterSpec(nodes=spec.nodes[::10])  # every 10th node: 122 nodes
    sub = trace.take(np.arange(0, len(trace), 10))  # every 10th pod: 816 pods
    return {
        pol: run_inflation(small, sub, pol, 42).unallocated_pct_at_100
        for pol in ("random", "dot-product", "clustering", "packing", "best-fit", "fgd")
    }


def test_golden_slice_of_the_real_trace(alibaba: Path) -> None:
    got = _slice_results(alibaba)
    expected = json.loads(GOLDEN.read_text())
    assert got == expected
    assert got["fgd"] is not None and got["random"] is not None and got["fgd"] < got["random"]


if __name__ == "__main__":  # regenerate the golden file: python -m tests.sim.test_inflation
    from seedance.traces.paths import data_dir

    GOLDEN.write_text(json.dumps(_slice_results(data_dir() / "alibaba-gpu-v2023"), indent=2) + "\n")
    print(GOLDEN.read_text())

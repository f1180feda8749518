"""Interference between shares of one GPU: exact slowdowns, properties, and a golden A/B slice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.cli.main import main
from seedance.core.cluster import ClusterSpec, NodeSpec
from seedance.core.errors import InputError, UnknownNameError
from seedance.sim.ab import ABOptions, run_ab
from seedance.sim.interference import (
    GavelPair,
    GavelPairs,
    InterferenceOptions,
    effective_runtimes,
    make_interference,
)
from seedance.traces import load_nodes, load_pods

SCALE = 0.001
A, B, C = "('ResNet-50 (batch size 64)', 1)", "('LM (batch size 20)', 1)", "('A3C', 1)"


def _gavel_file(tmp_path: Path) -> Path:
    """Two feasible job types and one (A3C) that Gavel marks infeasible beside ResNet-50."""
    table = {
        A: {"null": 4.0, A: [2.0, 2.0], B: [2.5, 8.0], C: [0.0, 0.0]},
        B: {"null": 10.0, A: [8.0, 2.5], B: [5.0, 5.0], C: [10.0, 1.0]},
        C: {"null": 2.0, A: [0.0, 0.0], B: [1.0, 10.0], C: [1.0, 1.0]},
    }
    path = tmp_path / "throughputs.json"
    path.write_text(json.dumps({"v100": table, "v100_unconsolidated": {}}))
    return path


def _cluster(mig: bool = False) -> ClusterSpec:
    labels = {"gpu.mode": "mig"} if mig else {}
    return ClusterSpec((NodeSpec("n0", 64_000, 256_000, 2, "V100-32GB", labels),))


class _Fixed(GavelPair):
    """Gavel pairs with hand-picked job types instead of the seeded draw."""

    def prepare(self, n_pods: int) -> None:
        assert len(self.job_of) == n_pods


def _model(tmp_path: Path, jobs: list[int]) -> GavelPair:
    model = _Fixed(pairs=GavelPairs.load(_gavel_file(tmp_path)))
    model.job_of = np.array(jobs, dtype=np.int64)
    return model


def _segs(rows: list[tuple[int, float, float, int, int]]) -> dict[str, Any]:
    cols = list(zip(*rows, strict=True))
    return {
        "pod": np.array(cols[0], dtype=np.int64),
        "start": np.array(cols[1], dtype=np.float64),
        "end": np.array(cols[2], dtype=np.float64),
        "node": np.zeros(len(rows), dtype=np.int64),
        "alloc_milli": np.array(cols[3], dtype=np.int64),
        "gpu_mask": np.array(cols[4], dtype=np.int64),
    }


def test_gavel_matrix_is_isolated_over_colocated_throughput(tmp_path: Path) -> None:
    pairs = GavelPairs.load(_gavel_file(tmp_path))
    assert pairs.jobs == ("A3C", "LM (batch size 20)", "ResNet-50 (batch size 64)")  # sorted keys
    m = pairs.slowdown["v100"]
    # A3C beside LM: 2 / 1 = 2; LM beside ResNet-50: 10 / 8 = 1.25; ResNet-50 beside LM: 4 / 2.5 = 1.6
    assert m[0, 1] == 2.0 and m[1, 2] == 1.25 and m[2, 1] == 1.6
    # infeasible pairs take the median of the row's feasible pairs: A3C row {2, 2} → 2; ResNet-50 {1.6, 2} → 1.8
    assert m[0, 2] == 2.0 and m[2, 0] == pytest.approx(1.8)
    assert pairs.infeasible["v100"] == 2 and "v100_unconsolidated" not in pairs.slowdown


def test_exact_slowdown_of_a_hand_built_pair(tmp_path: Path) -> None:
    # pod 0 runs ResNet-50 (job 2), pod 1 runs LM (job 1); both 500 milli on GPU 0, overlapping 50 s
    model = _model(tmp_path, [2, 1])
    seg = _segs([(0, 0.0, 100.0, 500, 1), (1, 50.0, 150.0, 500, 1)])
    out = effective_runtimes(_cluster(), model, n_pods=2, **seg)
    assert out.effective_s.tolist() == [50.0 + 50.0 / 1.6, 50.0 / 1.25 + 50.0]
    assert out.slowed_s.tolist() == [50.0, 50.0]
    s = out.summary(seg["alloc_milli"], "gavel-pair")
    assert s["slowed_segments"] == 2 and s["lost_gpu_hours"] == pytest.approx(0.5 * (18.75 + 10.0) / 3600, abs=1e-4)


def test_three_on_one_gpu_max_and_additive(tmp_path: Path) -> None:
    rows = [(0, 0.0, 10.0, 300, 1), (1, 0.0, 10.0, 300, 1), (2, 0.0, 10.0, 300, 1)]
    model = _model(tmp_path, [2, 1, 0])  # ResNet-50 beside LM (1.6) and A3C (1.8)
    out = effective_runtimes(_cluster(), model, n_pods=3, **_segs(rows))
    assert out.effective_s[0] == pytest.approx(10.0 / 1.8)
    add = _model(tmp_path, [2, 1, 0])
    add.options = InterferenceOptions(composition="additive")
    out = effective_runtimes(_cluster(), add, n_pods=3, **_segs(rows))
    assert out.effective_s[0] == pytest.approx(10.0 / (1.0 + 0.6 + 0.8))


def test_whole_gpus_other_gpus_mig_and_touching_runs_do_not_interfere(tmp_path: Path) -> None:
    model = _model(tmp_path, [2, 1, 0, 2])
    rows = [
        (0, 0.0, 100.0, 500, 1),  # GPU 0
        (1, 0.0, 100.0, 500, 2),  # GPU 1: another GPU
        (2, 0.0, 100.0, 1000, 1),  # a whole GPU (cannot share; the state would refuse it)
        (3, 100.0, 200.0, 500, 1),  # GPU 0 again, but after pod 0 ended
    ]
    out = effective_runtimes(_cluster(), model, n_pods=4, **_segs(rows))
    assert out.effective_s.tolist() == [100.0] * 4 and not out.slowed_s.any()
    shared = [(0, 0.0, 100.0, 500, 1), (1, 0.0, 100.0, 500, 1)]
    out = effective_runtimes(_cluster(mig=True), model, n_pods=4, **_segs(shared))
    assert out.effective_s.tolist() == [100.0, 100.0]  # MIG partitions in hardware


def test_mps_llm_model_and_registry() -> None:
    m = make_interference("MPS")
    assert m.name == "mps-llm" and m.slowdown("v100", 0, [1, 2]) == pytest.approx(1 / 0.925)
    assert m.slowdown("v100", 0, []) == 1.0
    with pytest.raises(UnknownNameError, match="valid names: mps-llm, gavel-pair"):
        make_interference("contention")


def test_real_gavel_pair(shared_data: Path) -> None:
    pairs = GavelPairs.load(shared_data / "gavel-throughputs" / "simulation_throughputs.json")
    assert len(pairs.jobs) == 26 and set(pairs.slowdown) == {"k80", "p100", "v100"}
    i, j = pairs.jobs.index("ResNet-18 (batch size 16)"), pairs.jobs.index("ResNet-18 (batch size 256)")
    # Gavel v100: isolated 32.353384328946916 steps/s, 24.45464779058787 beside ResNet-18 bs256
    assert pairs.slowdown["v100"][i, j] == pytest.approx(32.353384328946916 / 24.45464779058787)
    assert all((m >= 1.0).all() for m in pairs.slowdown.values())


def test_bad_gavel_file_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"v100": {A: {"null": -1.0}}}))
    with pytest.raises(InputError) as err:
        GavelPairs.load(bad)
    assert err.value.source == str(bad) and err.value.field == f"v100.{A}.null"
    with pytest.raises(InputError, match="cannot read"):
        GavelPairs.load(tmp_path / "missing.json")


seg_rows = st.lists(
    st.tuples(
        st.integers(0, 1),  # node
        st.integers(0, 1),  # GPU
        st.sampled_from([100, 250, 500, 1000]),  # milli held
        st.integers(0, 50),  # start
        st.integers(0, 50),  # length
    ),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module")
def gavel(shared_data: Path) -> GavelPairs:
    return GavelPairs.load(shared_data / "gavel-throughputs" / "simulation_throughputs.json")


@settings(max_examples=60, deadline=None)
@given(rows=seg_rows, seed=st.integers(0, 5))
def test_interference_never_shortens_a_job_and_isolated_jobs_are_unaffected(
    gavel: GavelPairs, rows: list[tuple[int, int, int, int, int]], seed: int
) -> None:
    spec = ClusterSpec((NodeSpec("a", 1, 1, 2, "V100-32GB"), NodeSpec("b", 1, 1, 2, "P100")))
    n = len(rows)
    start = np.array([float(r[3]) for r in rows])
    end = start + np.array([float(r[4]) for r in rows])
    node = np.array([r[0] for r in rows], dtype=np.int64)
    mask = np.array([1 << r[1] for r in rows], dtype=np.int64)
    alloc = np.array([r[2] for r in rows], dtype=np.int64)
    model = GavelPair(InterferenceOptions(seed=seed), pairs=gavel)
    out = effective_runtimes(spec, model, n_pods=n, pod=np.arange(n), start=start, end=end, node=node,
                             alloc_milli=alloc, gpu_mask=mask)
    dur = end - start
    # the effective run time never exceeds the wall-clock run (the job is only ever stretched) ...
    assert (out.effective_s <= dur + 1e-9).all() and (out.effective_s >= -1e-9).all()
    # ... by at most the worst measured pair slowdown
    worst = max(float(m.max()) for m in gavel.slowdown.values())
    assert (out.effective_s >= dur / worst - 1e-9).all()
    for k in range(n):
        share = 0 < alloc[k] < 1000
        partners = [
            j for j in range(n)
            if j != k and node[j] == node[k] and mask[j] == mask[k] and 0 < alloc[j] < 1000
            and min(end[j], end[k]) > max(start[j], start[k])
        ]
        if not share or not partners:  # isolated: exactly unaffected
            assert out.effective_s[k] == dur[k] and out.slowed_s[k] == 0.0


@pytest.fixture(scope="module")
def slice_csv(alibaba: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = (alibaba / "openb_pod_list_default.csv").read_text().splitlines()[:1501]
    path = tmp_path_factory.mktemp("interference") / "openb_pod_list_slice1500.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_golden_slice_shared_misses_gold_that_tiered_keeps(alibaba: Path, slice_csv: Path) -> None:
    spec, trace = load_nodes(alibaba / "openb_node_list_gpu_node.csv"), load_pods(slice_csv)
    plain, _ = run_ab(spec, trace, ["shared", "tiered"], capacity_scale=SCALE, opts=ABOptions(seed=0), series=False)
    model = make_interference("gavel-pair", InterferenceOptions(seed=0))
    recs, _ = run_ab(spec, trace, ["shared", "tiered"], capacity_scale=SCALE,
                     opts=ABOptions(seed=0, interference=model), series=False)
    shared, tiered = recs
    missed = {v["variant"]: {t: x["pods_missed"] for t, x in v["tiers"].items()} for v in recs}
    # golden: 51 GPUs, best-fit, seed 0, Gavel pairs charged to Gold and Silver
    assert missed == GOLDEN
    assert plain[0]["tiers"]["gold"]["pods_missed"] == 19 and plain[1]["tiers"]["gold"]["pods_missed"] == 0
    assert shared["interference"]["slowed_segments"] > 0 and shared["interference"]["lost_gpu_hours"] > 0
    assert tiered["interference"]["lost_gpu_hours"] <= shared["interference"]["lost_gpu_hours"]
    # the scheduler never sees the model: placements (and so Bronze, not charged) are unchanged
    assert shared["tiers"]["bronze"] == plain[0]["tiers"]["bronze"]
    assert shared["utilization_pct"] < plain[0]["utilization_pct"]  # lost throughput is not useful work
    everything, _ = run_ab(spec, trace, ["shared"], capacity_scale=SCALE,
                           opts=ABOptions(seed=0, interference=model, interference_charge="all"), series=False)
    assert everything[0]["tiers"]["bronze"]["pods_missed"] > plain[0]["tiers"]["bronze"]["pods_missed"]


#: 51 GPUs: shared misses 69 of 684 Gold pods (19 without interference); tiered as without it (0 / 3 / 9)
GOLDEN = {"shared": {"gold": 69, "silver": 1, "bronze": 5}, "tiered": {"gold": 0, "silver": 3, "bronze": 9}}


def test_simulate_ab_interference_cli(capsys: pytest.CaptureFixture[str], slice_csv: Path) -> None:
    code = main(["simulate", "--mode", "replay", "--ab", "shared,tiered", "--pods", str(slice_csv),
                 "--capacity-scale", str(SCALE), "--seeds", "0", "--interference", "gavel-pair", "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["interference"]["model"] == "gavel-pair" and "OSDI" in doc["interference"]["source"]
    assert doc["results"][0]["interference"]["charged_to"] == "isolated-tiers"
    for args, message in [(["--interference", "noisy"], "unknown interference model 'noisy'"),
                          (["--interference", "mps", "--interference-charge", "x"], "unknown interference charge")]:
        code = main(["simulate", "--mode", "replay", "--ab", "shared,tiered", "--pods", str(slice_csv), *args])
        _, err = capsys.readouterr()
        assert code == 2 and message in err and "Traceback" not in err


def test_charge_follows_the_tier_contract() -> None:
    from seedance.sim.ab import _charged_tiers

    assert _charged_tiers(ABOptions()).tolist() == [True, True, False]  # Bronze accepts MPS / time-slicing
    assert _charged_tiers(ABOptions(interference_charge="all")).tolist() == [True, True, True]
    with pytest.raises(InputError, match="valid: isolated-tiers, all"):
        _charged_tiers(ABOptions(interference_charge="some"))

"""``seedancectl trace scale``: k copies of every node and pod, same mix, seeded times, Alibaba files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from seedance.cli.main import main
from seedance.traces import load_nodes, load_pods
from seedance.traces.scale import scale_fleet, scale_nodes, scale_pods

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,8,G2\nn1,32000,131072,2,T4\nc0,96000,393216,0,\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    "p0,4000,8192,1,500,,LS,Running,0,100,0\n"
    "p1,8000,16384,2,1000,T4,BE,Succeeded,5,905,7\n"
    "p2,2000,4096,0,0,,LS,Running,30,40,\n"
)


def scale(n: Path, p: Path, *args: str) -> int:
    return main(["trace", "scale", "--nodes", str(n), "--pods", str(p), *args])


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    n, p = tmp_path / "nodes.csv", tmp_path / "openb_pod_list_tiny.csv"
    n.write_text(NODES)
    p.write_text(PODS)
    return n, p


def test_factor_one_is_the_source(files: tuple[Path, Path], tmp_path: Path) -> None:
    n, p = files
    assert scale(n, p, "--factor", "1", "--out", str(tmp_path / "o")) == 0
    assert (tmp_path / "o" / "nodes.csv").read_text() == NODES
    assert (tmp_path / "o" / "openb_pod_list_tiny.csv").read_text() == PODS


def test_copies_keep_requests_and_names_and_lifetimes(files: tuple[Path, Path]) -> None:
    spec, trace = load_nodes(files[0]), load_pods(files[1])
    fleet = scale_fleet(spec, trace, 3, seed=7, jitter_s=20)
    names = ["n0", "n0-x1", "n0-x2", "n1", "n1-x1", "n1-x2", "c0", "c0-x1", "c0-x2"]
    assert [x.name for x in fleet.nodes.nodes] == names
    assert fleet.nodes.total_gpus == 3 * spec.total_gpus == 30
    pods = fleet.pods
    assert pods.name.tolist() == ["p0", "p0-x1", "p0-x2", "p1", "p1-x1", "p1-x2", "p2", "p2-x1", "p2-x2"]
    assert pods.gpu_milli.tolist() == [500] * 3 + [1000] * 3 + [0] * 3
    assert pods.gpu_spec.tolist() == [""] * 3 + ["T4"] * 3 + [""] * 3
    assert pods.qos.tolist()[3:6] == ["BE"] * 3
    # lifetimes kept, originals unshifted, offsets within the jitter, never before 0
    np.testing.assert_array_equal(pods.deletion - pods.creation, np.repeat(trace.deletion - trace.creation, 3))
    assert pods.creation[[0, 3, 6]].tolist() == [0.0, 5.0, 30.0]
    assert np.all(np.abs(pods.creation - np.repeat(trace.creation, 3)) <= 20) and pods.creation.min() >= 0
    assert np.isnan(pods.scheduled[6:]).all()


def test_mix_is_exactly_k_times_the_real_trace(alibaba: Path) -> None:
    spec = load_nodes(alibaba / "openb_node_list_gpu_node.csv")
    trace = load_pods(alibaba / "openb_pod_list_default.csv")
    big = scale_nodes(spec, 4)
    assert big.total_gpus == 4 * 6212 and len(big.nodes) == 4 * 1213
    kinds = Counter((n.gpu_model, n.gpu_count, n.cpu_milli) for n in spec.nodes)
    got_kinds = Counter((n.gpu_model, n.gpu_count, n.cpu_milli) for n in big.nodes)
    assert got_kinds == Counter({k: 4 * v for k, v in kinds.items()})
    pods = scale_pods(trace, 4, seed=1)
    assert len(pods) == 4 * len(trace) and pods.total_gpu_milli == 4 * trace.total_gpu_milli
    reqs = Counter(zip(trace.cpu_milli.tolist(), trace.num_gpu.tolist(), trace.gpu_milli.tolist(), strict=True))
    got = Counter(zip(pods.cpu_milli.tolist(), pods.num_gpu.tolist(), pods.gpu_milli.tolist(), strict=True))
    assert got == Counter({k: 4 * v for k, v in reqs.items()})


def test_same_seed_same_files_other_seed_other_times(files: tuple[Path, Path], tmp_path: Path) -> None:
    n, p = files
    outs = []
    for i, seed in enumerate(("5", "5", "6")):
        d = tmp_path / f"o{i}"
        assert scale(n, p, "--factor", "4", "--seed", seed, "--out", str(d)) == 0
        outs.append((d / "openb_pod_list_tiny.csv").read_text())
        reloaded = load_pods(d / "openb_pod_list_tiny.csv")  # the written file loads back as a trace
        assert len(reloaded) == 12 and load_nodes(d / "nodes.csv").total_gpus == 40
    assert outs[0] == outs[1] and outs[0] != outs[2]


def test_cli_reports_counts_and_rejects_bad_factor(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n, p = files
    assert scale(n, p, "--factor", "2", "--out", str(tmp_path / "o")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nodes"]["count"] == 6 and out["nodes"]["gpus"] == 20 and out["pods"]["count"] == 6
    assert scale(n, p, "--factor", "0", "--out", str(tmp_path / "x")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--factor" in err and "Traceback" not in err

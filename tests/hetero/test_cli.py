"""``simulate --workload gavel-mix`` and ``explain migration`` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedance.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_simulate_gavel_mix_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "simulate", "--mode", "replay", "--workload", "gavel-mix", "--policy",
                       "agnostic,hetero-jct", "--jobs", "12", "--jobs-per-hour", "6", "--seeds", "1",
                       "--storage", "tiered,remote-only", "-o", "json")
    assert rc == 0, err
    doc = json.loads(out)
    for storage in ("tiered", "remote-only"):
        pol = doc["storage"][storage]["policies"]
        assert set(pol) == {"agnostic", "hetero-jct", "agnostic (tuned)"}
        for p in pol.values():
            assert {"avg_jct_s", "p99_jct_s", "migrations", "checkpoint_stall_s"} <= set(p)
        assert len(pol["agnostic (tuned)"]["sweep"]) == 18
    assert doc["checkpoint_stall_ratio"]["agnostic"] > 2
    assert set(doc["remote_only_own_interval"]) == {"agnostic", "hetero-jct"}
    both = doc["checkpoint_both_tuned"]
    assert both["rule"] == "checkfreq"
    row = both["hetero-jct"]
    assert row["remote-only"]["checkpoint_stall_s"] == doc["remote_only_own_interval"]["hetero-jct"][
        "checkpoint_stall_s"]
    assert row["stall_ratio remote-only / tiered"] == pytest.approx(
        row["remote-only"]["checkpoint_stall_s"] / row["tiered"]["checkpoint_stall_s"])
    assert row["rework_per_interruption_ratio remote-only / tiered"] > 1  # fewer recovery points on remote
    assert "up to 3.5x" in doc["reference"] and "nvme" in doc["bandwidth_sources"]


@pytest.mark.parametrize(("argv", "msg"), [
    (["--workload", "alibaba-mix"], "unknown workload 'alibaba-mix'"),
    (["--workload", "gavel-mix", "--policy", "gavel"], "unknown heterogeneous replay policy 'gavel'"),
    (["--workload", "gavel-mix", "--storage", "tape"], "unknown storage layout 'tape'"),
    (["--workload", "gavel-mix", "--checkpoint-rule", "daily"], "interval rule must be one of checkfreq, young-daly"),
])
def test_simulate_bad_input_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str], msg: str) -> None:
    rc, _, err = run(capsys, "simulate", "--mode", "replay", "--jobs", "5", "--seeds", "1", *argv)
    assert rc == 2 and msg in err


SPEC = {
    "job": "llama-8b-infer", "state_gb": 16.0, "cuda": "11.8", "sass": ["sm_70", "sm_80"], "ptx": ["compute_80"],
    "precision": "fp16",
    "source": {"name": "v100-box", "gpu": "V100-32GB", "gpus": 8, "topology": "pcie-v100", "network_gbps": 100},
    "targets": [
        {"name": "l40s-box", "gpu": "L40S", "gpus": 4, "topology": "pcie-l40s", "network_gbps": 100},
        {"name": "k80-box", "gpu": "K80", "gpus": 8, "driver": "470.256.02"},
    ],
}


def test_explain_migration_spec(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(SPEC))
    rc, out, err = run(capsys, "explain", "migration", str(spec), "-o", "json")
    assert rc == 0, err
    doc = json.loads(out)
    rows = {c["node"]: c for c in doc["candidates"]}
    l40s = rows["l40s-box"]
    # V100 GPU0 -SYS-> the NIC on the other socket (PCIe 3.0 staged: 7.875 GB/s), 100 Gbit/s network
    # (12.5 GB/s), NIC0 -NODE-> L40S GPU2 (the GPU nearest a NIC; PCIe 4.0 31.5 GB/s)
    assert [(lk["kind"], lk["gbs"]) for lk in l40s["path"]] == [("SYS", 7.875), ("network", 12.5), ("NODE", 31.5)]
    assert l40s["path"][2]["dst"] == "l40s-box/GPU2" and l40s["slowest_link"]["kind"] == "SYS"
    assert l40s["topology_s"] == pytest.approx(16 / 7.875 + (5 + 4) * 1e-6)
    assert l40s["checkpoint_s"] == pytest.approx(16 / 15.75)
    assert not rows["k80-box"]["feasible"] and "no code for compute capability 3.7" in rows["k80-box"]["reason"]
    assert doc["decision"] == "stay"  # no remaining work given: nothing to gain
    rc, out, _ = run(capsys, "explain", "migration", str(spec))
    assert rc == 0 and "l40s-box" in out and "infeasible" in out


def test_explain_migration_bad_spec(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**SPEC, "state_gb": -1}))
    rc, _, err = run(capsys, "explain", "migration", str(bad))
    assert rc == 2 and "bad.json" in err and "state_gb" in err
    bad.write_text(json.dumps({**SPEC, "source": {**SPEC["source"], "gpu": "Z100"}}))
    rc, _, err = run(capsys, "explain", "migration", str(bad))
    assert rc == 2 and "field v100-box.gpu: unknown GPU type 'Z100'" in err
    bad.write_text(json.dumps({**SPEC, "sass": ["sm_90"], "cuda": "11.2"}))
    rc, _, err = run(capsys, "explain", "migration", str(bad))
    assert rc == 2 and "CUDA 11.2 cannot build sm_90" in err


def test_explain_migration_of_a_replayed_job(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "explain", "migration", "3", "--jobs", "20", "--jobs-per-hour", "8", "--seed", "1",
                       "-o", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["job"] == 3 and doc["policy"] == "hetero-jct"
    for mv in doc["moves"]:
        assert mv["from"] != mv["to"] and mv["planner"]["candidates"] and mv["why"]
    rc, _, err = run(capsys, "explain", "migration", "99", "--jobs", "20")
    assert rc == 2 and "job index must be in [0, 20)" in err

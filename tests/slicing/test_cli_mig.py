"""``seedancectl mig ...`` and ``seedancectl simulate --slices mig``: outputs and bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedance.cli.main import main
from seedance.slicing.mig import Instance, is_legal, mig_gpu

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"node-{i},64000,262144,{g},{m}\n" for i, (g, m) in enumerate([(8, "G2")] * 4 + [(2, "T4")] * 4)
)
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    + "".join(
        f"pod-{i:03d},{4000 + 1000 * (i % 3)},8192,{k},{m},,LS,Running,{i * 10},{i * 10 + 500},{i * 10}\n"
        for i, (k, m) in enumerate([(1, 470), (1, 1000), (0, 0), (1, 250), (1, 300), (1, 810)] * 6)
    )
)
PLAN = """
gpus:
  - {model: A100-80GB, count: 2, name: idle}
  - name: node-7/gpu-0
    model: A100-80GB
    layout: [3g.40gb@0, 3g.40gb@4]
    busy: [3g.40gb@0]
    drain_s: 1200
demand:
  - {name: chat, gpu_milli: 250, count: 6}
  - {name: embed, gpu_milli: 120, count: 3, gpu_memory_gib: 15}
  - {name: train, gpu_milli: 470, count: 2}
options: {time_limit_s: 5}
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {"nodes": tmp_path / "nodes.csv", "pods": tmp_path / "openb_pod_list_tiny.csv", "plan": tmp_path / "p.yaml"}
    out["nodes"].write_text(NODES)
    out["pods"].write_text(PODS)
    out["plan"].write_text(PLAN)
    return out


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_profiles_and_geometries(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "mig", "profiles", "--gpu", "H200", "-o", "json")
    data = json.loads(out)
    assert code == 0 and [r["profile"] for r in data["profiles"]][-1] == "7g.141gb"
    assert data["profiles"][3]["placements"] == "{0,2,4}:2" and "H200" in data["notes"]
    code, out, _ = run(capsys, "mig", "geometries", "--gpu", "A100-40GB", "-o", "json")
    assert code == 0 and len(json.loads(out)["layouts"]) == 78
    code, out, _ = run(capsys, "mig", "profiles")
    assert code == 0 and "7g.80gb" in out and "1g.18gb" in out


def test_check_layout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "mig", "check", "4g.40gb@0", "2g.20gb@4", "1g.10gb@6")
    assert code == 0 and "legal on A100-80GB" in out
    code, out, err = run(capsys, "mig", "check", "--gpu", "H100", "3g.40gb@2", "4g.40gb@0")
    assert code == 2 and err.count("\n") == 1 and "may start only at [0, 4]" in err and "Traceback" not in err


def test_plan_from_yaml(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "mig", "plan", "--demand", str(files["plan"]), "-o", "json")
    assert code == 0
    plan = json.loads(out)
    assert [g["gpu"] for g in plan["gpus"]] == ["idle-0", "idle-1", "node-7/gpu-0"]
    g = mig_gpu("A100-80GB")
    assert all(is_legal(g, [Instance.parse(x) for x in gp["layout"]]) for gp in plan["gpus"])
    assert plan["status"] == "OPTIMAL" and plan["fit"]["served"] == {"chat": 5, "embed": 3, "train": 2}
    # --no-drain keeps the busy GPU as it is
    code, out, _ = run(capsys, "mig", "plan", "--demand", str(files["plan"]), "--no-drain", "-o", "json")
    assert json.loads(out)["gpus"][2]["action"] == "keep"
    code, out, _ = run(capsys, "mig", "plan", "--demand", str(files["plan"]), "--summary")
    assert code == 0 and "repartition" in out and "MIG plan" in out


def test_plan_and_compare_from_a_pod_list(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "mig",
        "plan",
        "--demand",
        str(files["pods"]),
        "--gpus",
        "A100-80GB:3",
        "--time-limit",
        "3",
        "-o",
        "yaml",
    )
    assert code == 0 and "gpu: a100-80gb-2" in out
    code, out, _ = run(capsys, "mig", "compare", "--demand", str(files["pods"]), "--gpus", "A100-80GB:3", "-o", "json")
    rows = json.loads(out)["rows"]
    assert code == 0 and rows[0]["layout"] == "planner (per GPU)"
    assert all(rows[0]["served_milli"] >= r["served_milli"] for r in rows[1:])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["mig", "plan", "--demand", "{pods}"], "no GPUs to plan"),
        (["mig", "plan", "--demand", "{pods}", "--gpus", "T4:2"], "not a MIG-capable GPU model"),
        (["mig", "plan", "--demand", "{pods}", "--gpus", "A100-80GB:x"], "MODEL[:COUNT]"),
        (["mig", "plan", "--demand", "{bad}"], "field demand.0.gpu_milli"),
        (["mig", "plan", "--demand", "{plan}", "--time-limit", "0"], "--time-limit"),
        (["mig", "plan", "--demand", "{missing}"], "cannot read file"),
        (["mig", "profiles", "--gpu", "V100"], "not a MIG-capable"),
        (["simulate", "--nodes", "{nodes}", "--pods", "{pods}", "--slices", "bogus"], "unknown slice mode"),
        (["simulate", "--nodes", "{nodes}", "--pods", "{pods}", "--slices", "mig", "--mig-map", "G2=T4"], "--mig-map"),
        (["simulate", "--nodes", "{nodes}", "--pods", "{pods}", "--slices", "mig", "--mode", "replay"], "--slices"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("demand:\n  - {gpu_milli: 2000, count: 1}\n")
    paths = {**{k: str(v) for k, v in files.items()}, "bad": str(bad), "missing": str(tmp_path / "nope.yaml")}
    code, _, err = run(capsys, *(a.format(**paths) for a in args))
    assert code == 2, err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_simulate_slices_mig_reports_the_cost_of_isolation(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["simulate", "--nodes", str(files["nodes"]), "--pods", str(files["pods"]), "--policy", "best-fit,fgd"]
    code, out, _ = run(capsys, *common, "--seeds", "1-2", "--slices", "mig", "--workers", "1", "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert data["slices"] == "mig" and data["mig_map"] == {"G2": "A100-80GB"}
    assert len(data["results"]) == 8  # 2 policies x 2 seeds x (free, MIG)
    costs = {c["policy"]: c for c in data["isolation_cost"]}
    assert set(costs) == {"best-fit", "fgd"}
    for c in costs.values():
        assert c["seeds"] == [1, 2]
        diff = c["mig_unallocated_pct_at_100"] - c["free_unallocated_pct_at_100"]
        assert c["isolation_cost_pp"] == pytest.approx(diff, abs=0.011)
    code, out, _ = run(capsys, *common, "--seeds", "1", "--slices", "mig", "--workers", "1")
    assert code == 0 and "cost of MIG isolation" in out and "G2 -> A100-80GB" in out

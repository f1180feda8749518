"""``seedancectl simulate``: outputs, reports, and bad input (exit 2, one line, no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from seedance.cli.main import main

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"node-{i},64000,262144,{g},{m}\n" for i, (g, m) in enumerate([(8, "G2")] * 6 + [(2, "T4")] * 4)
)
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    + "".join(
        f"pod-{i:03d},{4000 + 1000 * (i % 3)},8192,{k},{m},,LS,Running,{i * 10},{i * 10 + 500},{i * 10}\n"
        for i, (k, m) in enumerate([(1, 500), (1, 1000), (0, 0), (2, 1000), (1, 300)] * 8)
    )
)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    n, p = tmp_path / "nodes.csv", tmp_path / "openb_pod_list_tiny.csv"
    n.write_text(NODES)
    p.write_text(PODS)
    return n, p


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_output_has_the_documented_keys(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    n, p = files
    code, out, _ = run(
        capsys,
        "simulate",
        "--nodes",
        str(n),
        "--pods",
        str(p),
        "--policy",
        "best-fit,fgd",
        "--seeds",
        "1-2",
        "-o",
        "json",
        "--workers",
        "1",
        "--report",
        str(tmp_path / "rep"),
    )
    assert code == 0
    doc = json.loads(out)
    assert len(doc["results"]) == 4
    r = doc["results"][0]
    for key in (
        "policy",
        "trace",
        "seed",
        "mode",
        "arrived_pct",
        "alloc_pct",
        "frag_pct",
        "unallocated_pct_at_100",
        "wall_s",
    ):
        assert key in r
    assert r["trace"] == "tiny" and r["mode"] == "inflation" and len(r["arrived_pct"]) == 131
    assert {s["policy"] for s in doc["summary"]} == {"best-fit", "fgd"}
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "<img" in html and "best-fit" in html
    assert json.loads((tmp_path / "rep" / "results.json").read_text())["results"][0]["policy"] == "best-fit"


def test_csv_table_and_replay(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    n, p = files
    code, out, _ = run(
        capsys,
        "simulate",
        "--nodes",
        str(n),
        "--pods",
        str(p),
        "--policy",
        "packing",
        "--seeds",
        "3",
        "-o",
        "csv",
        "--workers",
        "1",
        "--out",
        str(tmp_path / "o.csv"),
    )
    assert code == 0 and out.splitlines()[0].startswith("trace,policy,seeds,")
    assert (tmp_path / "o.csv").read_text().strip() == out.strip()
    code, out, _ = run(
        capsys,
        "simulate",
        "--nodes",
        str(n),
        "--pods",
        str(p),
        "--policy",
        "best-fit",
        "--seeds",
        "0",
        "--mode",
        "replay",
        "-o",
        "json",
    )
    assert code == 0
    rec = json.loads(out)["results"][0]
    assert rec["mode"] == "replay" and rec["scheduled"] + rec["never_scheduled"] == 40
    code, out, _ = run(
        capsys,
        "simulate",
        "--nodes",
        str(n),
        "--pods",
        str(p),
        "--policy",
        "best-fit",
        "--seeds",
        "0",
        "--workers",
        "1",
    )
    assert code == 0 and "best-fit" in out and "unallocated" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--policy", "worst-fit"], "unknown placement policy 'worst-fit'; valid names:"),
        (["--seeds", "9-3"], "empty range"),
        (["--seeds", "x"], "not a seed"),
        (["--pods", "/nonexistent/pods.csv"], "file not found"),
        (["--arrived-max", "0"], "--arrived-max"),
        (["--mode", "replay", "--capacity-scale", "-1"], "--capacity-scale"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    n, p = files
    base = ["simulate", "--nodes", str(n), "--pods", str(p), "--seeds", "1", "--workers", "1"]
    code, out, err = run(capsys, *base, *args)
    assert code == 2
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err


def test_malformed_pod_file_names_file_line_field(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    n, _ = files
    bad = tmp_path / "bad.csv"
    bad.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nok,1000,1,1,500\nbad,1000,1,2,500\n")
    code, _, err = run(capsys, "simulate", "--nodes", str(n), "--pods", str(bad), "--seeds", "1")
    assert (
        code == 2
        and err.strip()
        == f"error: {bad}:3: field num_gpu: a fractional share (500 milli) needs num_gpu 1, got 2"
    )


def test_console_script_on_the_real_default_trace() -> None:
    exe = Path(sys.executable).parent / "seedancectl"
    proc = subprocess.run(
        [str(exe), "simulate", "--policy", "best-fit", "--seeds", "42", "-o", "json", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)["results"][0]
    assert r["trace"] == "default" and 5.5 < r["unallocated_pct_at_100"] < 9.0
    bad = subprocess.run(
        [str(exe), "simulate", "--policy", "nope"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "valid names" in bad.stderr and "Traceback" not in bad.stderr

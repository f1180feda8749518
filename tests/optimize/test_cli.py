"""``seedancectl optimize`` and ``kernels``: JSON shape, HTML report, bad input exits 2, submit to the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedance.cli.main import main

FAST = ("--pop", "24", "--generations", "10")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
    return tmp_path / "home"


def test_families_lists_the_spaces(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "optimize", "families", "-o", "json")
    rows = {r["family"]: r for r in json.loads(out)}
    assert code == 0 and {"llama-3", "bert", "resnet", "detr", "yolo"} <= set(rows)
    assert rows["detr"]["grid_points"] == 4 * 1 * 8 * 1 * 8 * 1
    code, out, _ = run(capsys, "optimize", "families")
    assert code == 0 and "SQuAD 2.0 dev F1" in out


def test_deploy_json_and_html_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "optimize", "deploy", "--family", "detr", "--slo-ms", "100", *FAST, "--seeds", "1-2",
                         "-o", "json", "--report", str(tmp_path / "rep"))
    assert code == 0, err
    p = json.loads(out)
    for key in ("front", "exact_front_size", "hypervolume", "exact_hypervolume", "hypervolume_ratio"):
        assert key in p
    assert p["enumerated"] == 256 and p["exact_front_size"] == len(p["exact_front"]) > 0
    assert 0 < p["hypervolume_ratio"] <= 1.0 and p["hypervolume"] <= p["exact_hypervolume"]
    assert [r["seed"] for r in p["nsga2"]["runs"]] == [1, 2]
    assert all(r["p95_ms"] <= 100 for r in p["front"]) and p["chosen"] in p["front"]
    assert p["whitepaper"]["rows"][0]["row"] == "whitepaper claim"
    assert p["whitepaper"]["claim"] == {"gflops": 1.8, "latency_ms": 23.0, "accuracy": 42.1,
                                        "vs_baseline": "+5.7% accuracy, -22% latency"}
    assert any(s.startswith("[detr-paper]") for s in p["sources"])
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "plotly" in html and "exact front" in html and "NSGA-II front" in html
    assert json.loads((tmp_path / "rep" / "result.json").read_text())["family"] == "detr"


@pytest.mark.parametrize(("argv", "message"), [
    (("--family", "gpt-5"), "error: --family: unknown family 'gpt-5'; valid: llama-3, bert, resnet, detr, yolo"),
    (("--family", "detr", "--slo-ms", "1"), "error: --slo-ms/--min-accuracy: the latency bound binds"),
    (("--family", "resnet", "--min-accuracy", "90"), "the accuracy floor binds: the best published ImageNet top-1"),
    (("--family", "detr", "--slo-ms", "-3"), "error: --slo-ms: must be > 0"),
    (("--family", "detr", "--prices", "cheap"), "valid: catalog, on-demand, spot"),
    (("--family", "detr", "--pick", "best"), "valid: cheapest, fastest, accurate"),
])
def test_bad_input_is_one_line_and_exit_2(argv: tuple[str, ...], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "optimize", "deploy", *argv, *FAST)
    assert code == 2 and err.count("\n") == 1 and message in err


def test_malformed_profile_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "prof.json"
    bad.write_text(json.dumps({"schema": "seedance.kernels.profile/v1", "device": "cpu", "device_name": "x",
                               "dtype": "float32", "rows": [{"model": "bert-base", "variant": "compiled"}]}))
    code, _, err = run(capsys, "optimize", "deploy", "--family", "bert", "--profile", str(bad), *FAST)
    assert code == 2 and err.startswith(f"error: {bad}:1: field rows[0].batch: must be an integer >= 1")
    code, _, err = run(capsys, "kernels", "show", str(bad))
    assert code == 2 and "rows[0].batch" in err


def test_chosen_point_is_submitted_as_an_inference_service(home: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "optimize", "deploy", "--family", "yolo", "--slo-ms", "20", "--min-accuracy", "50",
                       "--pick", "cheapest", *FAST, "-o", "json")
    chosen = json.loads(out)["chosen"]
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("kind: Cluster\nmetadata: {name: default}\nspec:\n  nodes:\n"
                       f"    - {{name: n0, cpu_milli: 64000, memory_mib: 256000, gpu_count: 4, "
                       f"gpu_model: {chosen['gpu']}}}\n")
    assert run(capsys, "submit", "-f", str(cluster))[0] == 0
    code, out, err = run(capsys, "optimize", "deploy", "--family", "yolo", "--slo-ms", "20", "--min-accuracy", "50",
                         "--pick", "cheapest", *FAST, "-o", "json", "--submit", "--name", "detector")
    assert code == 0, err
    sub = json.loads(out)["submitted"]
    assert sub["kind"] == "InferenceService" and sub["created"] is True
    job = sub["job"]
    assert job["name"] == "detector" and job["kind"] == "InferenceService" and job["status"] == "running"
    assert job["gpu_types"] == [chosen["gpu"]] and job["num_gpu"] == chosen["count"]
    assert job["labels"]["seedance.io/model"] == chosen["variant"]
    assert job["labels"]["seedance.io/slo-p95-ms"] == "20"
    code, out, _ = run(capsys, "get", "jobs", "-o", "json")
    assert [j["name"] for j in json.loads(out)] == ["detector"]


def test_kernels_bench_cli_writes_a_profile_show_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "p.json"
    code, out, err = run(capsys, "kernels", "bench", "--models", "resnet-50", "--variants", "eager,fused",
                         "--batches", "1", "--runs", "2", "--warmup", "1", "--image-size", "32", "--out", str(out_file),
                         "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [(r["variant"], r["runs"]) for r in doc["rows"]] == [("eager", 2), ("fused", 2)]
    eager, fused = doc["rows"]
    assert eager["peak_mib"] > eager["activation_peak_mib"] > 0
    assert fused["peak_mib"] < eager["peak_mib"]  # the folded model holds no BatchNorm buffers
    assert doc["fused_paths"] == {"resnet-50": "BatchNorm folded into the convolutions"}
    code, out, _ = run(capsys, "kernels", "show", str(out_file))
    assert code == 0 and "resnet-50" in out
    code, _, err = run(capsys, "kernels", "bench", "--variants", "compiled", "--runs", "1")
    assert code == 2 and "eager variant is the baseline" in err


def test_chosen_point_reaches_a_live_control_plane_over_http(home: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from tests.control.conftest import start_live_server
    from tests.control.helpers import ADMIN_TOKEN

    server, stop = start_live_server(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        assert run(capsys, "config", "set-context", "lab", "--server", server.url, "--token", ADMIN_TOKEN,
                   "--use")[0] == 0
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text("kind: Cluster\nmetadata: {name: default}\nspec:\n  nodes:\n"
                           "    - {name: l40s-0, cpu_milli: 64000, memory_mib: 256000, gpu_count: 4, "
                           "gpu_model: L40S}\n")
        assert run(capsys, "submit", "-f", str(cluster))[0] == 0
        code, out, err = run(capsys, "optimize", "deploy", "--family", "bert", "--slo-ms", "18", "--min-accuracy", "80",
                             *FAST, "-o", "json", "--submit", "--tier", "gold")
        assert code == 0, err
        p = json.loads(out)
        assert p["chosen"]["gpu"] == "L40S"  # the cheapest reader meeting the SLO runs on an L40S
        job = p["submitted"]["job"]
        assert job["kind"] == "InferenceService" and job["tier"] == "gold" and job["gpu_types"] == ["L40S"]
        server.service.loop.run_once()  # the fixture's server loop is off: one cycle by hand
        code, out, _ = run(capsys, "get", "jobs", "-o", "json")
        (got,) = json.loads(out)
        assert got["name"] == job["name"] and got["status"] == "running" and got["node"] == "l40s-0"
        assert not (home / "local.db").exists()
    finally:
        stop()

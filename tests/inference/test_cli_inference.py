"""``seedancectl inference``: JSON shape, the default load, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedance.cli.inference import parse_batcher_options
from seedance.cli.main import main
from seedance.core.errors import InputError

KEYS = {"policy", "goodput_rps", "completed_rps", "tokens_per_s", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
        "tpot_ms_p99", "peak_kv_mib", "preemptions"}


def _trace(tmp_path: Path) -> Path:
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(60):
        rows.append(f"2023-11-16 18:{15 + i // 60:02d}:{i % 60:02d}.{(i * 37) % 100:02d},{200 + 97 * (i % 13)},"
                    f"{20 + 31 * (i % 7)}")
    p = tmp_path / "trace.csv"
    p.write_text("\n".join(rows), encoding="utf-8")
    return p


def test_simulate_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "rep"
    rc = main(["inference", "simulate", "--trace", str(_trace(tmp_path)), "--policy", "static,continuous,seedance",
               "--replicas", "1", "--rate-scale", "2", "-o", "json", "--report", str(report),
               "--batcher-option", "seedance.delta=0.8"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in out["results"]] == ["static", "continuous", "seedance"]
    assert all(set(r) >= KEYS for r in out["results"])
    assert out["setup"]["rate_scale"] == 2.0
    assert out["claim"]["whitepaper_qps_ratio"] == pytest.approx(68.7 / 42.1, abs=1e-3)
    assert (report / "report.html").read_text().count("<img") == 3
    assert json.loads((report / "results.json").read_text())["results"][0]["policy"] == "static"


def test_default_load_is_where_static_keeps_the_slo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["inference", "simulate", "--trace", str(_trace(tmp_path)), "--policy", "static,seedance",
               "--replicas", "1", "-o", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["setup"]["load_chosen_as"] == "static's SLO capacity"
    assert out["results"][0]["meets_slo"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "fifo"], "unknown batcher 'fifo'"),
        (["--rate-scale", "-1"], "--rate-scale"),
        (["--gpu", "T4"], "no measured profile"),
        (["--batcher-option", "seedance.delta"], "POLICY.OPTION=VALUE"),
        (["--batcher-option", "seedance.gamma=1"], "unknown option 'gamma'"),
        (["--ttft-ms", "0"], "--ttft-ms"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                          message: str) -> None:
    rc = main(["inference", "simulate", "--trace", str(_trace(tmp_path)), "--rate-scale", "1", *args][:])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and message in err[0]


def test_missing_trace_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inference", "simulate", "--trace", str(tmp_path / "nope.csv")]) == 2
    assert "file not found" in capsys.readouterr().err


def test_batcher_option_parsing() -> None:
    assert parse_batcher_options(["static.batch_size=8", "static.max_new_tokens=64"]) == {
        "static": {"batch_size": "8", "max_new_tokens": "64"}}
    with pytest.raises(InputError):
        parse_batcher_options(["=3"])


def test_execute_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["inference", "execute", "--policy", "static,seedance", "--requests", "4", "--token-scale", "0.01",
               "--rate-scale", "100", "-o", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["outputs_equal_reference"] for r in out["results"]] == [True, True]
    assert [r["kv_block_accounting_max_rel_err"] for r in out["results"]] == [0.0, 0.0]


def test_tune_baselines_reports_tuned_beside_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["inference", "simulate", "--trace", str(_trace(tmp_path)), "--policy", "continuous-chunked,seedance",
               "--replicas", "1", "--rate-scale", "4", "--capacity", "--tune-baselines", "--ttft-ms", "2000",
               "-o", "json"])
    assert rc == 0
    rows = {r["policy"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    ch = rows["continuous-chunked"]
    assert ch["default_options"]["max_num_batched_tokens"] == 2048
    assert set(ch["tuned_options"]) == {"max_num_batched_tokens", "max_num_seqs", "watermark"}
    assert ch["capacity_rps"] >= ch["default_capacity_rps"]
    assert ch["capacity_rate_scale"] >= ch["default_capacity_rate_scale"]
    # every grid value was tried (6 powers of two + the SLO-derived budget, then 4 max_num_seqs values)
    assert ch["tuning_settings_tried"] >= 9
    assert "tuned_options" not in rows["seedance"] and "step_model_error" in rows["seedance"]


def test_cluster_mechanisms_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["inference", "simulate", "--trace", str(_trace(tmp_path)), "--policy", "continuous-chunked",
               "--replicas", "2", "--rate-scale", "1", "--workload", "multi-turn", "--prefix-cache",
               "--router", "prefix-aware", "--admission", "-o", "json"])
    assert rc == 0
    row = json.loads(capsys.readouterr().out)["results"][0]
    assert row["router"] == "prefix-aware" and "prefix_hit_rate" in row and row["rejected"] >= 0
    assert row["requests"] == 60
    rc = main(["inference", "simulate", "--trace", str(_trace(tmp_path)), "--policy", "continuous-chunked",
               "--replicas", "2", "--rate-scale", "1", "--prefill-replicas", "1", "--kv-link", "ib-ndr",
               "-o", "json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["completed"] == 60
    assert main(["inference", "simulate", "--trace", str(_trace(tmp_path)), "--workload", "chat"]) == 2
    assert main(["inference", "simulate", "--trace", str(_trace(tmp_path)), "--policy", "continuous",
                 "--replicas", "2", "--rate-scale", "1", "--prefill-replicas", "1", "--kv-link", "wifi"]) == 2

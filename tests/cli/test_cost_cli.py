"""``seedancectl cost`` and ``seedancectl telemetry`` on a slice of the real trace and recorded outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedance.cli.main import main
from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file

FIX = Path(__file__).resolve().parents[1] / "telemetry" / "fixtures"


@pytest.fixture
def small_trace(tmp_path: Path) -> tuple[Path, Path]:
    """The first 40 nodes and 400 pods of the default trace (same format)."""
    nodes = data_file(DEFAULT_NODES).read_text().splitlines()
    pods = data_file(DEFAULT_PODS).read_text().splitlines()
    n, p = tmp_path / "nodes.csv", tmp_path / "openb_pod_list_small.csv"
    n.write_text("\n".join(nodes[:1] + nodes[500:540]) + "\n")
    p.write_text("\n".join(pods[:401]) + "\n")
    return n, p


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_replay_bill_by_qos_then_explain(capsys: pytest.CaptureFixture[str], small_trace: tuple[Path, Path],
                                         tmp_path: Path) -> None:
    nodes, pods = small_trace
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    rc, out, err = run(capsys, "cost", "allocation", "--replay", "--nodes", str(nodes), "--pods", str(pods),
                       "--policy", "best-fit", "--aggregate", "qos", "-o", "json", "--ledger-window", "1d",
                       "--database-url", db)
    assert rc == 0, err
    doc = json.loads(out)
    names = {e["name"] for e in doc["allocations"]}
    assert "__idle__" in names and names - {"__idle__"} <= {"LS", "BE", "Burstable", "Guaranteed", "none"}
    assert abs(sum(e["total_cost"] for e in doc["allocations"]) - doc["cluster_cost"]) < 0.01
    assert doc["source"] == "replay:small:best-fit:42"
    rc, out, _ = run(capsys, "cost", "allocation", "--source", "replay:small:best-fit:42", "--window", "all",
                     "--aggregate", "qos", "--share-idle", "weighted", "-o", "csv", "--database-url", db)
    lines = out.splitlines()
    assert rc == 0 and lines[0].startswith("name,gpu_hours,gpu_cost") and not any(ln.startswith("__idle__")
                                                                                     for ln in lines)
    rc, out, _ = run(capsys, "cost", "allocation", "--source", "replay:small:best-fit:42", "--window", "all",
                     "--aggregate", "qos", "--database-url", db)
    assert rc == 0 and "__idle__" in out and "total" in out
    rc, out, err = run(capsys, "cost", "explain", "--source", "replay:small:best-fit:42", "--from",
                       "2023-01-01T00:00:00Z,2023-01-03T00:00:00Z", "--to", "2023-01-03T00:00:00Z,2023-01-05T00:00:00Z",
                       "--step", "1d", "-o", "json", "--database-url", db)
    assert rc == 0, err
    ex = json.loads(out)
    assert abs(ex["residual"]) < 1e-6 and len(ex["hourly"]) == 2
    assert set(ex["effects"]) == {"volume", "price", "mix", "idle", "efficiency", "shared"}
    rc, out, _ = run(capsys, "cost", "explain", "--source", "replay:small:best-fit:42", "--from",
                     "2023-01-01T00:00:00Z,2023-01-03T00:00:00Z", "--to", "2023-01-03T00:00:00Z,2023-01-05T00:00:00Z",
                     "--step", "1d", "--database-url", db)
    assert rc == 0 and "main cause" in out and "attribution by period" in out


def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    rc, _, err = run(capsys, "cost", "allocation", "--window", "fortnight", "--database-url", db)
    assert rc == 2 and err.count("\n") == 1 and "unknown window 'fortnight'" in err
    rc, _, err = run(capsys, "cost", "explain", "--from", "7d", "--to", "7d", "--filter", "team", "--database-url", db)
    assert rc == 2 and "expected k=v" in err
    bad = tmp_path / "prices.yaml"
    bad.write_text("cpu: -1\n")
    rc, _, err = run(capsys, "cost", "allocation", "--replay", "--prices", str(bad), "--database-url", db)
    assert rc == 2 and "must be a price >= 0" in err


def test_telemetry_collect_and_batch_size(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "telemetry", "collect", "--collector", "file", "--query-file",
                     str(FIX / "malformed.txt"), "-o", "json")
    doc = json.loads(out)
    assert rc == 0 and [g["index"] for g in doc["gpus"]] == [0, 5]
    assert doc["skipped"] == {"malformed": 1, "unknown-unit": 1, "bad-value": 2}
    rc, out, _ = run(capsys, "telemetry", "batch-size", "--util", "40", "--util", "90", "--util", "100")
    assert rc == 0 and out.splitlines() == ["40% -> 128", "90% -> 32", "100% -> 8"]
    rc, _, err = run(capsys, "telemetry", "collect", "--collector", "dcgm")
    assert rc == 2 and "valid names" in err


def test_agent_writes_a_local_ledger(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    rc, _, err = run(capsys, "telemetry", "agent", "--node", "n1", "--collector", "fake", "--gpus", "4",
                     "--ticks", "3", "--interval", "0.05", "--no-processes", "--cpu-cores", "8", "--ram-gib", "32",
                     "--database-url", db)
    assert rc == 0, err
    rc, out, _ = run(capsys, "cost", "allocation", "--window", "today", "-o", "json", "--database-url", db)
    doc = json.loads(out)
    assert rc == 0 and [e["name"] for e in doc["allocations"]] == ["__idle__"] and doc["total_cost"] > 0

"""``seedancectl scheduler policy enable``: the compliance gate on the local store, refusal, logged override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from seedance.cli.main import main
from seedance.control.db.models import EventRecord
from seedance.control.db.session import Database

ROOT = Path(__file__).parents[2]
ENABLE = ["scheduler", "policy", "enable", "--name=peak-aware", "--plugin=electricity-pricing",
          "--region=US-CAL-CISO", "--config-file=./policies/peak_aware.yaml"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(ROOT)
    return tmp_path / "home"


def local_events(home: Path, kind: str) -> list[EventRecord]:
    db = Database(f"sqlite:///{home / 'local.db'}", pool_size=1)
    try:
        with db.read() as s:
            return list(s.scalars(select(EventRecord).where(EventRecord.kind == kind)))
    finally:
        db.dispose()


def test_enable_refused_on_system_errors_then_override_recorded(
        shared_data: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(ENABLE) == 0  # a clean store: only a warning (no backup on record)
    assert main(["scheduler", "policy", "disable", "peak-aware"]) == 0
    assert main(["policy", "evidence", "backup", "encrypted=false", "cipher=none"]) == 0
    capsys.readouterr()
    assert main(ENABLE) == 1
    out = capsys.readouterr()
    assert "SDC006" in out.out and "refused: 1 compliance error(s)" in out.err
    assert main(["scheduler", "policy", "list", "-o", "json"]) == 0
    assert [p["enabled"] for p in json.loads(capsys.readouterr().out)["policies"]] == [False]
    assert main([*ENABLE, "--override"]) == 2
    assert "--override needs --reason" in capsys.readouterr().err
    assert local_events(home, "policy.compliance_override") == []
    assert main([*ENABLE, "--override", "--reason", "restore drill of the encrypted copy is booked"]) == 0
    capsys.readouterr()
    (ev,) = local_events(home, "policy.compliance_override")
    assert ev.data["policy"] == "peak-aware" and ev.data["reason"] == "restore drill of the encrypted copy is booked"
    assert [e["rule"] for e in ev.data["errors"]] == ["SDC006"] and ev.data["source"] == "policies/peak_aware.yaml"
    assert main(["scheduler", "policy", "list", "-o", "json"]) == 0
    assert [p["enabled"] for p in json.loads(capsys.readouterr().out)["policies"]] == [True]
    assert main([*ENABLE, "--no-system"]) == 0  # the YAML alone has no error


def test_evidence_command_bad_input_exits_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "evidence", "node-destruction", "cluster=default", "node=n1",
                 "destroyed_at=2026-12-01T00:00:00Z", "wipe_proof_sha256=xyz"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "field wipe_proof_sha256" in err[0]
    assert main(["policy", "evidence", "backup", "encrypted"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


MANIFEST = """\
kind: Cluster
metadata: {name: default}
spec:
  nodes:
    - {name: t4-0, cpu_milli: 32000, memory_mib: 256000, gpu_count: 2, gpu_model: T4}
    - {name: t4-1, cpu_milli: 32000, memory_mib: 256000, gpu_count: 2, gpu_model: T4}
---
kind: TrainingJob
metadata: {name: half-a}
spec: {tier: silver, gpus: 0.5, duration_hours: 2}
---
kind: TrainingJob
metadata: {name: half-b}
spec: {tier: bronze, gpus: 0.5, duration_hours: 2}
---
kind: TrainingJob
metadata: {name: whole}
spec: {tier: silver, gpus: 1, duration_hours: 1}
"""


def test_store_dry_run_from_the_cli_changes_nothing(
        shared_data: Path, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.control.test_dryrun import dump

    monkeypatch.setenv("COLUMNS", "250")
    man = tmp_path / "m.yaml"
    man.write_text(MANIFEST)
    assert main(["submit", "-f", str(man)]) == 0
    capsys.readouterr()
    from seedance.control.client import LocalClient

    local = LocalClient()
    before = dump(local.service)
    assert main([*ENABLE, "--dry-run", "--placement", "random", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert dump(local.service) == before
    local.close()
    assert (out["jobs"], out["nodes"], out["current"]["placement"], out["proposed"]["placement"]) == (
        3, 2, "best-fit", "random")
    assert out["proposed"]["queue_order"] == out["current"]["queue_order"] == "priority"  # a CostPolicy sets neither
    assert out["compliance"]["failed"] is False
    assert main([*ENABLE, "--dry-run", "--placement", "random"]) == 0
    text = capsys.readouterr().out
    assert "nothing was changed" in text and "jobs placed differently" in text and "SLA attainment per tier" in text
    assert main(["scheduler", "policy", "list", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["policies"] == []
    assert main([*ENABLE, "--dry-run", "--placement", "worst-fit"]) == 2
    assert "unknown placement policy 'worst-fit'" in capsys.readouterr().err

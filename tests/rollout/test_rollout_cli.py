"""``seedancectl rollout run`` end to end against the demo service, and bad canary files (exit 2)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from seedance.cli.main import main
from seedance.core.errors import InputError
from seedance.rollout.config import load_canary
from seedance.rollout.demo import DemoService, LoadGenerator
from tests.rollout.helpers import FLAG, write_flag_file

CANARY = """\
flag: enable_cpu_throttling
candidate: "on"
baseline: "off"
step_weight: 5
period_s: 1.5
sample_s: 0.25
metrics_url: {url}/metrics
thresholds:
  latency_window_s: 2
  latency_hold_s: 2
  error_window_s: 4
  min_requests: 4
"""


@pytest.mark.parametrize(("fault", "rc", "phase"), [({}, 0, "promoted"), ({"latency_ms": 600.0}, 1, "rolled-back")])
def test_rollout_run_exits_by_outcome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str], fault: dict[str, float], rc: int,
                                      phase: str) -> None:
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    flags = write_flag_file(tmp_path)
    svc = DemoService(str(flags), FLAG, poll_ms=50)
    url = svc.start()
    load = LoadGenerator(url, rps=120, threads=6, seed=3)
    load.start()
    cfg = tmp_path / "canary.yaml"
    cfg.write_text(CANARY.format(url=url))
    try:
        time.sleep(0.3)
        if fault:
            svc.inject(**fault)
        assert main(["rollout", "run", "--config", str(cfg), "--flag-file", str(flags), "--timeout", "30"]) == rc
    finally:
        load.stop()
        svc.close()
    out = json.loads(capsys.readouterr().out)
    assert out["phase"] == phase
    if rc:
        assert out["trip"]["reason"] == "latency"
    else:
        assert [p["verdict"] for p in out["periods"]] == ["healthy"] * 3
    from sqlalchemy import select

    from seedance.control.db.models import EventRecord
    from seedance.control.db.session import Database

    db = Database(f"sqlite:///{tmp_path / 'home' / 'local.db'}", pool_size=1)
    with db.read() as s:
        kinds = [e.kind for e in s.scalars(select(EventRecord).where(EventRecord.kind.like("rollout.%")))]
    db.dispose()
    assert kinds == ["rollout.started", "rollout.promoted" if rc == 0 else "rollout.rolled_back"]


@pytest.mark.parametrize(("text", "line", "field", "words"), [
    ("flag: f\nstep_weight: 10\n", 2, "step_weight", "less than or equal to 5"),
    ("flag: f\nthresholds:\n  trip_p95_ms: 100\n", 2, "thresholds", "healthy_p95_ms must not exceed"),
    ("flag: f\nthresholds:\n  latency_hold: 30\n", 3, "thresholds.latency_hold", "Extra inputs"),
    ("flag: f\ncandidate: on\n  baseline: off\n", 3, "candidate.baseline", "not valid YAML"),  # as indented
])
def test_bad_canary_files_are_located(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: int,
                                      field: str, words: str) -> None:
    f = tmp_path / "canary.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as info:
        load_canary(f)
    assert (info.value.line, info.value.field) == (line, field) and words in info.value.message
    flags = write_flag_file(tmp_path)
    assert main(["rollout", "run", "--config", str(f), "--flag-file", str(flags), "--events", "none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {f}:{line}: field {field}: ")

"""``seedancectl`` job commands: local embedded store, kubectl-style contexts to a live server."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from seedance.cli.main import main
from tests.control.conftest import LiveServer
from tests.control.helpers import ADMIN_TOKEN

MANIFEST = """\
apiVersion: seedance/v1
kind: Cluster
metadata: {name: default}
spec:
  nodes:
    - {name: gold-0, cpu_milli: 64000, memory_mib: 512000, gpu_count: 8, gpu_model: A100-80GB,
       labels: {gpu.sla.level: gold, gpu.mode: exclusive}}
    - {name: t4-0, cpu_milli: 32000, memory_mib: 256000, gpu_count: 4, gpu_model: T4}
---
apiVersion: seedance/v1
kind: TrainingJob
metadata: {name: llama-ft, labels: {team: nlp}}
spec: {tier: silver, gpus: 4, gpu_types: [A100-80GB], duration_hours: 12}
---
kind: InferenceService
metadata: {name: chat}
spec: {tier: gold, gpus: 0.25, gpu_types: [T4]}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
    return tmp_path / "home"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_local_mode_submit_get_describe_explain_cancel(home: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "all.yaml"
    f.write_text(MANIFEST)
    code, out, err = run(capsys, "submit", "-f", str(f), "-o", "json")
    assert code == 0, err
    results = json.loads(out)
    assert [(r["kind"], r["created"]) for r in results] == [("Cluster", True), ("TrainingJob", True),
                                                            ("InferenceService", True)]
    assert results[1]["object"]["status"] == "running"  # local mode runs a scheduling cycle at once
    assert (home / "local.db").exists()
    code, out, _ = run(capsys, "get", "jobs", "-o", "json")
    jobs = {j["name"]: j for j in json.loads(out)}
    assert jobs["llama-ft"]["node"] == "gold-0" and jobs["chat"]["node"] == "t4-0"
    assert jobs["llama-ft"]["cost_score"] == pytest.approx(4 * 12 * 5.12)
    code, out, _ = run(capsys, "get", "nodes", "-o", "yaml")
    nodes = {n["name"]: n for n in yaml.safe_load(out)}
    assert sum(nodes["gold-0"]["allocated_gpu_milli"]) == 4000 and nodes["t4-0"]["allocated_gpu_milli"][0] == 250
    code, out, _ = run(capsys, "describe", "job", "llama-ft", "-o", "yaml")
    desc = yaml.safe_load(out)
    assert desc["job"]["labels"] == {"team": "nlp"} and desc["decisions"][0]["outcome"] == "bind"
    code, out, _ = run(capsys, "explain", "job", "chat", "-o", "json")
    ex = json.loads(out)
    assert ex["summary"].startswith("running on t4-0")
    assert ex["latest"]["explanation"]["rejected_by"]["GpuModelMatch"] == 1
    code, out, _ = run(capsys, "explain", "job", "chat")  # the table form
    assert code == 0 and "rejected by filter" in out
    code, out, _ = run(capsys, "cancel", "job", "chat", "-o", "json")
    assert code == 0 and json.loads(out)["status"] == "cancelled"
    code, _, err = run(capsys, "cancel", "chat")
    assert code == 2 and err.strip() == "error: 409: job chat is already cancelled"
    # submitting the same file again: the cluster is unchanged, the named jobs already exist
    code, _, err = run(capsys, "submit", "-f", str(f))
    assert code == 2 and "a job called 'llama-ft' already exists" in err and err.count("\n") == 1


@pytest.mark.parametrize(("text", "message"), [
    ("kind: TrainingJob\nspec: {gpus: 1.5}\n", "bad.yaml:1: field spec.gpus: Value error, more than one GPU"),
    ("kind: Pod\n", "bad.yaml:1: field kind: kind must be one of"),
    ("a: [1, 2\n", "bad.yaml:2: not valid YAML"),
    ("kind: TrainingJob\nspec:\n  gpus: 1\n---\nkind: TrainingJob\nspec: {tier: diamond}\n",
     "bad.yaml:5: field spec.tier: Input should be 'gold', 'silver' or 'bronze'"),
    ("x: &a [1]\ny: *a\n", "bad.yaml:1: YAML anchors and aliases are not accepted"),
])
def test_bad_manifests_are_one_clear_line_and_exit_2(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     text: str, message: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    code, _, err = run(capsys, "submit", "-f", str(f))
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
    assert not (home / "local.db").exists()  # validated before anything is stored


def test_contexts_point_the_cli_at_a_server(home: Path, tmp_path: Path, live_server: LiveServer,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys, "config", "set-context", "lab", "--server", live_server.url, "--token", ADMIN_TOKEN,
                     "--use")
    assert code == 0
    cfg = home / "config.yaml"
    assert stat.S_IMODE(os.stat(cfg).st_mode) == 0o600
    assert run(capsys, "config", "current-context")[1].strip() == "lab"
    f = tmp_path / "all.yaml"
    f.write_text(MANIFEST)
    code, out, err = run(capsys, "submit", "-f", str(f), "-o", "json")
    assert code == 0, err
    live_server.service.loop.run_once()  # the server's loop is off in this fixture: one cycle by hand
    code, out, _ = run(capsys, "get", "jobs", "-o", "json")
    assert {j["name"]: j["status"] for j in json.loads(out)} == {"llama-ft": "running", "chat": "running"}
    assert not (home / "local.db").exists()  # nothing went to the local store
    code, out, _ = run(capsys, "explain", "job", "llama-ft", "-o", "json")
    assert json.loads(out)["latest"]["policy"] == "best-fit"
    # a second context with a bad token, picked for one command only
    run(capsys, "config", "set-context", "bad", "--server", live_server.url, "--token", "sdt_nope")
    code, _, err = run(capsys, "get", "jobs", "--context", "bad")
    assert code == 2 and "unknown or revoked token" in err
    listing = run(capsys, "config", "get-contexts")[1]
    assert "* lab" in listing and "bad" in listing and ADMIN_TOKEN not in listing
    run(capsys, "config", "use-local")
    code, out, _ = run(capsys, "get", "jobs", "-o", "json")
    assert code == 0 and json.loads(out) == []  # the (empty) local store again
    code, _, err = run(capsys, "config", "use-context", "nowhere")
    assert code == 2 and "no context 'nowhere'; known contexts: lab, bad" in err


def test_serve_refuses_bad_settings(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "serve", "--database-url", "mysql://x@y/z")
    assert code == 2 and "sqlite:/// or postgresql" in err
    code, _, err = run(capsys, "serve", "--placement", "nope")
    assert code == 2 and "unknown placement policy 'nope'" in err

"""The CI example runs as written: its check step's command, on the repository's policies, gives valid SARIF."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml

from seedance.cli.main import main

ROOT = Path(__file__).parents[2]
WORKFLOW = ROOT / "deploy" / "ci" / "compliance-sarif.yml"


def test_workflow_check_step_passes_on_the_shipped_policies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    wf = yaml.safe_load(WORKFLOW.read_text())
    steps = wf["jobs"]["compliance"]["steps"]
    assert wf["jobs"]["compliance"]["permissions"]["security-events"] == "write"
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif"))
    assert upload["if"] == "always()" and upload["with"]["sarif_file"] == "compliance.sarif"
    check = next(s for s in steps if s.get("id") == "check")
    line = next(x for x in check["run"].splitlines() if x.strip().startswith("seedancectl"))
    argv = shlex.split(line)[1:]
    monkeypatch.chdir(ROOT)
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "policies").glob("*.yaml"))
    out = tmp_path / "compliance.sarif"
    argv = [a for a in argv if a != "policies/*.yaml"]
    argv[argv.index("compliance.sarif")] = str(out)
    assert main([*argv[:2], *files, *argv[2:]]) == 0  # the shipped policies have no error finding
    log = json.loads(out.read_text())
    schema = json.loads((ROOT / "tests" / "compliance" / "fixtures" / "sarif-schema-2.1.0.json").read_text())
    assert list(jsonschema.Draft4Validator(schema).iter_errors(log)) == []
    assert [a["location"]["uri"] for a in log["runs"][0]["artifacts"]] == files

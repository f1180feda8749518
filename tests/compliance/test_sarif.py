"""SARIF 2.1.0 output validates against the OASIS schema and carries each finding's line, column and clauses."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import jsonschema
import pytest

from seedance.cli.main import main
from seedance.compliance.document import load_document, parse_document
from seedance.compliance.engine import check_document
from seedance.compliance.facts import BackupRecord, SystemFacts
from seedance.compliance.sarif import to_sarif

HERE = Path(__file__).parent
RULES = HERE / "fixtures" / "rules"
ROOT = HERE.parents[1]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft4Validator:
    schema = json.loads((HERE / "fixtures" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def test_sarif_of_every_fixture_validates_and_locates_each_finding(validator: jsonschema.Draft4Validator) -> None:
    reports = [check_document(load_document(p)) for p in sorted(RULES.glob("*.yaml"))]
    log = to_sarif(reports, version="0.1.0")
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert errors == []
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [f"SDC00{i}" for i in range(1, 7)]
    assert all("helpUri" not in r for r in rules)  # an empty helpUri breaks GitHub uploads
    assert "GDPR Art. 17(1)(a)" in rules[4]["properties"]["tags"]
    n = sum(len(r.findings) for r in reports)
    assert len(run["results"]) == n > 0
    fail = next(r for r in run["results"] if r["ruleId"] == "SDC001"
                and r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("SDC001-fail.yaml"))
    region = fail["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (8, 5)
    assert rules[fail["ruleIndex"]]["id"] == "SDC001" and fail["level"] == "error"


def test_suppressed_and_system_findings_are_valid_sarif(validator: jsonschema.Draft4Validator) -> None:
    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    fx = SystemFacts(collected_at=now, store="postgresql", append_only_logs=True, log_retention_hours=None,
                     backups=[BackupRecord(event_id=5, at=now, encrypted=False)])
    doc = parse_document("autoscale:\n  max_instances: 99 # seedance:skip=SDC001 reviewed\n", source="p.yaml")
    log = to_sarif([check_document(doc, fx)])
    assert list(validator.iter_errors(log)) == []
    res = {r["ruleId"]: r for r in log["runs"][0]["results"] if r["level"] == "error"}
    assert res["SDC001"]["suppressions"] == [{"kind": "inSource", "justification": "reviewed"}]
    loc = res["SDC006"]["locations"][0]
    assert loc["logicalLocations"] == [{"fullyQualifiedName": "controlplane/events/5", "kind": "resource"}]


def test_cli_writes_sarif_and_exits_1_on_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 validator: jsonschema.Draft4Validator,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "compliance.sarif"
    rel = str((RULES / "SDC002-fail.yaml").relative_to(ROOT))
    assert main(["policy", "validate", rel, "policies/cold_archive.yaml", "--format", "sarif", "-O", str(out)]) == 1
    log = json.loads(out.read_text())
    assert list(validator.iter_errors(log)) == []
    uris = [a["location"]["uri"] for a in log["runs"][0]["artifacts"]]
    assert uris == ["tests/compliance/fixtures/rules/SDC002-fail.yaml", "policies/cold_archive.yaml"]
    assert sorted(r["ruleId"] for r in log["runs"][0]["results"]) == ["SDC002", "SDC004"]  # keys unstated too
    assert "wrote sarif (2 finding(s), 2 file(s))" in capsys.readouterr().err
    assert main(["policy", "validate", "policies/cold_archive.yaml", "--format", "sarif"]) == 0
    clean = json.loads(capsys.readouterr().out)
    assert clean["runs"][0]["results"] == [] and list(validator.iter_errors(clean)) == []
    assert main(["policy", "validate", rel, "-f", "table"]) == 1
    assert "SDC002" in capsys.readouterr().out

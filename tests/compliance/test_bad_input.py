"""Bad policy files and rule ids: InputError with file, line and field; the CLI prints one line and exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from seedance.cli.main import main
from seedance.compliance.document import parse_document
from seedance.compliance.engine import check_document
from seedance.core.errors import InputError

CASES = [
    # (document, line, field, words)
    ("spec:\n  autoscale:\n    max_instances: [1\n", 4, "spec.autoscale.max_instances", "not valid YAML"),
    ("spec:\n  storage:\n    class: cold\n   bad: indent\n", 4, "spec.storage.bad", "not valid YAML"),
    ("spec:\n  autoscale:\n    max_instances: lots\n", 3, "spec.autoscale.max_instances", "must be an integer"),
    ("spec:\n  autoscale: 12\n", 2, "spec.autoscale", "must be a mapping"),
    ("spec:\n  actions:\n    - type: defrost-cache\n", 3, "spec.actions.0.type", "unknown action type"),
    ("spec:\n  actions: {type: cpu-throttling}\n", 2, "spec.actions", "must be a list"),
    ("spec:\n  storage:\n    encryption_at_rest: 'yes'\n", 3, "spec.storage.encryption_at_rest", "true or false"),
    ("spec:\n  autoscale:\n    max_instances: 9 # seedance:skip=SDC099 typo\n", 3, "seedance:skip",
     "unknown compliance rule 'SDC099'"),
    ("a: &x {b: 1}\nc: *x\n", 1, None, "anchors and aliases"),
    ("- just\n- a list\n", 1, None, "must be a YAML mapping"),
    ("spec:\n  x: !!python/object:os.system {}\n", 2, None, "not valid YAML"),
]


@pytest.mark.parametrize(("text", "line", "field", "words"), CASES)
def test_bad_documents_are_located(text: str, line: int, field: str | None, words: str) -> None:
    with pytest.raises(InputError) as info:
        check_document(parse_document(text, source="bad.yaml"))
    err = info.value
    assert (err.source, err.line, err.field) == ("bad.yaml", line, field)
    assert words in err.message


@pytest.mark.parametrize(("text", "line", "field", "words"), CASES[:3] + CASES[7:8])
def test_cli_prints_file_line_field_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                                line: int, field: str | None, words: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    assert main(["policy", "validate", str(f), "--format", "sarif"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1
    assert err[0].startswith(f"error: {f}:{line}: field {field}: ") and words in err[0]


def test_unknown_rule_ids_on_the_command_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ok.yaml"
    f.write_text("spec: {}\n")
    for opt in ("--rules", "--skip"):
        assert main(["policy", "validate", str(f), opt, "SDC001,nope"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {opt}: field rule: unknown compliance rule 'nope'; valid: SDC001 "
                              "(autoscale-max-instances), SDC002 (storage-encryption-at-rest), ")
        assert err.endswith("SDC006 (backup-encryption)")
    assert main(["policy", "validate", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read policy file" in capsys.readouterr().err


def test_malformed_suppression_is_located() -> None:
    with pytest.raises(InputError) as info:
        check_document(parse_document("spec: {}\n# seedance:skip=\n", source="s.yaml"))
    assert (info.value.line, info.value.field) == (2, "seedance:skip")

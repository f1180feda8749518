"""``seedancectl privacy``: local store and a server context, bad input as one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedance.cli.main import main
from seedance.privacy.crypto import encode_key, new_key
from seedance.privacy.settings import REPO_CONSENT_FLOW
from tests.control.helpers import ADMIN_TOKEN, serve_in_thread
from tests.privacy.conftest import REDIS_URL, Env


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_prefix: str) -> Path:
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
    monkeypatch.setenv("SEEDANCE_PRIVACY_REDIS_URL", REDIS_URL)
    monkeypatch.setenv("SEEDANCE_PRIVACY_REDIS_PREFIX", redis_prefix)
    monkeypatch.setenv("SEEDANCE_PRIVACY_MASTER_KEY", encode_key(new_key()))
    return tmp_path / "home"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_local_erase_verifies_and_writes_the_audit_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "privacy", "identify", "ada@example.org", "--trait", "email=ada@example.org",
                         "--trait", "name=Ada Lovelace", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["created"] is True
    code, out, err = run(capsys, "privacy", "backup", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["fmt"] == "sqlite"
    code, out, err = run(capsys, "privacy", "erase", "ada@example.org", "--device-id", "dev-ada-00000001",
                         "-o", "json")
    assert code == 0, err
    req = json.loads(out)
    assert req["status"] == "verified" and req["within_deadline"] is True and len(req["proof_hash"]) == 64
    assert req["report"]["stores"]["backups"]["1"]["subject_rows_sealed"] is True
    assert list((home / "audit_logs").glob("delete_requests_*Q*.parquet"))
    code, out, _ = run(capsys, "privacy", "requests", "-o", "json")
    assert [r["status"] for r in json.loads(out)] == ["verified"]
    code, out, _ = run(capsys, "privacy", "requests")
    assert "verified" in out
    code, _, err = run(capsys, "privacy", "erase", "ada@example.org")
    assert code == 2 and err.count("\n") == 1 and "unknown subject" in err


def test_bad_input_is_one_line_exit_2(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "privacy", "identify", "x@example.org", "--trait", "novalue")
    assert code == 2 and "key=value" in err
    bad = tmp_path / "flow.json"
    bad.write_text(json.dumps({**json.loads(REPO_CONSENT_FLOW.read_text()), "default_choice": "granted"}))
    code, _, err = run(capsys, "privacy", "check-consent", str(bad))
    assert code == 2 and "default_choice" in err and err.count("\n") == 1
    code, out, _ = run(capsys, "privacy", "check-consent", str(REPO_CONSENT_FLOW))
    assert code == 0 and "is valid" in out


def test_a_context_points_the_commands_at_a_server(home: Path, env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    from seedance.control.app import create_app

    app = create_app(service=env.control)
    app.state.privacy = env.privacy
    url, stop = serve_in_thread(app)
    try:
        assert run(capsys, "config", "set-context", "lab", "--server", url, "--token", ADMIN_TOKEN, "--use")[0] == 0
        code, out, err = run(capsys, "privacy", "identify", "bo@example.org", "--trait", "email=bo@example.org")
        assert code == 0, err
        code, out, err = run(capsys, "privacy", "erase", "bo@example.org", "-o", "json")
        assert code == 0, err
        assert json.loads(out)["status"] == "verified"
        from seedance.privacy.models import ErasureRequest
        from tests.privacy.helpers import table_count

        assert table_count(env, ErasureRequest) == 1  # it ran on the server's store
        code, out, _ = run(capsys, "privacy", "blacklist", "-o", "json")
        assert code == 0 and json.loads(out) == []
        code, _, err = run(capsys, "privacy", "show", "999")
        assert code == 2 and "404" in err
    finally:
        stop()

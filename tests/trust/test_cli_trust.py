"""``seedancectl trust verify`` and ``trust grades``: the registry's verifier from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedance.cli.main import main
from tests.trust.conftest import MAA_ISS, MEASUREMENT, NOW, JwksServer, Keys, claims_for, sign


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_verify_a_maa_token_with_a_pinned_jwks(tmp_path: Path, keys: Keys, capsys: pytest.CaptureFixture[str]) -> None:
    token = write(
        tmp_path, "t.jwt", sign(claims_for("maa-sevsnp", "n-123", now=NOW), keys.maa, kid="maa-1", alg="RS256")
    )
    jwks = write(tmp_path, "jwks.json", json.dumps(keys.jwks["maa"]))
    base = [
        "trust",
        "verify",
        "--token",
        str(token),
        "--service",
        f"maa={MAA_ISS}",
        "--jwks",
        str(jwks),
        "--nonce",
        "n-123",
        "--at",
        str(NOW + 5),
        "-o",
        "json",
    ]
    assert main([*base, "--measurement", MEASUREMENT["maa-sevsnp"], "--tee", "sev-snp"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verified"] is True and doc["tee"] == "sev-snp" and doc["measurement"] == MEASUREMENT["maa-sevsnp"]
    assert main([*base, "--measurement", "ff" * 48]) == 1
    assert json.loads(capsys.readouterr().out)["reason"] == "measurement"
    assert main([*base[:-2], "--at", str(NOW + 7200)]) == 1  # past exp (3600 s) + leeway
    assert capsys.readouterr().out.startswith("rejected (expired): token expired")


def test_verify_an_intel_token_with_keys_from_the_jwks_url(
    tmp_path: Path, keys: Keys, jwks_server: JwksServer, capsys: pytest.CaptureFixture[str]
) -> None:
    token = write(tmp_path, "t.jwt", sign(claims_for("ita-tdx", "n-9", now=NOW), keys.ita, kid="ita-1", alg="PS384"))
    assert (
        main(
            [
                "trust",
                "verify",
                "--token",
                str(token),
                "--service",
                "intel",
                "--jwks-url",
                jwks_server.url("ita"),
                "--nonce",
                "n-9",
                "--at",
                str(NOW),
                "-o",
                "json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["format"] == "ita-tdx"


@pytest.mark.parametrize("text", ["", "not-a-jwt", "a.b.c", "eyJhbGciOiJSUzI1NiJ9.e30.x", "...."])
def test_malformed_jwts_are_rejected_with_a_clear_reason(
    tmp_path: Path, keys: Keys, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    token = write(tmp_path, "t.jwt", text)
    jwks = write(tmp_path, "jwks.json", json.dumps(keys.jwks["maa"]))
    assert (
        main(
            [
                "trust",
                "verify",
                "--token",
                str(token),
                "--service",
                f"maa={MAA_ISS}",
                "--jwks",
                str(jwks),
                "--nonce",
                "n",
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert out.startswith("rejected (malformed): "), out


def test_verify_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = write(tmp_path, "t.jwt", "x.y.z")
    assert (
        main(["trust", "verify", "--token", str(tmp_path / "missing.jwt"), "--service", "intel", "--nonce", "n"]) == 2
    )
    assert main(["trust", "verify", "--token", str(token), "--service", "azure", "--nonce", "n"]) == 2
    assert main(["trust", "verify", "--token", str(token), "--service", "intel"]) == 2
    bad = write(tmp_path, "jwks.json", "{not json")
    assert (
        main(["trust", "verify", "--token", str(token), "--service", "intel", "--jwks", str(bad), "--nonce", "n"]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("error: ") for line in err)


def test_grades_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shares = write(
        tmp_path,
        "shares.yaml",
        """
shares:
  - {job: train, tenant: bank, node: n1, gpu: 0, backend: mig, gi: 1, ci: 0}
  - {job: chat, tenant: shop, node: n1, gpu: 0, backend: mig, gi: 2, ci: 0}
  - {job: etl, tenant: shop, node: n2, gpu: 0, backend: time-slicing}
  - {job: nb, tenant: lab, node: n2, gpu: 0, backend: time-slicing}
""",
    )
    assert main(["trust", "grades", "--from", str(shares), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [j["grade"] for j in doc["jobs"]] == ["hardware", "hardware", "runtime", "runtime"]
    assert doc["nodes"] == {"n1": "hardware", "n2": "runtime"}
    assert doc["tenants"] == {"bank": "hardware", "shop": "runtime", "lab": "runtime"}
    assert main(["trust", "grades", "--from", str(shares)]) == 0
    assert "per node: n1 hardware, n2 runtime" in capsys.readouterr().out
    bad = write(tmp_path, "bad.yaml", "shares:\n  - {job: x, tenant: t, node: n, backend: vgpu}\n")
    assert main(["trust", "grades", "--from", str(bad)]) == 2
    assert "shares[0]" in capsys.readouterr().err

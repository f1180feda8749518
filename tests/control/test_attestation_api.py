"""Node attestation over real HTTP: nonce, token, status; only a verified token admits a sensitive job.

The service is configured from its settings alone (MAA issuer, pinned JWKS file, per-tenant
allow-list file); the tokens are the documented MAA SEV-SNP sample signed with keys generated here
(``tests/trust/conftest.py``), at the real clock, since the live server verifies at ``time.time()``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from seedance.core.lifecycle import JobStatus
from seedance.trust.stages import LABEL_SENSITIVE, LABEL_TEE
from tests.control.conftest import LiveServer
from tests.control.helpers import add_nodes, job_row, submit
from tests.trust.conftest import MAA_ISS, SNP_MEASUREMENT, Keys, claims_for, sign
from tests.trust.conftest import keys as keys  # noqa: F401 - the fixture, shared with trust

NODE = "tee-0"
URL = f"/api/v1/clusters/default/nodes/{NODE}/attestation"


def _server(factory: Callable[..., LiveServer], url: str, tmp: Path, keys: Keys) -> LiveServer:
    (tmp / "jwks.json").write_text(json.dumps(keys.jwks["maa"]))
    (tmp / "measurements.json").write_text(json.dumps({"system": [SNP_MEASUREMENT.upper()]}))
    return factory(url, attestation_service="maa", attestation_issuer=MAA_ISS,
                   attestation_jwks_file=str(tmp / "jwks.json"),
                   attestation_measurements_file=str(tmp / "measurements.json"), attestation_max_age_s=600)


def _nonce(c: httpx.Client) -> str:
    r = c.post(URL + "/challenge")
    assert r.status_code == 201, r.text
    assert r.json()["ttl_s"] == 300.0
    return str(r.json()["nonce"])


def _token(keys: Keys, nonce: str, *, key: Any = None, now: float | None = None) -> str:
    claims = claims_for("maa-sevsnp", nonce, now=time.time() if now is None else now)
    return sign(claims, key or keys.maa, kid="maa-1", alg="RS256")


def test_only_a_verified_token_put_over_http_admits_a_pending_sensitive_job(
    live_server_factory: Callable[..., LiveServer], sqlite_url: str, tmp_path: Path, keys: Keys
) -> None:
    server = _server(live_server_factory, sqlite_url, tmp_path, keys)
    svc = server.service
    add_nodes(svc, count=1, gpus=8, model="H100-80GB", prefix="tee", labels={LABEL_TEE: "sev-snp"})
    job = submit(svc, gpus=1, labels={LABEL_SENSITIVE: "true"})
    with server.client() as c:
        assert c.get(URL).json() == {"node": NODE, "state": "none", "verified": False, "expires_at": None,
                                     "tee": None, "jti": None, "reason": "never attested"}
        svc.loop.run_once()
        assert job_row(svc, job).node_name is None

        bad = {
            "signature": _token(keys, n := _nonce(c), key=keys.attacker),  # forged: an attacker's key
            "expired": _token(keys, n2 := _nonce(c), now=time.time() - 7200),
        }
        for (reason, token), nonce in zip(bad.items(), (n, n2), strict=True):
            r = c.put(URL, json={"token": token, "nonce": nonce})
            assert r.status_code == 422, r.text
            assert f"attestation rejected ({reason})" in r.text
            svc.loop.run_once()
            assert job_row(svc, job).node_name is None and job_row(svc, job).status == JobStatus.PENDING.value
            assert c.get(URL).json()["state"] == "rejected"
        other = _nonce(c)
        r = c.put(URL, json={"token": _token(keys, other), "nonce": n})  # body nonce not the one bound
        assert r.status_code == 422 and "does not bind this nonce" in r.text
        missing = "/api/v1/clusters/default/nodes/ghost/attestation"
        assert c.put(missing, json={"token": "a.b.c", "nonce": "x"}).status_code == 404
        assert c.get(missing).status_code == 404

        before = time.time()
        r = c.put(URL, json={"token": _token(keys, other), "nonce": other})
        assert r.status_code == 200, r.text
        got = r.json()
        assert (got["state"], got["verified"], got["tee"]) == ("attested", True, "sev-snp")
        assert before + 600 - 5 <= got["expires_at"] <= time.time() + 600  # capped by attestation_max_age_s
        assert c.get(URL).json() == got
        # the token's nonce is single-use: replaying the same token is rejected
        r = c.put(URL, json={"token": _token(keys, other), "nonce": other})
        assert r.status_code == 422 and "(nonce)" in r.text
        assert c.get(URL).json()["verified"] is False  # a rejected token drops the node's trust (fail closed)
        assert c.put(URL, json={"token": _token(keys, o := _nonce(c)), "nonce": o}).status_code == 200
    svc.loop.run_once()
    row = job_row(svc, job)
    assert row.node_name == NODE and row.status in (JobStatus.BOUND.value, JobStatus.RUNNING.value)


def test_attestation_routes_answer_409_when_not_configured(live_server: LiveServer) -> None:
    add_nodes(live_server.service, count=1, prefix="tee")
    with live_server.client() as c:
        r = c.get(URL)
        assert r.status_code == 409 and "not configured" in r.text
        assert c.put(URL, json={"token": "a.b.c", "nonce": "x"}).status_code == 409

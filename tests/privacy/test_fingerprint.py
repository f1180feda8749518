"""The abuse response end to end, real Redis and a software WebAuthn authenticator verified by ``webauthn``:
50 devices on one WebGL signature do not pause, 51 do; pass -> resume; fail, forged or late -> blacklist (30 d)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from seedance.control.db.models import EventRecord
from seedance.privacy.fingerprint import webgl_signature
from seedance.privacy.models import FingerprintCluster, FingerprintDevice, TelemetryEvent
from seedance.privacy.schemas import Fingerprint
from tests.privacy.authenticator import AttestationCA, SoftwareAuthenticator
from tests.privacy.conftest import Env, client_for
from tests.privacy.helpers import WEBGL, batch, occurrences, table_count

ORIGIN = "http://localhost:8080"
DAY = 86400.0


def device(i: int) -> str:
    return f"emu-{i:04d}-0000-4000-8000-00000000abcd"


@pytest.fixture
def ca() -> AttestationCA:
    return AttestationCA.make()


@pytest.fixture
def farm(make_env: Callable[..., Env], sqlite_url: str, ca: AttestationCA, tmp_path: Path) -> Env:
    root = tmp_path / "root.pem"
    root.write_bytes(ca.root_pem)
    return make_env(sqlite_url, attestation_roots=(root,))


def steps(env: Env) -> dict[str, float]:
    reg = env.control.metrics.registry
    return {s: reg.get_sample_value("seedance_privacy_fingerprint_steps_total", {"step": s}) or 0.0 for s in (
        "cluster_paused", "ingestion_paused", "challenge_issued", "challenge_passed", "challenge_failed",
        "challenge_timed_out", "blacklisted", "resumed", "ingestion_blacklisted")}


def event_kinds(env: Env) -> list[str]:
    with env.control.db.read() as s:
        return [k for k in s.scalars(select(EventRecord.kind).order_by(EventRecord.id)) if k.startswith("privacy.")]


def fill(c: Any, env: Env, n: int) -> list[int]:
    return [c.post("/api/v1/telemetry/events", json=batch(env, device(i), fingerprint=WEBGL)).status_code
            for i in range(n)]


def test_fifty_devices_do_not_pause_fifty_one_do(farm: Env) -> None:
    with client_for(farm) as c:
        assert fill(c, farm, 50) == [202] * 50
        assert fill(c, farm, 50) == [202] * 50  # the same 50 again: still 50 devices
        assert steps(farm)["cluster_paused"] == 0 and event_kinds(farm) == []
        r = c.post("/api/v1/telemetry/events", json=batch(farm, device(50), fingerprint=WEBGL))
        assert r.status_code == 423 and "paused" in r.json()["detail"] and "nothing was stored" in r.json()["detail"]
        r = c.post("/api/v1/telemetry/events", json=batch(farm, device(3), fingerprint=WEBGL))
        assert r.status_code == 423  # the whole cluster is paused
        other = {**WEBGL, "webgl_renderer": "ANGLE (NVIDIA, NVIDIA GeForce RTX 4090)"}
        assert c.post("/api/v1/telemetry/events", json=batch(farm, device(3), fingerprint=other)).status_code == 202
        scrape = c.get("/metrics").text  # the counters are on the control plane's /metrics
        assert 'seedance_privacy_fingerprint_steps_total{step="cluster_paused"} 1.0' in scrape
        assert 'seedance_privacy_telemetry_events_total{outcome="refused"} 4.0' in scrape
    sig = webgl_signature(Fingerprint.model_validate(WEBGL))
    with farm.control.db.read() as s:
        cluster = s.get(FingerprintCluster, sig)
    assert cluster is not None and (cluster.status, cluster.devices) == ("paused", 51)
    assert table_count(farm, TelemetryEvent) == 101 * 2  # 100 accepted batches + 1 of the other signature; 2 refused
    assert event_kinds(farm) == ["privacy.fingerprint.cluster_paused"]
    assert steps(farm)["cluster_paused"] == 1 and steps(farm)["ingestion_paused"] == 2


def _paused(c: Any, env: Env) -> None:
    assert fill(c, env, 51)[-1] == 423


def test_pass_resumes_the_device_only(farm: Env, ca: AttestationCA) -> None:
    with client_for(farm) as c:
        _paused(c, farm)
        r = c.post("/api/v1/telemetry/challenges", json={"device_id": device(7)})
        assert r.status_code == 201, r.text
        ch = r.json()
        opts = ch["public_key"]
        assert opts["attestation"] == "direct" and opts["rp"]["id"] == "localhost" and len(opts["challenge"]) >= 86
        cred = SoftwareAuthenticator("packed-x5c", ca=ca).create(opts, ORIGIN)
        r = c.post(f"/api/v1/telemetry/challenges/{ch['challenge_id']}", json={"credential": cred})
        assert r.status_code == 200, r.text
        assert r.json()["result"] == "passed" and r.json()["fmt"] == "packed"
        assert c.post("/api/v1/telemetry/events", json=batch(farm, device(7), fingerprint=WEBGL)).status_code == 202
        assert c.post("/api/v1/telemetry/events", json=batch(farm, device(8), fingerprint=WEBGL)).status_code == 423
        # single use: the same answer again is refused
        again = c.post(f"/api/v1/telemetry/challenges/{ch['challenge_id']}", json={"credential": cred})
        assert again.status_code == 404
        assert c.post("/api/v1/telemetry/challenges", json={"device_id": device(7)}).status_code == 409
    assert event_kinds(farm)[-3:] == ["privacy.fingerprint.challenge_issued", "privacy.fingerprint.challenge_passed",
                                      "privacy.fingerprint.resumed"]
    st = steps(farm)
    assert (st["challenge_issued"], st["challenge_passed"], st["resumed"], st["blacklisted"]) == (1, 1, 1, 0)
    with farm.control.db.read() as s:
        verdicts = [(d.status, d.fmt) for d in s.scalars(select(FingerprintDevice))]
    assert verdicts == [("verified", "packed")]


@pytest.mark.parametrize("attestation", ["none", "packed-self"])
def test_software_authenticator_fails_and_is_blacklisted_for_30_days(farm: Env, attestation: str) -> None:
    with client_for(farm) as c:
        _paused(c, farm)
        ch = c.post("/api/v1/telemetry/challenges", json={"device_id": device(9)}).json()
        cred = SoftwareAuthenticator(attestation).create(ch["public_key"], ORIGIN)
        r = c.post(f"/api/v1/telemetry/challenges/{ch['challenge_id']}", json={"credential": cred})
        assert r.status_code == 403
        detail = r.json()["detail"]
        assert "attestation failed" in detail and "blacklisted until" in detail
        assert ("'none'" in detail) if attestation == "none" else ("self attestation" in detail)
        r = c.post("/api/v1/telemetry/events", json=batch(farm, device(9), fingerprint=WEBGL))
        assert r.status_code == 403 and "blacklisted" in r.json()["detail"]
        r = c.post("/api/v1/telemetry/events", json=batch(farm, device(9)))  # without a fingerprint too
        assert r.status_code == 403
    now = farm.clock().timestamp()
    members = farm.privacy.blacklist.members(now)
    assert len(members) == 1 and members[0][1] == pytest.approx(now + 30 * DAY)
    ttl = farm.privacy.redis.ttl(farm.privacy.blacklist.key)
    assert 30 * DAY - 120 <= ttl <= 30 * DAY + 1  # the key itself expires with its last member
    assert event_kinds(farm)[-3:] == ["privacy.fingerprint.challenge_issued", "privacy.fingerprint.challenge_failed",
                                      "privacy.fingerprint.blacklisted"]
    st = steps(farm)
    assert (st["challenge_failed"], st["blacklisted"], st["ingestion_blacklisted"]) == (1, 1, 2)
    with farm.control.db.read() as s:
        assert [d.status for d in s.scalars(select(FingerprintDevice))] == ["emulator"]
    # expiry: one second after 30 days the entry is pruned and the device is only paused again
    farm.clock.advance(days=30, seconds=1)
    assert farm.privacy.blacklist.prune(farm.clock().timestamp()) == 1
    assert farm.privacy.blacklist.members(farm.clock().timestamp()) == []


FORGERIES: list[tuple[str, dict[str, Any], str]] = [
    ("wrong challenge", {"challenge": "AAAA" * 22}, "challenge was not expected challenge"),
    ("wrong origin", {"origin": "https://evil.example"}, "Unexpected client data origin"),
    ("wrong rp id", {"rp_id": "evil.example"}, "Unexpected RP ID hash"),
    ("bad signature", {"corrupt_signature": True}, "Could not verify attestation statement signature"),
]


@pytest.mark.parametrize(("name", "tamper", "says"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_forged_responses_are_403_with_the_reason(farm: Env, ca: AttestationCA, name: str, tamper: dict[str, Any],
                                                  says: str) -> None:
    with client_for(farm) as c:
        _paused(c, farm)
        ch = c.post("/api/v1/telemetry/challenges", json={"device_id": device(11)}).json()
        origin = tamper.pop("origin", ORIGIN)
        cred = SoftwareAuthenticator("packed-x5c", ca=ca).create(ch["public_key"], origin, **tamper)
        r = c.post(f"/api/v1/telemetry/challenges/{ch['challenge_id']}", json={"credential": cred})
    assert r.status_code == 403 and says in r.json()["detail"], r.text
    assert len(farm.privacy.blacklist.members(farm.clock().timestamp())) == 1
    assert farm.privacy.verified.members(farm.clock().timestamp()) == []


def test_untrusted_root_fails(farm: Env) -> None:
    other_ca = AttestationCA.make("Some Other Root")
    with client_for(farm) as c:
        _paused(c, farm)
        ch = c.post("/api/v1/telemetry/challenges", json={"device_id": device(12)}).json()
        cred = SoftwareAuthenticator("packed-x5c", ca=other_ca).create(ch["public_key"], ORIGIN)
        r = c.post(f"/api/v1/telemetry/challenges/{ch['challenge_id']}", json={"credential": cred})
    assert r.status_code == 403 and "Certificate chain could not be validated" in r.json()["detail"]


@pytest.mark.parametrize("credential", [
    {"id": "x"}, {"id": "abc", "rawId": "abc", "type": "public-key", "response": {"clientDataJSON": 5}}, {},
])
def test_malformed_credential_is_422_nothing_stored_challenge_still_open(farm: Env, ca: AttestationCA,
                                                                       credential: dict[str, Any]) -> None:
    with client_for(farm) as c:
        _paused(c, farm)
        ch = c.post("/api/v1/telemetry/challenges", json={"device_id": device(13)}).json()
        r = c.post(f"/api/v1/telemetry/challenges/{ch['challenge_id']}", json={"credential": credential})
        assert r.status_code == 422 and "not a WebAuthn registration response" in r.json()["detail"]
        assert farm.privacy.blacklist.members(farm.clock().timestamp()) == []
        assert "privacy.fingerprint.blacklisted" not in event_kinds(farm)
        cred = SoftwareAuthenticator("packed-x5c", ca=ca).create(ch["public_key"], ORIGIN)
        ok = c.post(f"/api/v1/telemetry/challenges/{ch['challenge_id']}", json={"credential": cred})
        assert ok.status_code == 200  # the challenge was still open


def test_unanswered_challenge_times_out_into_the_blacklist(farm: Env, ca: AttestationCA) -> None:
    with client_for(farm) as c:
        _paused(c, farm)
        ch1 = c.post("/api/v1/telemetry/challenges", json={"device_id": device(14)}).json()
        ch2 = c.post("/api/v1/telemetry/challenges", json={"device_id": device(15)}).json()
        farm.clock.advance(seconds=299)
        assert c.post("/api/v1/privacy/sweep").json()["timed_out"] == 0
        farm.clock.advance(seconds=2)
        cred = SoftwareAuthenticator("packed-x5c", ca=ca).create(ch2["public_key"], ORIGIN)
        late = c.post(f"/api/v1/telemetry/challenges/{ch2['challenge_id']}", json={"credential": cred})
        assert late.status_code == 410 and "expired" in late.json()["detail"]  # a valid answer, but too late
        assert c.post("/api/v1/privacy/sweep").json()["timed_out"] == 1  # ch1, never answered
        gone = c.post(f"/api/v1/telemetry/challenges/{ch1['challenge_id']}", json={"credential": cred})
        assert gone.status_code == 404
        listed = c.get("/api/v1/privacy/blacklist").json()
    assert len(listed) == 2
    st = steps(farm)
    assert (st["challenge_timed_out"], st["blacklisted"]) == (2, 2)
    assert event_kinds(farm).count("privacy.fingerprint.challenge_timed_out") == 2


def test_no_challenge_outside_a_paused_cluster(farm: Env) -> None:
    with client_for(farm) as c:
        c.post("/api/v1/telemetry/events", json=batch(farm, device(1), fingerprint=WEBGL))
        r = c.post("/api/v1/telemetry/challenges", json={"device_id": device(1)})
    assert r.status_code == 409 and "not in a paused" in r.json()["detail"]


def test_device_ids_stay_out_of_every_store_through_the_flow(farm: Env, ca: AttestationCA) -> None:
    with client_for(farm) as c:
        _paused(c, farm)
        ch = c.post("/api/v1/telemetry/challenges", json={"device_id": device(20)}).json()
        c.post(f"/api/v1/telemetry/challenges/{ch['challenge_id']}",
               json={"credential": SoftwareAuthenticator("none").create(ch["public_key"], ORIGIN)})
    assert occurrences(farm, *[device(i) for i in range(51)]) == []

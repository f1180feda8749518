"""Attestation: real MAA / Intel token formats signed with local keys, JWKS over real HTTP, every rejection reason.

Rejections are checked three ways: the verifier's reason, the registry's eligibility (nothing
admitted), and the scheduler with the AttestedTEE stage (a sensitive job never lands there).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import jwt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import DEFAULT_FILTERS, Scheduler, make_policy
from seedance.trust.attestation import (
    AttestationRejected,
    AttestationService,
    AttestationVerifier,
    JwksUrl,
    NonceStore,
    PinnedJwks,
    Reason,
    TeeKind,
    intel_trust_authority_service,
    maa_service,
)
from seedance.trust.registry import AttestationRegistry, MeasurementPolicy, RunningJob
from seedance.trust.stages import LABEL_TEE, AttestedTeeFilter, TrustRequirement
from tests.trust.conftest import ITA_ISS, MAA_ISS, MEASUREMENT, NOW, SAMPLES, TEE, JwksServer, Keys, claims_for, sign

FORMATS = sorted(SAMPLES)
DROP = object()  # a claim value meaning "leave the claim out"


class World:
    """Verifier + registry + a 2-node cluster (``good`` attested, ``node`` under test) + the scheduler."""

    def __init__(self, keys: Keys, server: JwksServer, *, audience: str | None = None, cooldown: float = 30) -> None:
        self.keys = keys
        self.now = NOW
        self.audience = audience
        self.nonces = NonceStore(ttl_s=300.0)
        self.services = [
            maa_service("maa", MAA_ISS, JwksUrl(server.url("maa"), refetch_cooldown_s=cooldown), audience=audience),
            intel_trust_authority_service(JwksUrl(server.url("ita")), audience=audience),
        ]
        self.verifier = AttestationVerifier(self.services, self.nonces)
        self.policy = MeasurementPolicy.from_mapping({"bank": list(MEASUREMENT.values()), "shop": []})
        self.registry = AttestationRegistry(self.verifier, self.policy)
        self.stage_req = TrustRequirement("bank", sensitive=True)
        self.stage = AttestedTeeFilter(self.registry, clock=lambda: self.now, requirement_of=lambda r: self.stage_req)
        self.scheduler = Scheduler(make_policy("best-fit"), filters=(*DEFAULT_FILTERS, self.stage))

    def view(self, tee: dict[str, str]) -> ClusterState:
        nodes = tuple(NodeSpec(n, 64000, 262144, 8, "H100-80GB", {LABEL_TEE: t}) for n, t in tee.items())
        return ClusterState(ClusterSpec(nodes))

    def token(self, fmt: str, node: str, *, now: float | None = None, kid: str | None = None, **changes: Any) -> str:
        nonce = self.registry.challenge(node, self.now if now is None else now)
        claims = claims_for(fmt, nonce, now=self.now)
        if self.audience:
            claims["aud"] = self.audience
        claims.update(changes)
        claims = {k: v for k, v in claims.items() if v is not DROP}
        key, default_kid = (self.keys.ita, "ita-1") if fmt.startswith("ita") else (self.keys.maa, "maa-1")
        return sign(claims, key, kid=kid or default_kid, alg=SAMPLES[fmt][1])

    def placed_on(self, view: ClusterState) -> str | None:
        d = self.scheduler.decide(view, ResourceRequest(4000, 8192, 1, 1000))
        return view.spec.nodes[d.placement.node].name if d.placement else None


@pytest.fixture
def world(keys: Keys, jwks_server: JwksServer) -> World:
    return World(keys, jwks_server)


@pytest.mark.parametrize("fmt", FORMATS)
def test_documented_token_formats_verify(world: World, fmt: str) -> None:
    token = world.token(fmt, "n1")
    rec = world.registry.submit("n1", token, world.now, advertised=TeeKind(TEE[fmt]))
    assert (rec.format, rec.tee.value, rec.measurement) == (fmt, TEE[fmt], MEASUREMENT[fmt])
    assert rec.jti == SAMPLES[fmt][0]["jti"] and rec.expires_at == NOW + 3600
    assert rec.service == ("maa" if fmt.startswith("maa") else "intel-trust-authority")
    view = world.view({"n1": TEE[fmt]})
    assert world.stage.mask(view, ResourceRequest(0, 0)).tolist() == [True]
    assert world.placed_on(view) == "n1"


def test_keys_come_from_the_jwks_endpoint_and_rotate(keys: Keys, jwks_server: JwksServer) -> None:
    world = World(keys, jwks_server, cooldown=0)
    before = len(jwks_server.hits)
    world.registry.submit("n1", world.token("maa-sevsnp", "n1"), world.now)
    assert jwks_server.hits[before:] == ["/maa/certs"]  # fetched by PyJWKClient over HTTP
    # rotation: a new kid appears in the JWKS; the unknown kid triggers a refetch and verifies
    new = keys.jwk(keys.attacker, "maa-2", "RS256")
    saved = json.loads(json.dumps(jwks_server.handler.docs["/maa/certs"]))
    try:
        jwks_server.set("maa", {"keys": [*saved["keys"], new]})
        claims = claims_for("maa-sevsnp", world.registry.challenge("n2", world.now), now=world.now)
        rec = world.registry.submit("n2", sign(claims, keys.attacker, kid="maa-2", alg="RS256"), world.now)
        assert rec.node == "n2"
    finally:
        jwks_server.set("maa", saved)
    claims = claims_for("maa-sevsnp", world.registry.challenge("n3", world.now), now=world.now)
    with pytest.raises(AttestationRejected) as err:
        world.registry.submit("n3", sign(claims, keys.maa, kid="maa-9", alg="RS256"), world.now)
    assert err.value.reason is Reason.UNKNOWN_KEY


def test_an_unreachable_jwks_endpoint_admits_nothing(keys: Keys) -> None:
    nonces = NonceStore()
    svc = maa_service("maa", MAA_ISS, JwksUrl("http://127.0.0.1:9/certs", timeout_s=2))
    v = AttestationVerifier([svc], nonces)
    token = sign(claims_for("maa-sevsnp", nonces.issue("n1", NOW)), keys.maa, kid="maa-1", alg="RS256")
    with pytest.raises(AttestationRejected) as err:
        v.verify(token, node="n1", now=NOW)
    assert err.value.reason is Reason.KEYS_UNAVAILABLE


def test_pinned_jwks_verifies_the_same_way(keys: Keys) -> None:
    nonces = NonceStore()
    svc = intel_trust_authority_service(PinnedJwks(keys.jwks["ita"]))
    v = AttestationVerifier([svc], nonces)
    token = sign(claims_for("ita-tdx", nonces.issue("n1", NOW)), keys.ita, kid="ita-1", alg="PS384")
    assert v.verify(token, node="n1", now=NOW).measurement == MEASUREMENT["ita-tdx"]
    with pytest.raises(InputError, match="not a usable JWKS"):
        PinnedJwks({"keys": "nope"})


def _tamper_claims(token: str, **changes: Any) -> str:
    head, body, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims.update(changes)
    new = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{head}.{new}.{sig}"


def _debug_on(fmt: str) -> dict[str, Any]:
    return {
        "maa-sevsnp": {"x-ms-sevsnpvm-is-debuggable": True},
        "maa-tdx": {"tdx_td_attributes_debug": True},
        "maa-sgx": {"x-ms-sgx-is-debuggable": True},
        "ita-tdx": {"dbgstat": "enabled"},
        "ita-sgx": {"sgx_is_debuggable": True},
    }[fmt]


def _measurement_claim(fmt: str) -> str:
    return {
        "maa-sevsnp": "x-ms-sevsnpvm-launchmeasurement",
        "maa-tdx": "tdx_mrtd",
        "maa-sgx": "x-ms-sgx-mrenclave",
        "ita-tdx": "tdx_mrtd",
        "ita-sgx": "sgx_mrenclave",
    }[fmt]


def _bad_token(w: World, fmt: str, fault: str) -> tuple[str, TeeKind | None, Reason]:
    """A token for node ``node`` carrying exactly one fault, the TEE the node advertises, and the expected reason."""
    adv = TeeKind(TEE[fmt])
    alg = SAMPLES[fmt][1]
    if fault == "forged":
        nonce = w.registry.challenge("node", w.now)
        kid = "ita-1" if fmt.startswith("ita") else "maa-1"
        return sign(claims_for(fmt, nonce, now=w.now), w.keys.attacker, kid=kid, alg=alg), adv, Reason.SIGNATURE
    if fault == "tampered":
        return (
            _tamper_claims(w.token(fmt, "node"), **{_measurement_claim(fmt): MEASUREMENT[fmt][::-1]}),
            adv,
            Reason.SIGNATURE,
        )
    if fault == "issuer":
        return w.token(fmt, "node", iss="https://evil.wus.attest.azure.net"), adv, Reason.ISSUER
    if fault == "expired":
        return (
            w.token(fmt, "node", iat=int(w.now - 7200), nbf=int(w.now - 7200), exp=int(w.now - 600)),
            adv,
            Reason.EXPIRED,
        )
    if fault == "future":
        return (
            w.token(fmt, "node", iat=int(w.now + 900), nbf=int(w.now + 900), exp=int(w.now + 4000)),
            adv,
            Reason.NOT_YET_VALID,
        )
    if fault == "stale-nonce":
        return w.token(fmt, "node", now=w.now - 301), adv, Reason.NONCE  # issued past the 300 s TTL
    if fault == "foreign-nonce":
        return w.token(fmt, "other"), adv, Reason.NONCE  # nonce issued to another node
    if fault == "unknown-nonce":
        key = "attester_held_data" if fmt.startswith("ita") else "nonce"
        value = base64.b64encode(b"not-issued").decode() if fmt.startswith("ita") else "not-issued"
        return w.token(fmt, "node", **{key: value}), adv, Reason.NONCE
    if fault == "debug":
        return w.token(fmt, "node", **_debug_on(fmt)), adv, Reason.DEBUG
    if fault == "measurement":
        return w.token(fmt, "node", **{_measurement_claim(fmt): "ff" * 48}), adv, Reason.MEASUREMENT
    if fault == "alg-none":
        body = w.token(fmt, "node").split(".")[1]
        head = base64.urlsafe_b64encode(json.dumps({"alg": "none", "kid": "maa-1"}).encode()).decode().rstrip("=")
        return f"{head}.{body}.", adv, Reason.ALGORITHM
    if fault == "alg-hs256":
        nonce = w.registry.challenge("node", w.now)
        secret = w.keys.jwks["maa"]["keys"][0]["n"]  # the public modulus as an HMAC secret (key confusion)
        token = jwt.encode(claims_for(fmt, nonce, now=w.now), secret, algorithm="HS256", headers={"kid": "maa-1"})
        return token, adv, Reason.ALGORITHM
    if fault == "tee-mismatch":
        other = next(k for k in TeeKind if k is not adv)
        return w.token(fmt, "node"), other, Reason.TEE_TYPE
    if fault == "unknown-kid":
        return w.token(fmt, "node", kid="rotated-away"), adv, Reason.UNKNOWN_KEY
    if fault == "tcb":
        return w.token(fmt, "node", attester_tcb_status="OutOfDate"), adv, Reason.TCB_STATUS
    if fault == "compliance":
        return w.token(fmt, "node", **{"x-ms-compliance-status": "not-compliant"}), adv, Reason.COMPLIANCE
    if fault == "no-audience":
        return w.token(fmt, "node", aud=DROP), adv, Reason.AUDIENCE
    if fault == "wrong-audience":
        return w.token(fmt, "node", aud="another-relying-party"), adv, Reason.AUDIENCE
    if fault == "revoked-jti":
        w.registry.revoke(jti="leaked-token-id", reason="leaked")
        return w.token(fmt, "node", jti="leaked-token-id"), adv, Reason.REVOKED
    if fault == "truncated":
        return w.token(fmt, "node")[:-40].rsplit(".", 1)[0], adv, Reason.MALFORMED
    if fault == "garbage":
        return "eyJhbGciOi.!!!.xx", adv, Reason.MALFORMED
    raise AssertionError(fault)


FAULTS = (
    "forged",
    "tampered",
    "issuer",
    "expired",
    "future",
    "stale-nonce",
    "foreign-nonce",
    "unknown-nonce",
    "debug",
    "measurement",
    "alg-none",
    "alg-hs256",
    "tee-mismatch",
    "truncated",
    "garbage",
    "unknown-kid",
    "tcb",
    "compliance",
    "no-audience",
    "wrong-audience",
    "revoked-jti",
)
#: faults that exist for some formats only (Intel and MAA-TDX carry a TCB status; MAA CVMs a compliance claim)
_ONLY = {"tcb": ("maa-tdx", "ita-tdx", "ita-sgx"), "compliance": ("maa-sevsnp", "maa-tdx")}
CASES = [(f, x) for f in FORMATS for x in FAULTS if f in _ONLY.get(x, FORMATS)]


def _never_admitted(keys: Keys, jwks_server: JwksServer, fmt: str, fault: str, good: str) -> None:
    w = World(keys, jwks_server, audience="seedance-prod" if fault.endswith("audience") else None)
    w.registry.submit("good", w.token(good, "good"), w.now, advertised=TeeKind(TEE[good]))
    # the node under test first holds a valid attestation: a faulty token must also take that away
    w.registry.submit("node", w.token(fmt, "node"), w.now, advertised=TeeKind(TEE[fmt]))
    token, advertised, reason = _bad_token(w, fmt, fault)
    with pytest.raises(AttestationRejected) as err:
        w.registry.submit("node", token, w.now, advertised=advertised)
    assert err.value.reason is reason, str(err.value)
    view = w.view({"good": TEE[good], "node": TEE[fmt]})
    assert w.stage.mask(view, ResourceRequest(0, 0)).tolist() == [True, False]
    assert w.placed_on(view) == "good"
    assert w.stage.reasons_for(view, w.stage_req)[1].startswith("rejected: last token rejected: " + reason.value)


@pytest.mark.parametrize(("fmt", "fault"), CASES, ids=[f"{f}-{x}" for f, x in CASES])
def test_every_fault_of_every_format_is_rejected(keys: Keys, jwks_server: JwksServer, fmt: str, fault: str) -> None:
    _never_admitted(keys, jwks_server, fmt, fault, FORMATS[(FORMATS.index(fmt) + 1) % len(FORMATS)])


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(case=st.sampled_from(CASES), good=st.sampled_from(FORMATS))
def test_no_faulty_token_ever_admits_a_sensitive_job(
    keys: Keys, jwks_server: JwksServer, case: tuple[str, str], good: str
) -> None:
    _never_admitted(keys, jwks_server, *case, good)


def test_a_replayed_token_is_refused(world: World) -> None:
    token = world.token("maa-tdx", "n1")
    world.registry.submit("n1", token, world.now)
    with pytest.raises(AttestationRejected, match="already used") as err:
        world.registry.submit("n1", token, world.now + 10)
    assert err.value.reason is Reason.NONCE
    assert not world.registry.trust("n1", world.now).eligible_now  # the replay dropped the node's trust


def test_audience_is_required_when_configured(keys: Keys, jwks_server: JwksServer) -> None:
    w = World(keys, jwks_server, audience="seedance-prod")
    w.audience = None  # the tokens below set (or omit) aud themselves
    with pytest.raises(AttestationRejected) as err:
        w.registry.submit("n1", w.token("maa-sevsnp", "n1"), w.now)  # MAA tokens carry no aud
    assert err.value.reason is Reason.AUDIENCE
    with pytest.raises(AttestationRejected) as err:
        w.registry.submit("n1", w.token("maa-sevsnp", "n1", aud="someone-else"), w.now)
    assert err.value.reason is Reason.AUDIENCE
    assert w.registry.submit("n1", w.token("maa-sevsnp", "n1", aud=["x", "seedance-prod"]), w.now).node == "n1"


def test_tcb_status_and_compliance(world: World) -> None:
    with pytest.raises(AttestationRejected) as err:
        world.registry.submit("n1", world.token("ita-sgx", "n1", attester_tcb_status="OUT_OF_DATE"), world.now)
    assert err.value.reason is Reason.TCB_STATUS
    with pytest.raises(AttestationRejected) as err:
        world.registry.submit("n1", world.token("maa-sevsnp", "n1", **{"x-ms-compliance-status": "x"}), world.now)
    assert err.value.reason is Reason.COMPLIANCE
    token = _resign_without(world, "maa-sgx", "x-ms-sgx-is-debuggable")
    with pytest.raises(AttestationRejected) as err:  # a format's debug claim missing is not a pass
        world.registry.submit("n1", token, world.now)
    assert err.value.reason is Reason.DEBUG


def _resign_without(w: World, fmt: str, claim: str) -> str:
    c = claims_for(fmt, w.registry.challenge("n1", w.now), now=w.now)
    del c[claim]
    return sign(c, w.keys.maa, kid="maa-1", alg="RS256")


def test_expiry_moves_the_node_out_at_the_next_scheduling_cycle(world: World) -> None:
    world.registry.submit("n1", world.token("maa-sevsnp", "n1", exp=int(NOW + 120)), world.now)
    world.registry.submit("n2", world.token("maa-tdx", "n2"), world.now)
    view = world.view({"n1": "sev-snp", "n2": "tdx"})
    running = [RunningJob("train-7", "bank", "n1", sensitive=True), RunningJob("web", "bank", "n1", sensitive=False)]
    placed = []
    for t in (NOW, NOW + 60, NOW + 119, NOW + 120, NOW + 180):  # one scheduling cycle per 60 s, and exp itself
        world.now = t
        placed.append(tuple(world.stage.mask(view, ResourceRequest(0, 0)).tolist()))
    assert placed == [(True, True), (True, True), (True, True), (False, True), (False, True)]
    alerts = world.registry.sweep(running, NOW + 120)
    assert [(a.job, a.node) for a in alerts] == [("train-7", "n1")]  # the sensitive job is reported
    assert alerts[0].reason.startswith("expired: attestation expired 0 s ago")
    assert world.registry.sweep(running, NOW + 119) == []


def test_revocation_by_node_and_by_jti(world: World) -> None:
    world.registry.submit("n1", world.token("maa-sevsnp", "n1"), world.now)
    world.registry.submit("n2", world.token("ita-tdx", "n2"), world.now)
    view = world.view({"n1": "sev-snp", "n2": "tdx"})
    assert world.registry.revoke(node="n1", reason="host compromised") == ["n1"]
    assert world.stage.mask(view, ResourceRequest(0, 0)).tolist() == [False, True]
    with pytest.raises(AttestationRejected) as err:
        world.registry.submit("n1", world.token("maa-sevsnp", "n1"), world.now)
    assert err.value.reason is Reason.REVOKED  # sticky until reinstated
    world.registry.reinstate("n1")
    world.registry.submit("n1", world.token("maa-sevsnp", "n1"), world.now)
    assert world.stage.mask(view, ResourceRequest(0, 0)).tolist() == [True, True]
    jti = SAMPLES["ita-tdx"][0]["jti"]
    assert world.registry.revoke(jti=jti, reason="token leaked") == ["n2"]
    with pytest.raises(AttestationRejected, match="is revoked"):
        world.registry.submit("n2", world.token("ita-tdx", "n2"), world.now)
    alerts = world.registry.sweep([RunningJob("j", "bank", "n2", True)], world.now)
    assert alerts[0].reason == "rejected: last token rejected: revoked: token " + jti + " is revoked"


def test_allow_lists_are_per_tenant_and_tee_kinds_filter(world: World) -> None:
    world.registry.submit("n1", world.token("maa-sevsnp", "n1"), world.now)
    world.registry.submit("n2", world.token("ita-tdx", "n2"), world.now)
    view = world.view({"n1": "sev-snp", "n2": "tdx"})
    assert world.stage.mask_for(view, TrustRequirement("shop", True)).tolist() == [False, False]
    assert world.stage.mask_for(view, TrustRequirement("shop", False)).tolist() == [True, True]
    assert world.stage.mask_for(view, TrustRequirement("bank", True, frozenset({TeeKind.TDX}))).tolist() == [
        False,
        True,
    ]
    reasons = world.stage.reasons_for(view, TrustRequirement("shop", True))
    assert reasons[0] is not None and "not on shop's allow-list" in reasons[0]
    reasons = world.stage.reasons_for(view, TrustRequirement("bank", True, frozenset({TeeKind.SGX})))
    assert reasons == ["advertises no TEE of sgx (seedance.io/tee)"] * 2
    unlabelled = ClusterState(ClusterSpec((NodeSpec("n1", 1000, 1000, 1, "H100-80GB"),)))
    assert world.stage.mask(unlabelled, ResourceRequest(0, 0)).tolist() == [False]  # attested, but no TEE label
    assert (world.registry.trust("n1", world.now, "bank").to_json()["attestation"] or {})["jti"] == SAMPLES[
        "maa-sevsnp"
    ][0]["jti"]


def test_max_validity_caps_a_long_lived_token(keys: Keys, jwks_server: JwksServer) -> None:
    w = World(keys, jwks_server)
    w.registry = AttestationRegistry(w.verifier, w.policy, max_validity_s=600)
    w.registry.submit("n1", w.token("maa-sevsnp", "n1"), w.now)  # token says 3600 s
    slots = w.registry.indices(["n1", "unknown"])
    assert w.registry.eligible(slots, "bank", NOW + 599).tolist() == [True, False]
    assert w.registry.eligible(slots, "bank", NOW + 600).tolist() == [False, False]


def test_service_and_label_configuration_errors(keys: Keys) -> None:
    pinned = PinnedJwks(keys.jwks["ita"])
    with pytest.raises(InputError, match="asymmetric"):
        AttestationService("x", "iss", pinned, ("HS256",), ("maa-sgx",))
    svc = intel_trust_authority_service(pinned)
    with pytest.raises(InputError, match="same issuer"):
        AttestationVerifier([svc, svc], NonceStore())
    with pytest.raises(InputError, match="must be true or false"):
        TrustRequirement.from_labels("bank", {"seedance.io/sensitive": "yes"})
    with pytest.raises(InputError, match="unknown TEE 'tpm'"):
        TrustRequirement.from_labels("bank", {"seedance.io/sensitive": "true", "seedance.io/tee-required": "tdx,tpm"})
    r = TrustRequirement.from_labels("bank", {"seedance.io/sensitive": "TRUE", "seedance.io/tee-required": "tdx"})
    assert r == TrustRequirement("bank", True, frozenset({TeeKind.TDX}))
    assert ITA_ISS == "Intel Trust Authority"

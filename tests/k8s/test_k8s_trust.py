"""The extender over real HTTP with the trust stages: the same ``AttestedTEE`` stage as the simulator and the loop.

A pod labelled ``seedance.io/sensitive=true`` is filtered to attested nodes only, with each other
node's reason in ``FailedNodes``; prioritize and bind agree. Faulty attestations (every fault the
verifier knows, the acceptance six drawn more often) never admit it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.k8s.extender import Extender
from seedance.k8s.trust import ExtenderStages
from seedance.scheduling import make_policy
from seedance.trust.attestation import AttestationRejected, TeeKind
from seedance.trust.registry import AttestationRegistry, MeasurementPolicy
from seedance.trust.stages import LABEL_SENSITIVE, LABEL_TEE
from tests.k8s.k8s_docs import ExtenderOverHttp, RecordingBinder, extender_args, make_node, make_pod
from tests.trust.conftest import MEASUREMENT, NOW, TEE, JwksServer, Keys
from tests.trust.conftest import jwks_server as jwks_server  # noqa: F401 - the fixtures, shared with trust
from tests.trust.conftest import keys as keys  # noqa: F401
from tests.trust.test_attestation import CASES, FORMATS, World, _bad_token

ACCEPTANCE = ("forged", "issuer", "expired", "stale-nonce", "debug", "measurement")


class Http(ExtenderOverHttp):
    """An extender served on 127.0.0.1 with a registry and the test clock."""

    def __init__(self, w: World) -> None:
        self.binder = RecordingBinder()
        super().__init__(Extender(make_policy("best-fit"), binder=self.binder,
                                  stages=ExtenderStages(registry=w.registry, clock=lambda: w.now)))


def _world(keys: Keys, server: JwksServer, audience: str | None = None) -> World:
    w = World(keys, server, audience=audience)
    w.policy = MeasurementPolicy.from_mapping({"bank": list(MEASUREMENT.values())})
    w.registry = AttestationRegistry(w.verifier, w.policy)
    return w


def _pod(name: str, *, sensitive: bool, namespace: str = "bank") -> dict[str, Any]:
    pod = make_pod(name, namespace=namespace, uid=f"uid-{name}", cpu="4", memory="8Gi", gpus=1)
    pod["metadata"]["labels"] = {LABEL_SENSITIVE: "true"} if sensitive else {"app": name}
    return pod


@pytest.fixture
def nodes() -> list[dict[str, Any]]:
    return [make_node("good", gpus=8, model="H100", labels={LABEL_TEE: "tdx"}),
            make_node("node", gpus=2, model="H100", labels={LABEL_TEE: "sev-snp"})]


def _run(w: World, nodes: list[dict[str, Any]], good: str, fmt: str, fault: str | None) -> dict[str, Any]:
    nodes[0]["metadata"]["labels"][LABEL_TEE] = TEE[good]
    nodes[1]["metadata"]["labels"][LABEL_TEE] = TEE[fmt]
    w.registry.submit("good", w.token(good, "good"), w.now, advertised=TeeKind(TEE[good]))
    w.registry.submit("node", w.token(fmt, "node"), w.now, advertised=TeeKind(TEE[fmt]))
    if fault is not None:
        token, advertised, _ = _bad_token(w, fmt, fault)
        with pytest.raises(AttestationRejected):
            w.registry.submit("node", token, w.now, advertised=advertised)
    h = Http(w)
    try:
        h.extender.set_nodes(nodes)
        secret, plain = _pod("secret", sensitive=True), _pod("plain", sensitive=False)
        out: dict[str, Any] = {
            "filter": h.post("filter", extender_args(secret, nodes, node_cache_capable=True)),
            "plain": h.post("filter", extender_args(plain, nodes, node_cache_capable=True)),
            "prioritize": h.post("prioritize", extender_args(secret, nodes, node_cache_capable=True)),
            "bind_bad": h.post("bind", {"PodName": "secret", "PodNamespace": "bank", "PodUID": "uid-secret",
                                        "Node": "node"}),
            "bind": h.post("bind", {"PodName": "secret", "PodNamespace": "bank", "PodUID": "uid-secret",
                                    "Node": "good"}),
            "binds": [c["node"] for c in h.binder.calls],
        }
        return out
    finally:
        h.close()


def test_extender_admits_a_sensitive_pod_on_attested_nodes_only(
    keys: Keys, jwks_server: JwksServer, nodes: list[dict[str, Any]]
) -> None:
    out = _run(_world(keys, jwks_server), nodes, "maa-tdx", "maa-sevsnp", None)
    assert out["filter"]["NodeNames"] == ["good", "node"]
    out = _run(_world(keys, jwks_server), nodes, "maa-tdx", "maa-sevsnp", "debug")
    assert out["filter"]["NodeNames"] == ["good"]
    assert out["filter"]["FailedNodes"] == {
        "node": "Seedance: sensitive job: rejected: last token rejected: debug: x-ms-sevsnpvm-is-debuggable is True, "
                "must be false"
    }
    assert out["plain"]["NodeNames"] == ["good", "node"]
    assert {h["Host"]: h["Score"] for h in out["prioritize"]}["node"] == 0
    assert out["bind_bad"] == {  # kube-scheduler choosing the untrusted node: the bind is refused
        "Error": "Seedance: pod bank/secret no longer fits node node: no node fits now (AttestedTEE rejects 1 of 2)"}
    assert out["bind"] == {"Error": ""}
    assert out["binds"] == ["good"]


def test_extender_expiry_takes_the_node_out_at_the_first_request_after_exp(
    keys: Keys, jwks_server: JwksServer, nodes: list[dict[str, Any]]
) -> None:
    w = _world(keys, jwks_server)
    w.registry.submit("node", w.token("maa-sevsnp", "node", exp=int(NOW + 120)), w.now)
    h = Http(w)
    try:
        h.extender.set_nodes(nodes[1:])
        seen = []
        for t in (NOW + 119, NOW + 120):
            w.now = t
            res = h.post("filter", extender_args(_pod("s", sensitive=True), nodes[1:], node_cache_capable=True))
            seen.append((res["NodeNames"], res["FailedNodes"].get("node", "")[:49]))
    finally:
        h.close()
    assert seen == [(["node"], ""), ([], "Seedance: sensitive job: expired: attestation exp")]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=st.sampled_from([c for c in CASES if c[1] in ACCEPTANCE]) | st.sampled_from(CASES),
       good=st.sampled_from(FORMATS))
def test_property_extender_no_faulty_attestation_admits_a_sensitive_pod(
    keys: Keys, jwks_server: JwksServer, nodes: list[dict[str, Any]], case: tuple[str, str], good: str
) -> None:
    fmt, fault = case
    out = _run(_world(keys, jwks_server, "seedance-prod" if fault.endswith("audience") else None), nodes, good,
               fmt, fault)
    assert out["filter"]["NodeNames"] == ["good"], (fmt, fault, out["filter"])
    assert out["filter"]["FailedNodes"]["node"].startswith("Seedance: sensitive job: rejected: last token rejected")
    assert out["plain"]["NodeNames"] == ["good", "node"]
    assert out["binds"] == ["good"]


def test_without_a_registry_the_extender_admits_no_sensitive_pod_and_explains_others_as_before(
    nodes: list[dict[str, Any]]
) -> None:
    ext = Extender(make_policy("best-fit"))
    assert "AttestedTEE" not in ext.config.filters and ext.config.adapters[0] == "sensitive-guard"
    ext.set_nodes(nodes)
    res = ext.filter(extender_args(_pod("s", sensitive=True), nodes, node_cache_capable=True))
    assert res["NodeNames"] == [] and set(res["FailedNodes"].values()) == {
        "Seedance: sensitive job: profile 'default' has no AttestedTEE stage and no attestation registry is "
        "configured, so no node is eligible"}
    assert ext.filter(extender_args(_pod("p", sensitive=False), nodes, node_cache_capable=True))["NodeNames"] == [
        "good", "node"]

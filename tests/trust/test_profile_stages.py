"""The trust stages as profile stages: schema by name, the simulator driver, isolation grades through the profile.

The live loop (real store) and the extender (real HTTP) run the same stages in
``tests/control/test_attestation_loop.py`` and ``tests/k8s/test_k8s_trust.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest, SliceBackend
from seedance.profile import Attempt, ProfileConfig, build_profile, profile_from_text
from seedance.profile.context import MappingPods, PodInfo, StageServices
from seedance.sim.replay import ReplaySimulation
from seedance.slicing.slices import resolve_slice
from seedance.tiers.filters import offered_backends
from seedance.trust.attestation import AttestationRejected, TeeKind
from seedance.trust.grades import Grade, backend_grade
from seedance.trust.profile_stages import AttestedTee
from seedance.trust.stages import LABEL_SENSITIVE, LABEL_TEE
from tests.conftest import make_trace
from tests.trust.conftest import NOW, TEE, JwksServer, Keys
from tests.trust.test_attestation import CASES, FORMATS, World, _bad_token

#: the acceptance faults (issue 22); the property below draws from every fault the verifier knows
ACCEPTANCE = ("forged", "issuer", "expired", "stale-nonce", "debug", "measurement")
TRUST_FILTERS = ("NodeSchedulable", "NodeResourcesFit", "GpuModelMatch", "GpuFit", "AttestedTEE")
SENSITIVE = {LABEL_SENSITIVE: "true"}


def test_trust_stages_are_named_in_the_profile_document() -> None:
    cfg = profile_from_text(
        "kind: SchedulingProfile\n"
        "adapters: [tier-request, isolation-grade, deferral]\n"
        "filters: [NodeSchedulable, NodeResourcesFit, GpuFit, AttestedTEE, IsolationGrade]\n"
        "isolation: {tiers: {silver: hardware}, tenants: {bank: driver}}\n",
        source="p.yaml",
    )
    assert cfg.filters[-2:] == ("AttestedTEE", "IsolationGrade")
    assert cfg.isolation.tiers == {"silver": "hardware"}
    prof = build_profile(cfg, ClusterState(ClusterSpec((NodeSpec("n", 1000, 1000, 1, "A100-80GB"),))))
    assert [f.name for f in prof.filters][-2:] == ["AttestedTEE", "IsolationGrade"]
    assert [a.name for a in prof.adapters] == ["isolation-grade", "deferral"]  # tier-request is off without tiers
    with pytest.raises(InputError) as err:
        profile_from_text("kind: SchedulingProfile\nisolation:\n  tiers: {gold: strong}\n", source="p.yaml")
    assert err.value.source == "p.yaml" and err.value.line == 3 and "hardware, driver, runtime, none" in str(err.value)
    with pytest.raises(InputError, match="valid names: .*attestedtee") as err2:
        profile_from_text("kind: SchedulingProfile\nfilters: [NodeSchedulable, AttestedTE]\n", source="p.yaml")
    assert err2.value.line == 2  # the unknown name, with the valid ones listed


def test_without_a_registry_a_sensitive_job_is_admitted_nowhere() -> None:
    view = ClusterState(ClusterSpec((NodeSpec("n", 64000, 262144, 8, "H100-80GB", {LABEL_TEE: "tdx"}),)))
    pods = MappingPods({1: PodInfo("secret", "bank", SENSITIVE), 2: PodInfo("plain", "bank"),
                        3: PodInfo("typo", "bank", {LABEL_SENSITIVE: "yes"})})
    prof = build_profile(ProfileConfig(filters=TRUST_FILTERS), view, services=StageServices(pods=pods))
    req = ResourceRequest(4000, 8192, 1, 1000)
    d = prof.decide(view, req, 1)
    assert d.placement is None and d.reason == "no node fits now (AttestedTEE rejects 1 of 1)"
    assert prof.decide(view, req, 2).placement is not None
    bad = prof.admit(Attempt(view, req, 3))
    assert not bad.ok.any() and bad.reason(0) == (
        "trust labels of typo do not parse: field seedance.io/sensitive: must be true or false, got 'yes'")


def _sim(w: World, fmt: str, good: str, fault: str | None) -> ReplaySimulation:
    """Replay of two pods on {good, node}: pod 0 sensitive, pod 1 not; ``node`` is the tighter (best-fit) node."""
    w.registry.submit("good", w.token(good, "good"), w.now, advertised=TeeKind(TEE[good]))
    w.registry.submit("node", w.token(fmt, "node"), w.now, advertised=TeeKind(TEE[fmt]))
    if fault is not None:
        token, advertised, _ = _bad_token(w, fmt, fault)
        with pytest.raises(AttestationRejected):
            w.registry.submit("node", token, w.now, advertised=advertised)
    spec = ClusterSpec((
        NodeSpec("good", 64000, 262144, 8, "H100-80GB", {LABEL_TEE: TEE[good]}),
        NodeSpec("node", 64000, 262144, 2, "H100-80GB", {LABEL_TEE: TEE[fmt]}),
    ))
    trace = make_trace([(4000, 8192, 1, 1000)] * 2, times=[(NOW + 1, NOW + 50), (NOW + 2, NOW + 50)])
    pods = MappingPods({0: PodInfo("p0", "bank", SENSITIVE), 1: PodInfo("p1", "bank")})
    sim = ReplaySimulation(spec, trace, "best-fit", profile=ProfileConfig(filters=TRUST_FILTERS),
                           services=StageServices(pods=pods, attestation=w.registry))
    sim.run()
    return sim


def _node_of(sim: ReplaySimulation, pod: int) -> str | None:
    p = sim.records[pod].placement
    return None if p is None else sim.spec.nodes[p.node].name


def test_simulator_places_a_sensitive_pod_on_an_attested_node_only(keys: Keys, jwks_server: JwksServer) -> None:
    sim = _sim(World(keys, jwks_server), "maa-sevsnp", "ita-tdx", None)
    assert (_node_of(sim, 0), _node_of(sim, 1)) == ("node", "node")  # both attested: best-fit's tighter node
    sim = _sim(World(keys, jwks_server), "maa-sevsnp", "ita-tdx", "forged")
    assert (_node_of(sim, 0), _node_of(sim, 1)) == ("good", "node")  # only the sensitive pod moves


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=st.sampled_from([c for c in CASES if c[1] in ACCEPTANCE]) | st.sampled_from(CASES),
       good=st.sampled_from(FORMATS))
def test_property_simulator_no_faulty_attestation_admits_a_sensitive_pod(
    keys: Keys, jwks_server: JwksServer, case: tuple[str, str], good: str
) -> None:
    fmt, fault = case
    w = World(keys, jwks_server, audience="seedance-prod" if fault.endswith("audience") else None)
    sim = _sim(w, fmt, good, fault)
    assert _node_of(sim, 0) == "good", (fmt, fault, sim.records[0].reason)
    assert _node_of(sim, 1) == "node"


def test_simulator_expiry_takes_the_node_out_at_the_first_attempt_after_exp(
    keys: Keys, jwks_server: JwksServer
) -> None:
    w = World(keys, jwks_server)
    w.registry.submit("n", w.token("maa-sevsnp", "n", exp=int(NOW + 600)), w.now)
    spec = ClusterSpec((NodeSpec("n", 64000, 262144, 8, "H100-80GB", {LABEL_TEE: "sev-snp"}),))
    times = [(NOW + 599, NOW + 700), (NOW + 600, NOW + 700)]  # one attempt just before exp, one at exp
    trace = make_trace([(4000, 8192, 1, 1000)] * 2, times=times)
    pods = MappingPods({0: PodInfo("a", "bank", SENSITIVE), 1: PodInfo("b", "bank", SENSITIVE)})
    sim = ReplaySimulation(spec, trace, "best-fit", profile=ProfileConfig(filters=TRUST_FILTERS),
                           services=StageServices(pods=pods, attestation=w.registry))
    sim.run()
    assert _node_of(sim, 0) == "n" and _node_of(sim, 1) is None
    assert sim.records[1].reason == "never scheduled: still pending at deletion time"
    stage = next(f for f in sim.profile.filters if isinstance(f, AttestedTee))
    reasons = stage.node_reasons(sim.state, ResourceRequest(0, 0))
    assert reasons is not None and reasons[0] == "sensitive job: expired: attestation expired 100 s ago (attested " \
        "by maa (maa-sevsnp), jti b65da1dcfbb4698b0bb2323cac664b745a2ff1cffbba55641fd65784aa9474d5)"


MODES = ("exclusive", "mig", "shared", None)
MODELS = ("A100-80GB", "T4", "H100-80GB")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=st.lists(st.tuples(st.sampled_from(MODES), st.sampled_from(MODELS)), min_size=1, max_size=8),
    milli=st.integers(50, 999),
    accepted=st.sets(st.sampled_from(list(SliceBackend))),
    tier=st.sampled_from(("silver", "bronze")),
    tenant=st.sampled_from(("bank", "shop")),
    mig=st.booleans(),
)
def test_property_a_tier_requiring_hardware_is_never_placed_on_a_time_sliced_share(
    layout: list[tuple[str | None, str]], milli: int, accepted: set[SliceBackend], tier: str, tenant: str,
    mig: bool,
) -> None:
    """Through the profile (adapter ``isolation-grade`` + filter ``IsolationGrade``), free or MIG pools."""
    nodes = tuple(NodeSpec(f"n{i}", 64000, 262144, 4, model, {"gpu.mode": mode} if mode else {})
                  for i, (mode, model) in enumerate(layout))
    view = ClusterState(ClusterSpec(nodes))
    cfg = ProfileConfig(
        adapters=("isolation-grade",), filters=("NodeSchedulable", "NodeResourcesFit", "GpuModelMatch", "GpuFit",
                                                 "GpuModeFit", "IsolationGrade"),
        isolation={"tiers": {"silver": "hardware"}, "tenants": {"bank": "driver"}},
        slices={"mode": "mig", "mig_map": {}} if mig else {"mode": "free"},
    )
    pods = MappingPods({7: PodInfo("j", tenant, tier=tier)})
    prof = build_profile(cfg, view, services=StageServices(pods=pods))
    required = max(Grade.HARDWARE if tier == "silver" else Grade.NONE, Grade.DRIVER if tenant == "bank" else Grade.NONE)
    req = ResourceRequest(4000, 8192, 1, milli, backends=tuple(sorted(accepted)))
    d = prof.decide(view, req, 7)
    if d.placement is None:
        return
    node = d.placement.node
    model = view.spec.nodes[node].gpu_model
    assert model is not None
    masks = offered_backends(view)
    adapted = prof.adapt(Attempt(view, req, 7))
    got = resolve_slice(adapted, model, tuple(b for b in SliceBackend if masks[b][node]))
    assert got is not None and backend_grade(got.backend) >= required
    if required is Grade.HARDWARE:
        assert got.backend not in (SliceBackend.TIME_SLICING, SliceBackend.MPS)
        if "slice" in d.explanation:  # MIG pools: the slice the MIG stage actually booked
            assert d.explanation["slice"]["backend"] in ("mig", "whole")

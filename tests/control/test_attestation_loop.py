"""The live loop with the trust and deferral stages, on a real store (SQLite; PostgreSQL where marked).

The same ``AttestedTEE`` stage as the simulator (``tests/trust/test_profile_stages.py``) and the
extender (``tests/k8s/test_k8s_trust.py``): faulty attestations never admit a sensitive job; an
expiring attestation takes its node out at the first cycle at or after ``exp`` and the sensitive
jobs running there are reported; a flexible job is deferred to a cheaper hour, then placed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from seedance.control.db.models import EventRecord
from seedance.control.schemas import PolicyCreate
from seedance.control.service import ControlService
from seedance.control.services import policies
from seedance.control.services.attestation import EVENT_LOST, LiveStages
from seedance.costmodel.live_deferral import LiveDeferral
from seedance.costmodel.policy import CostPolicy
from seedance.costmodel.score import Signals
from seedance.signals.series import HOUR
from seedance.trust.attestation import AttestationRejected, TeeKind
from seedance.trust.registry import AttestationRegistry, MeasurementPolicy
from seedance.trust.stages import LABEL_SENSITIVE, LABEL_TEE
from tests.control.helpers import ADMIN_TOKEN, add_nodes, job_row, submit
from tests.trust.conftest import MEASUREMENT, NOW, TEE, JwksServer, Keys
from tests.trust.conftest import jwks_server as jwks_server  # noqa: F401 - the fixtures, shared with trust
from tests.trust.conftest import keys as keys  # noqa: F401
from tests.trust.test_attestation import CASES, FORMATS, World, _bad_token

Svc = Callable[..., ControlService]
SENSITIVE = {LABEL_SENSITIVE: "true"}
ACCEPTANCE = ("forged", "issuer", "expired", "stale-nonce", "debug", "measurement")


@dataclass
class Clock:
    t: float = NOW

    def __call__(self) -> float:
        return self.t


def _world(keys: Keys, server: JwksServer, *, audience: str | None = None) -> World:
    """The trust test world, its allow-list given to the admin's tenant (``system``), who submits here."""
    w = World(keys, server, audience=audience)
    w.policy = MeasurementPolicy.from_mapping({"system": list(MEASUREMENT.values())})
    w.registry = AttestationRegistry(w.verifier, w.policy)
    return w


def _attach(svc: ControlService, w: World, clock: Clock) -> LiveStages:
    stages = LiveStages(registry=w.registry, clock=clock)
    svc.loop.stages = stages
    svc.loop._caches.clear()
    return stages


def _events(svc: ControlService, kind: str) -> list[EventRecord]:
    with svc.db.read() as s:
        return list(s.scalars(select(EventRecord).where(EventRecord.kind == kind).order_by(EventRecord.id)))


def test_property_live_loop_no_faulty_attestation_admits_a_sensitive_job(
    make_service: Svc, sqlite_url: str, keys: Keys, jwks_server: JwksServer
) -> None:
    svc = make_service(sqlite_url)
    serial = itertools.count()

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=st.sampled_from([c for c in CASES if c[1] in ACCEPTANCE]) | st.sampled_from(CASES),
           good=st.sampled_from(FORMATS))
    def check(case: tuple[str, str], good: str) -> None:
        fmt, fault = case
        n = next(serial)
        cluster = f"c{n}"
        w = _world(keys, jwks_server, audience="seedance-prod" if fault.endswith("audience") else None)
        _attach(svc, w, Clock(w.now))
        add_nodes(svc, cluster=cluster, count=1, gpus=8, model="H100-80GB", prefix=f"good{n}",
                  labels={LABEL_TEE: TEE[good]})
        add_nodes(svc, cluster=cluster, count=1, gpus=2, model="H100-80GB", prefix=f"node{n}",
                  labels={LABEL_TEE: TEE[fmt]})
        g, b = f"good{n}-0", f"node{n}-0"
        w.registry.submit(g, w.token(good, g), w.now, advertised=TeeKind(TEE[good]))
        w.registry.submit(b, w.token(fmt, b), w.now, advertised=TeeKind(TEE[fmt]))
        token, advertised, _ = _bad_for(w, fmt, fault, b)
        with pytest.raises(AttestationRejected):
            w.registry.submit(b, token, w.now, advertised=advertised)
        secret = submit(svc, cluster=cluster, gpus=1, labels=SENSITIVE)
        plain = submit(svc, cluster=cluster, gpus=1)
        svc.loop.run_once()
        assert job_row(svc, secret).node_name == g, (fmt, fault, job_row(svc, secret).status_reason)
        assert job_row(svc, plain).node_name == b  # best-fit's tighter node: only the sensitive job avoids it

    check()


def _bad_for(w: World, fmt: str, fault: str, node: str) -> tuple[str, TeeKind | None, Any]:
    """``_bad_token`` for a node named ``node`` (it builds tokens for the node called ``node``)."""
    real_token, real_challenge = w.token, w.registry.challenge

    def token(f: str, n: str, **kw: Any) -> str:
        return real_token(f, node if n == "node" else n, **kw)

    def challenge(n: str, now: float) -> str:
        return real_challenge(node if n == "node" else n, now)

    w.token = token  # type: ignore[method-assign]
    w.registry.challenge = challenge  # type: ignore[method-assign]
    try:
        return _bad_token(w, fmt, fault)
    finally:
        w.token = real_token  # type: ignore[method-assign]
        w.registry.challenge = real_challenge  # type: ignore[method-assign]


def test_expiring_attestation_leaves_eligibility_within_one_cycle_and_running_jobs_are_reported(
    make_service: Svc, db_url: str, keys: Keys, jwks_server: JwksServer
) -> None:
    svc = make_service(db_url)
    w = _world(keys, jwks_server)
    clock = Clock(NOW)
    _attach(svc, w, clock)
    add_nodes(svc, count=1, gpus=4, model="H100-80GB", prefix="n1", labels={LABEL_TEE: "sev-snp"})
    add_nodes(svc, count=1, gpus=8, model="H100-80GB", prefix="n2", labels={LABEL_TEE: "tdx"})
    w.registry.submit("n1-0", w.token("maa-sevsnp", "n1-0", exp=int(NOW + 120)), w.now)
    w.registry.submit("n2-0", w.token("maa-tdx", "n2-0"), w.now)
    placed = []
    for t in (NOW, NOW + 60, NOW + 119, NOW + 120, NOW + 180):  # one cycle per 60 s, and at exp itself
        clock.t = t
        j = submit(svc, gpus=1, labels=SENSITIVE)
        svc.loop.run_once()
        placed.append(job_row(svc, j).node_name)
    # n1 (the tighter node) while attested; from the first cycle at exp on, n2: latency 0 cycles after exp
    assert placed == ["n1-0", "n1-0", "n1-0", "n2-0", "n2-0"]
    lost = _events(svc, EVENT_LOST)
    assert sorted(e.job_id for e in lost) == [1, 2, 3]  # the three sensitive jobs still on n1, once each
    assert all(e.data["node"] == "n1-0" and e.data["reason"].startswith("expired: attestation expired") for e in lost)
    assert "lost its attestation" in lost[0].message
    # a plain job still goes to n1; revoking n2 reports the sensitive jobs there at the next cycle
    plain = submit(svc, gpus=1)
    w.registry.revoke(node="n2-0", reason="host compromised")
    svc.loop.run_once()
    assert job_row(svc, plain).node_name == "n1-0"
    assert sorted(e.job_id for e in _events(svc, EVENT_LOST)) == [1, 2, 3, 4, 5]
    svc.loop.run_once()
    assert len(_events(svc, EVENT_LOST)) == 5  # reported once, not every cycle


def test_a_pending_sensitive_job_binds_in_the_cycle_after_its_node_attests(
    make_service: Svc, sqlite_url: str, keys: Keys, jwks_server: JwksServer
) -> None:
    svc = make_service(sqlite_url)
    w = _world(keys, jwks_server)
    _attach(svc, w, Clock(NOW))
    add_nodes(svc, count=1, gpus=8, model="H100-80GB", prefix="tee", labels={LABEL_TEE: "tdx"})
    add_nodes(svc, count=1, gpus=8, model="H100-80GB", prefix="plain")
    j = submit(svc, gpus=1, labels=SENSITIVE)
    svc.loop.run_once()
    row = job_row(svc, j)
    assert row.status == "pending" and row.status_reason == "no node fits now (AttestedTEE rejects 2 of 2)"
    svc.loop.run_once()
    assert job_row(svc, j).status == "pending"
    w.registry.submit("tee-0", w.token("ita-tdx", "tee-0"), w.now)
    svc.loop.run_once()  # the sweep sees the change and re-opens pending jobs in the same cycle
    assert job_row(svc, j).node_name == "tee-0"


def test_without_a_registry_the_service_places_no_sensitive_job(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=1, gpus=8, model="H100-80GB", labels={LABEL_TEE: "tdx"})
    j = submit(svc, gpus=1, labels=SENSITIVE)
    k = submit(svc, gpus=1, labels={LABEL_SENSITIVE: "false"})
    svc.loop.run_once()
    assert job_row(svc, j).status == "pending" and job_row(svc, j).status_reason == (
        "sensitive job: profile 'default' has no AttestedTEE stage and no attestation registry is configured, "
        "so no node is eligible")
    assert job_row(svc, k).status == "running"


# ------------------------------------------------------------------------------------------- deferral
H0 = int(NOW // HOUR * HOUR)


class TableProvider:
    """Signals from a fixed hourly table (dear now, cheap three hours later), as a live provider answers."""

    def __init__(self) -> None:
        price = np.full(48, 150.0)
        price[:3] = (400.0, 380.0, 360.0)
        price[3] = 20.0
        self.signals = Signals(H0, price, np.full(48, 300.0), "USD", "table")
        self.calls = 0

    def snapshot(self, now: float, horizon_hours: int = 48) -> Any:
        self.calls += 1
        return SimpleNamespace(signals=self.signals)


def test_the_live_loop_defers_a_flexible_job_to_the_cheap_hour_and_then_places_it(
    make_service: Svc, sqlite_url: str
) -> None:
    svc = make_service(sqlite_url)
    clock = Clock(H0 + 1800.0)
    svc.loop.stages = LiveStages(deferral=LiveDeferral(TableProvider(), CostPolicy()), clock=clock)
    add_nodes(svc, count=1, gpus=8)
    flex = submit(svc, gpus=1, tier="bronze", duration_hours=1.0, flexibility_hours=6.0)
    rigid = submit(svc, gpus=1, tier="bronze", duration_hours=1.0)
    svc.loop.run_once()
    row = job_row(svc, flex)
    assert row.status == "pending" and row.status_reason.startswith(
        "deferred 2.5 h to 2023-11-15T01:00:00Z: energy 0.22 -> 0.01 USD")
    assert job_row(svc, rigid).status == "running"
    from seedance.control.db.models import DecisionRecord

    with svc.db.read() as s:
        d = s.scalars(select(DecisionRecord).where(DecisionRecord.job_id == flex)).one()
    assert d.outcome == "pending" and d.explanation["deferral"]["defer"] is True
    assert d.explanation["deferral"]["cost_window"] < d.explanation["deferral"]["cost_now"]
    from seedance.control.client import LocalClient

    cli = LocalClient(sqlite_url)  # what ``seedancectl describe job`` / ``explain job`` read
    try:
        described = cli.get_job(str(flex))
        assert described["status_reason"] == row.status_reason
        assert [x["reason"] for x in cli.decisions(str(flex))] == [row.status_reason]
        assert cli.explain(str(flex))["latest"]["explanation"]["deferral"]["start"] == "2023-11-15T01:00:00Z"
    finally:
        cli.service.close()
    clock.t = H0 + 2 * HOUR  # still before the window: still deferred, without a new capacity change
    svc.loop.run_once()
    assert job_row(svc, flex).status == "pending"
    clock.t = H0 + 3 * HOUR  # the window: placed
    svc.loop.run_once()
    assert job_row(svc, flex).status == "running"


def test_a_hardware_tier_is_never_placed_on_a_time_sliced_share_live(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=1, gpus=4, prefix="shared", labels={"gpu.mode": "shared"})
    add_nodes(svc, count=1, gpus=8, prefix="mig", labels={"gpu.mode": "mig"})
    me = svc.authenticate(ADMIN_TOKEN)
    doc = (
        "kind: SchedulingProfile\nname: graded\nadapters: [isolation-grade]\n"
        "filters: [NodeSchedulable, NodeResourcesFit, GpuModelMatch, GpuFit, GpuModeFit, IsolationGrade]\n"
        "isolation: {tiers: {silver: hardware}}\n"
    )
    with svc.db.write() as s:
        policies.create_policy(session=s, principal=me, validator=svc.validator,
                               data=PolicyCreate(name="graded", config_yaml=doc, enabled=True))
    silver = [submit(svc, gpus=0.25, tier="silver") for _ in range(3)]
    bronze = submit(svc, gpus=0.25, tier="bronze")
    svc.loop.run_once()
    assert {job_row(svc, j).node_name for j in silver} == {"mig-0"}
    assert job_row(svc, bronze).node_name == "shared-0"  # best-fit's tighter node: no grade required

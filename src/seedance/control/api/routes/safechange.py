"""Safe change: ``/api/v1/compliance/*`` (facts, rules, checks, evidence, overrides) and policy dry runs.

* ``GET /compliance/facts``: the running control plane's evidence (``SystemFacts``).
* ``GET /compliance/rules``: the rules with their clauses.
* ``POST /compliance/check`` and ``POST /policies/{name}/compliance`` (operator): a policy document (given, or
  stored) checked with the system's facts; ``?format=sarif`` answers SARIF 2.1.0.
* ``POST /compliance/evidence``: append a backup, key-rotation or node-destruction record (operator).
* ``POST /compliance/overrides``: log a policy enabled elsewhere over its errors (operator).
* ``POST /policies/{name}/dry-run``: replay the cluster's recent jobs under the current and the
  proposed policy; read-only (operator).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Query
from pydantic import BaseModel, ConfigDict, StringConstraints

from seedance.compliance.facts import SystemFacts
from seedance.control.api.deps import NamePath, PrincipalDep, ServiceDep
from seedance.control.api.errors import ERROR_RESPONSES
from seedance.control.schemas import Role
from seedance.control.security import Principal
from seedance.control.services import compliance, dryrun, policies

router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES, tags=["compliance"])


def _operator(me: PrincipalDep) -> Principal:
    """The caller, if operator or admin (checked before the body is read: 403 comes first)."""
    me.require(Role.OPERATOR, "compliance checks, evidence, overrides, dry runs and rollout events")
    return me


OperatorDep = Annotated[Principal, Depends(_operator)]
Format = Annotated[Literal["json", "sarif"], Query(description="json (report) or sarif (SARIF 2.1.0 log).")]


class CheckRequest(BaseModel):
    """A policy document to check."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    config_yaml: Annotated[str, StringConstraints(max_length=32 * 1024)]
    source: Annotated[str, StringConstraints(min_length=1, max_length=500)] = "config_yaml"


def _render(report: Any, fmt: str) -> dict[str, Any]:
    if fmt == "sarif":
        import seedance
        from seedance.compliance.sarif import to_sarif

        return to_sarif([report], version=getattr(seedance, "__version__", "0"))
    out: dict[str, Any] = report.to_json()
    return out


@router.get("/compliance/facts", response_model=SystemFacts)
def facts(svc: ServiceDep, me: PrincipalDep) -> SystemFacts:
    """The evidence the compliance rules check, gathered from this control plane's store."""
    with svc.db.read() as s:
        return compliance.gather_facts(session=s)


@router.get("/compliance/rules")
def rules(svc: ServiceDep, me: PrincipalDep) -> list[dict[str, Any]]:
    """Every compliance rule: id, name, summary, clauses, evidence."""
    from seedance.compliance.engine import resolve_rules

    return [{"id": r.id, "name": r.name, "summary": r.summary, "level": str(r.level),
             "clauses": [c.tag for c in r.clauses], "evidence": list(r.evidence)}
            for r in resolve_rules(None, source="")]


@router.post("/compliance/check")
def check(data: CheckRequest, svc: ServiceDep, me: OperatorDep, format: Format = "json") -> dict[str, Any]:
    """Check a policy document with this control plane's facts (nothing is stored)."""
    with svc.db.read() as s:
        fx = compliance.gather_facts(session=s)
    return _render(compliance.check_text(data.config_yaml, source=data.source, facts=fx), format)


@router.post("/policies/{name}/compliance")
def check_policy(name: NamePath, svc: ServiceDep, me: OperatorDep, format: Format = "json") -> dict[str, Any]:
    """Check a stored policy with this control plane's facts (nothing is stored)."""
    with svc.db.read() as s:
        p = policies.get_policy(session=s, name=name)
        fx = compliance.gather_facts(session=s)
        text = p.config_yaml
    return _render(compliance.check_text(text, source=f"policy {name} config_yaml", facts=fx), format)


@router.post("/compliance/evidence", status_code=201)
def record_evidence(data: compliance.EvidenceCreate, svc: ServiceDep, me: OperatorDep) -> dict[str, Any]:
    """Append an evidence record to the event log (operator)."""
    with svc.db.write() as s:
        return compliance.record_evidence(session=s, principal=me, data=data)


@router.post("/compliance/overrides", status_code=201)
def record_override(data: compliance.OverrideCreate, svc: ServiceDep, me: OperatorDep) -> dict[str, Any]:
    """Log a policy enabled outside this store over its compliance errors (operator)."""
    with svc.db.write() as s:
        report = compliance.override_elsewhere(session=s, principal=me, data=data)
    return {"recorded": compliance.OVERRIDE_EVENT, "policy": data.policy, "report": report.to_json()}


@router.post("/policies/{name}/dry-run")
def dry_run(
    name: NamePath, svc: ServiceDep, me: OperatorDep,
    data: Annotated[dryrun.DryRunRequest | None, Body()] = None,
) -> dict[str, Any]:
    """Replay the cluster's recent jobs under the current and this policy; what would change (read-only)."""
    st = svc.settings
    with svc.db.read() as s:
        prepared = dryrun.prepare(session=s, name=name, request=data or dryrun.DryRunRequest(),
                                  default_placement=st.default_placement, default_queue=st.default_queue_order,
                                  tier_pools=st.tier_pools)
    return dryrun.execute(prepared)


@router.post("/policies/dry-run")
def dry_run_document(data: dryrun.DryRunProposal, svc: ServiceDep, me: OperatorDep) -> dict[str, Any]:
    """Dry run of a policy document that is not stored (the CLI's ``scheduler policy enable --dry-run``)."""
    st = svc.settings
    with svc.db.read() as s:
        prepared = dryrun.prepare(session=s, name=data.name, request=data, default_placement=st.default_placement,
                                  default_queue=st.default_queue_order, tier_pools=st.tier_pools,
                                  validator=svc.validator)
    return dryrun.execute(prepared)


class RolloutEvent(BaseModel):
    """A canary controller's event (``rollout.*``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    kind: Annotated[str, StringConstraints(pattern=r"^rollout\.[a-z_]{1,40}$")]
    message: Annotated[str, StringConstraints(max_length=500)] = ""
    data: dict[str, Any] = {}


@router.post("/rollout/events", status_code=201, tags=["rollout"])
def rollout_event(data: RolloutEvent, svc: ServiceDep, me: OperatorDep) -> dict[str, Any]:
    """Append a canary controller's event to the event log (operator)."""
    from seedance.control.services import events

    with svc.db.write() as s:
        events.record(session=s, kind=data.kind, message=data.message, data={**data.data, "by": me.token_name})
    return {"recorded": data.kind}

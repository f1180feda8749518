"""``/api/v1/policies``: scheduling policies (the same YAML as the CLI's --config-file)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Response

from seedance.control.api.deps import NamePath, PrincipalDep, ServiceDep
from seedance.control.api.errors import ERROR_RESPONSES
from seedance.control.schemas import PolicyCreate, PolicyRead
from seedance.control.services import compliance, jobs, policies

router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES, tags=["policies"])


@router.post("/policies", status_code=201, response_model=PolicyRead)
def create_policy(data: PolicyCreate, svc: ServiceDep, me: PrincipalDep) -> PolicyRead:
    """Validate and store a scheduling policy (operator)."""
    with svc.db.write() as s:
        p = policies.create_policy(session=s, principal=me, data=data, validator=svc.validator)
        out = policies.to_read(p, data.cluster)
    svc.wake_scheduler()
    return out


@router.get("/policies", response_model=list[PolicyRead])
def list_policies(svc: ServiceDep, me: PrincipalDep) -> list[PolicyRead]:
    """Every scheduling policy."""
    with svc.db.read() as s:
        names = jobs.cluster_names(session=s)
        return [policies.to_read(p, names.get(p.cluster_id) if p.cluster_id else None)
                for p in policies.list_policies(session=s)]


@router.get("/policies/{name}", response_model=PolicyRead)
def get_policy(name: NamePath, svc: ServiceDep, me: PrincipalDep) -> PolicyRead:
    """One scheduling policy."""
    with svc.db.read() as s:
        p = policies.get_policy(session=s, name=name)
        return policies.to_read(p, jobs.cluster_names(session=s).get(p.cluster_id) if p.cluster_id else None)


def _toggle(name: str, svc: ServiceDep, me: PrincipalDep, enabled: bool,
            gate: compliance.EnableRequest | None = None) -> PolicyRead:
    with svc.db.write() as s:
        if gate is not None:  # compliance gate, in the same transaction as the enable
            compliance.gate_stored(session=s, principal=me, name=name, override=gate.override, reason=gate.reason)
        p = policies.set_enabled(session=s, principal=me, name=name, enabled=enabled)
        out = policies.to_read(p, jobs.cluster_names(session=s).get(p.cluster_id) if p.cluster_id else None)
    svc.wake_scheduler()
    return out


@router.post("/policies/{name}/enable", response_model=PolicyRead)
def enable_policy(
    name: NamePath, svc: ServiceDep, me: PrincipalDep, body: Annotated[compliance.EnableRequest | None, Body()] = None
) -> PolicyRead:
    """Put a policy in force (operator); refused (409) on compliance errors unless overridden with a reason."""
    return _toggle(name, svc, me, True, body or compliance.EnableRequest())


@router.post("/policies/{name}/disable", response_model=PolicyRead)
def disable_policy(name: NamePath, svc: ServiceDep, me: PrincipalDep) -> PolicyRead:
    """Take a policy out of force (operator)."""
    return _toggle(name, svc, me, False)


@router.delete("/policies/{name}", status_code=204)
def delete_policy(name: NamePath, svc: ServiceDep, me: PrincipalDep) -> Response:
    """Remove a policy (operator)."""
    with svc.db.write() as s:
        policies.delete_policy(session=s, principal=me, name=name)
    svc.wake_scheduler()
    return Response(status_code=204)

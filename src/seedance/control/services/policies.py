"""Scheduling policies (shared infrastructure): store, enable, disable, and pick the active one.

The policy in force for a cluster is the most recently updated enabled policy bound to that
cluster, else the most recent enabled policy bound to no cluster, else the service defaults.
Enabling or disabling a policy bumps the affected clusters' versions so the loop re-plans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from seedance.control.db.models import Cluster, SchedulingPolicy, utcnow
from seedance.control.errors import Conflict, NotFound
from seedance.control.policydoc import PolicyValidator, canonical_placement, canonical_queue_order
from seedance.control.schemas import PolicyCreate, PolicyRead, Role
from seedance.control.security import Principal
from seedance.control.services import clusters, events
from seedance.core.errors import InputError, UnknownNameError


@dataclass(frozen=True, slots=True)
class ActivePolicy:
    """The policy in force for one cluster."""

    name: str
    placement: str
    queue_order: str
    version: int
    profile: dict[str, Any] | None = None  # a stored ``kind: SchedulingProfile`` document (validated)


def create_policy(
    *, session: Session, principal: Principal, data: PolicyCreate, validator: PolicyValidator
) -> SchedulingPolicy:
    """Validate and store a policy (operator or admin)."""
    principal.require(Role.OPERATOR, "creating a scheduling policy")
    config = validator.validate(data.config_yaml, source="config_yaml")
    fields = data.model_fields_set
    placement = data.placement if "placement" in fields or "placement" not in config else config["placement"]
    queue_order = data.queue_order if "queue_order" in fields or "queue_order" not in config else config["queue_order"]
    try:
        placement = canonical_placement(str(placement))
    except UnknownNameError as exc:
        raise InputError(str(exc), source="request body", field="placement") from None
    try:
        queue_order = canonical_queue_order(str(queue_order))
    except UnknownNameError as exc:
        raise InputError(str(exc), source="request body", field="queue_order") from None
    cluster_id = clusters.get_cluster(session=session, name=data.cluster).id if data.cluster else None
    if data.enabled:  # compliance gate; no override here: create it disabled, then enable with a reason
        from seedance.control.services import compliance

        compliance.gate_new(session=session, principal=principal, policy=data.name, text=data.config_yaml,
                            cluster_id=cluster_id)
    now = utcnow()
    policy = SchedulingPolicy(
        name=data.name, cluster_id=cluster_id, placement=placement, queue_order=queue_order,
        plugin=data.plugin or _opt_str(config, "plugin"), region=data.region or _opt_str(config, "region"),
        config_yaml=data.config_yaml, config=config, enabled=data.enabled, version=0, created_at=now, updated_at=now,
    )
    try:
        with session.begin_nested():
            session.add(policy)
            session.flush()
    except IntegrityError:
        raise Conflict(f"policy {data.name!r} already exists") from None
    if policy.enabled:
        _bump_clusters(session, cluster_id)
    events.record(session=session, kind="policy.created", cluster_id=cluster_id, message=f"policy {policy.name}",
                  data={"placement": placement, "queue_order": queue_order, "enabled": policy.enabled})
    return policy


def get_policy(*, session: Session, name: str) -> SchedulingPolicy:
    """A policy by name."""
    policy = session.scalars(select(SchedulingPolicy).where(SchedulingPolicy.name == name)).first()
    if policy is None:
        raise NotFound(f"policy {name!r} not found")
    return policy


def list_policies(*, session: Session) -> list[SchedulingPolicy]:
    """Every policy, by id."""
    return list(session.scalars(select(SchedulingPolicy).order_by(SchedulingPolicy.id)))


def set_enabled(*, session: Session, principal: Principal, name: str, enabled: bool) -> SchedulingPolicy:
    """Enable or disable a policy (operator or admin)."""
    principal.require(Role.OPERATOR, "enabling or disabling a policy")
    policy = get_policy(session=session, name=name)
    if policy.enabled != enabled:
        session.execute(
            update(SchedulingPolicy).where(SchedulingPolicy.id == policy.id)
            .values(enabled=enabled, version=SchedulingPolicy.version + 1, updated_at=utcnow())
        )
        _bump_clusters(session, policy.cluster_id)
        events.record(session=session, kind="policy.enabled" if enabled else "policy.disabled",
                      cluster_id=policy.cluster_id, message=f"policy {policy.name}")
        session.refresh(policy)
    return policy


def delete_policy(*, session: Session, principal: Principal, name: str) -> None:
    """Remove a policy (operator or admin)."""
    principal.require(Role.OPERATOR, "deleting a policy")
    policy = get_policy(session=session, name=name)
    if policy.enabled:
        _bump_clusters(session, policy.cluster_id)
    session.delete(policy)
    events.record(session=session, kind="policy.deleted", cluster_id=policy.cluster_id, message=f"policy {name}")


def active_policy(*, session: Session, cluster_id: int, default_placement: str, default_queue: str) -> ActivePolicy:
    """The policy in force for ``cluster_id`` (see the module docstring)."""
    rows = session.execute(
        select(SchedulingPolicy.name, SchedulingPolicy.placement, SchedulingPolicy.queue_order,
               SchedulingPolicy.version, SchedulingPolicy.cluster_id, SchedulingPolicy.config)
        .where(SchedulingPolicy.enabled.is_(True),
               (SchedulingPolicy.cluster_id == cluster_id) | SchedulingPolicy.cluster_id.is_(None))
        .order_by(SchedulingPolicy.updated_at.desc(), SchedulingPolicy.id.desc())
    ).all()
    bound = [r for r in rows if r[4] == cluster_id] or list(rows)
    if not bound:
        return ActivePolicy("default", default_placement, default_queue, 0)
    r = bound[0]
    profile = (r[5] or {}).get("profile")
    return ActivePolicy(r[0], r[1], r[2], int(r[3]), profile if isinstance(profile, dict) else None)


def to_read(policy: SchedulingPolicy, cluster_name: str | None) -> PolicyRead:
    """The API view of a policy."""
    return PolicyRead(
        id=policy.id, name=policy.name, cluster=cluster_name, placement=policy.placement,
        queue_order=policy.queue_order, plugin=policy.plugin, region=policy.region, config_yaml=policy.config_yaml,
        config=dict(policy.config), enabled=policy.enabled, version=policy.version, created_at=policy.created_at,
        updated_at=policy.updated_at,
    )


def _opt_str(config: dict[str, object], key: str) -> str | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= 63:
        raise InputError("must be a string of 1 to 63 characters", source="config_yaml", field=f"spec.{key}")
    return value


def _bump_clusters(session: Session, cluster_id: int | None) -> None:
    ids = [cluster_id] if cluster_id is not None else list(session.scalars(select(Cluster.id)))
    for cid in ids:
        clusters.bump(session=session, cluster_id=cid, sched=True, capacity=True)

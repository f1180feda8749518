"""The live loop's trust and deferral wiring: pod directory per cycle, the attestation sweep, profile stages.

NOTE(seedance): what the loop gets from :class:`LiveStages` (its hooks are one line each).
  * ``configure(cfg)``: a job labelled ``seedance.io/sensitive=true`` is never placed without a
    verified, fresh attestation, whatever the stored profile lists (``ensure_trust``: ``AttestedTEE``
    added when a registry is configured, else the ``sensitive-guard`` hold), and the ``deferral``
    adapter is added when a live deferral is configured.
  * ``services``: the :class:`~seedance.profile.context.StageServices` the profile is built with
    (the pod directory filled by ``load``, the registry, the deferral, the clock).
  * ``load(session, cluster, pending)``: one query per cycle for the pending jobs' tenant, labels,
    tier, duration, flexibility and deadline.
  * ``sweep(db, cluster)`` at the start of every cycle: the eligibility of the cluster's nodes at
    the clock (state, token id, unexpired) is compared with the last cycle's. On a change the
    cluster's ``capacity_version`` moves (pending jobs are decided again in this very cycle, so a
    node whose attestation expired or was revoked is out of eligibility within one cycle, and a
    node newly attested is tried), and the running or bound sensitive jobs on nodes no longer
    eligible for their tenant get one ``job.attestation_lost`` event each (reported, not silently
    left; never twice for one job and node, across restarts too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from seedance.control.db.models import EventRecord, Job, Node, Tenant, utcnow
from seedance.control.db.session import Database
from seedance.control.services import clusters as cluster_svc
from seedance.core.lifecycle import JobStatus
from seedance.profile.config import ProfileConfig
from seedance.profile.context import MappingPods, PodInfo, StageServices
from seedance.trust.profile_stages import ensure_trust
from seedance.trust.registry import RunningJob, TrustAlert
from seedance.trust.stages import LABEL_SENSITIVE

if TYPE_CHECKING:
    from seedance.costmodel.live_deferral import LiveDeferral
    from seedance.trust.registry import AttestationRegistry

log = logging.getLogger("seedance.control.attestation")

#: Event kind of a running sensitive job whose node lost its attestation.
EVENT_LOST = "job.attestation_lost"
_ACTIVE = (JobStatus.BOUND.value, JobStatus.RUNNING.value)


def is_sensitive(labels: dict[str, Any] | None) -> bool:
    """Whether job labels mark the job sensitive (anything but an explicit ``false`` counts: fail closed)."""
    value = (labels or {}).get(LABEL_SENSITIVE)
    return value is not None and str(value).strip().lower() != "false"


@dataclass(slots=True)
class LiveStages:
    """Trust and deferral for the live loop (see the module docstring).

    Args:
        registry: The node-attestation registry (``None``: no node is eligible for a sensitive job).
        deferral: The live deferral stage (``None``: no job is deferred).
        clock: The stages' clock (default: ``time.time``).
    """

    registry: AttestationRegistry | None = None
    deferral: LiveDeferral | None = None
    clock: Callable[[], float] = time.time
    pods: MappingPods = field(default_factory=MappingPods)
    _seen: dict[int, tuple[tuple[str, str | None, bool], ...]] = field(default_factory=dict)
    _services: StageServices | None = None

    @property
    def services(self) -> StageServices:
        """What the live profile's stages are built with."""
        if self._services is None:
            self._services = StageServices(pods=self.pods, attestation=self.registry, deferral=self.deferral,
                                           clock=self.clock)
        return self._services

    def configure(self, cfg: ProfileConfig) -> ProfileConfig:
        """``cfg`` with the trust stage (``ensure_trust``) and the deferral adapter (when configured)."""
        cfg = ensure_trust(cfg, registry=self.registry is not None)
        if self.deferral is not None and not any(a.lower() == "deferral" for a in cfg.adapters):
            cfg = cfg.model_copy(update={"adapters": ("deferral", *cfg.adapters)})
        return cfg

    # ------------------------------------------------------------------ pod directory
    def load(self, s: Session, cluster_id: int, pending: Sequence[int]) -> None:
        """Fill the pod directory with the pending jobs of this cycle (one query)."""
        self.pods.pods.clear()
        if not pending:
            return
        rows = s.execute(
            select(Job.id, Job.name, Tenant.name, Job.labels, Job.tier, Job.duration_hours, Job.flexibility_hours,
                   Job.deadline, Job.created_at, Job.gpu_types)
            .join(Tenant, Tenant.id == Job.tenant_id).where(Job.id.in_(list(pending)))
        ).all()
        for jid, name, tenant, labels, tier, hours, flex, deadline, created, types in rows:
            self.pods.pods[int(jid)] = PodInfo(
                name=name, tenant=tenant, labels={str(k): str(v) for k, v in (labels or {}).items()}, tier=tier,
                duration_hours=hours, flexibility_hours=float(flex or 0.0),
                deadline=deadline.timestamp() if deadline is not None else None,
                submitted=created.timestamp() if created is not None else None,
                gpu_model=types[0] if types else None,
            )

    # ------------------------------------------------------------------ the sweep
    def sweep(self, db: Database, cluster_id: int) -> list[TrustAlert]:
        """Compare the nodes' eligibility with the last cycle's; on a change retry pending jobs and report."""
        if self.registry is None:
            return []
        now = self.clock()
        with db.read() as s:
            nodes = list(s.scalars(select(Node.name).where(Node.cluster_id == cluster_id).order_by(Node.id)))
        sig = tuple(self._node_sig(n, now) for n in nodes)
        if self._seen.get(cluster_id) == sig:
            return []
        first = cluster_id not in self._seen
        self._seen[cluster_id] = sig
        with db.write() as s:
            if not first:
                cluster_svc.bump(session=s, cluster_id=cluster_id, sched=False, capacity=True)
            return self._report(s, cluster_id, now)

    def _node_sig(self, node: str, now: float) -> tuple[str, str | None, bool]:
        assert self.registry is not None
        t = self.registry.trust(node, now)
        return (t.state, t.attestation.jti if t.attestation else None, t.eligible_now)

    def _report(self, s: Session, cluster_id: int, now: float) -> list[TrustAlert]:
        assert self.registry is not None
        rows = s.execute(
            select(Job.id, Job.name, Job.tenant_id, Tenant.name, Job.node_name, Job.labels)
            .join(Tenant, Tenant.id == Job.tenant_id)
            .where(Job.cluster_id == cluster_id, Job.status.in_(_ACTIVE))
        ).all()
        sensitive = {int(r[0]): r for r in rows if r[4] and is_sensitive(r[5])}
        if not sensitive:
            return []
        ids = {int(r[0]): str(r[1]) for r in sensitive.values()}
        alerts = self.registry.sweep(
            [RunningJob(str(jid), r[3], r[4], True) for jid, r in sensitive.items()], now
        )
        if not alerts:
            return []
        told = {
            (int(j), str((d or {}).get("node")))
            for j, d in s.execute(
                select(EventRecord.job_id, EventRecord.data)
                .where(EventRecord.kind == EVENT_LOST, EventRecord.job_id.in_([int(a.job) for a in alerts]))
            )
        }
        at = utcnow()
        out: list[TrustAlert] = []
        for a in alerts:
            jid = int(a.job)
            if (jid, a.node) in told:
                continue
            r = sensitive[jid]
            s.add(EventRecord(
                tenant_id=r[2], job_id=jid, cluster_id=cluster_id, kind=EVENT_LOST,
                message=f"sensitive job {ids[jid]} runs on {a.node}, which lost its attestation: {a.reason}"[:2000],
                data={"node": a.node, "reason": a.reason, "at": a.at}, created_at=at,
            ))
            log.warning("sensitive job %s on %s: %s", ids[jid], a.node, a.reason)
            out.append(TrustAlert(ids[jid], a.tenant, a.node, a.reason, a.at))
        return out

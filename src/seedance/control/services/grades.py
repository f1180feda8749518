"""Isolation grades of the live jobs: what each bound or running job's placement actually isolates.

NOTE(seedance): derived, never stored. For one cluster, every bound or running job becomes one
``trust.grades.SliceShare`` per GPU it holds: a whole GPU (or a share placed as a whole GPU) is
``whole``; a share on a ``gpu.mode=mig`` node (or one whose bind decision names a MIG slice) is
``mig``, its GPU instance told apart by the slice's start (else by the job); any other share is
``time-slicing`` (the sharing the free mode gives). ``grade_shares`` then weighs every pair of
jobs of different tenants on one physical GPU. The result is computed once per cluster and
session (``Session.info``), so a page of jobs costs one query per cluster.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, object_session

from seedance.control.db.models import DecisionRecord, Job, Node
from seedance.control.schemas import IsolationRead
from seedance.core.decision import Outcome
from seedance.core.lifecycle import JobStatus
from seedance.core.resources import MILLI_PER_GPU, SliceBackend
from seedance.tiers.filters import LABEL_MODE, MODE_MIG
from seedance.trust.grades import JobGrade, SliceShare, grade_shares

_ACTIVE = (JobStatus.BOUND.value, JobStatus.RUNNING.value)
_KEY = "seedance.isolation"


def cluster_grades(s: Session, cluster_id: int) -> dict[int, JobGrade]:
    """Per live job of the cluster, its weakest grade over the GPUs it holds."""
    rows = s.execute(
        select(Job.id, Job.tenant_id, Job.node_name, Job.gpu_indices, Job.num_gpu, Job.gpu_milli,
               Job.placed_gpu_milli)
        .where(Job.cluster_id == cluster_id, Job.status.in_(_ACTIVE))
    ).all()
    if not rows:
        return {}
    modes = {n: str((lb or {}).get(LABEL_MODE, "")) for n, lb in s.execute(
        select(Node.name, Node.labels).where(Node.cluster_id == cluster_id))}
    share_ids = [int(r[0]) for r in rows if r[4] == 1 and (r[6] or r[5]) < MILLI_PER_GPU]
    slices: dict[int, dict[str, Any]] = {}
    if share_ids:
        for jid, expl in s.execute(
            select(DecisionRecord.job_id, DecisionRecord.explanation)
            .where(DecisionRecord.job_id.in_(share_ids), DecisionRecord.outcome == Outcome.BIND.value)
            .order_by(DecisionRecord.id)
        ):
            info = (expl or {}).get("slice") if isinstance(expl, dict) else None
            if isinstance(info, dict):
                slices[int(jid)] = info
    shares: list[SliceShare] = []
    for jid, tenant, node, gpus, num_gpu, milli, placed in rows:
        if not node:
            continue
        held = placed or milli
        info = slices.get(int(jid), {})
        if num_gpu != 1 or held >= MILLI_PER_GPU:
            backend, gi = SliceBackend.WHOLE, None
        elif info.get("backend") == SliceBackend.MIG.value or modes.get(node) == MODE_MIG:
            backend, gi = SliceBackend.MIG, int(info["start"]) if "start" in info else -int(jid)
        else:
            backend, gi = SliceBackend.TIME_SLICING, None
        for g in gpus or []:
            shares.append(SliceShare(str(jid), str(tenant), node, int(g), backend, gi))
    out: dict[int, JobGrade] = {}
    for jg in grade_shares(shares).jobs:
        jid = int(jg.job)
        if jid not in out or jg.grade < out[jid].grade:
            out[jid] = jg
    return out


def isolation_of(job: Job) -> IsolationRead | None:
    """The grade of a bound or running job (``None`` otherwise), from the job's own session."""
    if job.status not in _ACTIVE or not job.node_name:
        return None
    s = object_session(job)
    if s is None:
        return None
    cache: dict[int, dict[int, JobGrade]] = s.info.setdefault(_KEY, {})
    grades = cache.get(job.cluster_id)
    if grades is None:
        grades = cache[job.cluster_id] = cluster_grades(s, job.cluster_id)
    jg = grades.get(job.id)
    if jg is None:
        return None
    with_ = None
    if jg.weakest_with is not None:
        other = s.get(Job, int(jg.weakest_with))
        with_ = other.name if other is not None else jg.weakest_with
    return IsolationRead.model_validate({
        "grade": jg.grade.label, "slice_grade": jg.slice_grade.label, "backend": jg.backend, "gpu": jg.gpu,
        "weakest_with": with_, "reason": jg.reason,
    })

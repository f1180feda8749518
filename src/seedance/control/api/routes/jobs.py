"""``/api/v1/jobs``: submit, list, read, cancel, decisions, events, explain."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from starlette.concurrency import run_in_threadpool

from seedance.backends.dispatch import read_logs
from seedance.control.api.deps import BeforeId, IdPath, Limit, PrincipalDep, ServiceDep
from seedance.control.api.errors import ERROR_RESPONSES
from seedance.control.schemas import (
    NAME_PATTERN,
    DecisionList,
    DecisionRead,
    EventList,
    EventRead,
    Explanation,
    JobCreate,
    JobList,
    JobLogs,
    JobRead,
    Tier,
)
from seedance.control.security import Principal
from seedance.control.service import ControlService
from seedance.control.services import events, jobs
from seedance.core.lifecycle import JobStatus

router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)


@router.post(
    "/jobs", status_code=201, response_model=JobRead, tags=["jobs"],
    responses={200: {"model": JobRead, "description": "Replay: a job with this idempotency key already exists."}},
)
async def submit_job(data: JobCreate, svc: ServiceDep, me: PrincipalDep) -> Response:
    """Submit a job (member). Answered after the job is durably stored."""
    return await submit(svc, me, data)


async def submit(svc: ControlService, me: Principal, data: JobCreate) -> Response:
    """The submission handler (also called by ``api.fastpath.SubmitFastPath`` for a cached token)."""
    if svc.committer is not None:  # group commit: this insert shares a transaction with concurrent ones
        # on the event loop: pricing from cached cluster data, then an awaited commit (no thread per request)
        prepared = jobs.prepare_cached(principal=me, data=data, scorer=svc.scorer, directory=svc.directory)
        if prepared is None:
            prepared = await run_in_threadpool(_prepare, svc, me, data)
        values, event = prepared
        job_id = await svc.committer.submit_async(values, event)
        if job_id is not None:
            out, created = jobs.read_from_values(job_id, values, data.cluster), True
        else:
            out, created = await run_in_threadpool(_resolve, svc, values, data.cluster), False
    else:
        out, created = await run_in_threadpool(_submit_alone, svc, me, data)
    if created:
        svc.wake_scheduler()
        return Response(out.model_dump_json(), status_code=201, media_type="application/json")
    # the hot path skips FastAPI's re-validation of the answer: it is a JobRead built just now
    return Response(out.model_dump_json(), status_code=200, media_type="application/json",
                    headers={"Idempotent-Replayed": "true"})


def _prepare(svc: ControlService, me: Principal, data: JobCreate) -> tuple[dict[str, Any], dict[str, Any]]:
    with svc.db.read() as s:
        return jobs.prepare_submission(session=s, principal=me, data=data, scorer=svc.scorer, directory=svc.directory)


def _resolve(svc: ControlService, values: dict[str, Any], cluster: str) -> JobRead:
    with svc.db.read() as s:
        return jobs.resolve_not_inserted(session=s, values=values, cluster=cluster, directory=svc.directory)


def _submit_alone(svc: ControlService, me: Principal, data: JobCreate) -> tuple[JobRead, bool]:
    with svc.db.write() as s:
        return jobs.submit_job(session=s, principal=me, data=data, scorer=svc.scorer, directory=svc.directory)


@router.get("/jobs", response_model=JobList, tags=["jobs"])
def list_jobs(
    svc: ServiceDep, me: PrincipalDep, limit: Limit = 100, before_id: BeforeId = None,
    status: Annotated[JobStatus | None, Query()] = None,
    tier: Annotated[Tier | None, Query()] = None,
    cluster: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=63)] = None,
    name: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=63)] = None,
) -> JobList:
    """Jobs of the caller's tenant (admins: all), newest first."""
    with svc.db.read() as s:
        rows = jobs.list_jobs(
            session=s, principal=me, status=status.value if status else None, tier=tier.value if tier else None,
            cluster=cluster, name=name, limit=limit, before_id=before_id,
        )
        names = jobs.cluster_names(session=s)
        items = [jobs.to_read(j, names.get(j.cluster_id, "?")) for j in rows]
    return JobList(items=items, next_before=items[-1].id if len(items) == limit else None)


@router.get("/jobs/{job_id}", response_model=JobRead, tags=["jobs"])
def get_job(job_id: IdPath, svc: ServiceDep, me: PrincipalDep) -> JobRead:
    """One job."""
    with svc.db.read() as s:
        job = jobs.get_job(session=s, principal=me, job_id=job_id)
        return jobs.to_read(job, jobs.cluster_names(session=s).get(job.cluster_id, "?"))


@router.post("/jobs/{job_id}/cancel", response_model=JobRead, tags=["jobs"])
def cancel_job(job_id: IdPath, svc: ServiceDep, me: PrincipalDep) -> JobRead:
    """Cancel a job (member); a placed job gives its GPUs back."""
    with svc.db.write() as s:
        job, handle = jobs.cancel_job(session=s, principal=me, job_id=job_id)
        out = jobs.to_read(job, jobs.cluster_names(session=s).get(job.cluster_id, "?"))
    if handle is not None:
        svc.dispatcher.cancel(handle)
    svc.wake_scheduler()
    return out


@router.get("/jobs/{job_id}/decisions", response_model=DecisionList, tags=["jobs"])
def job_decisions(job_id: IdPath, svc: ServiceDep, me: PrincipalDep, limit: Limit = 100) -> DecisionList:
    """The job's scheduling decisions with explanations, oldest first."""
    with svc.db.read() as s:
        rows = jobs.decisions_of(session=s, principal=me, job_id=job_id, limit=limit)
        return DecisionList(items=[DecisionRead.model_validate(d) for d in rows])


@router.get("/jobs/{job_id}/events", response_model=EventList, tags=["jobs"])
def job_events(job_id: IdPath, svc: ServiceDep, me: PrincipalDep, limit: Limit = 100) -> EventList:
    """The job's events, newest first."""
    with svc.db.read() as s:
        jobs.get_job(session=s, principal=me, job_id=job_id)
        rows = events.list_events(session=s, principal=me, job_id=job_id, limit=limit)
        return EventList(items=[EventRead.model_validate(e) for e in rows], next_before=None)


@router.get("/jobs/{job_id}/logs", response_model=JobLogs, tags=["jobs"])
def job_logs(
    job_id: IdPath, svc: ServiceDep, me: PrincipalDep,
    tail_bytes: Annotated[int | None, Query(ge=1, le=16 * 2**20, description="Only the last bytes.")] = None,
) -> JobLogs:
    """The job's captured stdout/stderr, from the backend that ran it (``seedancectl logs``)."""
    with svc.db.read() as s:
        job = jobs.get_job(session=s, principal=me, job_id=job_id)
        name, status = job.name, JobStatus(job.status)
    text, note = read_logs(svc.dispatcher, job_id, tail_bytes=tail_bytes)
    return JobLogs(job_id=job_id, name=name, status=status, backend=svc.dispatcher.name,
                   available=text is not None, text=text or "", note=note)


@router.get("/jobs/{job_id}/explain", response_model=Explanation, tags=["jobs"])
def explain_job(job_id: IdPath, svc: ServiceDep, me: PrincipalDep) -> Explanation:
    """Why the job is where it is."""
    with svc.db.read() as s:
        return jobs.explain_job(session=s, principal=me, job_id=job_id)


@router.get("/events", response_model=EventList, tags=["events"])
def list_events(
    svc: ServiceDep, me: PrincipalDep, limit: Limit = 100, before_id: BeforeId = None,
    kind: Annotated[str | None, Query(pattern=r"^[a-z][a-z._]{0,62}$")] = None,
) -> EventList:
    """The event log (the caller's tenant plus infrastructure events), newest first."""
    with svc.db.read() as s:
        rows = events.list_events(session=s, principal=me, kind=kind, limit=limit, before_id=before_id)
        items = [EventRead.model_validate(e) for e in rows]
    return EventList(items=items, next_before=items[-1].id if len(items) == limit else None)

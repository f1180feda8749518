"""Privacy routes: ``/api/v1/telemetry/*`` (ingestion, WebAuthn challenges) and ``/api/v1/privacy/*``
(subjects, consent, erasure requests, backups, blacklist, maintenance).

The router's lifespan builds the app's :class:`~seedance.privacy.service.PrivacyService` (unless
one was set on ``app.state.privacy`` before start-up, as tests do) and its worker thread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Response

from seedance.control.api.deps import IdPath, Limit, PrincipalDep
from seedance.control.api.errors import ERROR_RESPONSES
from seedance.control.schemas import ErrorBody, Role
from seedance.control.security import Principal, bearer_token
from seedance.control.service import ControlService
from seedance.privacy.schemas import (
    BackupRead,
    BlacklistEntry,
    ChallengeAnswer,
    ChallengeCreate,
    ChallengeRead,
    ChallengeResult,
    ConsentDecision,
    ErasureCreate,
    ErasureList,
    ErasureRead,
    SubjectIdentify,
    SubjectRead,
    SweepResult,
    TelemetryAccepted,
    TelemetryBatch,
)
from seedance.privacy.service import PrivacyService


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    from seedance.privacy.maintenance import PrivacyWorker

    created = None
    if getattr(app.state, "privacy", None) is None:
        created = app.state.privacy = PrivacyService(app.state.service)
    svc: PrivacyService = app.state.privacy
    worker = PrivacyWorker(svc) if svc.settings.worker_enabled else None
    if worker is not None:
        worker.start()
    try:
        yield
    finally:
        if worker is not None:
            worker.stop()
        if created is not None:
            created.close()


router = APIRouter(prefix="/api/v1", lifespan=_lifespan, responses={
    **ERROR_RESPONSES, 503: {"model": ErrorBody, "description": "Redis or the PostgreSQL tools are unreachable."}})
_423: dict[int | str, dict[str, Any]] = {
    423: {"description": "Ingestion paused for this device's fingerprint cluster: answer a challenge."}}
_410: dict[int | str, dict[str, Any]] = {410: {"description": "The challenge expired; the device was blacklisted."}}


def get_privacy(request: Request) -> PrivacyService:
    """The privacy service of the app."""
    svc: PrivacyService = request.app.state.privacy
    return svc


PrivacyDep = Annotated[PrivacyService, Depends(get_privacy)]
ChallengeId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{16,64}$")]


def _at_least(role: Role, action: str) -> Callable[[Principal], Principal]:
    """A dependency refusing callers below ``role`` (before the body is read: a viewer gets 403, not 422)."""

    def check(me: PrincipalDep) -> Principal:
        me.require(role, action)
        return me

    return check


MemberDep = Annotated[Principal, Depends(_at_least(Role.MEMBER, "writing privacy data"))]
OperatorDep = Annotated[Principal, Depends(_at_least(Role.OPERATOR, "managing erasure requests"))]
AdminDep = Annotated[Principal, Depends(_at_least(Role.ADMIN, "running privacy operations"))]


def _token_if_given(request: Request) -> None:
    """Public routes: no token needed, but a presented one must be valid (401 otherwise)."""
    auth = request.headers.get("authorization")
    if auth is not None:
        service: ControlService = request.app.state.service
        service.authenticate(bearer_token(auth))


# ------------------------------------------------------------------------------ telemetry
@router.post("/telemetry/events", response_model=TelemetryAccepted, status_code=202, tags=["telemetry"],
             responses={**_423})
def ingest_events(batch: TelemetryBatch, svc: PrivacyDep, me: MemberDep) -> TelemetryAccepted:
    """Ingest one session's events (anonymised on arrival; a refused batch stores nothing)."""
    from seedance.privacy.telemetry import ingest

    with svc.redis_errors():
        return ingest(svc, me, batch)


@router.post("/telemetry/challenges", response_model=ChallengeRead, status_code=201, tags=["telemetry"])
def new_challenge(data: ChallengeCreate, svc: PrivacyDep, me: MemberDep) -> ChallengeRead:
    """A WebAuthn attestation challenge for a device of a paused cluster."""
    from seedance.privacy.challenge import issue

    with svc.redis_errors():
        return issue(svc, tenant_id=me.tenant_id, device_id=data.device_id, subject=data.subject)


@router.post("/telemetry/challenges/{challenge_id}", response_model=ChallengeResult, tags=["telemetry"],
             responses={**_410})
def answer_challenge(challenge_id: ChallengeId, data: ChallengeAnswer, svc: PrivacyDep,
                     me: MemberDep) -> ChallengeResult:
    """Answer a challenge: passed -> ingestion resumes; failed or late -> blacklisted (403/410)."""
    from seedance.privacy.challenge import answer

    with svc.redis_errors():
        return answer(svc, tenant_id=me.tenant_id, challenge_id=challenge_id, credential=data.credential)


# ------------------------------------------------------------------------------- subjects
@router.post("/privacy/subjects", response_model=SubjectRead, tags=["privacy"],
             responses={201: {"model": SubjectRead, "description": "A new subject."}})
def identify_subject(data: SubjectIdentify, svc: PrivacyDep, me: MemberDep) -> Response:
    """Register a data subject (or merge traits into its sealed profile) (member)."""
    from seedance.privacy.subjects import identify

    with svc.redis_errors(), svc.db.write() as s:
        sid, created = identify(svc, session=s, tenant_id=me.tenant_id, external_id=data.subject,
                                traits=data.traits)
    body = SubjectRead(subject_id=sid, created=created)
    return Response(body.model_dump_json(), status_code=201 if created else 200, media_type="application/json")


@router.get("/privacy/subjects/{subject_id}", tags=["privacy"])
def read_subject(subject_id: Annotated[str, Path(pattern=r"^[0-9a-f-]{36}$")], svc: PrivacyDep,
                 me: PrincipalDep) -> dict[str, Any]:
    """A subject's profile (access request, GDPR Art. 15) (operator)."""
    from seedance.control.errors import NotFound
    from seedance.privacy.models import Subject
    from seedance.privacy.subjects import read_profile

    with svc.redis_errors(), svc.db.read() as s:
        row = s.get(Subject, subject_id)
        if row is None:
            raise NotFound("subject not found")
        me.check_tenant(row.tenant_id, "subject")
        me.require(Role.OPERATOR, "reading a data subject's profile")
        profile = read_profile(svc, session=s, subject_id=subject_id)
    if profile is None:
        raise NotFound("subject not found")
    return {"subject_id": subject_id, "profile": profile}


# -------------------------------------------------------------------------------- consent
@router.get("/privacy/consent-flow", tags=["privacy"], dependencies=[Depends(_token_if_given)])
def consent_flow(svc: PrivacyDep) -> dict[str, Any]:
    """The consent flow document the dashboard's dialog follows (public: shown before login)."""
    return svc.consent_flow.model_dump(by_alias=True)


@router.post("/privacy/consents", status_code=201, tags=["privacy"])
def record_consent(data: ConsentDecision, svc: PrivacyDep, me: MemberDep) -> dict[str, int]:
    """Record a consent decision."""
    from seedance.privacy.consents import record_decision

    with svc.redis_errors():
        return {"id": record_decision(svc, me, data)}


# -------------------------------------------------------------------------------- erasure
@router.post("/privacy/erasure-requests", response_model=ErasureRead, status_code=202, tags=["privacy"],
             responses={200: {"model": ErasureRead, "description": "The subject's open request."}})
def request_erasure(data: ErasureCreate, svc: PrivacyDep, me: OperatorDep) -> Response:
    """Record an erasure request (operator); it is executed and verified before its 72 h deadline."""
    from seedance.privacy.erasure import request_erasure as make

    out, created = make(svc, me, data)
    return Response(out.model_dump_json(), status_code=202 if created else 200, media_type="application/json")


@router.get("/privacy/erasure-requests", response_model=ErasureList, tags=["privacy"])
def list_erasures(svc: PrivacyDep, me: PrincipalDep, limit: Limit = 100,
                  status: Annotated[str | None, Query(pattern=r"^[a-z]{1,16}$")] = None) -> ErasureList:
    """Erasure requests of the caller's tenant (admin: all), newest first; they hold random ids only."""
    from seedance.privacy.erasure import list_requests

    return ErasureList(items=list_requests(svc, me, status=status, limit=limit))


@router.get("/privacy/erasure-requests/{request_id}", response_model=ErasureRead, tags=["privacy"])
def get_erasure(request_id: IdPath, svc: PrivacyDep, me: PrincipalDep) -> ErasureRead:
    """One erasure request with its per-store report and proof hash."""
    from seedance.privacy.erasure import get_request

    return get_request(svc, me, request_id)


@router.post("/privacy/erasure-requests/{request_id}/retry", response_model=ErasureRead, tags=["privacy"])
def retry_erasure(request_id: IdPath, svc: PrivacyDep, me: MemberDep) -> ErasureRead:
    """Queue a failed request again (operator)."""
    from seedance.privacy.erasure import retry

    return retry(svc, me, request_id)


@router.post("/privacy/erasures/run", response_model=ErasureList, tags=["privacy"])
def run_erasures(svc: PrivacyDep, me: AdminDep) -> ErasureList:
    """Execute and verify the open requests now (admin; the worker does this every minute)."""
    from seedance.privacy.erasure import run_erasures as run

    return ErasureList(items=run(svc))


@router.post("/privacy/backups", response_model=BackupRead, status_code=201, tags=["privacy"])
def take_backup(svc: PrivacyDep, me: AdminDep) -> BackupRead:
    """Back up the store without the key vault (admin)."""
    from seedance.privacy.backup import take_backup as take

    return BackupRead.model_validate(take(svc))


@router.get("/privacy/backups", response_model=list[BackupRead], tags=["privacy"])
def list_backups(svc: PrivacyDep, me: PrincipalDep) -> list[BackupRead]:
    """Registered backups, newest first (shared infrastructure: readable by every token)."""
    from seedance.privacy.backup import list_backups as backups

    return [BackupRead.model_validate(b) for b in backups(svc)]


# ------------------------------------------------------------------------- abuse response
@router.get("/privacy/blacklist", response_model=list[BlacklistEntry], tags=["privacy"])
def blacklist(svc: PrivacyDep, me: PrincipalDep) -> list[BlacklistEntry]:
    """Live blacklist entries: keyed device tags, no identifier (shared: readable by every token)."""
    import datetime as dt

    with svc.redis_errors():
        members = svc.blacklist.members(svc.now().timestamp())
    return [BlacklistEntry(device_tag=m, expires_at=dt.datetime.fromtimestamp(t, dt.UTC)) for m, t in members]


@router.post("/privacy/sweep", response_model=SweepResult, tags=["privacy"])
def sweep(svc: PrivacyDep, me: AdminDep) -> SweepResult:
    """Expire unanswered challenges, prune expired list members, destroy retired keys (admin)."""
    from seedance.privacy.maintenance import sweep as run

    return run(svc)

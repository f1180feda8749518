"""Typed dependency aliases for routes (``ServiceDep``, ``PrincipalDep``) and shared parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from seedance.control.schemas import NAME_PATTERN, NODE_NAME_PATTERN
from seedance.control.security import Principal
from seedance.control.service import ControlService

_bearer = HTTPBearer(auto_error=False, description="An API token: 'Authorization: Bearer sdt_...'.")


async def get_service(request: Request) -> ControlService:
    """The service of the app handling the request (a coroutine: FastAPI runs a plain function in a thread)."""
    service: ControlService = request.app.state.service
    return service


ServiceDep = Annotated[ControlService, Depends(get_service)]


async def get_principal(
    request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The caller, from the bearer token (401 when missing, unknown or revoked).

    A token seen within ``auth_cache_ttl_s`` is answered from the service's cache on the event loop;
    anything else (a store lookup, failed-authentication throttling) runs in a worker thread.
    """
    svc: ControlService = request.app.state.service
    value = creds.credentials if creds is not None else None
    hit = svc.cached_principal(value)
    if hit is not None:
        return hit
    client = request.scope.get("client")
    return await run_in_threadpool(svc.authenticate_from, value, client[0] if client else None)


PrincipalDep = Annotated[Principal, Depends(get_principal)]

MAX_ID = 2**62
IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]
ClusterPath = Annotated[str, Path(pattern=NAME_PATTERN, max_length=63)]
NodePath = Annotated[str, Path(pattern=NODE_NAME_PATTERN, max_length=253)]
NamePath = Annotated[str, Path(pattern=NAME_PATTERN, max_length=63)]
Limit = Annotated[int, Query(ge=1, le=1000, description="Most items returned.")]
BeforeId = Annotated[int | None, Query(ge=1, le=MAX_ID, description="Only items with a smaller id (paging).")]

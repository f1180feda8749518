"""``/healthz``, ``/metrics``, ``/api/v1/dashboard`` and the dashboard's static page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse
from sqlalchemy import text

from seedance.control.api.deps import PrincipalDep, ServiceDep
from seedance.control.api.errors import ERROR_RESPONSES
from seedance.control.observability import CONTENT_TYPE
from seedance.control.schemas import NAME_PATTERN, DashboardData, Health
from seedance.control.services import dashboard

router = APIRouter()
api = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)


@router.get("/healthz", response_model=Health, tags=["system"])
def healthz(svc: ServiceDep) -> Health:
    """Liveness: the store answers and its schema revision."""
    with svc.db.read() as s:
        s.execute(text("SELECT 1"))
    return Health(status="ok", database=svc.db.dialect, revision=svc.revision)


@router.get(
    "/metrics", tags=["system"], response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Prometheus text."},
               **{k: v for k, v in ERROR_RESPONSES.items() if k == 401}},
)
def metrics(svc: ServiceDep, request: Request) -> Response:
    """Prometheus metrics: public only where the settings say so (see ``metrics_public``, ``metrics_listen``)."""
    if not svc.settings.metrics_open:
        header = request.headers.get("authorization", "")
        svc.authenticate(header[7:] if header.lower().startswith("bearer ") else None)
    return Response(svc.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/", include_in_schema=False)
def root() -> RedirectResponse:
    """The dashboard."""
    return RedirectResponse("/dashboard/")


@api.get("/dashboard", response_model=DashboardData, tags=["dashboard"])
def dashboard_data(
    svc: ServiceDep, me: PrincipalDep,
    cluster: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=63)] = None,
    window_h: Annotated[float, Query(gt=0, le=24 * 31, description="Hours of cost history.")] = 24.0,
) -> Response:
    """Everything the dashboard draws, for one cluster (default: the first). An answer rendered less than
    ``dashboard_cache_s`` ago for the same tenant scope, cluster and window is served again (``Age``: its
    age in seconds)."""
    def render() -> bytes:
        with svc.db.read() as s:
            data = dashboard.dashboard_data(session=s, principal=me, cluster=cluster, window_h=window_h)
        return data.model_dump_json().encode()

    body, age = svc.dashboard_cache.get((me.tenant_scope(), cluster, window_h), render)
    return Response(body, media_type="application/json",
                    headers={"Age": str(int(age)), "Cache-Control": "private, no-cache"})

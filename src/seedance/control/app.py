"""``create_app``: the FastAPI application of the control plane.

``create_app(settings)`` builds a :class:`~seedance.control.service.ControlService` (store,
metrics, loop) and the routes; ``create_app_from_env`` is the factory uvicorn workers call
(settings from ``SEEDANCE_*`` variables, set by ``seedancectl serve``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import seedance
from seedance.control.api import openapi
from seedance.control.api.errors import (
    BodyLimitMiddleware,
    RateLimitMiddleware,
    ServerGuardMiddleware,
    install_error_handlers,
)
from seedance.control.api.fastpath import SubmitFastPath
from seedance.control.api.routes import (
    attestation,
    clusters,
    finops,
    jobs,
    policies,
    privacy,
    safechange,
    system,
    tenants,
)
from seedance.control.observability import ControlMetrics
from seedance.control.service import ControlService
from seedance.control.services.scheduling import FilterProvider
from seedance.control.settings import ControlSettings
from seedance.scheduling.framework import FilterPlugin

DASHBOARD_DIR = Path(__file__).parent / "dashboard"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def create_app(
    settings: ControlSettings | None = None, *, service: ControlService | None = None,
    filters: Sequence[FilterPlugin] | FilterProvider = (),
) -> FastAPI:
    """The application; starts the scheduling loop on start-up when the settings enable it."""
    svc = service or ControlService(settings or ControlSettings(), filters=filters)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        svc.start()
        try:
            yield
        finally:
            svc.close()

    app = FastAPI(
        title="Seedance control plane", version=getattr(seedance, "__version__", "0"),
        description="Cost-aware GPU scheduling: tenants, tokens, clusters, nodes, jobs, policies, decisions.",
        openapi_url="/openapi.json", docs_url=None, redoc_url=None, lifespan=lifespan,
        # FastAPI's native OpenTelemetry layer checks the global providers on every request
        telemetry=None if svc.settings.opentelemetry else {"tracing": False, "metrics": False, "logs": False},
    )
    app.state.service = svc
    install_error_handlers(app)
    openapi.install(app)
    for module in (jobs, system, tenants, clusters, policies):  # jobs first: the hot routes match sooner
        app.include_router(module.router)
    app.include_router(system.api)
    app.include_router(privacy.router)
    app.include_router(safechange.router)
    app.include_router(finops.router)
    app.include_router(attestation.router)
    app.mount("/dashboard", StaticFiles(directory=DASHBOARD_DIR, html=True), name="dashboard")
    app.add_middleware(SubmitFastPath, fastapi=app)  # innermost of ours: after limits, metrics, headers
    app.add_middleware(BodyLimitMiddleware, limit=svc.settings.max_body_bytes)
    app.add_middleware(RateLimitMiddleware, limiter=svc.limiter, per_address=svc.settings.rate_limit_per_address,
                       per_token=svc.settings.rate_limit_per_token)
    app.add_middleware(RequestMetricsMiddleware, metrics=svc.metrics)
    app.add_middleware(ServerGuardMiddleware, csp=svc.settings.content_security_policy)  # outermost: added last
    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn workers: settings from the environment; the process tuned for serving."""
    from seedance.control.runtime import tune_server_process

    settings = ControlSettings()
    app = create_app(settings)
    tune_server_process(switch_interval_s=settings.switch_interval_ms / 1e3,
                        gc_gen0_threshold=settings.gc_gen0_threshold, freeze=settings.gc_freeze)
    return app


class RequestMetricsMiddleware:
    """Counts and times HTTP requests by route template (bounded label values)."""

    def __init__(self, app: ASGIApp, metrics: ControlMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or ("/dashboard" if scope["path"].startswith("/dashboard") else "other")
            method = scope["method"] if scope["method"] in _METHODS else "other"
            self.metrics.http_requests.labels(method, path, str(status)).inc()
            self.metrics.http_seconds.labels(method, path).observe(time.perf_counter() - start)

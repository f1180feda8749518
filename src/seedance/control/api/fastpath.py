"""``SubmitFastPath``: ``POST /api/v1/jobs`` served without FastAPI's per-request routing machinery.

A job submission is the control plane's hot request; FastAPI's route matching, dependency solving
and exception layers cost more CPU than the submission itself. This middleware (innermost of the
app's own, so body limit, rate limits, request metrics and security headers still apply) takes a
submission whose bearer token is in the service's authentication cache and whose JSON body is a
valid :class:`~seedance.control.schemas.JobCreate`, and runs the route's own handler
(:func:`seedance.control.api.routes.jobs.submit`) on it directly. Everything else (a token not
cached, a body that does not parse or validate, another content type) goes on to the FastAPI route
untouched (its body replayed), which gives the canonical answers: the fast path never produces an
error answer of its own before the handler runs, and once it ran its errors are answered by the
app's own exception handlers. ``GET``/other paths pass through at the cost of one comparison.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seedance.control.schemas import JobCreate
from seedance.control.security import bearer_token
from seedance.control.service import ControlService

PATH = "/api/v1/jobs"


class SubmitFastPath:
    """See the module docstring.

    Args:
        app: The next ASGI app (FastAPI's exception layer and router).
        fastapi: The application (its service, exception handlers and the route of ``POST /api/v1/jobs``).
    """

    def __init__(self, app: ASGIApp, fastapi: FastAPI) -> None:
        self.app = app
        self.fastapi = fastapi
        from seedance.control.api.routes.jobs import router

        self.route = next(r for r in router.routes if isinstance(r, APIRoute) and r.path == PATH
                          and "POST" in (r.methods or ()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        svc: ControlService = self.fastapi.state.service
        token = content_type = None
        for k, v in scope["headers"]:
            if k == b"authorization":
                token = v
            elif k == b"content-type":
                content_type = v
        me = svc.cached_principal(bearer_token(token.decode("latin-1"))) if token is not None else None
        if me is None or content_type is None or content_type.split(b";")[0].strip().lower() != b"application/json":
            await self.app(scope, receive, send)
            return
        body, complete = await _read(receive)
        data = None
        if complete:
            try:
                data = JobCreate.model_validate(json.loads(body))
            except (ValueError, ValidationError):  # JSONDecodeError is a ValueError; FastAPI words the answer
                data = None
        if data is None:
            await self.app(scope, _replay(body, receive, complete), send)
            return
        from seedance.control.api.routes.jobs import submit

        scope["route"] = self.route  # the request metrics' route label
        scope["app"] = self.fastapi
        try:
            response = await submit(svc, me, data)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                raise
            response = await handler(Request(scope, receive), exc)
        await response(scope, receive, send)

    def _handler(self, exc: Exception) -> Any:
        handlers = self.fastapi.exception_handlers
        for cls in type(exc).__mro__:
            if cls in handlers:
                return handlers[cls]
        return None


async def _read(receive: Receive) -> tuple[bytes, bool]:
    """The request body; ``complete`` False when the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), True


def _replay(body: bytes, receive: Receive, complete: bool) -> Receive:
    sent = not complete

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay

"""Error mapping and request-size guard: every failure is a JSON ``ErrorBody`` with a clear line.

* service errors (``ControlError``) → their status (401, 403, 404, 409);
* ``InputError`` and unknown registry names → 422; an illegal lifecycle move → 409;
* request validation → 422 listing each field, a body that is not JSON at all → 400;
* a body over ``max_body_bytes`` → 413 before the app reads it (nothing is stored);
* the store unreachable (connection lost, pool exhausted) → 503 with ``Retry-After``;
* a 405 lists every method of the path in ``Allow``;
* anything else → a JSON 500 from :class:`ServerGuardMiddleware`, which swallows the exception so the
  server keeps the keep-alive connection open (uvicorn closes a connection whose app raised), and
  adds the security headers (CSP, X-Frame-Options, nosniff) to every answer.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seedance.control.errors import ControlError, TooManyRequests, Unauthorized
from seedance.control.ratelimit import RateLimiter, retry_header, token_key
from seedance.control.schemas import ErrorBody, ErrorItem
from seedance.core.errors import InputError, InvalidTransition, UnknownNameError

_ERR = {"model": ErrorBody}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {**_ERR, "description": "Malformed request (e.g. the body is not JSON)."},
    401: {**_ERR, "description": "Missing, unknown or revoked token."},
    403: {**_ERR, "description": "The token's role may not do this."},
    404: {**_ERR, "description": "No such object (or one of another tenant)."},
    409: {**_ERR, "description": "Conflict: name taken, idempotency key reused, illegal state change."},
    413: {**_ERR, "description": "Request body too large."},
    422: {**_ERR, "description": "Invalid input; each problem is located."},
    429: {**_ERR, "description": "Too many requests; retry after the seconds in Retry-After."},
    503: {**_ERR, "description": "The store is unreachable right now; retry after the seconds in Retry-After."},
}
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
RETRY_AFTER_S = 1
"""Seconds a client is told to wait after a 503 (the pool reconnects on the next checkout)."""
_log = logging.getLogger("seedance.control.api")
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
     b"img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
     b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


def _body(
    status: int, detail: str, errors: list[dict[str, str]] | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    items = [ErrorItem(**e) for e in errors or []]
    return JSONResponse(ErrorBody(detail=detail, errors=items).model_dump(), status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    @app.exception_handler(ControlError)
    async def _control(_: Request, exc: ControlError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        if isinstance(exc, TooManyRequests):
            headers = {"Retry-After": retry_header(exc.retry_after_s)}
        return _body(exc.status, str(exc), headers=headers)

    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        loc = ".".join(x for x in (exc.source, exc.field) if x) or "request"
        return _body(422, str(exc), [{"loc": loc, "msg": exc.message}])

    @app.exception_handler(UnknownNameError)
    async def _unknown(_: Request, exc: UnknownNameError) -> JSONResponse:
        return _body(422, str(exc))

    @app.exception_handler(InvalidTransition)
    async def _transition(_: Request, exc: InvalidTransition) -> JSONResponse:
        return _body(409, f"not allowed now: {exc}")

    @app.exception_handler(IntegrityError)
    async def _integrity(_: Request, exc: IntegrityError) -> JSONResponse:
        return _body(409, "conflicts with stored data (a unique name or a reference); nothing was changed")

    async def _unavailable(_: Request, exc: Exception) -> JSONResponse:
        _log.warning("store unavailable: %s", exc)
        return _body(503, "the store is unavailable right now; nothing was changed, retry shortly",
                     headers={"Retry-After": str(RETRY_AFTER_S)})

    for cls in (OperationalError, InterfaceError, PoolTimeout):
        app.add_exception_handler(cls, _unavailable)

    @app.exception_handler(DBAPIError)
    async def _dbapi(request: Request, exc: DBAPIError) -> JSONResponse:
        if exc.connection_invalidated:
            return await _unavailable(request, exc)
        raise exc

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        items = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err.get("loc", ()))
            items.append({"loc": loc, "msg": str(err.get("msg", "invalid"))})
            if err.get("type") == "json_invalid":
                return _body(400, f"request body is not valid JSON: {err.get('ctx', {}).get('error', '')}".rstrip(": "),
                             [{"loc": loc or "body", "msg": "invalid JSON"}])
        first = items[0] if items else {"loc": "request", "msg": "invalid"}
        more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
        return _body(422, f"{first['loc']}: {first['msg']}{more}", items)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        headers = dict(exc.headers) if exc.headers else {}
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        return _body(exc.status_code, detail, headers=headers or None)


def allowed_methods(request: Request) -> list[str]:
    """The methods the OpenAPI document lists for the request's path: a literal path wins over templated
    ones (``/policies/dry-run`` over ``/policies/{name}``), as OpenAPI matches them."""
    path = request.url.path
    literal, templated = set(), set()
    for template, item in request.app.openapi().get("paths", {}).items():
        methods = {m.upper() for m in item if m.upper() in _METHODS}
        if template == path:
            literal |= methods
        elif "{" in template and re.fullmatch(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)), path):
            templated |= methods
    return sorted(literal or templated)


class ServerGuardMiddleware:
    """Outermost middleware: security headers on every answer; an unexpected exception becomes a JSON 500.

    The exception is logged and not re-raised, so uvicorn keeps the keep-alive connection (it closes
    a connection whose app raised, and the client's next request on it would be reset).
    """

    def __init__(self, app: ASGIApp, headers: Sequence[tuple[bytes, bytes]] = SECURITY_HEADERS,
                 csp: str | None = None) -> None:
        self.app = app
        self.headers = [h for h in headers if csp is None or h[0] != b"content-security-policy"]
        if csp is not None:
            self.headers.append((b"content-security-policy", csp.encode("ascii")))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", ()), *self.headers]}
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception:
            _log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise  # half an answer is out: only closing the connection is honest
            await _body(500, "internal server error (logged); retry, or report it if it persists")(
                scope, receive, send_wrapper)


class BodyLimitMiddleware:
    """Refuse request bodies larger than ``limit`` bytes with 413, before the app sees them.

    Bodies are read up to the limit (declared or chunked), then replayed to the app.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _body(400, "invalid Content-Length header")(scope, receive, send)
                    return
                if declared > self.limit:
                    await self._too_large(scope, receive, send)
                    return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        resp = _body(413, f"request body larger than {self.limit} bytes; nothing was stored",
                     headers={"Connection": "close"})
        await resp(scope, receive, send)


class RateLimitMiddleware:
    """429 with ``Retry-After`` when a source address or a bearer token passes its requests-per-second limit.

    Runs before routing and authentication (a flood costs no store query); the limits are the
    settings ``rate_limit_per_address`` and ``rate_limit_per_token``.
    """

    def __init__(self, app: ASGIApp, limiter: RateLimiter, per_address: int, per_token: int) -> None:
        self.app = app
        self.limiter = limiter
        self.per_address = per_address
        self.per_token = per_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            wait = None
            if self.per_address:
                client = scope.get("client")
                wait = self.limiter.hit(f"addr:{client[0] if client else '?'}", self.per_address, 1)
            if wait is None and self.per_token:
                auth = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), None)
                if auth:
                    wait = self.limiter.hit(f"tok:{token_key(auth.decode('latin-1'))}", self.per_token, 1)
            if wait is not None:
                await _body(429, "too many requests; slow down", headers={"Retry-After": retry_header(wait)})(
                    scope, receive, send)
                return
        await self.app(scope, receive, send)

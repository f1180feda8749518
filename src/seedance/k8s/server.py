"""HTTP front of the scheduler extender: stdlib ``ThreadingHTTPServer``, HTTP/1.1 keep-alive.

Routes (the verb is the last path segment, so any ``urlPrefix`` path works):

* ``POST .../filter``, ``.../prioritize``, ``.../bind``: the extender verbs, JSON in and out.
  A body that is not JSON, or not shaped like the verb's argument type, answers **400** with
  ``{"Error": "..."}`` (kube-scheduler reports any non-200 as a failed call); an unexpected fault
  answers 500 the same way.
* ``GET /healthz`` (always 200), ``GET /readyz`` (200 once the node cache is synced, else 503),
  ``GET /metrics`` (Prometheus text: requests and seconds per verb).

Each response goes out in one ``write`` with Nagle's algorithm off, so keep-alive clients do not
stall on delayed ACKs.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from seedance.core.errors import InputError, UnknownNameError
from seedance.k8s.extender import Extender

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 2**20
JSON = "application/json"
Response = tuple[int, str, bytes]


class App(Protocol):
    """What the server calls for every request."""

    def handle(self, method: str, path: str, body: bytes) -> Response:
        """Called once per request with the whole body; returns (status, content type, payload)."""


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


class ExtenderApp:
    """Routes HTTP requests to an :class:`Extender` and counts them."""

    def __init__(self, extender: Extender) -> None:
        self.extender = extender
        self._verbs: dict[str, Callable[[Any], Any]] = {
            "filter": extender.filter,
            "prioritize": extender.prioritize,
            "bind": extender.bind,
        }
        self._lock = threading.Lock()
        self.requests: dict[str, int] = dict.fromkeys(self._verbs, 0)
        self.errors: dict[str, int] = dict.fromkeys(self._verbs, 0)
        self.seconds: dict[str, float] = dict.fromkeys(self._verbs, 0.0)

    def handle(self, method: str, path: str, body: bytes) -> Response:
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET":
            return self._get(route)
        verb = route.rsplit("/", 1)[-1]
        fn = self._verbs.get(verb)
        if method != "POST" or fn is None:
            return HTTPStatus.NOT_FOUND, JSON, _json({"Error": f"no route {method} {path}"})
        t0 = time.perf_counter()
        status, payload = self._call(fn, body)
        dt = time.perf_counter() - t0
        with self._lock:
            self.requests[verb] += 1
            self.seconds[verb] += dt
            if status != HTTPStatus.OK:
                self.errors[verb] += 1
        return status, JSON, payload

    @staticmethod
    def _call(fn: Callable[[Any], Any], body: bytes) -> tuple[int, bytes]:
        try:
            args = json.loads(body)
        except ValueError as exc:
            return HTTPStatus.BAD_REQUEST, _json({"Error": f"request body is not JSON: {exc}"})
        try:
            return HTTPStatus.OK, _json(fn(args))
        except (InputError, UnknownNameError) as exc:
            return HTTPStatus.BAD_REQUEST, _json({"Error": str(exc)})
        except Exception as exc:
            log.exception("extender verb failed")
            return HTTPStatus.INTERNAL_SERVER_ERROR, _json({"Error": f"internal error: {exc}"})

    def _get(self, route: str) -> Response:
        if route == "/healthz":
            return HTTPStatus.OK, "text/plain", b"ok\n"
        if route == "/readyz":
            ready = self.extender.synced
            return (HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE), "text/plain", (
                b"ready\n" if ready else b"node cache not synced\n")
        if route == "/metrics":
            return HTTPStatus.OK, "text/plain; version=0.0.4", self.metrics().encode()
        return HTTPStatus.NOT_FOUND, "text/plain", b"not found\n"

    def metrics(self) -> str:
        """Prometheus text exposition of the request counters."""
        lines = [
            "# HELP seedance_extender_requests_total Extender requests by verb.",
            "# TYPE seedance_extender_requests_total counter",
        ]
        with self._lock:
            lines += [f'seedance_extender_requests_total{{verb="{v}"}} {n}' for v, n in self.requests.items()]
            lines += ["# HELP seedance_extender_errors_total Extender requests answered with a non-200 status.",
                      "# TYPE seedance_extender_errors_total counter"]
            lines += [f'seedance_extender_errors_total{{verb="{v}"}} {n}' for v, n in self.errors.items()]
            lines += ["# HELP seedance_extender_request_seconds_total Time spent in extender verbs.",
                      "# TYPE seedance_extender_request_seconds_total counter"]
            lines += [f'seedance_extender_request_seconds_total{{verb="{v}"}} {s:.6f}'
                      for v, s in self.seconds.items()]
        lines.append(f"seedance_extender_nodes {len(self.extender.node_names())}")
        lines.append(f"seedance_extender_unaccounted_pods {self.extender.unaccounted}")
        return "\n".join(lines) + "\n"


def _handler_class(app: App) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "seedance-extender"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            self._serve("POST")

        def do_GET(self) -> None:  # noqa: N802
            self._serve("GET")

        def _serve(self, method: str) -> None:
            length = self.headers.get("Content-Length")
            if method == "POST" and length is None:
                self._reply(HTTPStatus.LENGTH_REQUIRED, JSON, _json({"Error": "Content-Length required"}))
                self.close_connection = True
                return
            n = int(length or 0)
            if n > MAX_BODY_BYTES:
                self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, JSON, _json({"Error": "request body too large"}))
                self.close_connection = True
                return
            body = self.rfile.read(n) if n else b""
            self._reply(*app.handle(method, self.path, body))

        def _reply(self, status: int, ctype: str, payload: bytes) -> None:
            head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n")
            self.wfile.write(head.encode("latin-1") + payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
            log.debug("%s - %s", self.address_string(), format % args)

    return Handler


def make_server(app: App, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A threading HTTP server for ``app`` (port 0 picks a free port: ``server.server_address``)."""
    server = ThreadingHTTPServer((host, port), _handler_class(app))
    server.daemon_threads = True
    return server


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    """Run ``server.serve_forever`` in a daemon thread; stop with ``server.shutdown()``."""
    t = threading.Thread(target=server.serve_forever, name="seedance-extender-http", daemon=True)
    t.start()
    return t

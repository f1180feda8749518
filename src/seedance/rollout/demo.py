"""A small HTTP service behind a cost-action flag, with fault injection, and a bounded load generator.

The rollout's counterpart of Flagger's podinfo: ``GET /work?user=U&region=R&tier=T`` evaluates the
flag for that user through OpenFeature and answers from the variant it gets; ``GET /metrics`` is
the Prometheus exposition the canary controller reads (``http_request_duration_seconds`` and
``http_requests_total``, labelled with the ``variant`` served and the status ``code``). Faults are
injected into the candidate variant only: added latency and a share of 5xx answers (every
``1/ratio``-th candidate request, deterministic). Every request is also kept in a log (start, end,
variant, code, monotonic seconds) so tests measure from the service's own view when an SLI
condition began to hold. Loopback only.
"""

from __future__ import annotations

import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from seedance.rollout.evaluator import FlagEvaluator

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, float("inf"))


class DemoService:
    """The service (see the module docstring); ``start()`` serves on 127.0.0.1 in a thread.

    Args:
        flag_file: flagd flag file the service evaluates.
        flag: Flag key.
        candidate: Variant the faults apply to.
        base_ms: Work time of every request.
        jitter_ms: Uniform extra work time (0..jitter).
        seed: Seed of the jitter.
    """

    def __init__(self, flag_file: str, flag: str, *, candidate: str = "on", base_ms: float = 15.0,
                 jitter_ms: float = 10.0, seed: int = 0, poll_ms: int = 50) -> None:
        self.flag = flag
        self.candidate = candidate
        self.base_ms = base_ms
        self.jitter_ms = jitter_ms
        self.evaluator = FlagEvaluator(flag_file, poll_ms=poll_ms)
        self.registry = CollectorRegistry()
        self.latency = Histogram("http_request_duration_seconds", "Request latency.", ["variant"],
                                 registry=self.registry, buckets=BUCKETS)
        self.requests = Counter("http_requests_total", "Requests by variant and status code.", ["variant", "code"],
                                registry=self.registry)
        self.log: list[tuple[float, float, str, int]] = []
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._extra_ms = 0.0
        self._error_ratio = 0.0
        self._cand_seen = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------ faults
    def inject(self, *, latency_ms: float | None = None, error_ratio: float | None = None) -> float:
        """Change the candidate's faults; returns the monotonic time they took effect."""
        with self._lock:
            if latency_ms is not None:
                self._extra_ms = latency_ms
            if error_ratio is not None:
                self._error_ratio = error_ratio
                self._cand_seen = 0
            return time.monotonic()

    def _fault(self, variant: str) -> tuple[float, bool]:
        with self._lock:
            jitter = self._rng.uniform(0.0, self.jitter_ms)
            if variant != self.candidate:
                return self.base_ms + jitter, False
            self._cand_seen += 1
            n, r = self._cand_seen, self._error_ratio
            fail = r > 0 and int(n * r) > int((n - 1) * r)
            return self.base_ms + jitter + self._extra_ms, fail

    # ------------------------------------------------------------------------------------ serving
    def handle_work(self, query: dict[str, list[str]]) -> tuple[int, bytes]:
        """Answer one ``/work`` request (called by the HTTP handler)."""
        t0 = time.monotonic()
        user = (query.get("user") or ["anonymous"])[0]
        attrs = {k: v[0] for k, v in query.items() if k in ("region", "tier", "tenant")}
        d = self.evaluator.details(self.flag, False, user, **attrs)
        variant = str(d.variant) if d.variant is not None else "default"  # disabled flag: the code default
        work_ms, fail = self._fault(variant)
        time.sleep(work_ms / 1000.0)
        code = 503 if fail else 200
        t1 = time.monotonic()
        self.latency.labels(variant).observe(t1 - t0)
        self.requests.labels(variant, str(code)).inc()
        with self._lock:
            self.log.append((t0, t1, variant, code))
        return code, (b'{"variant": "%s"}' % variant.encode())

    def start(self) -> str:
        """Serve on a free loopback port; returns the base URL."""
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlparse(self.path)
                if url.path == "/metrics":
                    code, body, ctype = 200, generate_latest(service.registry), "text/plain; version=0.0.4"
                elif url.path == "/work":
                    code, body = service.handle_work(parse_qs(url.query))
                    ctype = "application/json"
                else:
                    code, body, ctype = 404, b"not found", "text/plain"
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="demo-service", daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def requests_log(self) -> list[tuple[float, float, str, int]]:
        """A copy of the request log."""
        with self._lock:
            return list(self.log)

    def close(self) -> None:
        """Stop serving and close the flag client."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self.evaluator.close()


class LoadGenerator:
    """``threads`` clients sending ``rps`` requests per second in all to a service's ``/work``.

    Users are drawn from ``users`` ids (``user-<i>``, seeded); each request carries the region and
    tier attributes given. Bounded: it never sends faster than ``rps``, and a slow answer only
    delays that thread.
    """

    def __init__(self, base_url: str, *, rps: float = 100.0, threads: int = 8, users: int = 5000,
                 region: str = "cn-east-2", tier: str = "premium", seed: int = 0) -> None:
        self.base_url = base_url
        self.rps = rps
        self.threads = threads
        self.users = users
        self.attrs = {"region": region, "tier": tier}
        self.seed = seed
        self.sent = 0
        self.failed = 0
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()

    def _run(self, i: int) -> None:
        import http.client
        from urllib.parse import urlencode

        url = urlparse(self.base_url)
        rng = random.Random(self.seed * 1000 + i)
        gap = self.threads / self.rps
        nxt = time.monotonic() + rng.uniform(0, gap)
        conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=10)
        try:
            while not self._stop.is_set():
                delay = nxt - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    break
                nxt = max(nxt + gap, time.monotonic() - gap)
                query = urlencode({"user": f"user-{rng.randrange(self.users)}", **self.attrs})
                try:
                    conn.request("GET", f"/work?{query}")
                    conn.getresponse().read()
                    ok = True
                except (OSError, http.client.HTTPException):
                    conn.close()  # reconnects on the next request
                    ok = False
                with self._lock:
                    self.sent += 1
                    self.failed += 0 if ok else 1
        finally:
            conn.close()

    def start(self) -> None:
        """Start the client threads."""
        for i in range(self.threads):
            t = threading.Thread(target=self._run, args=(i,), name=f"load-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    def stop(self) -> None:
        """Stop and join the client threads."""
        self._stop.set()
        for t in self._workers:
            t.join(15)

"""Job submissions per second and latency at N concurrent clients, on SQLite and PostgreSQL.

Starts ``seedancectl serve`` (scheduling loop on, noop dispatcher) on a fresh store, registers a
cluster big enough for every job, then runs ``--clients`` closed-loop clients over keep-alive
HTTP/1.1 connections for ``--seconds``: each client POSTs a job (unique idempotency key) and
waits for the answer before sending the next. Also runs an open-loop phase at ``--rate``
requests/s (Poisson arrivals spread over the same clients) to report latency at a fixed load.

Baseline measured in the same run: ``GET /healthz`` under the same closed loop (the HTTP stack
and one trivial query), so ``submit/healthz`` says what a durable submission costs on top.

    .venv/bin/python benchmarks/bench_control_api.py --db sqlite --db postgresql

PostgreSQL: ``127.0.0.1:5432`` database ``test`` (override with ``--pg-url``); the benchmark
uses a fresh schema and drops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

TOKEN = "bench-" + "Hq3Zt8Vw2Lk5Nm9Rp4Xs7CfJd6Gb1Ty0"  # passes the bootstrap-token strength check
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Conn:
    """One keep-alive HTTP/1.1 connection (tiny client: low CPU per request)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.r: asyncio.StreamReader | None = None
        self.w: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {TOKEN}\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        raw = head.encode() + b"\r\n" + (body or b"")
        fresh = self.w is None
        status_line = await self._send(raw)
        if not status_line and not fresh:
            # the server closed this connection while it was idle (its idle timeout): reconnect
            # and send again, as HTTP/1.1 clients do; the closed connection never read the request
            assert self.w is not None
            self.w.close()
            self.w = None
            status_line = await self._send(raw)
        assert self.r is not None
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.r.readline()
            if line in (b"\r\n", b""):
                break
            k, _, v = line.decode().partition(":")
            if k.lower() == "content-length":
                length = int(v)
        data = await self.r.readexactly(length) if length else b""
        return status, data

    async def _send(self, raw: bytes) -> bytes:
        """Write one request (opening the connection if needed); the status line, empty if closed."""
        if self.w is None:
            self.r, self.w = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.r is not None
        try:
            self.w.write(raw)
            await self.w.drain()
            return await self.r.readline()
        except ConnectionError:
            return b""


def job_body(i: int, prefix: str) -> bytes:
    gpus = (0.25, 0.5, 1, 2)[i % 4]
    return json.dumps({"gpus": gpus, "tier": ("gold", "silver", "bronze")[i % 3], "cpu_milli": 500, "memory_mib": 512,
                       "idempotency_key": f"{prefix}-{i}", "duration_hours": 2}).encode()


async def closed_loop(port: int, clients: int, seconds: float, kind: str, prefix: str) -> tuple[list[float], int]:
    lat: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def worker() -> None:
        nonlocal errors
        c = Conn(port)
        while time.perf_counter() < stop:
            i = next(counter)
            t = time.perf_counter()
            if kind == "submit":
                status, _ = await c.request("POST", "/api/v1/jobs", job_body(i, prefix))
                ok = status == 201
            else:
                status, _ = await c.request("GET", "/healthz")
                ok = status == 200
            lat.append(time.perf_counter() - t)
            errors += not ok

    await asyncio.gather(*(worker() for _ in range(clients)))
    return lat, errors


async def open_loop(port: int, clients: int, seconds: float, rate: float, prefix: str) -> tuple[list[float], int]:
    """Poisson arrivals at ``rate``/s over ``clients`` connections; latency includes queueing for a connection."""
    lat: list[float] = []
    errors = 0
    pool: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(clients):
        pool.put_nowait(Conn(port))
    rng = random.Random(1)
    tasks = []

    async def one(i: int, t0: float) -> None:
        nonlocal errors
        c = await pool.get()
        try:
            status, _ = await c.request("POST", "/api/v1/jobs", job_body(i, prefix))
        finally:
            pool.put_nowait(c)
        lat.append(time.perf_counter() - t0)
        errors += status != 201

    start = time.perf_counter()
    t = start
    i = 0
    while t - start < seconds:
        t += rng.expovariate(rate)
        delay = t - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, t)))
        i += 1
    await asyncio.gather(*tasks)
    return lat, errors


def group_cpu_s(pgid: int) -> float:
    """User+system CPU seconds of every live process in a process group (the server and its workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # field 5 (pgrp) is index 2 after the command name
            total += int(fields[11]) + int(fields[12])
    return total / tick


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=1000)[int(q * 10) - 1] if len(xs) > 1 else float("nan")


def setup_cluster(port: int, nodes: int) -> None:
    def call(method: str, path: str, body: dict[str, Any]) -> None:
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method=method,
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()

    call("POST", "/api/v1/clusters", {"name": "default"})
    for n in range(nodes):
        call("POST", "/api/v1/clusters/default/nodes", {
            "name": f"node-{n}", "cpu_milli": 10_000_000, "memory_mib": 100_000_000, "gpu_count": 8,
            "gpu_model": "A100-80GB", "labels": {"gpu.sla.level": ("gold", "silver", "bronze")[n % 3]}})


def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def run_db(db: str, args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="seedance-bench-"))
    schema = None
    if db == "sqlite":
        url = f"sqlite:///{tmp / 'bench.db'}"
    else:
        import psycopg

        schema = f"bench_{os.getpid()}_{secrets.token_hex(3)}"
        base = args.pg_url.replace("+psycopg", "")
        with psycopg.connect(base, autocommit=True) as c:
            c.execute(f"CREATE SCHEMA {schema}")
        url = f"{args.pg_url}?options=-csearch_path%3D{schema}"
    port = free_port()
    env = {**os.environ, "SEEDANCE_HOME": str(tmp), "SEEDANCE_BOOTSTRAP_TOKEN": TOKEN,
           "SEEDANCE_AUTH_CACHE_TTL_S": "2"}
    cmd = [sys.executable, "-m", "seedance.cli.main", "serve", "--port", str(port), "--database-url", url,
           "--workers", str(args.workers)]
    if args.no_scheduler:
        cmd.append("--no-scheduler")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_ready(port, proc)
        setup_cluster(port, args.nodes)
        asyncio.run(closed_loop(port, args.clients, 2.0, "submit", "warm"))
        c0 = group_cpu_s(proc.pid)
        base_lat, base_err = asyncio.run(closed_loop(port, args.clients, args.seconds, "healthz", "h"))
        c1 = group_cpu_s(proc.pid)
        lat, err = asyncio.run(closed_loop(port, args.clients, args.seconds, "submit", "c"))
        c2 = group_cpu_s(proc.pid)
        olat, oerr = asyncio.run(open_loop(port, args.clients, args.seconds, args.rate, "o"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        if schema is not None:
            import psycopg

            with psycopg.connect(args.pg_url.replace("+psycopg", ""), autocommit=True) as c:
                c.execute(f"DROP SCHEMA {schema} CASCADE")
    out = {
        "db": db, "clients": args.clients, "workers": args.workers,
        "healthz_per_s": len(base_lat) / args.seconds, "healthz_p99_ms": pct(base_lat, 99) * 1e3,
        "submit_per_s": len(lat) / args.seconds, "submit_p50_ms": pct(lat, 50) * 1e3,
        "submit_p99_ms": pct(lat, 99) * 1e3, "submit_errors": err + base_err,
        "open_rate": args.rate, "open_done_per_s": len(olat) / args.seconds,
        "open_p50_ms": pct(olat, 50) * 1e3, "open_p99_ms": pct(olat, 99) * 1e3, "open_errors": oerr,
    }
    out["submit_vs_healthz"] = out["submit_per_s"] / out["healthz_per_s"]
    out["server_cpu_ms_per_healthz"] = (c1 - c0) * 1e3 / max(1, len(base_lat))
    out["server_cpu_ms_per_submit"] = (c2 - c1) * 1e3 / max(1, len(lat))
    out["loadavg_1m"] = os.getloadavg()[0]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", action="append", choices=["sqlite", "postgresql"], help="repeatable (default: both)")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rate", type=float, default=300.0, help="open-loop arrival rate (requests/s)")
    ap.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    ap.add_argument("--nodes", type=int, default=200, help="nodes (8 GPUs each) in the cluster")
    ap.add_argument("--no-scheduler", action="store_true", help="measure with the scheduling loop off")
    ap.add_argument("--pg-url", default=PG_DEFAULT)
    args = ap.parse_args()
    rows = [run_db(db, args) for db in (args.db or ["sqlite", "postgresql"])]
    for r in rows:
        print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}))
    print(f"{'db':<11}{'submit/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'healthz/s':>11}{'ratio':>7}"
          f"{'open@' + str(int(args.rate)) + ' p99':>14}{'cpu ms/submit':>15}{'load':>6}")
    for r in rows:
        print(f"{r['db']:<11}{r['submit_per_s']:>10.0f}{r['submit_p50_ms']:>9.1f}{r['submit_p99_ms']:>9.1f}"
              f"{r['healthz_per_s']:>11.0f}{r['submit_vs_healthz']:>7.2f}{r['open_p99_ms']:>11.1f} ms"
              f"{r['server_cpu_ms_per_submit']:>15.2f}{r['loadavg_1m']:>6.1f}")


if __name__ == "__main__":
    main()

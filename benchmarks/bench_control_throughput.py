"""Durable submissions/s and latency under an open-loop load, with /metrics scrapes and dashboard tabs,
for main's code ("before", a ``git archive`` of ``--before-ref``) and this checkout ("after") in one run.
With ``--scheduler-process``, "after" runs the loop in its own process (``serve --no-scheduler`` plus
``seedancectl scheduler run``; server CPU is both processes'); adding ``--metrics-on-loop``, "after"'s
scrapes go to that process's metrics listener (``metrics_listen``), not to the API port.

For each variant: start ``seedancectl serve`` (scheduling loop on, noop dispatcher) on a fresh store,
register a cluster, then for each ``--rates`` value send Poisson arrivals of ``POST /api/v1/jobs`` for
``--seconds`` over up to ``--clients`` keep-alive connections (latency counts from the scheduled send
time, so a server that falls behind shows it), while ``--scrapes`` GETs of ``/metrics`` per second and
``--tabs`` dashboard tabs (``GET /api/v1/dashboard`` every 5 s each) run. Reports per rate: completed/s,
p50, p99, errors, server CPU per submission (``/proc/<pid>/stat``), the load generator's own CPU per
submission (it shares the machine: a raw asyncio HTTP/1.1 keep-alive client), the 1-minute load
average, then after/before ratios.

    .venv/bin/python benchmarks/bench_control_throughput.py                       # PostgreSQL, main vs here
    .venv/bin/python benchmarks/bench_control_throughput.py --db sqlite --rates 200,500 --seconds 5
    flock /tmp/seedance-bench.lock .venv/bin/python benchmarks/bench_control_throughput.py --seconds 10

PostgreSQL: ``127.0.0.1:5432`` database ``test`` (``--pg-url``); each server gets a fresh schema, dropped after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_control_api import TOKEN, Conn, free_port, open_loop  # noqa: E402

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (``--workers``: uvicorn's workers)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for p in (root, *root.children(recursive=True)):
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def before_src(ref: str, into: Path) -> Path:
    """``src/`` of git ``ref`` extracted into ``into``."""
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref, "src"], check=True,
                          capture_output=True).stdout
    tar = into / "before.tar"
    tar.write_bytes(blob)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into / "src"


class Server:
    """``seedancectl serve`` on a fresh store; with ``scheduler_process``, ``serve --no-scheduler`` plus a
    ``seedancectl scheduler run`` process (``loop``) on the same store."""

    def __init__(self, src: Path, db: str, pg_url: str, home: Path, workers: int = 1,
                 scheduler_process: bool = False, metrics_on_loop: bool = False) -> None:
        self.port = free_port()
        self.metrics_port = free_port() if metrics_on_loop else self.port  # where the side traffic scrapes
        self.schema = None
        if db == "postgresql":
            import psycopg

            self.schema = f"sd_bench_{secrets.token_hex(4)}"
            self.pg = pg_url.replace("postgresql+psycopg://", "postgresql://")
            with psycopg.connect(self.pg, autocommit=True) as c:
                c.execute(f"CREATE SCHEMA {self.schema}")
            url = f"{pg_url}?options=-csearch_path%3D{self.schema}"
        else:
            url = f"sqlite:///{home / 'bench.db'}"
        env = {**os.environ, "PYTHONPATH": str(src), "SEEDANCE_HOME": str(home), "SEEDANCE_BOOTSTRAP_TOKEN": TOKEN,
               "SEEDANCE_METRICS_PUBLIC": "true"}
        loop_off = ["--no-scheduler"] if scheduler_process else []
        self.proc = subprocess.Popen([sys.executable, "-m", "seedance.cli.main", "serve", "--port", str(self.port),
                                      "--database-url", url, "--workers", str(workers), *loop_off], env=env, cwd=home,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.loop: subprocess.Popen[bytes] | None = None
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2)
                break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise SystemExit("server did not start") from None
                time.sleep(0.3)
        if scheduler_process:
            loop_env = {**env, "SEEDANCE_METRICS_LISTEN": f"127.0.0.1:{self.metrics_port}"} if metrics_on_loop else env
            self.loop = subprocess.Popen([sys.executable, "-m", "seedance.cli.main", "scheduler", "run",
                                          "--database-url", url], env=loop_env, cwd=home,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            assert self.loop.stderr is not None
            for raw in self.loop.stderr:  # up once it holds the store's lease
                if b"scheduling" in raw:
                    break
            else:
                raise SystemExit("scheduler process did not start")
            self.loop.stderr.close()

    @property
    def pids(self) -> list[int]:
        """The server's processes: the API, and the loop process when there is one."""
        return [self.proc.pid] + ([self.loop.pid] if self.loop is not None else [])

    def call(self, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.terminate()
            self.loop.wait(30)
        self.proc.terminate()
        self.proc.wait(30)
        if self.schema:
            import psycopg

            with psycopg.connect(self.pg, autocommit=True) as c:
                c.execute(f"DROP SCHEMA {self.schema} CASCADE")


async def background(port: int, seconds: float, scrapes: float, tabs: int,
                     metrics_port: int | None = None) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"metrics": [], "dashboard": []}
    stop = time.perf_counter() + seconds

    async def every(period: float, path: str, key: str, offset: float) -> None:
        c = Conn(metrics_port if key == "metrics" and metrics_port is not None else port)
        await asyncio.sleep(offset)
        while time.perf_counter() < stop:
            t = time.perf_counter()
            await c.request("GET", path)
            out[key].append(time.perf_counter() - t)
            await asyncio.sleep(max(0.0, period - (time.perf_counter() - t)))

    jobs = [every(1.0 / scrapes, "/metrics", "metrics", i / (scrapes * 3)) for i in range(3)] if scrapes else []
    jobs += [every(5.0, "/api/v1/dashboard", "dashboard", i) for i in range(tabs)]
    await asyncio.gather(*jobs)
    return out


def pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1e3 if xs else float("nan")


async def phase(server: Server, rate: float, seconds: float, clients: int, scrapes: float, tabs: int,
                prefix: str) -> dict[str, Any]:
    c0, w0, g0 = sum(map(cpu_seconds, server.pids)), time.perf_counter(), time.process_time()
    l0 = cpu_seconds(server.loop.pid) if server.loop is not None else 0.0
    load = asyncio.create_task(open_loop(server.port, clients, seconds, rate, prefix))
    bg = asyncio.create_task(background(server.port, seconds, scrapes / 3 if scrapes else 0, tabs,
                                        server.metrics_port))
    lat, errors = await load
    wall = time.perf_counter() - w0
    side = await bg
    cpu = sum(map(cpu_seconds, server.pids)) - c0  # the API's and the loop process's
    loop_cpu = cpu_seconds(server.loop.pid) - l0 if server.loop is not None else None
    gen = time.process_time() - g0  # this process: the load generator and the side traffic
    done = len(lat) - errors
    return {"rate": rate, "completed_per_s": round(done / wall, 1), "p50_ms": round(pct(lat, 0.5), 1),
            "p99_ms": round(pct(lat, 0.99), 1), "errors": errors,
            "cpu_ms_per_submit": round(cpu / max(done, 1) * 1e3, 2),
            "loop_process_cpu_ms_per_submit": round(loop_cpu / max(done, 1) * 1e3, 2) if loop_cpu is not None else None,
            "loadgen_cpu_ms_per_submit": round(gen / max(done, 1) * 1e3, 3),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "metrics_p50_ms": round(pct(side["metrics"], 0.5), 1),
            "dashboard_p50_ms": round(pct(side["dashboard"], 0.5), 1), "wall_s": round(wall, 1)}


def run_variant(name: str, src: Path, args: argparse.Namespace, home: Path,
                scheduler_process: bool = False, metrics_on_loop: bool = False) -> list[dict[str, Any]]:
    home.mkdir(parents=True, exist_ok=True)
    server = Server(src, args.db, args.pg_url, home, args.workers, scheduler_process, metrics_on_loop)
    try:
        server.call("POST", "/api/v1/clusters", {"name": "default"})
        for i in range(args.nodes):
            server.call("POST", "/api/v1/clusters/default/nodes", {"name": f"n{i}", "cpu_milli": 10_000_000,
                        "memory_mib": 100_000_000, "gpu_count": 8, "gpu_model": "A100-80GB"})
        asyncio.run(open_loop(server.port, 16, 2.0, 50, f"{name}-warm"))  # warm-up, not reported
        rows = []
        for rate in args.rates:
            row = {"variant": name, **asyncio.run(phase(server, rate, args.seconds, args.clients, args.scrapes,
                                                        args.tabs, f"{name}-{rate}"))}
            print(json.dumps(row), flush=True)
            rows.append(row)
        return rows
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", choices=("postgresql", "sqlite"), default="postgresql")
    ap.add_argument("--pg-url", default=PG_DEFAULT)
    ap.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")], default=[200.0, 500.0, 1000.0])
    ap.add_argument("--seconds", type=float, default=10.0, help="Seconds per rate.")
    ap.add_argument("--clients", type=int, default=256, help="Most concurrent connections of the load generator.")
    ap.add_argument("--scrapes", type=float, default=3.0, help="GET /metrics per second during the load (0: none).")
    ap.add_argument("--tabs", type=int, default=5, help="Dashboard tabs polling every 5 s during the load.")
    ap.add_argument("--nodes", type=int, default=50, help="Nodes of 8 GPUs in the cluster.")
    ap.add_argument("--workers", type=int, default=1, help="seedancectl serve --workers (server processes).")
    ap.add_argument("--before-ref", default="main", help="Git ref measured as 'before' ('none': skip).")
    ap.add_argument("--scheduler-process", action="store_true",
                    help="'after' runs 'serve --no-scheduler' plus a 'seedancectl scheduler run' process (server CPU "
                    "counts both); 'before' keeps the loop inside serve.")
    ap.add_argument("--before-scheduler-process", action="store_true",
                    help="'before' runs its loop in its own process too (a --before-ref that has 'scheduler run').")
    ap.add_argument("--metrics-on-loop", action="store_true",
                    help="With --scheduler-process: 'after' scrapes /metrics from the loop process's metrics listener "
                    "(metrics_listen; store-derived and scheduler series) instead of the API port, so no scrape runs "
                    "in the process taking submissions; the dashboard tabs still call the API.")
    args = ap.parse_args()
    if args.metrics_on_loop and not args.scheduler_process:
        ap.error("--metrics-on-loop needs --scheduler-process")
    print(json.dumps({"load_average": os.getloadavg(), "cpus": os.cpu_count(), "db": args.db,
                      "workers": args.workers, "scheduler_process": args.scheduler_process,
                      "metrics_on_loop": args.metrics_on_loop}), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        rows: list[dict[str, Any]] = []
        if args.before_ref != "none":
            rows += run_variant("before", before_src(args.before_ref, Path(tmp)), args, Path(tmp) / "before",
                                args.before_scheduler_process)
        rows += run_variant("after", ROOT / "src", args, Path(tmp) / "after", args.scheduler_process,
                            args.metrics_on_loop)
    print("\nvariant  rate  done/s  p50 ms  p99 ms  errors  CPU ms/submit  loadgen ms  metrics p50  dashboard p50"
          "  load 1m")
    for r in rows:
        print(f"{r['variant']:7} {r['rate']:5.0f} {r['completed_per_s']:7.1f} {r['p50_ms']:7.1f} "
              f"{r['p99_ms']:7.1f} {r['errors']:7d} {r['cpu_ms_per_submit']:14.2f} "
              f"{r['loadgen_cpu_ms_per_submit']:11.3f} {r['metrics_p50_ms']:12.1f} "
              f"{r['dashboard_p50_ms']:14.1f} {r['load_average_1m']:8.2f}")
    before = {r["rate"]: r for r in rows if r["variant"] == "before"}
    for r in rows:
        b = before.get(r["rate"]) if r["variant"] == "after" else None
        if b:
            cpu_ratio = r["cpu_ms_per_submit"] / b["cpu_ms_per_submit"]
            done_ratio = r["completed_per_s"] / max(b["completed_per_s"], 0.1)
            print(f"rate {r['rate']:.0f}: CPU/submit after/before {cpu_ratio:.2f}, done/s ratio {done_ratio:.2f}")
    print(json.dumps({"load_average_end": os.getloadavg()}))


if __name__ == "__main__":
    main()

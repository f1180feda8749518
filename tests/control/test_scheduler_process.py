"""The scheduling loop in its own process: ``seedancectl scheduler run`` next to an API without a loop.

Real stores (SQLite file, PostgreSQL schema), real HTTP, real subprocesses: jobs submitted to the
API (scheduler off) are placed by the loop process within a bound (PostgreSQL: woken by NOTIFY;
SQLite: its interval); SIGTERM ends the process with exit code 0; a second loop process waits as
a standby while the first holds the store's lease and takes over when it stops; bad options exit 2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from seedance.cli.main import main
from tests.control.conftest import LiveServer
from tests.control.helpers import ADMIN_TOKEN, free_port

NODE = {"cpu_milli": 64000, "memory_mib": 512000, "gpu_count": 8, "gpu_model": "A100-80GB"}
PLACED = ("bound", "running")


class LoopProcess:
    """A ``seedancectl scheduler run`` subprocess whose stderr lines are collected."""

    def __init__(self, url: str, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        env = {**os.environ, "SEEDANCE_HOME": str(home), "SEEDANCE_BOOTSTRAP_TOKEN": ADMIN_TOKEN,
               "SEEDANCE_DB_POOL_SIZE": "4", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seedance.cli.main", "scheduler", "run", "--database-url", url, *args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        self.lines: list[str] = []
        self._seen = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._seen:
                self.lines.append(raw.decode(errors="replace"))
                self._seen.notify_all()

    def wait_for(self, text: str, timeout: float = 20.0) -> None:
        """Wait until a stderr line contains ``text``."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while not any(text in line for line in self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    pytest.fail(f"scheduler process never said {text!r}: {''.join(self.lines)}")
                self._seen.wait(min(left, 0.2))

    def terminate(self, timeout: float = 15.0) -> int:
        """SIGTERM, then the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def setup_cluster(c: httpx.Client, nodes: int = 2) -> None:
    assert c.post("/api/v1/clusters", json={"name": "default"}).status_code == 201
    for i in range(nodes):
        assert c.post("/api/v1/clusters/default/nodes", json={"name": f"node-{i}", **NODE}).status_code == 201


def placed_within(c: httpx.Client, ids: list[int], bound_s: float) -> float:
    """Seconds until every job in ``ids`` is bound or running with a node (fails past ``bound_s``)."""
    t0 = time.monotonic()
    left = set(ids)
    while left:
        for jid in sorted(left):
            job = c.get(f"/api/v1/jobs/{jid}").json()
            if job["status"] in PLACED and job["node"]:
                left.discard(jid)
        if time.monotonic() - t0 > bound_s:
            pytest.fail(f"jobs {sorted(left)} not placed within {bound_s} s")
        time.sleep(0.01)
    return time.monotonic() - t0


@pytest.fixture
def loops(tmp_path: Path) -> Callable[..., LoopProcess]:
    started: list[LoopProcess] = []

    def start(url: str, *args: str) -> LoopProcess:
        p = LoopProcess(url, tmp_path, *args)
        started.append(p)
        return p

    yield start  # type: ignore[misc]
    for p in started:
        p.kill()


def test_loop_process_places_api_submissions(
    db_url: str, live_server_factory: Callable[..., LiveServer], loops: Callable[..., LoopProcess],
) -> None:
    server = live_server_factory(db_url)  # the API without a loop (scheduler_enabled off)
    assert not server.service.loop.running
    loop = loops(db_url)
    loop.wait_for("scheduling")
    with server.client() as c:
        setup_cluster(c)
        ids = []
        for i in range(6):
            r = c.post("/api/v1/jobs", json={"name": f"j{i}", "gpus": 1})
            assert r.status_code in (200, 201, 202), r.text
            ids.append(r.json()["id"])
        # PostgreSQL: NOTIFY wakes the loop at once; SQLite: the loop's interval (0.5 s) plus a cycle
        took = placed_within(c, ids, bound_s=2.0 if "postgresql" in db_url else 3.0)
        assert took < (2.0 if "postgresql" in db_url else 3.0)
        nodes = {c.get(f"/api/v1/jobs/{jid}").json()["node"] for jid in ids}
        assert nodes <= {"node-0", "node-1"}
    assert loop.terminate() == 0
    assert any("scheduler stopped" in line for line in loop.lines)


def test_loop_process_serves_store_and_scheduler_series_on_its_metrics_listener(
    pg_schema_url: str, live_server_factory: Callable[..., LiveServer], tmp_path: Path,
) -> None:
    server = live_server_factory(pg_schema_url)
    port = free_port()
    loop = LoopProcess(pg_schema_url, tmp_path, env={"SEEDANCE_METRICS_LISTEN": f"127.0.0.1:{port}"})
    try:
        loop.wait_for("scheduling")
        with server.client() as c:
            setup_cluster(c, nodes=1)
            ids = [c.post("/api/v1/jobs", json={"name": f"m{i}", "gpus": 1}).json()["id"] for i in range(2)]
            placed_within(c, ids, bound_s=5.0)
        scrape = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    finally:
        loop.kill()
    assert scrape.status_code == 200 and scrape.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    lines = scrape.text.splitlines()
    assert 'seedance_cluster_gpu_allocated{cluster="default"} 2.0' in lines  # the store's series
    assert 'seedance_cluster_gpu_capacity{cluster="default"} 8.0' in lines
    assert 'seedance_scheduler_decisions_total{outcome="bind",policy="best-fit"} 2.0' in lines  # the loop's own
    assert not any(line.startswith("seedance_http_requests_total{") for line in lines)  # the API's stay there


def test_postgresql_notify_places_faster_than_the_interval(
    pg_schema_url: str, live_server_factory: Callable[..., LiveServer], loops: Callable[..., LoopProcess],
) -> None:
    server = live_server_factory(pg_schema_url)
    loop = loops(pg_schema_url, "--interval", "30")  # only a notification can wake it in time
    loop.wait_for("scheduling")
    with server.client() as c:
        setup_cluster(c, nodes=1)
        time.sleep(0.3)  # let the cycle woken by the cluster's creation pass
        took = []
        for i in range(5):
            jid = c.post("/api/v1/jobs", json={"name": f"n{i}", "gpus": 1}).json()["id"]
            took.append(placed_within(c, [jid], bound_s=2.0))
    print(f"submit to placed (ms): {[round(t * 1e3) for t in took]}")
    assert max(took) < 1.0, took  # submit to placed: NOTIFY, min gap (50 ms), one cycle
    assert server.service.waker is not None and server.service.waker.sent >= 5
    assert loop.terminate() == 0


def test_serve_without_scheduler_and_a_loop_process(
    pg_schema_url: str, tmp_path: Path, loops: Callable[..., LoopProcess],
) -> None:
    """The deployment: ``seedancectl serve --no-scheduler`` plus ``seedancectl scheduler run``, both real processes."""
    port = free_port()
    env = {**os.environ, "SEEDANCE_HOME": str(tmp_path), "SEEDANCE_BOOTSTRAP_TOKEN": ADMIN_TOKEN}
    with (tmp_path / "serve.log").open("wb") as log:  # read it when the test fails
        api = subprocess.Popen(
            [sys.executable, "-m", "seedance.cli.main", "serve", "--no-scheduler", "--port", str(port),
             "--database-url", pg_schema_url], env=env, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
        )
    try:
        loop = loops(pg_schema_url)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30,
                          headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as c:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if c.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline and api.poll() is None, "serve did not start"
                time.sleep(0.1)
            loop.wait_for("scheduling")
            setup_cluster(c)
            ids = [c.post("/api/v1/jobs", json={"name": f"s{i}", "gpus": 1}).json()["id"] for i in range(8)]
            placed_within(c, ids, bound_s=2.0)
            assert {c.get(f"/api/v1/jobs/{jid}").json()["status"] for jid in ids} <= set(PLACED)
        assert loop.terminate() == 0
    finally:
        api.send_signal(signal.SIGTERM)
        api.wait(15)


def test_second_loop_process_waits_then_takes_over(
    db_url: str, live_server_factory: Callable[..., LiveServer], loops: Callable[..., LoopProcess],
) -> None:
    server = live_server_factory(db_url)
    first = loops(db_url)
    first.wait_for("scheduling")
    second = loops(db_url)
    second.wait_for("standby")
    assert not any("scheduling" in line for line in second.lines)
    assert first.terminate() == 0
    second.wait_for("scheduling", timeout=10.0)  # the lease came free: retried within a second
    with server.client() as c:
        setup_cluster(c, nodes=1)
        jid = c.post("/api/v1/jobs", json={"name": "after", "gpus": 2}).json()["id"]
        placed_within(c, [jid], bound_s=3.0)
    assert second.terminate() == 0


@pytest.mark.parametrize("args", [["--interval", "0"], ["--dispatcher", "no-such-backend"],
                                  ["--placement", "no-such-policy"], ["--min-gap", "-1"]])
def test_bad_options_exit_2(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert main(["scheduler", "run", "--database-url", url, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert not (tmp_path / "store.db").exists()  # nothing was started

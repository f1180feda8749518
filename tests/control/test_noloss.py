"""No loss under SIGKILL: jobs submitted under concurrent load while ``seedancectl serve`` is killed
with SIGKILL (5 times per store in the default run, 20 in the ``bench`` variant) and restarted (a
standby started on the shared listening socket takes over, so each kill lands on a server busy with
requests); every acknowledged job is there afterwards, exactly once (idempotency keys), on SQLite and
on PostgreSQL. The scheduling loop runs throughout, so kills also land in the middle of scheduling
commits; the placements must stay consistent.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from seedance.control.db.models import EventRecord, Job, Node
from seedance.control.db.session import Database
from tests.control.helpers import ADMIN_TOKEN

#: the default run kills each store's server 5 times; the acceptance figure (20 SIGKILLs per store under
#: load) is the ``bench`` variant: ``pytest -m bench tests/control/test_noloss.py -s``
KILLS_DEFAULT, KILLS_ACCEPTANCE = 5, 20
CLIENTS = 8
THINK_S = 0.02  # between a client's submissions: load, without starving the restarting standby of CPU


class Fleet:
    """``seedancectl serve`` processes sharing one listening socket (``--fd``, socket activation).

    The test holds the socket, so connections queue instead of being refused while no server is up,
    and a standby can start (imports, store check) while the current server takes load; then the
    current one is killed with SIGKILL in the middle of its requests and the standby takes over.
    """

    def __init__(self, url: str, home: Path) -> None:
        self.url = url
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.sock.set_inheritable(True)
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.env = {**os.environ, "SEEDANCE_HOME": str(home), "SEEDANCE_BOOTSTRAP_TOKEN": ADMIN_TOKEN,
                    "SEEDANCE_SCHEDULER_INTERVAL_S": "0.05", "SEEDANCE_DB_POOL_SIZE": "8"}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ready: dict[int, threading.Event] = {}
        self.logs: dict[int, list[str]] = {}

    def spawn(self) -> subprocess.Popen[bytes]:
        fd = self.sock.fileno()
        proc = subprocess.Popen(
            [sys.executable, "-m", "seedance.cli.main", "serve", "--fd", str(fd), "--database-url", self.url,
             "--log-level", "info"],
            env=self.env, pass_fds=(fd,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        ready = self.ready[proc.pid] = threading.Event()
        log = self.logs[proc.pid] = []

        def watch() -> None:
            assert proc.stderr is not None
            for raw in proc.stderr:
                line = raw.decode(errors="replace")
                log.append(line)
                if "Application startup complete" in line:
                    ready.set()

        threading.Thread(target=watch, daemon=True).start()
        self.procs.append(proc)
        return proc

    def wait_ready(self, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
        end = time.time() + timeout
        while not self.ready[proc.pid].wait(0.05):
            if proc.poll() is not None or time.time() > end:
                pytest.fail(f"server {proc.pid} did not start: {''.join(self.logs[proc.pid])[-2000:]}")

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        self.sock.close()


def client_loop(base: str, n: int, stop: threading.Event, acked: dict[str, tuple[int, dict[str, Any]]],
                stats: Counter[str], lock: threading.Lock) -> None:
    """Submit jobs one after another; retry each until a 2xx, then record it as acknowledged."""
    rng = random.Random(n)
    http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                        timeout=httpx.Timeout(10, connect=2))
    i = 0
    while not stop.is_set():
        key = f"c{n}-{i}"
        body = {"gpus": rng.choice([0.25, 0.5, 1, 2]), "tier": rng.choice(["gold", "silver", "bronze"]),
                "cpu_milli": 500, "memory_mib": 512, "idempotency_key": key, "labels": {"client": f"c{n}"}}
        while True:
            try:
                r = http.post("/api/v1/jobs", json=body)
            except httpx.HTTPError:
                with lock:
                    stats["transport_errors"] += 1
                time.sleep(0.05)
                continue
            if r.status_code in (200, 201):
                with lock:
                    acked[key] = (r.json()["id"], body)
                    stats["replayed" if r.status_code == 200 else "created"] += 1
                time.sleep(THINK_S)
                break
            if r.status_code >= 500:
                with lock:
                    stats["server_errors"] += 1
                time.sleep(0.05)
                continue
            pytest.fail(f"unexpected {r.status_code}: {r.text}")  # a 4xx would be a bug in this test
        i += 1
    http.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kills_wanted", [
    pytest.param(KILLS_DEFAULT, id=f"{KILLS_DEFAULT}-kills"),
    pytest.param(KILLS_ACCEPTANCE, id=f"{KILLS_ACCEPTANCE}-kills", marks=pytest.mark.bench),
])
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_no_acknowledged_job_is_lost_or_duplicated_under_sigkill(
    backend: str, kills_wanted: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{tmp_path / 'noloss.db'}" if backend == "sqlite" else request.getfixturevalue("pg_schema_url")
    fleet = Fleet(url, tmp_path)
    current = fleet.spawn()
    fleet.wait_ready(current)
    admin = httpx.Client(base_url=fleet.base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10)
    assert admin.post("/api/v1/clusters", json={"name": "default"}).status_code == 201
    for k in range(6):
        r = admin.post("/api/v1/clusters/default/nodes", json={
            "name": f"node-{k}", "cpu_milli": 256_000, "memory_mib": 2_000_000, "gpu_count": 8,
            "gpu_model": "A100-80GB"})
        assert r.status_code == 201
    admin.close()
    acked: dict[str, tuple[int, dict[str, Any]]] = {}
    stats: Counter[str] = Counter()
    lock = threading.Lock()
    stop = threading.Event()
    threads = [threading.Thread(target=client_loop, args=(fleet.base, n, stop, acked, stats, lock), daemon=True)
               for n in range(CLIENTS)]
    for t in threads:
        t.start()
    rng = random.Random(42)
    kills = 0
    acked_at_kill: list[int] = []
    standby = fleet.spawn()
    try:
        for _ in range(kills_wanted):
            fleet.wait_ready(standby)
            time.sleep(rng.uniform(0.2, 0.6))  # both take load; then the older one dies mid-flight
            with lock:
                acked_at_kill.append(len(acked))
            fleet.kill(current)
            kills += 1
            current, standby = standby, fleet.spawn()
        fleet.kill(standby)  # end with exactly one server: the last restarted one
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        fleet.close()
    assert kills == kills_wanted
    assert not any(t.is_alive() for t in threads), "a client never got its job acknowledged"
    assert stats["transport_errors"] > 0, "the kills never hit a request in flight"
    assert len(acked) > 0 and acked_at_kill[-1] > acked_at_kill[0]

    db = Database(url)
    with db.read() as s:
        rows = {j.idempotency_key: j for j in s.scalars(select(Job))}
        keys = Counter(s.scalars(select(Job.idempotency_key)).all())
        submitted = Counter(s.scalars(select(EventRecord.job_id).where(EventRecord.kind == "job.submitted")).all())
        nodes = {n.name: n for n in s.scalars(select(Node))}
        total = s.execute(select(func.count(Job.id))).scalar_one()
    db.dispose()
    missing = [k for k in acked if k not in rows]
    assert missing == [], f"{len(missing)} acknowledged jobs lost: {missing[:5]}"
    assert all(rows[k].id == jid for k, (jid, _) in acked.items()), "an acknowledged id changed"
    assert all(rows[k].gpu_milli == (round(b["gpus"] * 1000) if b["gpus"] < 1 else 1000)
               for k, (_, b) in acked.items())
    assert max(keys.values()) == 1 and total == len(keys), "a job was stored twice"
    assert set(submitted) == {j.id for j in rows.values()} and max(submitted.values()) == 1
    # placements left by killed schedulers are consistent: no GPU beyond 1000 milli
    per_gpu = {name: [0] * n.gpu_count for name, n in nodes.items()}
    for j in rows.values():
        if j.status in ("bound", "running"):
            for g in j.gpu_indices:
                per_gpu[str(j.node_name)][g] += j.placed_gpu_milli or j.gpu_milli
    assert all(x <= 1000 for row in per_gpu.values() for x in row), per_gpu
    assert sum(1 for j in rows.values() if j.status == "running") > 0
    print(f"\n{backend}: kills={kills} acknowledged={len(acked)} stored={total} "
          f"retried_after_kill={stats['transport_errors']} replays={stats['replayed']} lost=0 duplicated=0")

"""Helpers shared by the control-plane tests (builders with defaults)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from seedance.control.db.models import Job
from seedance.control.schemas import ClusterCreate, JobCreate, NodeCreate
from seedance.control.service import ControlService
from seedance.control.services import jobs
from seedance.control.settings import ControlSettings

ADMIN_TOKEN = "sdt_test_admin_" + "Q7f2Kx9Lm3Pz8Rw4Tb6Yc1Nd"


def settings_for(url: str, **kw: Any) -> ControlSettings:
    """Test settings: loop off (tests drive it), admin bootstrap token, tiny pool."""
    base: dict[str, Any] = {
        "database_url": url, "bootstrap_token": ADMIN_TOKEN, "scheduler_enabled": False, "db_pool_size": 4,
    }
    base.update(kw)
    return ControlSettings(**base)


def add_nodes(
    svc: ControlService, *, cluster: str = "default", count: int = 2, gpus: int = 8, model: str = "A100-80GB",
    labels: dict[str, str] | None = None, prefix: str = "node", cpu_milli: int = 64_000, memory_mib: int = 512_000,
) -> None:
    """Create ``cluster`` if missing and add ``count`` identical nodes."""
    from seedance.control.errors import NotFound
    from seedance.control.services import clusters

    me = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        try:
            clusters.get_cluster(session=s, name=cluster)
        except NotFound:
            clusters.create_cluster(session=s, principal=me, data=ClusterCreate(name=cluster))
        for i in range(count):
            clusters.add_node(session=s, principal=me, cluster_name=cluster, data=NodeCreate(
                name=f"{prefix}-{i}", cpu_milli=cpu_milli, memory_mib=memory_mib, gpu_count=gpus,
                gpu_model=model if gpus else None, labels=labels or {}))


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])




def serve_in_thread(
    app: Any, *, start_timeout: float = 30.0, stop_timeout: float = 15.0, **uvicorn_options: Any
) -> tuple[str, Callable[[], None]]:
    """Serve ``app`` with uvicorn in a daemon thread on a free port; returns its URL and a stop function.

    Fails the test if the server does not start within ``start_timeout`` seconds.
    """
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, lifespan="on", **uvicorn_options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + start_timeout
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            pytest.fail("live server did not start")
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(stop_timeout)

    return f"http://127.0.0.1:{port}", stop


def submit(svc: ControlService, **fields: Any) -> int:
    """Submit a job as the admin (fields of ``JobCreate``) and return its id."""
    me = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        out, _ = jobs.submit_job(session=s, principal=me, data=JobCreate.model_validate(fields), scorer=svc.scorer,
                                 directory=svc.directory)
    return out.id


def job_row(svc: ControlService, job_id: int) -> Job:
    """The stored job ``job_id``."""
    with svc.db.read() as s:
        job = s.get(Job, job_id)
        assert job is not None
        return job

"""Fixtures of the backend tests: a real local multi-node Ray cluster and a live control plane on it.

The Ray cluster (``ray.cluster_utils.Cluster``: one raylet per Seedance node, logical GPUs, custom
resources from ``ray_node_resources``) is module-scoped: one per test module, about 1.2 GiB and
30 processes. Its session files go to a fresh folder under /tmp, removed afterwards. See
``../shared/reference/feasibility.md`` §1 for the settings that work on this machine kind (loopback
address, no usage stats, no dashboard, fast health checks).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from seedance.backends.local_cluster import FAST_HEALTH_CHECKS, local_ray_cluster
from seedance.backends.ray_backend import RayDispatcher, ray_node_resources
from seedance.control.service import ControlService
from tests.control.helpers import ADMIN_TOKEN, serve_in_thread, settings_for

GPUS_PER_NODE = 2
# Seedance node name -> labels; the first is Ray's head node (it also hosts the supervisor)
NODES: dict[str, dict[str, str]] = {
    "gpu-a": {"gpu.sla.level": "gold", "gpu.mode": "shared"},
    "gpu-b": {"gpu.sla.level": "silver", "gpu.mode": "shared"},
    "gpu-c": {"gpu.sla.level": "bronze", "gpu.mode": "shared"},
}
VICTIM = "gpu-c"


@dataclass
class RayWorld:
    """The local Ray cluster: Seedance node name -> Ray node (handle and id)."""

    cluster: Any
    handles: dict[str, Any]
    ray_ids: dict[str, str]
    temp_dir: Path
    start_s: float
    timings: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def ray_world() -> Iterator[RayWorld]:
    """Three raylets with two logical GPUs each, started by the test, shut down and cleaned after."""
    t0 = time.perf_counter()
    nodes = [(name, ray_node_resources(name, GPUS_PER_NODE, labels)) for name, labels in NODES.items()]
    with local_ray_cluster(nodes, gpus_per_node=GPUS_PER_NODE, temp_root="/tmp",
                           health_checks=FAST_HEALTH_CHECKS) as local:
        import ray

        try:
            ray.init(address=local.address, log_to_driver=False, _node_ip_address="127.0.0.1",
                     namespace="seedance-test", logging_level="WARNING")
            ray_ids = {name: str(h.node_id) for name, h in local.handles.items()}
            yield RayWorld(local.cluster, local.handles, ray_ids, local.temp_dir, time.perf_counter() - t0)
        finally:
            ray.shutdown()


@dataclass
class Plane:
    """A live control plane (uvicorn in a thread, scheduling loop on) dispatching to Ray."""

    url: str
    service: ControlService
    dispatcher: RayDispatcher
    log_dir: Path

    def client(self, token: str = ADMIN_TOKEN) -> httpx.Client:
        """An HTTP client with ``token`` as bearer."""
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def start_server(service: ControlService) -> tuple[str, Callable[[], None]]:
    """Serve ``service`` with uvicorn in a thread on a free port; returns its URL and a stop function."""
    from seedance.control.app import create_app

    return serve_in_thread(create_app(service=service), start_timeout=60.0, stop_timeout=30.0)


def register_nodes(p: Plane) -> None:
    """Create cluster ``default`` on ``p`` and register the module's Ray nodes with their labels."""
    with p.client() as c:
        assert c.post("/api/v1/clusters", json={"name": "default"}).status_code == 201
        for name, labels in NODES.items():
            r = c.post("/api/v1/clusters/default/nodes", json={
                "name": name, "cpu_milli": 16_000, "memory_mib": 65_536, "gpu_count": GPUS_PER_NODE,
                "gpu_model": "A100-80GB", "labels": labels})
            assert r.status_code == 201, r.text


@pytest.fixture(scope="module")
def plane(ray_world: RayWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    """The control plane with ``--dispatcher ray`` on the module's Ray cluster and its nodes registered."""
    root = tmp_path_factory.mktemp("plane")
    dispatcher = RayDispatcher(log_dir=str(root / "logs"), flush_s=0.3, namespace="seedance-test")
    service = ControlService(settings_for(f"sqlite:///{root / 'store.db'}", scheduler_enabled=True,
                                          scheduler_interval_s=0.2), dispatcher=dispatcher)
    url, stop = start_server(service)
    p = Plane(url, service, dispatcher, root / "logs")
    register_nodes(p)
    try:
        yield p
    finally:
        stop()


def wait_for(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.25) -> Any:
    """Poll ``cond`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def process_gone(pid: int) -> bool:
    """The process has exited (or is a zombie waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")

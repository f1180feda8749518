"""A multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``), started and cleaned up in one place.

Used by the live-migration runs, the Ray backend's tests and the Ray sweep tests and benchmark. Each
raylet has one CPU, a small object store, the loopback address and no dashboard; its session files go
to a fresh temp folder, removed afterwards. ``ray.cluster_utils`` also writes the head's address to
``<Ray's default temp dir>/ray_current_cluster`` whatever the nodes' temp folder is (``$RAY_TMPDIR``,
else ``$TMPDIR``, else ``/tmp``: Ray's rule, not :func:`tempfile.gettempdir`'s, which also reads
``$TEMP``/``$TMP``), so that folder is created when missing (a fresh machine) and never removed: another
cluster on this machine may be starting and about to write there. No driver is connected here: callers ``ray.init``
by ``address`` when they need one. Whoever starts a cluster on a shared machine holds ``flock`` on
the Ray lock while it is up.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the head's health checks when a test kills nodes: a dead raylet is noticed within about 1.5 s
FAST_HEALTH_CHECKS: Mapping[str, int] = {
    "health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0,
}


@dataclass(frozen=True)
class LocalRayCluster:
    """The running cluster: ``ray.cluster_utils.Cluster``, each node's handle (head first), its temp folder."""

    cluster: Any
    handles: dict[str, Any]
    temp_dir: Path

    @property
    def address(self) -> str:
        """The head's GCS address, for ``ray.init(address=...)`` or ``--executor ray=ADDRESS``."""
        return str(self.cluster.address)


@contextmanager
def local_ray_cluster(
    nodes: Sequence[tuple[str, Mapping[str, float]]],
    *,
    gpus_per_node: int = 0,
    temp_root: str | None = None,
    prefix: str = "sdray-",
    health_checks: Mapping[str, int] | None = None,
) -> Iterator[LocalRayCluster]:
    """Raylets named by ``nodes`` (name, custom resources; the first is the head), all up; shut down after.

    ``temp_root`` is where the session folder goes (default: the system's temp folder; keep it short:
    Ray's socket paths must fit); ``health_checks`` is the head's ``_system_config`` (e.g.
    :data:`FAST_HEALTH_CHECKS`).
    """
    # before ray is imported: no phoning home; "localhost" resolves to 127.0.0.1 (else ray.init hangs)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from ray._common.utils import get_default_ray_temp_dir
    from ray.cluster_utils import Cluster

    temp = Path(tempfile.mkdtemp(prefix=prefix, dir=temp_root))
    default_root = Path(get_default_ray_temp_dir())  # type: ignore[no-untyped-call]
    default_root.mkdir(parents=True, exist_ok=True)
    common: dict[str, Any] = {"node_ip_address": "127.0.0.1", "object_store_memory": 80 * 2**20, "num_cpus": 1,
                              "temp_dir": str(temp)}
    if gpus_per_node:
        common["num_gpus"] = gpus_per_node
    (head, head_resources), *rest = nodes
    head_args: dict[str, Any] = {**common, "include_dashboard": False}
    if head_resources:
        head_args["resources"] = dict(head_resources)
    if health_checks:
        head_args["_system_config"] = dict(health_checks)
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args=head_args)
        handles = {head: cluster.head_node}
        for name, resources in rest:
            args: dict[str, Any] = {**common, "resources": dict(resources)} if resources else common
            handles[name] = cluster.add_node(**args)
        cluster.wait_for_nodes()
        yield LocalRayCluster(cluster, handles, temp)
    finally:
        if cluster is not None:
            cluster.shutdown()  # type: ignore[no-untyped-call]
        shutil.rmtree(temp, ignore_errors=True)
        (default_root / "ray_current_cluster").unlink(missing_ok=True)

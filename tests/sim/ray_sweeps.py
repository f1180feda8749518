"""Sweeps on a real local Ray cluster: the cluster, and the comparison of two results files.

Shared by ``tests/sim/test_ray_sweep.py`` and ``benchmarks/bench_ray_sweep.py``. Whoever starts a
cluster on a shared machine holds ``flock`` on the Ray lock while it is up.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Timing fields of a ``seedancectl simulate -o json`` payload: (list key, field). They are measured
# wall-clock seconds (how long a run took on whichever process ran it), the only part of the payload
# that depends on where and when a run executed; everything else is a function of the run's inputs.
TIMING_FIELDS: tuple[tuple[str, str], ...] = (
    ("results", "wall_s"),  # one run's simulation time
    ("summary", "wall_s_mean"),  # its mean over the seeds of a (trace, policy)
    ("bounds", "wall_s"),  # --bound: one LP bound's solve time (computed on the driver, never remote)
    ("bound_summary", "wall_s_mean"),
)


@contextmanager
def local_ray_cluster(nodes: int = 3) -> Iterator[str]:
    """A head and ``nodes - 1`` worker raylets of one CPU each on this machine; yields the address.

    No driver is connected: a sweep joins by address (``--executor ray=ADDRESS``), as a user's would.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from ray.cluster_utils import Cluster

    temp = Path(tempfile.mkdtemp(prefix="sdsweep-", dir="/tmp"))  # short: Ray's socket paths must fit
    # ray.cluster_utils writes the head's address to <default temp dir>/ray_current_cluster even when
    # the nodes use another temp dir; on a fresh machine that folder does not exist yet.
    default_root = Path(tempfile.gettempdir()) / "ray"
    made_root = not default_root.exists()
    default_root.mkdir(exist_ok=True)
    common = {"node_ip_address": "127.0.0.1", "object_store_memory": 80 * 2**20, "num_cpus": 1,
              "temp_dir": str(temp)}
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={
            **common, "include_dashboard": False,
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3,
                               "health_check_initial_delay_ms": 0},
        })
        for _ in range(nodes - 1):
            cluster.add_node(**common)
        cluster.wait_for_nodes()
        yield str(cluster.address)
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        if made_root:
            shutil.rmtree(default_root, ignore_errors=True)
        else:
            (default_root / "ray_current_cluster").unlink(missing_ok=True)


def timeless(payload: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``payload`` without its ``TIMING_FIELDS``."""
    out = copy.deepcopy(payload)
    for key, field in TIMING_FIELDS:
        for record in out.get(key) or ():
            record.pop(field, None)
    return out


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """Where two payloads first differ, timings aside; ``None`` when they are the same.

    Top-level keys in ``a``'s order; inside a list of records, the first index whose records differ,
    with both records and the fields that differ.
    """
    a, b = timeless(a), timeless(b)
    for key in [*a, *(k for k in b if k not in a)]:
        if key not in a or key not in b:
            return {"key": key, "only_in": "a" if key in a else "b"}
        x, y = a[key], b[key]
        if x == y:
            continue
        if isinstance(x, list) and isinstance(y, list):
            for i, (rx, ry) in enumerate(zip(x, y, strict=False)):
                if rx != ry:
                    fields = None
                    if isinstance(rx, dict) and isinstance(ry, dict):
                        fields = sorted(f for f in {*rx, *ry} if f not in rx or f not in ry or rx[f] != ry[f])
                    return {"key": key, "index": i, "fields": fields, "a": rx, "b": ry}
            return {"key": key, "index": min(len(x), len(y)), "lengths": [len(x), len(y)]}
        return {"key": key, "a": x, "b": y}
    return None

"""Sweeps on a real local Ray cluster: the cluster, and the comparison of two results files.

Shared by ``tests/sim/test_ray_sweep.py`` and ``benchmarks/bench_ray_sweep.py``. Whoever starts a
cluster on a shared machine holds ``flock`` on the Ray lock while it is up.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from seedance.backends.local_cluster import FAST_HEALTH_CHECKS
from seedance.backends.local_cluster import local_ray_cluster as start_cluster

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
    names = [(f"node-{i}", {}) for i in range(nodes)]
    with start_cluster(names, temp_root="/tmp", prefix="sdsweep-", health_checks=FAST_HEALTH_CHECKS) as local:
        yield local.address


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

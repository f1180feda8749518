"""Attribution arithmetic shared by the sampler and the exporter (Kepler's rules).

Kepler (sustainable-computing-io/kepler, ``docs/developer/power-attribution-guide.md``) splits a
node's power into *active* = total × usage ratio and *idle* = the rest, then gives each workload
active × (its CPU-time Δ / the node's CPU-time Δ); idle stays at node level. The same rule attributes
a GPU's active energy by each process's share of busy time. Processes are summed to containers and
containers to pods (:func:`rollup`), so every level adds up by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

K = TypeVar("K")


def split_by_ratio(total: float, usage_ratio: float, node_time: float, times: Mapping[K, float]
                   ) -> tuple[float, float, dict[K, float]]:
    """``(active, idle, per-workload)`` of ``total``: active = total × usage_ratio, each workload
    active × its time / ``node_time`` (what no workload accounts for stays unattributed).

    >>> a, i, w = split_by_ratio(60.0, 1 / 3, 1000.0, {"p1": 100.0, "p2": 80.0})
    >>> round(a, 6), round(i, 6), {k: round(v, 6) for k, v in w.items()}
    (20.0, 40.0, {'p1': 2.0, 'p2': 1.6})
    """
    if not 0.0 <= usage_ratio <= 1.0:
        raise ValueError(f"usage ratio must be within 0..1, got {usage_ratio}")
    active = total * usage_ratio
    if node_time <= 0:
        return active, total - active, dict.fromkeys(times, 0.0)
    return active, total - active, {k: active * t / node_time for k, t in times.items()}


def rollup(values: Iterable[tuple[tuple[str, str, str], float]]) -> tuple[dict[tuple[str, str, str], float],
                                                                           dict[tuple[str, str], float]]:
    """Sum per-process values (keyed by (namespace, pod, container)) to containers and to pods."""
    by_container: dict[tuple[str, str, str], float] = {}
    for k, v in values:
        by_container[k] = by_container.get(k, 0.0) + v
    by_pod: dict[tuple[str, str], float] = {}
    for (ns, pod, _), v in by_container.items():
        by_pod[(ns, pod)] = by_pod.get((ns, pod), 0.0) + v
    return by_container, by_pod

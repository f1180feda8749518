"""The utilisation heatmap (node × GPU) and the whitepaper's ``adaptive_batch_size``.

NOTE(seedance): the whitepaper's formula contradicts its own text.
  §3.2 gives ``max(8, min(128, int(128 * (1 - avg_util / 100))))`` and says it yields 32 at 90 %
  average utilisation and 128 below 50 %; the formula gives 12 at 90 % and 64 at 50 %. We build what
  the text says: a monotone non-increasing map of the mean utilisation u (%) with

  * u ≤ 50 → 128;
  * 50 < u ≤ 90 → 128 · 2^(−(u − 50) / 20)  (halves every 20 points: 64 at 70 %, 32 at 90 %);
  * u > 90 → 32 · 2^(−(u − 90) / 5)  (halves every 5 points: 16 at 95 %, 8 at 100 %);

  rounded to an integer and clamped to [8, 128]. GPUs that reported no utilisation (MIG-enabled,
  lost) are NaN in the heatmap and left out of the mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError

BATCH_MIN, BATCH_MAX = 8, 128


def batch_size_for(util_pct: float) -> int:
    """The batch size for a mean utilisation (%): 128 at ≤ 50, 32 at 90, 8 at 100, monotone.

    >>> [batch_size_for(u) for u in (0, 50, 70, 90, 95, 100)]
    [128, 128, 64, 32, 16, 8]
    """
    if not 0.0 <= util_pct <= 100.0 or math.isnan(util_pct):
        raise InputError(f"utilisation must be within 0..100 %, got {util_pct!r}", source="adaptive_batch_size")
    if util_pct <= 50.0:
        raw = float(BATCH_MAX)
    elif util_pct <= 90.0:
        raw = BATCH_MAX * 2.0 ** (-(util_pct - 50.0) / 20.0)
    else:
        raw = 32.0 * 2.0 ** (-(util_pct - 90.0) / 5.0)
    return max(BATCH_MIN, min(BATCH_MAX, int(round(raw))))


def adaptive_batch_size(gpu_util_heatmap: NDArray[np.float64] | Sequence[Sequence[float]],
                        threshold: float = 75.0) -> int:
    """The whitepaper's function (``heatmap`` shape ``(nodes, gpus)``), with the corrected mapping.

    ``threshold`` is kept for the whitepaper's signature; the mapping does not use it.
    """
    a = np.asarray(gpu_util_heatmap, dtype=np.float64)
    if a.size == 0 or np.all(np.isnan(a)):
        raise InputError("the heatmap holds no utilisation reading", source="adaptive_batch_size")
    vals = a[~np.isnan(a)]
    if np.any((vals < 0) | (vals > 100)):
        raise InputError("heatmap values must be within 0..100 %", source="adaptive_batch_size")
    return batch_size_for(float(vals.mean()))


def heatmap_matrix(rows: Sequence[Mapping[str, Any]], metric: str = "util") -> tuple[list[str], NDArray[np.float64]]:
    """``(nodes, matrix)`` of whole GPUs from GPU-state rows: utilisation %, memory used % or $/h.

    Missing readings (and lost GPUs) are NaN; MIG instances are folded into their GPU (memory and
    cost summed, utilisation the instances' mean engine activity).
    """
    if metric not in ("util", "memory", "cost"):
        raise InputError(f"unknown metric {metric!r}; valid: util, memory, cost", source="metric")
    nodes = sorted({str(r["node"]) for r in rows})
    pos = {n: i for i, n in enumerate(nodes)}
    width = 1 + max((int(r["gpu"]) for r in rows if int(r["gpu"]) >= 0), default=-1)
    acc: dict[tuple[int, int], list[float]] = {}
    tot: dict[tuple[int, int], list[float]] = {}
    for r in rows:
        g = int(r["gpu"])
        if g < 0 or r.get("lost"):
            continue
        k = (pos[str(r["node"])], g)
        if metric == "util":
            v = r.get("util_pct")
            if v is not None:
                acc.setdefault(k, []).append(float(v))
        elif metric == "memory":
            if r.get("mem_used_mib") is not None and r.get("mem_total_mib"):
                acc.setdefault(k, []).append(float(r["mem_used_mib"]))
                tot.setdefault(k, []).append(float(r["mem_total_mib"]))
        else:
            acc.setdefault(k, []).append(float(r.get("cost_usd_h") or 0.0))
    m = np.full((len(nodes), max(0, width)), np.nan)
    for (i, g), vs in acc.items():
        if metric == "util":
            m[i, g] = sum(vs) / len(vs)
        elif metric == "memory":
            m[i, g] = 100.0 * sum(vs) / sum(tot[(i, g)])
        else:
            m[i, g] = sum(vs)
    return nodes, m

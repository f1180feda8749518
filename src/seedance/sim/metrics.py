"""Metric series and their discretisation (the FGD paper's bucketing by arrived workload)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def bucket_by_arrival(
    arrived_milli: NDArray[np.int64],
    used_milli: NDArray[np.int64],
    frag_milli: NDArray[np.float64],
    total_gpus: int,
    top: int,
) -> tuple[list[int], list[float | None], list[float | None]]:
    """Bucket per-event rows by arrived % of capacity (columns ``0..top``).

    Each event's arrived % is ``round(arrived / total_gpus / 10)`` (half to even) and its
    allocation ``round(used / total_gpus / 10, 2)``. A column is the mean over its events; a
    column with no event falls back to the events within ±1; otherwise it is ``None``.
    Fragmentation is reported as % of cluster GPU capacity.

    Returns:
        ``(columns, alloc_pct, frag_pct)``.
    """
    arrive = np.round(arrived_milli / total_gpus / 10.0).astype(np.int64)
    alloc = np.round(used_milli / total_gpus / 10.0, 2)
    cols = list(range(top + 1))
    a_out: list[float | None] = []
    f_out: list[float | None] = []
    # group rows per integer bucket once
    order = np.argsort(arrive, kind="stable")
    sa = arrive[order]
    for c in cols:
        lo, hi = np.searchsorted(sa, c, "left"), np.searchsorted(sa, c, "right")
        if hi <= lo:
            lo, hi = np.searchsorted(sa, c - 1, "left"), np.searchsorted(sa, c + 1, "right")
        if hi <= lo:
            a_out.append(None)
            f_out.append(None)
            continue
        rows = order[lo:hi]
        a_out.append(round(float(alloc[rows].mean()), 2))
        f_out.append(round(float(100.0 * frag_milli[rows].mean() / 1000.0 / total_gpus), 2))
    return cols, a_out, f_out

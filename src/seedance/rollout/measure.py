"""When did an SLI condition begin to hold, from a service's own request log (exact, no histogram buckets)?

Used to measure rollback delays independently of the controller: the condition's start comes from
the requests the service served (end time, latency, status code, variant), the rollback's end from
the controller. The trailing windows are evaluated at every candidate request's end time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Log = Sequence[tuple[float, float, str, int]]


def _candidate(log: Log, variant: str, since: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = [(t1, t1 - t0, code) for t0, t1, v, code in log if v == variant and t1 >= since]
    rows.sort()
    if not rows:
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    a = np.array(rows, dtype=np.float64)
    return a[:, 0], a[:, 1], a[:, 2].astype(np.int64)


def p95_breach_start(log: Log, variant: str, *, since: float, window_s: float, threshold_ms: float,
                     min_requests: int) -> float | None:
    """First time ≥ ``since`` at which the P95 of ``variant``'s requests ended in the trailing window exceeds
    ``threshold_ms`` (with at least ``min_requests`` of them) and stays above until the log ends."""
    end, lat, _ = _candidate(log, variant, since - window_s)
    start: float | None = None
    for i in np.flatnonzero(end >= since).tolist():
        t = end[i]
        sel = (end > t - window_s) & (end <= t)
        if sel.sum() < min_requests:
            continue
        above = float(np.percentile(lat[sel], 95)) * 1000.0 > threshold_ms
        if above and start is None:
            start = float(t)
        elif not above:
            start = None
    return start


def error_ratio_start(log: Log, variant: str, *, since: float, window_s: float, threshold: float,
                      min_requests: int) -> float | None:
    """First time ≥ ``since`` at which the 5xx share of ``variant``'s requests ended in the trailing window
    exceeds ``threshold`` (with at least ``min_requests`` of them)."""
    end, _, code = _candidate(log, variant, since - window_s)
    for i in np.flatnonzero(end >= since).tolist():
        t = end[i]
        sel = (end > t - window_s) & (end <= t)
        n = int(sel.sum())
        if n >= min_requests and float((code[sel] >= 500).sum()) / n > threshold:
            return float(t)
    return None


def served_after(log: Log, variant: str, t: float) -> int:
    """Requests of ``variant`` that *began* after ``t``."""
    return sum(1 for t0, _, v, _ in log if v == variant and t0 > t)

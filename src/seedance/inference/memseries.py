"""KV memory over time: each replica's points as the engine runs, summed over replicas at the end.

A replica records a point when it starts an iteration, a span or an idle period (:func:`mark`) and
one when an iteration or span ends (its peak, before anything is freed); its memory is linear
between consecutive points (a decode span grows its KV linearly in steps, hence in time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray


class _Marked(Protocol):
    mem_t: list[float]
    mem_v: list[float]
    kv_start: float


def mark(rep: _Marked, now: float) -> None:
    """``rep`` starts a new iteration, span or idle period at ``now`` with ``kv_start`` MiB."""
    t, v = rep.mem_t, rep.mem_v
    if t and t[-1] != now:  # it was idle since its last point: flat until now
        t.append(now)
        v.append(v[-1])
    t.append(now)
    v.append(rep.kv_start)


def memory_series(points: Sequence[tuple[list[float], list[float]]], t0: float
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64], list[float]]:
    """KV MiB of all replicas together over time, and each replica's peak.

    ``points`` holds each replica's ``(times, MiB)``. Each replica's memory is linear between its
    points; where a replica has several points at one time (a drop when requests finish), the
    total takes the first, so peaks are kept.
    """
    xs = np.unique(np.concatenate([np.asarray(t) for t, _ in points] + [np.array([t0])]))
    total = np.zeros_like(xs)
    peaks = []
    for mt, mv in points:
        tt, vv = np.asarray(mt), np.asarray(mv)
        if tt.size == 0:
            peaks.append(0.0)
            continue
        k = np.searchsorted(tt, xs, side="left")  # first point at or after x
        kc = np.minimum(k, tt.size - 1)
        k0 = np.maximum(k - 1, 0)
        exact = tt[kc] == xs
        span = tt[kc] - tt[k0]
        w = np.divide(xs - tt[k0], span, out=np.zeros_like(xs), where=span > 0)
        val = np.where(exact, vv[kc], vv[k0] + w * (vv[kc] - vv[k0]))
        val = np.where((k == 0) & ~exact, 0.0, val)
        val = np.where(k >= tt.size, vv[-1], val)
        total += val
        peaks.append(float(vv.max()))
    return xs, total, peaks

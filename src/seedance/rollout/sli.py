"""SLIs from a service's Prometheus metrics: P95 latency and 5xx share of the canary's requests over a window.

Every scrape gives cumulative counters of the requests served with the canary variant: the
latency histogram's buckets and the request counter split into 5xx and the rest. A window's SLI
comes from the difference between the newest scrape and the newest one at least ``window`` older
(as Prometheus' ``rate`` over a range): the P95 by ``histogram_quantile``'s rule (linear inside the
bucket holding the rank; the highest finite bound when the rank falls in ``+Inf``) and the 5xx
share as Δ5xx / Δrequests. Fewer than ``min_requests`` requests in the window is *no data*
(``None``), never a pass.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from seedance.core.errors import InputError
from seedance.rollout.config import MetricNames


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Cumulative canary counters at one scrape.

    Attributes:
        t: Monotonic time of the scrape (s).
        bounds: Upper bounds of the histogram buckets (seconds, ascending, ``inf`` last).
        buckets: Cumulative count per bound.
        requests: Requests counted.
        errors: Of which 5xx.
    """

    t: float
    bounds: tuple[float, ...]
    buckets: tuple[float, ...]
    requests: float
    errors: float


def parse_snapshot(text: str, *, t: float, names: MetricNames, variant: str, source: str = "metrics") -> Snapshot:
    """The canary's counters from a Prometheus text exposition (requests labelled ``variant``)."""
    from prometheus_client.parser import text_string_to_metric_families

    buckets: dict[float, float] = {}
    requests = errors = 0.0
    seen_hist = seen_req = False
    hist = names.latency_histogram
    req = names.requests_counter.removesuffix("_total")
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, IndexError, TypeError) as exc:
        raise InputError(f"not a Prometheus text exposition: {exc}", source=source) from None
    for fam in families:
        if fam.name not in (hist, req):
            continue
        for s in fam.samples:
            if s.labels.get(names.variant_label) != variant:
                continue
            if fam.name == hist and s.name == f"{hist}_bucket":
                seen_hist = True
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + float(s.value)
            elif fam.name == req and s.name == f"{req}_total":
                seen_req = True
                requests += float(s.value)
                if str(s.labels.get(names.code_label, "")).startswith("5"):
                    errors += float(s.value)
    bounds = tuple(sorted(buckets))
    if seen_hist and (not bounds or not math.isinf(bounds[-1])):
        raise InputError(f"histogram {hist} has no +Inf bucket", source=source, field=hist)
    if not seen_req and not seen_hist:
        return Snapshot(t, (), (), 0.0, 0.0)
    return Snapshot(t, bounds, tuple(buckets[b] for b in bounds), requests, errors)


def histogram_quantile(q: float, bounds: tuple[float, ...], counts: np.ndarray) -> float | None:
    """Prometheus' ``histogram_quantile`` over cumulative ``counts`` (``None`` without observations)."""
    if not len(bounds) or counts[-1] <= 0:
        return None
    rank = q * float(counts[-1])
    i = int(np.searchsorted(counts, rank, side="left"))
    i = min(i, len(bounds) - 1)
    if math.isinf(bounds[i]):
        return float(bounds[i - 1]) if i > 0 else None
    lo = float(bounds[i - 1]) if i > 0 else 0.0
    below = float(counts[i - 1]) if i > 0 else 0.0
    width = float(counts[i]) - below
    if width <= 0:
        return float(bounds[i])
    return lo + (float(bounds[i]) - lo) * (rank - below) / width


@dataclass(frozen=True, slots=True)
class WindowSLI:
    """SLIs of one window (``None``: no data)."""

    start: float
    end: float
    requests: float
    p95_ms: float | None
    error_ratio: float | None


class SLIHistory:
    """Recent snapshots and the SLIs of trailing windows.

    Args:
        keep_s: How much history to keep (the longest window asked for).
        min_requests: Fewest requests for a window to count.
    """

    def __init__(self, keep_s: float, min_requests: int) -> None:
        self.keep_s = keep_s
        self.min_requests = min_requests
        self._snaps: deque[Snapshot] = deque()

    def add(self, snap: Snapshot) -> None:
        """Record a scrape (a counter that went down, i.e. a restarted service, starts history afresh)."""
        if self._snaps and snap.requests < self._snaps[-1].requests:
            self._snaps.clear()
        self._snaps.append(snap)
        while len(self._snaps) > 2 and snap.t - self._snaps[1].t >= self.keep_s:
            self._snaps.popleft()

    @property
    def latest(self) -> Snapshot | None:
        """The newest scrape."""
        return self._snaps[-1] if self._snaps else None

    def since(self, t0: float) -> WindowSLI | None:
        """SLIs between the newest scrape at or before ``t0`` (else the oldest kept) and the newest one."""
        if len(self._snaps) < 2:
            return None
        new = self._snaps[-1]
        old = self._snaps[0]
        for s in self._snaps:
            if s.t <= t0:
                old = s
            else:
                break
        if old is new:
            return None
        return self.between(old, new)

    def window(self, seconds: float) -> WindowSLI | None:
        """SLIs over the trailing ``seconds``."""
        new = self.latest
        return None if new is None else self.since(new.t - seconds)

    def between(self, old: Snapshot, new: Snapshot) -> WindowSLI:
        """SLIs of the requests counted between two scrapes."""
        n = new.requests - old.requests
        p95: float | None = None
        ratio: float | None = None
        if n >= self.min_requests:
            ratio = (new.errors - old.errors) / n
            if new.bounds:
                newc = np.array(new.buckets)
                oldc = np.array(old.buckets) if old.bounds == new.bounds else np.zeros(len(new.bounds))
                q = histogram_quantile(0.95, new.bounds, newc - oldc)
                p95 = None if q is None else 1000.0 * q
        return WindowSLI(old.t, new.t, n, p95, ratio)

"""SLI windows from Prometheus expositions: quantiles by histogram_quantile's rule, 5xx share, no data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from seedance.core.errors import InputError
from seedance.rollout.config import MetricNames
from seedance.rollout.sli import SLIHistory, histogram_quantile, parse_snapshot
from tests.rollout.helpers import SyntheticMetrics

NAMES = MetricNames()


def test_histogram_quantile_matches_prometheus_rule() -> None:
    bounds = (0.1, 0.2, 0.5, math.inf)
    # 100 observations: 50 <= 0.1, 30 in (0.1, 0.2], 15 in (0.2, 0.5], 5 above
    counts = np.array([50.0, 80.0, 95.0, 100.0])
    assert histogram_quantile(0.5, bounds, counts) == pytest.approx(0.1)  # rank 50: top of the first bucket
    assert histogram_quantile(0.65, bounds, counts) == pytest.approx(0.1 + 0.1 * 15 / 30)
    assert histogram_quantile(0.95, bounds, counts) == pytest.approx(0.5)  # rank 95: top of (0.2, 0.5]
    assert histogram_quantile(0.99, bounds, counts) == 0.5  # in +Inf: the highest finite bound
    assert histogram_quantile(0.95, bounds, np.zeros(4)) is None


def test_snapshot_reads_only_the_canary_variant() -> None:
    m = SyntheticMetrics()
    m.serve(20, 0.03, errors=1, variant="on")
    m.serve(500, 0.9, errors=100, variant="off")
    snap = parse_snapshot(m.scrape(), t=1.0, names=NAMES, variant="on")
    assert (snap.requests, snap.errors) == (20.0, 1.0) and math.isinf(snap.bounds[-1])
    assert snap.buckets[-1] == 20.0
    empty = parse_snapshot(m.scrape(), t=1.0, names=NAMES, variant="canary-that-never-ran")
    assert (empty.requests, empty.bounds) == (0.0, ())
    with pytest.raises(InputError, match="not a Prometheus text exposition"):
        parse_snapshot('http_requests_total{variant="on" 3\n', t=1.0, names=NAMES, variant="on")


def test_windows_use_counter_differences_and_need_min_requests() -> None:
    m = SyntheticMetrics()
    h = SLIHistory(keep_s=60, min_requests=10)
    h.add(parse_snapshot(m.scrape(), t=0.0, names=NAMES, variant="on"))
    for t in range(1, 21):
        m.serve(5, 0.05 if t <= 10 else 0.45, errors=1 if t > 15 else 0)
        h.add(parse_snapshot(m.scrape(), t=float(t), names=NAMES, variant="on"))
    w = h.window(5)
    assert w is not None and w.requests == 25 and w.error_ratio == pytest.approx(5 / 25)
    assert w.p95_ms == pytest.approx(495.0)  # all 25 in (0.4, 0.5]: 0.4 + 0.1 x 23.75 / 25
    early = h.since(0.0)
    assert early is not None and early.requests == 100 and early.error_ratio == pytest.approx(5 / 100)
    assert h.window(1) is not None and h.window(1).p95_ms is None  # 5 requests < 10: no data
    m2 = SyntheticMetrics()  # the service restarted: counters back to zero, history starts afresh
    h.add(parse_snapshot(m2.scrape(), t=21.0, names=NAMES, variant="on"))
    assert h.window(30) is None

"""Metric definitions and the SLO-capacity search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from seedance.core.errors import InputError
from seedance.inference.capacity import slo_capacity
from seedance.inference.metrics import SLO, summarize
from seedance.inference.sim import DONE, DROPPED, ServingRun


def _run() -> ServingRun:
    n = 4
    return ServingRun(
        policy="p", trace="t", arrival=np.array([0.0, 1.0, 2.0, 3.0]), prompt=np.array([10, 10, 10, 10]),
        output=np.array([11, 1, 21, 5]), predicted=np.array([10.0, 10.0, 10.0, 10.0]),
        baseline_pred=np.array([10.0, 10.0, 10.0, 10.0]),
        first_token=np.array([0.5, 1.2, 4.0, np.nan]), finish=np.array([1.5, 1.2, 6.0, np.nan]),
        state=np.array([DONE, DONE, DONE, DROPPED], dtype=np.int8), preemptions=np.zeros(n, np.int32),
        mem_t=np.array([0.0, 1.0]), mem_mib=np.array([3.0, 7.5]), replica_peak_mib=[7.5], iterations=9, events=9,
        wall_s=0.0, pools=(1,), kv_pool_mib=100.0,
    )


def test_summary_definitions() -> None:
    row = summarize(_run(), SLO(ttft_ms=1000.0, tpot_ms=100.0))
    # TTFT 500, 200, 2000 ms; TPOT 1000/10 = 100 ms, (one token: none), 2000/20 = 100 ms
    assert row["completed"] == 3 and row["dropped"] == 1
    assert row["makespan_s"] == 6.0
    assert row["completed_rps"] == pytest.approx(0.5)
    assert row["goodput_rps"] == pytest.approx(2 / 6, abs=1e-4)  # request 2 misses TTFT
    assert row["tokens_per_s"] == pytest.approx(33 / 6, abs=0.01)
    assert row["ttft_ms_p50"] == 500.0 and row["tpot_ms_p50"] == 100.0
    assert row["peak_kv_mib"] == 7.5
    assert row["meets_slo"] is False  # a dropped request fails the run
    assert row["slo_attainment"] == 0.5


def test_slo_validation() -> None:
    with pytest.raises(InputError):
        SLO(ttft_ms=0)
    with pytest.raises(InputError):
        SLO(tpot_ms=math.inf)


def test_capacity_search_brackets_the_threshold() -> None:
    calls: list[float] = []

    def run_at(s: float) -> dict[str, object]:
        calls.append(s)
        return {"meets_slo": s <= 3.3, "goodput_rps": s}

    c = slo_capacity(run_at, start=1.0, tol=0.01)
    assert 3.3 / 1.01 <= c.rate_scale <= 3.3
    assert c.row is not None and c.row["goodput_rps"] == c.rate_scale
    assert calls[:3] == [1.0, 2.0, 4.0]
    never = slo_capacity(lambda s: {"meets_slo": False}, start=1.0)
    assert never.rate_scale == 0.0 and never.row is None

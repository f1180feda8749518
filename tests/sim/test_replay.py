"""Replay mode: waiting, departures, never-scheduled pods, utilisation and scaling."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import make_cluster, make_trace

from seedance.core.errors import InputError
from seedance.sim.replay import ReplaySimulation, run_replay, scale_cluster
from seedance.traces import load_nodes, load_pods


def test_pods_wait_then_start_when_a_gpu_frees() -> None:
    spec = make_cluster([(32000, 1 << 16, 1, "T4")])
    tr = make_trace(
        [(1000, 1, 1, 1000), (1000, 1, 1, 600), (1000, 1, 1, 400), (1000, 1, 1, 1000)],
        times=[(0, 100), (10, 300), (20, 300), (30, 50)],
    )
    sim = ReplaySimulation(spec, tr, "best-fit")
    sim.run()
    r = sim.records
    assert (r[0].start, r[0].end) == (0.0, 100.0)
    assert (r[1].start, r[1].end) == (100.0, 300.0)  # waited 90 s; fixed end at its deletion time
    assert (r[2].start, r[2].end) == (100.0, 300.0)  # 400 milli fits beside 600 once the GPU frees
    assert math.isnan(r[3].start) and "never scheduled" in r[3].reason  # expired at t=50 while pending
    res = sim.result(wall_s=0.0)
    assert (res.scheduled, res.never_scheduled) == (3, 1)
    assert res.queue_delay_s_mean == pytest.approx((0 + 90 + 80) / 3, abs=0.1)
    # allocated 1000 on [0,100), 1000 on [100,300) → 100% of the one GPU over [0, 300]
    assert res.utilization_pct == pytest.approx(100.0)


def test_shifted_end_runs_the_full_duration() -> None:
    spec = make_cluster([(32000, 1 << 16, 1, "T4")])
    tr = make_trace([(1000, 1, 1, 1000), (1000, 1, 1, 1000)], times=[(0, 100), (10, 60)])
    sim = ReplaySimulation(spec, tr, "best-fit", end="shifted")
    sim.run()
    assert (sim.records[1].start, sim.records[1].end) == (100.0, 150.0)


def test_replay_needs_times() -> None:
    with pytest.raises(InputError, match="creation_time"):
        ReplaySimulation(make_cluster(), make_trace([(1, 1, 0, 0)]), "best-fit")


def test_scale_cluster_keeps_the_mix(alibaba: Path) -> None:
    spec = load_nodes(alibaba / "openb_node_list_gpu_node.csv")
    half = scale_cluster(spec, 0.5, seed=1)
    assert abs(half.total_gpus - 3106) < 40
    assert scale_cluster(spec, 0.5, seed=1) == half
    double = scale_cluster(spec, 2.0)
    assert double.total_gpus == 2 * spec.total_gpus and len({n.name for n in double.nodes}) == 2426
    with pytest.raises(InputError):
        scale_cluster(spec, 0.0)


def test_full_default_trace_replay(alibaba: Path) -> None:
    spec = load_nodes(alibaba / "openb_node_list_gpu_node.csv")
    tr = load_pods(alibaba / "openb_pod_list_default.csv")
    full = run_replay(spec, tr, "best-fit")
    assert full.scheduled == 8152 and full.never_scheduled == 0 and full.queue_delay_s_p99 == 0.0
    small = run_replay(spec, tr, "best-fit", capacity_scale=0.01)
    assert small.n_nodes < 30 and small.utilization_pct > 10 * full.utilization_pct
    assert small.queue_delay_s_mean >= 0 and len(small.timeline_alloc_pct) == 400
    assert np.nanmax(small.timeline_alloc_pct) <= 100.0

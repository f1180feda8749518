"""Heterogeneous replay: exact outcomes on a hand-built two-GPU case, policies, and a Gavel-mix slice."""

from __future__ import annotations

import numpy as np
import pytest

from seedance.core.errors import InputError
from seedance.hetero.fleet import make_fleet
from seedance.hetero.policies import maxmin_allocation
from seedance.hetero.replay import ReplayOptions, replay
from seedance.hetero.throughput import ThroughputMatrix, default_matrix
from seedance.hetero.workload import Workload, alibaba_gaps, gavel_mix
from seedance.storage.checkpoint import (
    LLAMA3_INTERRUPTIONS_PER_GPU_HOUR,
    checkfreq_interval,
    checkpoint_cost,
    durable_lag_s,
    job_checkpoint_gb,
    young_daly_interval,
)
from seedance.storage.tiers import STORAGE
from seedance.traces.paths import DEFAULT_PODS, data_file

TYPES = ("ResNet-50 (batch size 64)", "A3C")
MATRIX = ThroughputMatrix(TYPES, ("k80", "v100"), (1,), np.array([[[1.0, 10.0]], [[5.0, 5.0]]]), "hand")
WL = Workload(np.array([0.0, 0.0]), np.array([0, 1]), np.array([36_000.0, 3_600.0]),
              np.array([[1.0, 10.0], [5.0, 5.0]]), MATRIX)
FLEET = make_fleet([("k80", 1), ("v100", 1)], gpus_per_node=1)


def eff(job_type: str, rate: float, pcie: float = 15.75, layout: str = "tiered") -> tuple[float, float]:
    """Effective steps/s and stall per step under CheckFreq's interval on the tiered layout."""
    gb = job_checkpoint_gb(job_type)
    ref = checkpoint_cost(gb, STORAGE.get("tiered"), pcie)
    ck = checkpoint_cost(gb, STORAGE.get(layout), pcie)
    k = checkfreq_interval(1 / rate, ref.snapshot_s, ref.persist_s)
    return k / (k / rate + ck.snapshot_s), ck.snapshot_s / k


def test_agnostic_puts_the_fast_job_on_the_slow_gpu() -> None:
    r = replay("agnostic", WL, FLEET)
    e0, _ = eff(TYPES[0], 1.0)  # FIFO: job 0 takes the first free GPU in fleet order, the K80
    e1, _ = eff(TYPES[1], 5.0)
    assert r["avg_jct_s"] == pytest.approx(((10 + 36_000 / e0) + (10 + 3_600 / e1)) / 2, rel=1e-9)
    assert r["migrations"] == 0


def test_hetero_jct_matches_jobs_to_gpus() -> None:
    r = replay("hetero-jct", WL, FLEET)
    e0, _ = eff(TYPES[0], 10.0)  # ResNet-50 is 10x faster on the V100, A3C indifferent: it takes the K80
    e1, _ = eff(TYPES[1], 5.0)
    assert r["avg_jct_s"] == pytest.approx(((10 + 36_000 / e0) + (10 + 3_600 / e1)) / 2, rel=1e-9)
    assert (r["migrations"], r["preemptions"]) == (0, 0)
    agn = replay("agnostic", WL, FLEET)
    assert agn["avg_jct_s"] / r["avg_jct_s"] > 5


def test_remote_only_stall_ratio_is_the_bandwidth_ratio() -> None:
    fast = replay("agnostic", WL, FLEET)
    slow = replay("agnostic", WL, make_fleet([("k80", 1), ("v100", 1)], gpus_per_node=1, storage="remote-only"))
    # same CheckFreq interval, snapshot over PCIe 3.0 x16 (15.75 GB/s) vs 10 Gbit/s remote (1.25 GB/s)
    assert slow["checkpoint_stall_s"] / fast["checkpoint_stall_s"] == pytest.approx(15.75 / 1.25)
    _, s0 = eff(TYPES[0], 1.0)
    _, s1 = eff(TYPES[1], 5.0)
    assert fast["checkpoint_stall_s"] == pytest.approx(36_000 * s0 + 3_600 * s1)


def test_stall_by_kind_and_expected_rework_on_the_hand_built_case() -> None:
    r = replay("agnostic", WL, FLEET)
    assert r["stall_leave_s"] == r["stall_restore_s"] == 0.0  # non-preemptive
    assert r["stall_periodic_s"] == pytest.approx(r["checkpoint_stall_s"])
    rows = []
    for jt, rate in ((TYPES[0], 1.0), (TYPES[1], 5.0)):  # K80 for job 0, V100 for job 1, as FIFO places them
        gb = job_checkpoint_gb(jt)
        ref = checkpoint_cost(gb, STORAGE.get("tiered"), 15.75)
        k = checkfreq_interval(1 / rate, ref.snapshot_s, ref.persist_s)
        run_s = (36_000 if jt == TYPES[0] else 3_600) / eff(jt, rate)[0]
        rows.append((run_s, k / rate / 2 + durable_lag_s(ref)))
    gpu_s = sum(t for t, _ in rows)
    per = sum(t * e for t, e in rows) / gpu_s
    assert r["expected_rework_per_interruption_s"] == pytest.approx(per, rel=1e-9)
    assert r["expected_rework_s"] == pytest.approx(gpu_s * per * LLAMA3_INTERRUPTIONS_PER_GPU_HOUR / 3600, rel=1e-9)
    assert r["stall_plus_rework_s"] == pytest.approx(r["checkpoint_stall_s"] + r["expected_rework_s"])
    # CheckFreq's bound holds on both layouts at their own interval (profile = true speed here)
    for layout in ("tiered", "remote-only"):
        own = replay("agnostic", WL, make_fleet([("k80", 1), ("v100", 1)], gpus_per_node=1, storage=layout),
                     ReplayOptions(interval_layout=layout))
        assert 0 < own["stall_periodic_s"] <= 0.035 * own["gpu_hours"] * 3600


def test_interval_uses_the_throughput_of_the_gpu_the_job_runs_on_when_fleet_and_matrix_orders_differ() -> None:
    # fleet order V100, K80; the matrix's columns are K80, V100. FIFO best-fit: job 0 (ResNet-50, 10 steps/s on
    # the V100) takes the first node, the V100; job 1 (A3C, 5 steps/s anywhere) the K80.
    r = replay("agnostic", WL, make_fleet([("v100", 1), ("k80", 1)], gpus_per_node=1))
    snap0 = 25_557_032 * 8 / 1e9 / 15.75  # 0.01298 s over PCIe 3.0 x16
    snap1 = 1_000_000 * 12 / 1e9 / 15.75
    # V100: 0.1 s iterations, k = ceil(0.01298 / (0.035 x 0.1)) = 4 (the K80's 1 s iteration would give k = 1)
    assert checkfreq_interval(0.1, snap0, snap0 * 15.75 / 3.8) == 4
    assert r["stall_periodic_s"] == pytest.approx(36_000 * snap0 / 4 + 3_600 * snap1 / 1, rel=1e-12)
    # intervals per (job, type): ResNet-50 4 x 0.1 s on the V100, 1 x 1 s on the K80; A3C 1 x 0.2 s on both
    assert r["mean_checkpoint_interval_s"] == pytest.approx((0.4 + 1.0 + 0.2 + 0.2) / 4, rel=1e-12)


def test_checkfreq_interval_follows_the_jobs_measured_speed_not_its_profile() -> None:
    # a ResNet-50 running at 20 steps/s on the V100 against a profile of 10 (CheckFreq profiles the job itself)
    wl = Workload(np.zeros(1), np.array([0]), np.array([36_000.0]), np.array([[1.0, 20.0]]), MATRIX)
    r = replay("agnostic", wl, make_fleet([("v100", 1)], gpus_per_node=1))
    snap = 25_557_032 * 8 / 1e9 / 15.75
    k = 8  # ceil(0.01298 / (0.035 x 0.05 s)) = ceil(7.42); the profile's 0.1 s iterations would give 4
    assert checkfreq_interval(0.05, snap, snap * 15.75 / 3.8) == k
    assert r["stall_periodic_s"] == pytest.approx(36_000 * snap / k, rel=1e-12)
    run_s = 36_000 / (k / (k / 20.0 + snap))
    assert r["gpu_hours"] * 3600 == pytest.approx(run_s, rel=1e-12)
    # within CheckFreq's 3.5% (3.14%); at the profile's interval it would be snap / (4 x 0.05 + snap) = 6.1%
    assert r["stall_periodic_s"] / run_s == pytest.approx(snap / (k * 0.05 + snap), rel=1e-12)
    assert r["stall_periodic_s"] / run_s < 0.035 < snap / (4 * 0.05 + snap)


def test_snapshot_overlap_shortens_the_staged_stall_and_the_checkfreq_interval_only() -> None:
    # one ResNet-50 at 10 steps/s on a V100; a quarter of each 0.1 s iteration can hide the 0.01298 s snapshot
    wl = Workload(np.zeros(1), np.array([0]), np.array([36_000.0]), np.array([[1.0, 10.0]]), MATRIX)
    snap = 25_557_032 * 8 / 1e9 / 15.75
    runs = {(s, ov): replay("agnostic", wl, make_fleet([("v100", 1)], gpus_per_node=1, storage=s),
                            ReplayOptions(interval_layout=s, snapshot_overlap=ov))
            for s in ("tiered", "remote-only") for ov in (0.0, 0.1, 0.25)}
    assert runs[("tiered", 0.0)]["stall_periodic_s"] == pytest.approx(36_000 * snap / 4, rel=1e-12)  # k = 4
    # overlap 0.1: 0.00298 s left, k = ceil(0.00298 / 0.0035) = 1 -> every iteration, 36,000 x 0.00298 s
    assert runs[("tiered", 0.1)]["stall_periodic_s"] == pytest.approx(36_000 * (snap - 0.01), rel=1e-9)
    assert runs[("tiered", 0.0)]["mean_checkpoint_interval_s"] == pytest.approx(0.4, rel=1e-12)
    assert runs[("tiered", 0.1)]["mean_checkpoint_interval_s"] == pytest.approx(0.1, rel=1e-12)
    assert runs[("tiered", 0.25)]["stall_periodic_s"] == 0.0
    # the synchronous remote write overlaps nothing: identical at every overlap
    for ov in (0.1, 0.25):
        assert runs[("remote-only", ov)]["stall_periodic_s"] == runs[("remote-only", 0.0)]["stall_periodic_s"]
    with pytest.raises(InputError) as ei:
        ReplayOptions(snapshot_overlap=-0.1)
    assert ei.value.field == "snapshot_overlap"


def test_a_preempted_job_stalls_for_its_snapshot_and_restores_from_dram() -> None:
    # two equal jobs, one V100: least-attained-service alternates them every round
    wl = Workload(np.zeros(2), np.array([0, 0]), np.array([36_000.0, 36_000.0]), np.array([[1.0, 10.0]] * 2),
                  MATRIX)
    fleet = make_fleet([("v100", 1)], gpus_per_node=1)
    r = replay("agnostic-las", wl, fleet)
    gb = job_checkpoint_gb(TYPES[0])
    assert r["preemptions"] > 2 and r["migrations"] == 0
    assert r["stall_leave_s"] == pytest.approx(r["preemptions"] * gb / 15.75)  # snapshot only, not + persist
    assert r["stall_restore_s"] == pytest.approx((r["restarts"] - 2) * gb / 15.75)  # DRAM copy, same node
    assert r["checkpoint_stall_s"] == pytest.approx(r["stall_periodic_s"] + r["stall_leave_s"] + r["stall_restore_s"])
    slow = replay("agnostic-las", wl, make_fleet([("v100", 1)], gpus_per_node=1, storage="remote-only"))
    assert slow["stall_leave_s"] == pytest.approx(slow["preemptions"] * gb / 1.25)  # synchronous remote write


def test_young_daly_interval_rule_in_the_replay() -> None:
    opts = ReplayOptions(interval_rule="young-daly", interruptions_per_gpu_hour=1.0)
    r = replay("agnostic", WL, FLEET, opts)
    want = []
    for j, jt in enumerate(TYPES):
        for c, node in enumerate(FLEET.nodes):  # one node per type: K80, V100
            rate = float(MATRIX.steps_per_s[j, 0, c])
            ref = checkpoint_cost(job_checkpoint_gb(jt), STORAGE.get("tiered"), node.gpu.pcie_gbs)
            want.append(young_daly_interval(1 / rate, ref.snapshot_s, ref.persist_s, 3600.0) / rate)
    assert r["mean_checkpoint_interval_s"] == pytest.approx(float(np.mean(want)), rel=1e-9)
    assert r["interval_rule"] == "young-daly"


def test_maxmin_lp_exact() -> None:
    x = maxmin_allocation(np.array([[1.0, 0.1], [1.0, 1.0]]), np.array([1, 1]))
    assert x == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0]]), abs=1e-6)
    x = maxmin_allocation(np.array([[1.0, 0.5], [1.0, 0.5], [1.0, 0.5]]), np.array([1, 1]))
    # three alike jobs share 1 + 0.5 units of normalised throughput: 0.5 each
    assert (x * np.array([1.0, 0.5])).sum(axis=1) == pytest.approx([0.5, 0.5, 0.5], abs=1e-6)


@pytest.fixture(scope="module")
def small_mix() -> Workload:
    return gavel_mix(default_matrix(), alibaba_gaps(data_file(DEFAULT_PODS)), jobs=30, jobs_per_hour=6.0, seed=1)


@pytest.mark.parametrize("policy", ["agnostic", "hetero-jct", "hetero-fair", "agnostic-las", "agnostic-fair"])
def test_gavel_mix_slice_every_job_finishes(small_mix: Workload, policy: str) -> None:
    fleet = make_fleet([("v100", 2), ("p100", 2), ("k80", 2)], gpus_per_node=2)
    r = replay(policy, small_mix, fleet)
    best = small_mix.steps / np.nanmax(small_mix.true_rate, axis=1)
    assert r["jobs"] == 30 and np.isfinite(r["avg_jct_s"])
    assert r["avg_jct_s"] >= best.mean() and r["p99_jct_s"] >= r["median_jct_s"]
    assert r["checkpoint_stall_s"] > 0
    if policy == "agnostic":
        assert r["migrations"] == 0 and r["preemptions"] == 0


def test_workload_follows_gavel_generator(small_mix: Workload) -> None:
    run_v100 = small_mix.steps / default_matrix().steps_per_s[small_mix.job_type, 0, 2]
    assert (run_v100 >= 60 * 10**1.5 - 1e-6).all() and (run_v100 <= 60 * 10**4 + 1e-6).all()
    assert small_mix.arrival[0] == 0 and np.all(np.diff(small_mix.arrival) >= 0)
    assert np.diff(small_mix.arrival).mean() == pytest.approx(600.0, rel=1e-9)  # 6 jobs/h
    with pytest.raises(InputError):
        gavel_mix(default_matrix(), np.array([1.0, 2.0]), jobs=0, jobs_per_hour=1.0, seed=0)


def test_bad_options() -> None:
    with pytest.raises(InputError):
        ReplayOptions(round_s=0)
    with pytest.raises(InputError, match="placement must be"):
        ReplayOptions(placement="random")
    with pytest.raises(InputError, match="interval rule must be one of checkfreq, young-daly") as ei:
        ReplayOptions(interval_rule="daily")
    assert ei.value.field == "interval_rule"
    with pytest.raises(InputError, match="must be > 0"):
        ReplayOptions(interruptions_per_gpu_hour=0.0)


def test_dram_staging_alone_stalls_as_much_as_the_nvme_cxl_tiers() -> None:
    # CheckFreq on a node with host DRAM but no NVMe/CXL: the same snapshot (PCIe-bound), the same interval
    # (the stall bound binds before the persist bound), the same network-bound restores; only the durable copy lags
    wl = Workload(np.zeros(3), np.array([0, 0, 1]), np.array([7_200.0, 9_000.0, 7_200.0]),
                  np.array([[1.0, 10.0], [1.0, 10.0], [5.0, 5.0]]), MATRIX)
    for rule in ("checkfreq", "young-daly"):
        runs = {s: replay("agnostic-las", wl, make_fleet([("k80", 1), ("v100", 1)], gpus_per_node=1, storage=s),
                          ReplayOptions(interval_layout=s, interval_rule=rule)) for s in ("tiered", "dram-remote")}
        assert runs["tiered"]["migrations"] > 0 and runs["tiered"]["stall_restore_s"] > 0
        for k in ("checkpoint_stall_s", "stall_periodic_s", "stall_leave_s", "stall_restore_s",
                  "mean_checkpoint_interval_s"):
            assert runs["dram-remote"][k] == pytest.approx(runs["tiered"][k], rel=1e-12), (rule, k)
        lag = "expected_rework_per_interruption_s"
        assert runs["dram-remote"][lag] > runs["tiered"][lag]

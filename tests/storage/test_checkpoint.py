"""Checkpoint sizes, tier placement, CheckFreq's rule, and impossible sizes."""

from __future__ import annotations

import math

import pytest

from seedance.core.errors import InputError
from seedance.storage.checkpoint import (
    LLAMA3_INTERRUPTIONS_PER_GPU_HOUR,
    checkfreq_interval,
    checkpoint_cost,
    checkpoint_gb,
    durable_lag_s,
    job_checkpoint_gb,
    leave_stall_s,
    periodic_stall_s,
    young_daly_interval,
)
from seedance.storage.tiers import STORAGE, Tier, custom


def test_sizes_from_parameters_and_optimiser() -> None:
    assert checkpoint_gb(25_557_032, "sgd-momentum") == pytest.approx(0.204456256)  # 8 B per parameter
    assert checkpoint_gb(1e9, "adam") == pytest.approx(12.0)  # 4 B weights + 8 B moments
    assert checkpoint_gb(8e9, "sgd", weight_bytes=2) == pytest.approx(16.0)
    assert job_checkpoint_gb("Transformer (batch size 128)") == pytest.approx(0.78)
    assert job_checkpoint_gb("ResNet-18 (batch size 32)") == pytest.approx(11_689_512 * 8 / 1e9)


@pytest.mark.parametrize(("params", "field"), [(0, "params"), (-5, "params"), (math.nan, "params"),
                                                (math.inf, "params"), (1e15, "params")])
def test_impossible_parameter_counts(params: float, field: str) -> None:
    with pytest.raises(InputError) as ei:
        checkpoint_gb(params, "adam", source="job.yaml")
    assert ei.value.field == field and ei.value.source == "job.yaml"


def test_bad_optimiser_and_unknown_family() -> None:
    with pytest.raises(InputError, match="unknown optimiser 'lion'; known: sgd, sgd-momentum, adam, adamw"):
        checkpoint_gb(1e6, "lion")
    with pytest.raises(InputError, match="no parameter count for 'GPT-5'"):
        job_checkpoint_gb("GPT-5")


def test_tier_placement_and_costs() -> None:
    tiered = STORAGE.get("tiered")
    c = checkpoint_cost(10.0, tiered, 15.75)
    # staging on DRAM (fastest write), bound by the GPU's PCIe 3.0 x16 link; persist DRAM -> NVMe at 3.8 GB/s
    assert (c.snapshot_tier, c.persist_tier) == ("dram", "nvme")
    assert c.snapshot_s == pytest.approx(10 / 15.75) and c.persist_s == pytest.approx(10 / 3.8)
    assert c.restore_s(tiered, 15.75, same_node=True, network_gbs=1.25) == pytest.approx(10 / 15.75)
    assert c.restore_s(tiered, 15.75, same_node=False, network_gbs=1.25) == pytest.approx(8.0)
    r = checkpoint_cost(10.0, STORAGE.get("remote-only"), 15.75)
    assert (r.snapshot_tier, r.snapshot_s, r.persist_s) == ("remote", pytest.approx(8.0), 0.0)
    # DRAM full -> CXL takes the snapshot
    small = custom("small", [Tier("dram", 4, 204.8, 204.8, "t"), Tier("cxl", 64, 63, 63, "t"),
                             Tier("nvme", 100, 7, 3.8, "t")])
    assert checkpoint_cost(10.0, small, 63.0).snapshot_tier == "cxl"
    assert checkpoint_cost(10.0, small, 63.0).snapshot_s == pytest.approx(10 / 63)


def test_checkpoint_larger_than_every_tier() -> None:
    small = custom("small", [Tier("dram", 4, 204.8, 204.8, "t"), Tier("nvme", 8, 7, 3.8, "t")])
    with pytest.raises(InputError, match="checkpoint of 10 GB fits no tier of 'small'") as ei:
        checkpoint_cost(10.0, small, 15.75)
    assert ei.value.field == "checkpoint_gb"
    with pytest.raises(InputError, match="must be > 0 GB"):
        checkpoint_cost(0.0, STORAGE.get("tiered"), 15.75)
    with pytest.raises(InputError, match="must be > 0") as e2:
        Tier("nvme", 100, 0.0, 3.8, "t")
    assert e2.value.field == "read_gbs"
    with pytest.raises(InputError, match="needs a persistent tier"):
        custom("volatile", [Tier("dram", 4, 204.8, 204.8, "t")])


def test_checkfreq_rule() -> None:
    # stall bound: 0.05 / (0.035 * 0.25) = 5.71 -> 6 iterations; persist 0.2 s fits in one iteration
    assert checkfreq_interval(0.25, 0.05, 0.2) == 6
    # persist 3 s needs 12 iterations of 0.25 s before the next snapshot
    assert checkfreq_interval(0.25, 0.05, 3.0) == 12
    assert checkfreq_interval(1.0, 0.0, 0.0) == 1
    with pytest.raises(InputError):
        checkfreq_interval(0.0, 0.1, 0.1)


def test_young_daly_rule() -> None:
    # sqrt(2 x 0.05 s x 1e6 s) = 316.2 s = 1264.9 iterations of 0.25 s -> 1265
    assert young_daly_interval(0.25, 0.05, 0.2, 1e6) == 1265
    # never under the persist (one checkpoint in flight) nor under one iteration
    assert young_daly_interval(0.25, 1e-9, 3.0, 1.0) == 12
    assert young_daly_interval(1.0, 0.0, 0.0, 1e6) == 1
    # stall ratio of two layouts at their own optimum: sqrt of their snapshot ratio (unclamped)
    fast, slow = young_daly_interval(0.1, 0.01, 0.0, 1e8), young_daly_interval(0.1, 0.16, 0.0, 1e8)
    assert (0.16 / slow) / (0.01 / fast) == pytest.approx(4.0, rel=1e-3)
    with pytest.raises(InputError) as ei:
        young_daly_interval(0.1, 0.01, 0.0, 0.0)
    assert ei.value.field == "young-daly"
    assert math.isclose(LLAMA3_INTERRUPTIONS_PER_GPU_HOUR, 1.973e-5, rel_tol=1e-3)


def test_leaving_the_gpu_stalls_for_the_snapshot_and_durability_lags_by_the_persist() -> None:
    gb = job_checkpoint_gb("ResNet-50 (batch size 64)")  # 0.2045 GB
    tiered = checkpoint_cost(gb, STORAGE.get("tiered"), 15.75)
    remote = checkpoint_cost(gb, STORAGE.get("remote-only"), 15.75)
    staged = checkpoint_cost(gb, STORAGE.get("dram-remote"), 15.75)
    assert leave_stall_s(tiered) == pytest.approx(gb / 15.75)  # GPU -> DRAM over PCIe 3.0 x16
    assert durable_lag_s(tiered) == pytest.approx(gb / 15.75 + gb / 3.8)  # + DRAM -> NVMe
    assert leave_stall_s(remote) == durable_lag_s(remote) == pytest.approx(gb / 1.25)  # synchronous remote write
    # CheckFreq on a node without NVMe/CXL: the same snapshot as tiered, a slower persist
    assert (staged.snapshot_tier, staged.persist_tier) == ("dram", "remote")
    assert leave_stall_s(staged) == leave_stall_s(tiered)
    assert durable_lag_s(staged) == pytest.approx(gb / 15.75 + gb / 1.25)


def test_a_staged_snapshot_may_overlap_the_next_iteration_a_synchronous_write_may_not() -> None:
    gb = 0.78  # Transformer: 65M parameters x 12 B
    tiered = checkpoint_cost(gb, STORAGE.get("tiered"), 15.75)  # snapshot 0.049524 s to DRAM, persist to NVMe
    remote = checkpoint_cost(gb, STORAGE.get("remote-only"), 15.75)  # synchronous 0.624 s to the remote store
    assert periodic_stall_s(tiered, 0.1) == tiered.snapshot_s == pytest.approx(0.78 / 15.75)  # default: none
    assert periodic_stall_s(tiered, 0.1, 0.25) == pytest.approx(0.78 / 15.75 - 0.025)  # 0.024524 s
    assert periodic_stall_s(tiered, 0.1, 0.5) == 0.0  # 0.0495 s hides in 0.05 s of forward/backward
    assert periodic_stall_s(remote, 0.1, 0.5) == remote.snapshot_s == pytest.approx(0.624)
    staged = checkpoint_cost(gb, STORAGE.get("dram-remote"), 15.75)
    assert periodic_stall_s(staged, 0.1, 0.25) == pytest.approx(0.78 / 15.75 - 0.025)
    with pytest.raises(InputError) as ei:
        periodic_stall_s(tiered, 0.1, 1.5)
    assert ei.value.field == "snapshot_overlap"

"""Slices: how a share of one GPU maps to MIG, MPS, time-slicing or a whole GPU, per tier."""

from __future__ import annotations

from dataclasses import replace

import pytest

from seedance.core.resources import ResourceRequest, SliceBackend
from seedance.slicing.mig import mig_gpu
from seedance.slicing.slices import (
    SLICE_PROVIDERS,
    Isolation,
    resolve_slice,
    smallest_profile,
)
from seedance.tiers import DEFAULT_TIER_CONFIG

MIG, MPS, TS, WHOLE = SliceBackend.MIG, SliceBackend.MPS, SliceBackend.TIME_SLICING, SliceBackend.WHOLE
MIG_POOL = (WHOLE, MIG)
SHARED_POOL = (WHOLE, MPS, TS)


def share(milli: int, *backends: SliceBackend) -> ResourceRequest:
    return ResourceRequest(cpu_milli=4000, memory_mib=8192, num_gpu=1, gpu_milli=milli, backends=backends)


@pytest.mark.parametrize(
    ("milli", "profile", "booked"),
    [
        (50, "1g.10gb", 142),
        (140, "1g.10gb", 142),
        (142, "1g.10gb", 142),
        (143, "2g.20gb", 285),
        (250, "2g.20gb", 285),
        (285, "2g.20gb", 285),
        (286, "3g.40gb", 428),
        (470, "4g.40gb", 571),
        (571, "4g.40gb", 571),
        (572, "7g.80gb", 1000),
        (810, "7g.80gb", 1000),
    ],
)
def test_mig_takes_the_smallest_profile_covering_the_compute_share(milli: int, profile: str, booked: int) -> None:
    s = resolve_slice(share(milli), "A100-80GB", MIG_POOL)
    assert s is not None
    assert (s.backend, s.profile, s.booked_milli, s.requested_milli) == (MIG, profile, booked, milli)
    assert s.isolation == Isolation.HARDWARE
    assert s.waste_milli == booked - milli


def test_mig_memory_need_picks_a_bigger_profile() -> None:
    g = mig_gpu("A100-80GB")
    assert smallest_profile(g, 100, 15.0).name == "1g.20gb"  # type: ignore[union-attr]
    assert smallest_profile(g, 300, 30.0).name == "3g.40gb"  # type: ignore[union-attr]
    assert smallest_profile(g, 100, 60.0).name == "7g.80gb"  # type: ignore[union-attr]
    assert smallest_profile(g, 100, 81.0) is None
    h = mig_gpu("H100-80GB")
    s = resolve_slice(share(100), "H100-80GB", MIG_POOL, memory_gib=15.0)
    assert s is not None and (s.profile, s.sm_count, s.memory_gib) == ("1g.20gb", 26, 19.62)
    assert smallest_profile(h, 100, media=True).name == "1g.10gb"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="1..1000"):
        smallest_profile(g, 0)


def test_mps_caps_threads_at_the_share_and_books_what_was_asked() -> None:
    s = resolve_slice(share(255), "T4", SHARED_POOL)
    assert s is not None
    assert (s.backend, s.thread_pct, s.booked_milli, s.isolation) == (MPS, 26, 255, Isolation.COMPUTE_CAP)
    s2 = resolve_slice(share(300, MPS), "A100-80GB", SHARED_POOL, memory_gib=20.0)
    assert s2 is not None and s2.memory_gib == 20.0
    assert resolve_slice(share(300, MPS), "T4", SHARED_POOL, memory_gib=20.0) is None  # T4 has 16 GiB


def test_time_slicing_isolates_nothing() -> None:
    s = resolve_slice(share(300, TS), "T4", SHARED_POOL)
    assert s is not None and (s.backend, s.booked_milli, s.isolation, s.thread_pct) == (TS, 300, "none", None)


def test_tier_backends_decide_what_a_share_gets() -> None:
    tiers = DEFAULT_TIER_CONFIG.tiers
    gold = share(300, *tiers["gold"].allowed_backends)
    silver = share(300, *tiers["silver"].allowed_backends)
    bronze = share(300, *tiers["bronze"].allowed_backends)
    # gold never shares: a whole GPU on any pool
    for pool in (MIG_POOL, SHARED_POOL):
        s = resolve_slice(gold, "A100-80GB", pool)
        assert s is not None and (s.backend, s.booked_milli) == (WHOLE, 1000)
    # silver: a MIG slice where MIG is offered, else a whole GPU (no MPS / time-slicing)
    assert resolve_slice(silver, "A100-80GB", MIG_POOL).backend is MIG  # type: ignore[union-attr]
    assert resolve_slice(silver, "A100-80GB", SHARED_POOL).backend is WHOLE  # type: ignore[union-attr]
    # bronze: the best isolation each pool offers
    assert resolve_slice(bronze, "A100-80GB", MIG_POOL).backend is MIG  # type: ignore[union-attr]
    assert resolve_slice(bronze, "A100-80GB", SHARED_POOL).backend is MPS  # type: ignore[union-attr]
    # nothing acceptable offered
    assert resolve_slice(share(300, MPS), "A100-80GB", MIG_POOL) is None


def test_mig_is_skipped_on_gpus_without_mig() -> None:
    assert resolve_slice(share(300, MIG), "T4", (MIG,)) is None
    assert resolve_slice(share(300), "V100-32GB", (MIG, WHOLE)).backend is WHOLE  # type: ignore[union-attr]


def test_whole_and_cpu_requests() -> None:
    whole = ResourceRequest(cpu_milli=1000, memory_mib=1024, num_gpu=2, gpu_milli=1000)
    s = resolve_slice(whole, "A100-80GB", MIG_POOL)
    assert s is not None and (s.backend, s.booked_milli) == (WHOLE, 1000)
    assert resolve_slice(replace(whole, backends=(MIG,)), "A100-80GB", MIG_POOL) is None
    assert resolve_slice(ResourceRequest(cpu_milli=1000, memory_mib=1024), "T4", SHARED_POOL) is None


def test_providers_are_registered_by_name() -> None:
    assert set(SLICE_PROVIDERS.names()) == {"whole", "mig", "mps", "time-slicing"}
    assert SLICE_PROVIDERS.get("TS") is SLICE_PROVIDERS.get("time-slicing")
    s = SLICE_PROVIDERS.get("mig")().resolve(250, "H200")
    assert s is not None and s.to_json()["profile"] == "2g.35gb"

"""Tier filters and request adaptation on hand-built clusters."""

from __future__ import annotations

import numpy as np

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.resources import ResourceRequest, SliceBackend
from seedance.tiers import DEFAULT_TIER_CONFIG
from seedance.tiers.filters import GpuModeFit, TierFilter, adapt_request, whole_gpu_request

GOLD = DEFAULT_TIER_CONFIG.tiers["gold"]
SILVER = DEFAULT_TIER_CONFIG.tiers["silver"]
BRONZE = DEFAULT_TIER_CONFIG.tiers["bronze"]
SHARE = ResourceRequest(cpu_milli=2000, memory_mib=4096, num_gpu=1, gpu_milli=460)
WHOLE2 = ResourceRequest(cpu_milli=2000, memory_mib=4096, num_gpu=2, gpu_milli=1000)
CPU_ONLY = ResourceRequest(cpu_milli=2000, memory_mib=4096)


def labelled(*nodes: tuple[str, str, dict[str, str]]) -> ClusterState:
    """Nodes ``(name, model, labels)`` with 4 GPUs, 32 cores, 128 GiB each."""
    return ClusterState(
        ClusterSpec(
            nodes=tuple(
                NodeSpec(name=n, cpu_milli=32000, memory_mib=131072, gpu_count=4, gpu_model=m, labels=lab)
                for n, m, lab in nodes
            )
        )
    )


def test_gold_share_becomes_one_whole_exclusive_gpu() -> None:
    r = adapt_request(SHARE, GOLD)
    assert (r.num_gpu, r.gpu_milli, r.backends) == (1, 1000, (SliceBackend.WHOLE,))
    assert adapt_request(WHOLE2, GOLD).backends == (SliceBackend.WHOLE,)
    assert adapt_request(CPU_ONLY, GOLD) == CPU_ONLY


def test_silver_and_bronze_keep_their_shares_with_their_backends() -> None:
    s = adapt_request(SHARE, SILVER)
    assert (s.gpu_milli, s.backends) == (460, (SliceBackend.WHOLE, SliceBackend.MIG))
    b = adapt_request(SHARE, BRONZE)
    assert b.gpu_milli == 460 and SliceBackend.TIME_SLICING in b.backends
    assert whole_gpu_request(b).gpu_milli == 1000 and whole_gpu_request(WHOLE2) is WHOLE2


def test_tier_filter_is_the_whitepaper_affinity() -> None:
    st = labelled(
        ("g", "T4", {"gpu.sla.level": "gold", "gpu.mode": "exclusive"}),
        ("g-shared", "T4", {"gpu.sla.level": "gold", "gpu.mode": "shared"}),
        ("s", "T4", {"gpu.sla.level": "silver", "gpu.mode": "exclusive"}),
        ("b", "T4", {"gpu.sla.level": "bronze", "gpu.mode": "shared"}),
        ("bare", "T4", {}),
    )
    gold = TierFilter.own("gold", GOLD)
    assert gold.mask(st, WHOLE2).tolist() == [True, False, False, False, False]
    assert gold.describe() == "gpu.sla.level in [gold] and gpu.mode in [exclusive]"
    assert TierFilter.own("silver", SILVER).mask(st, WHOLE2).tolist() == [False, False, True, False, False]
    assert TierFilter.borrowed("bronze", BRONZE).mask(st, WHOLE2).tolist() == [True, True, True, False, False]
    assert TierFilter({}).mask(st, WHOLE2).all()


def test_gpu_mode_keeps_shares_off_exclusive_nodes_and_mig_on_mig_gpus() -> None:
    st = labelled(
        ("ex", "A100-80GB", {"gpu.mode": "exclusive"}),
        ("mig-a100", "A100-80GB", {"gpu.mode": "mig"}),
        ("mig-t4", "T4", {"gpu.mode": "mig"}),  # T4 cannot do MIG: the label is not enough
        ("shared", "T4", {"gpu.mode": "shared"}),
        ("bare", "T4", {}),
    )
    f = GpuModeFit()
    assert f.mask(st, adapt_request(SHARE, SILVER)).tolist() == [False, True, False, False, True]
    assert f.mask(st, adapt_request(SHARE, BRONZE)).tolist() == [False, True, False, True, True]
    assert f.mask(st, WHOLE2).all() and f.mask(st, CPU_ONLY).all()
    only_ts = ResourceRequest(2000, 4096, 1, 460, backends=(SliceBackend.TIME_SLICING,))
    assert np.flatnonzero(f.mask(st, only_ts)).tolist() == [3, 4]


def test_gpu_mode_keeps_a_mig_only_share_off_unlabelled_gpus_that_cannot_do_mig() -> None:
    st = labelled(("bare-t4", "T4", {}), ("bare-a100", "A100-80GB", {}), ("shared", "T4", {"gpu.mode": "shared"}))
    f = GpuModeFit()
    only_mig = ResourceRequest(2000, 4096, 1, 50, backends=(SliceBackend.MIG,))
    assert f.mask(st, only_mig).tolist() == [False, True, False]
    mig_or_whole = ResourceRequest(2000, 4096, 1, 50, backends=(SliceBackend.WHOLE, SliceBackend.MIG))
    assert f.mask(st, mig_or_whole).tolist() == [True, True, False]
    only_mps = ResourceRequest(2000, 4096, 1, 50, backends=(SliceBackend.MPS,))
    assert f.mask(st, only_mps).tolist() == [True, True, True]


def test_gpu_mode_mask_is_the_per_node_rule_for_every_backend_set() -> None:
    import itertools

    nodes = [
        (f"{mode or 'bare'}-{model}", model, {"gpu.mode": mode} if mode else {})
        for mode in ("exclusive", "mig", "shared", "other", None)
        for model in ("A100-80GB", "T4")
    ]
    st = labelled(*nodes)
    f = GpuModeFit()

    def rule(mode: str | None, model: str, backends: set[SliceBackend]) -> bool:
        mig = SliceBackend.MIG in backends and model == "A100-80GB"
        shared = bool(backends & {SliceBackend.MPS, SliceBackend.TIME_SLICING})
        if mode == "exclusive":
            return False
        if mode == "mig":
            return mig
        if mode == "shared":
            return shared
        return mig or shared or SliceBackend.WHOLE in backends  # unlabelled (or an unknown mode)

    for k in range(len(SliceBackend) + 1):
        for combo in itertools.combinations(tuple(SliceBackend), k):
            req = ResourceRequest(2000, 4096, 1, 460, backends=combo)
            want = [rule(lab.get("gpu.mode"), model, set(combo or SliceBackend)) for _, model, lab in nodes]
            assert f.mask(st, req).tolist() == want, combo
    whole = f.mask(st, WHOLE2)
    assert whole.all() and not whole.flags.writeable  # the state's shared all-nodes mask

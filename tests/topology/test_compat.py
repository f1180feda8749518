"""CUDA compatibility matrix: exact verdicts, bad builds, and the pre-flight property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.hetero.fleet import Fleet, FleetNode, gpu_type
from seedance.hetero.stages import CompatFilter, FlopsPerDollarFallback, HeteroJob, ThroughputPerDollar, rank_nodes
from seedance.hetero.throughput import default_matrix
from seedance.storage.tiers import STORAGE
from seedance.topology.compat import TOOLKITS, CudaBuild, check


def test_sm89_needs_cuda_118() -> None:
    with pytest.raises(InputError, match=r"CUDA 11.2 cannot build sm_89 .*needs CUDA 11.8") as ei:
        CudaBuild.of("11.2", sass=["sm_89"])
    assert ei.value.field == "arch"
    assert CudaBuild.of("11.8", sass=["sm_89"]).sass == ((8, 9),)
    with pytest.raises(InputError, match="CUDA 12.4 cannot build sm_37"):
        CudaBuild.of("12.4", sass=["sm_37"])
    with pytest.raises(InputError, match="unknown CUDA toolkit '7.5'"):
        CudaBuild.of("7.5")
    with pytest.raises(InputError, match="not a sm_XY architecture"):
        CudaBuild.of("12.4", sass=["ampere"])


def test_exact_verdicts() -> None:
    new = (580, 65, 6)
    v = check(CudaBuild.of("11.8", sass=["sm_80"]), (8, 9), new)
    assert v.ok and not v.jit  # sm_80 SASS runs on 8.9 (same major, higher minor)
    v = check(CudaBuild.of("11.8", sass=["sm_86"]), (8, 0), new)
    assert not v.ok and "no code for compute capability 8.0" in v.reason  # not on a lower minor
    v = check(CudaBuild.of("11.8", sass=["sm_80"]), (9, 0), new)
    assert not v.ok  # SASS does not cross majors
    v = check(CudaBuild.of("11.8", sass=["sm_80"], ptx=["compute_80"]), (9, 0), new)
    assert v.ok and v.jit
    v = check(CudaBuild.of("12.4"), (3, 7), (470, 256, 2))
    assert not v.ok and v.reason == "CUDA 12.4 needs driver >= 525.60.13, the node has 470.256.2"
    v = check(CudaBuild.of("11.4"), (3, 7), (470, 256, 2))
    assert v.ok  # the fat binary of CUDA 11.4 carries sm_37
    v = check(CudaBuild.of("11.4"), (3, 7), (525, 60, 13))
    assert not v.ok and "no longer supports Kepler" in v.reason
    v = check(CudaBuild.of("11.2"), (8, 9), (470, 256, 2))
    assert not v.ok and "does not support compute capability 8.9 (needs >= 520.61.5)" in v.reason


GPUS = ["K80", "P100", "V100-16GB", "T4", "A10", "A100-80GB", "L40S", "H100-80GB"]
DRIVERS = [(410, 48), (450, 80, 2), (470, 256, 2), (525, 60, 13), (550, 54, 14), (580, 65, 6)]
ARCHS = ["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]


def _oracle(build: CudaBuild, cc: tuple[int, int], driver: tuple[int, ...]) -> bool:
    """The rules restated from NVIDIA's documentation, independently of ``check``."""
    # before CUDA 11 every toolkit needs its own GA driver; from 11 on, the major line's minimum
    own = {"9.0": (384, 81), "10.0": (410, 48), "10.2": (440, 33), "11.0": (450, 36, 6)}
    line = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580, 65, 6)}
    compat_min = own[build.cuda] if build.cuda in own else line[int(build.cuda.split(".")[0])]
    gpu_min = {(3, 7): (340,), (6, 0): (367, 48), (7, 0): (384, 81), (7, 5): (410, 48), (8, 0): (450, 36, 6),
               (8, 6): (455, 23), (8, 9): (520, 61, 5), (9, 0): (520, 61, 5)}[cc]
    if driver < compat_min or driver < gpu_min or (cc[0] == 3 and driver >= (471,)):
        return False
    return any(a == cc[0] and b <= cc[1] for a, b in build.sass) or any(p <= cc for p in build.ptx)


@st.composite
def builds(draw: st.DrawFn) -> CudaBuild:
    tk = draw(st.sampled_from(sorted(TOOLKITS)))
    t = TOOLKITS[tk]
    ok = [a for a in ARCHS if t.arch_min <= (int(a[3]), int(a[4:])) <= t.arch_max]
    sass = draw(st.lists(st.sampled_from(ok), max_size=3, unique=True))
    ptx = draw(st.lists(st.sampled_from(ok), max_size=1, unique=True))
    return CudaBuild.of(f"{tk[0]}.{tk[1]}", sass, ptx)


@settings(max_examples=300, deadline=None)
@given(build=builds(), nodes=st.lists(st.tuples(st.sampled_from(GPUS), st.sampled_from(DRIVERS)), min_size=1,
                                      max_size=6))
def test_no_job_is_ever_placed_on_a_gpu_its_toolkit_cannot_run(build: CudaBuild,
                                                                nodes: list[tuple[str, tuple[int, ...]]]) -> None:
    fleet_nodes = []
    for i, (g, drv) in enumerate(nodes):
        gt = gpu_type(g)
        if gt.compute_capability[0] == 3 and drv > (470, 999):
            drv = (470, 256, 2)  # a Kepler node cannot run a newer driver at all
        fleet_nodes.append(FleetNode(f"n{i}", gt, 4, drv, gt.tdp_w, STORAGE.get("tiered")))
    fleet = Fleet(tuple(fleet_nodes))
    job = HeteroJob(1, "ResNet-50 (batch size 64)", 1, build)
    ranked = rank_nodes(job, fleet, CompatFilter(), ThroughputPerDollar(_MATRIX), FlopsPerDollarFallback())
    chosen = {i for i, _, _ in ranked}
    for i, n in enumerate(fleet.nodes):
        can = _oracle(build, n.gpu.compute_capability, n.driver)
        assert (i in chosen) == can, (n.gpu.name, n.driver, build.describe())
        if i not in chosen:
            assert CompatFilter().reason(job, n)  # a refused node always has a reason


_MATRIX = default_matrix()


def test_throughput_per_dollar_and_fallback() -> None:
    nodes = tuple(FleetNode(f"n{g}", gpu_type(g), 4, (470, 256, 2) if g == "K80" else (580, 65, 6),
                            gpu_type(g).tdp_w, STORAGE.get("tiered")) for g in ("K80", "P100", "V100-16GB", "L40S"))
    fleet = Fleet(nodes)
    build = CudaBuild.of("11.4")
    job = HeteroJob(1, "ResNet-50 (batch size 64)", 1, build)
    ranked = rank_nodes(job, fleet, CompatFilter(), ThroughputPerDollar(_MATRIX), FlopsPerDollarFallback())
    # ResNet-50 bs64 steps/s per $/h: K80 0.619/0.45, P100 2.619/1.46, V100 4.395/3.06; L40S has no profile
    assert [fleet.nodes[i].gpu.name for i, _, _ in ranked] == ["P100", "V100-16GB", "K80", "L40S"]
    assert [stage for _, _, stage in ranked] == ["throughput-per-dollar"] * 3 + ["flops-per-dollar"]
    assert ranked[0][1] == pytest.approx(_MATRIX.rate("ResNet-50 (batch size 64)", 1, "p100") / 1.46)
    unknown = HeteroJob(2, None, 1, build)
    ranked = rank_nodes(unknown, fleet, CompatFilter(), ThroughputPerDollar(_MATRIX), FlopsPerDollarFallback())
    assert ranked[0][2] == "flops-per-dollar" and fleet.nodes[ranked[0][0]].gpu.name == "L40S"


def test_unknown_gpu_type() -> None:
    with pytest.raises(InputError, match="unknown GPU type 'Z100'; valid: K80, A10"):
        gpu_type("Z100")
    with pytest.raises(InputError, match="the throughput matrix has k80, p100, v100") as ei:
        _MATRIX.gpu_index("a100")
    assert ei.value.field == "gpu_type"

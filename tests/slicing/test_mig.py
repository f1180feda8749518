"""MIG facts and layout legality: the profile tables, the legal placements, every legal layout."""

from __future__ import annotations

import numpy as np
import pytest

from seedance.core.errors import InputError, UnknownNameError
from seedance.slicing.mig import (
    COMPUTE_SLICES,
    FULL_MASK,
    MEMORY_SLICES,
    Instance,
    OccupancyTables,
    check_layout,
    enumerate_layouts,
    geometry_name,
    is_legal,
    layout_mask,
    layout_problems,
    mig_gpu,
    mig_gpus,
)

MODELS = ["A100-40GB", "A100-80GB", "H100-80GB", "H200"]

# ``nvidia-smi mig -lgipp`` (MIG User Guide; same listing on H100): profile ID -> ({starts}, size)
LGIPP = {
    19: ((0, 1, 2, 3, 4, 5, 6), 1),
    20: ((0, 1, 2, 3, 4, 5, 6), 1),
    15: ((0, 2, 4, 6), 2),
    14: ((0, 2, 4), 2),
    9: ((0, 4), 4),
    5: ((0,), 4),
    0: ((0,), 8),
}

# MIG User Guide "Supported MIG Profiles": name -> (fraction of SMs in sevenths, instances available)
GUIDE = {
    "A100-40GB": {
        "1g.5gb": (1, 7), "1g.5gb+me": (1, 1), "1g.10gb": (1, 4), "2g.10gb": (2, 3),
        "3g.20gb": (3, 2), "4g.20gb": (4, 1), "7g.40gb": (7, 1),
    },
    "A100-80GB": {
        "1g.10gb": (1, 7), "1g.10gb+me": (1, 1), "1g.20gb": (1, 4), "2g.20gb": (2, 3),
        "3g.40gb": (3, 2), "4g.40gb": (4, 1), "7g.80gb": (7, 1),
    },
    "H100-80GB": {
        "1g.10gb": (1, 7), "1g.10gb+me": (1, 1), "1g.20gb": (1, 4), "2g.20gb": (2, 3),
        "3g.40gb": (3, 2), "4g.40gb": (4, 1), "7g.80gb": (7, 1),
    },
    "H200": {
        "1g.18gb": (1, 7), "1g.18gb+me": (1, 1), "1g.35gb": (1, 4), "2g.35gb": (2, 3),
        "3g.71gb": (3, 2), "4g.71gb": (4, 1), "7g.141gb": (7, 1),
    },
}  # fmt: skip

# SMs per profile from ``nvidia-smi mig -lgip`` outputs (H200's 1g.35gb is not confirmed: 26 assumed)
SMS = {
    "A100-40GB": (14, 14, 14, 28, 42, 56, 98),
    "A100-80GB": (14, 14, 14, 28, 42, 56, 98),
    "H100-80GB": (16, 16, 26, 32, 60, 64, 132),
    "H200": (16, 16, 26, 32, 60, 64, 132),
}


@pytest.mark.parametrize("model", MODELS)
def test_profiles_match_the_mig_user_guide(model: str) -> None:
    g = mig_gpu(model)
    assert {p.name: (p.compute_slices, p.max_instances) for p in g.profiles} == GUIDE[model]
    assert tuple(p.sm_count for p in g.profiles) == SMS[model]
    assert [p.profile_id for p in g.profiles] == [19, 20, 15, 14, 9, 5, 0]


@pytest.mark.parametrize("model", MODELS)
def test_placements_match_lgipp(model: str) -> None:
    for p in mig_gpu(model).profiles:
        starts, size = LGIPP[p.profile_id]
        assert (p.starts, p.memory_slices) == (starts, size), p.name


def test_names_aliases_and_unknown_models() -> None:
    assert mig_gpu("a100-sxm4-80gb").model == "A100-80GB"
    assert mig_gpu("H100").model == "H100-80GB"
    assert mig_gpu("A100-80GB").profile("MIG 3g.40gb").compute_slices == 3
    with pytest.raises(UnknownNameError, match="valid names: A100-40GB, A100-80GB, H100-80GB, H200"):
        mig_gpu("T4")
    with pytest.raises(UnknownNameError, match="valid names: 1g.10gb"):
        mig_gpu("A100-80GB").profile("5g.50gb")
    assert [g.model for g in mig_gpus()] == MODELS


def _brute_force_layouts(model: str) -> set[tuple[Instance, ...]]:
    """Every subset of the non-media placements whose memory slices do not overlap (numpy)."""
    cands = mig_gpu(model).placements(media=False)
    k = len(cands)
    subsets = np.arange(1 << k, dtype=np.int64)
    cover = np.zeros((k, MEMORY_SLICES), dtype=np.int64)
    for i, (p, s) in enumerate(cands):
        cover[i, s : s + p.memory_slices] = 1
    bits = (subsets[:, None] >> np.arange(k)) & 1
    legal = subsets[(bits @ cover <= 1).all(axis=1)]
    return {
        tuple(sorted((Instance(cands[i][0].name, cands[i][1]) for i in range(k) if m >> i & 1), key=lambda x: x.start))
        for m in legal.tolist()
    }


@pytest.mark.parametrize("model", ["A100-80GB", "H200"])
def test_enumeration_equals_brute_force_over_all_placement_subsets(model: str) -> None:
    g = mig_gpu(model)
    enumerated = {tuple(sorted(lay, key=lambda x: x.start)) for lay in enumerate_layouts(g)}
    assert enumerated == _brute_force_layouts(model)
    assert len(enumerated) == 723


@pytest.mark.parametrize("model", MODELS)
def test_every_enumerated_layout_is_legal_and_uses_at_most_seven_compute_slices(model: str) -> None:
    g = mig_gpu(model)
    layouts = enumerate_layouts(g, media=True)
    assert len(layouts) == 2319
    for lay in layouts:
        assert is_legal(g, lay)
        assert sum(g.profile(i.profile).compute_slices for i in lay) <= COMPUTE_SLICES
        assert sum(1 for i in lay if i.profile.endswith("+me")) <= 1
    maximal = enumerate_layouts(g, maximal=True)
    assert len(maximal) == 78
    # a maximal layout admits no further placement
    tables = OccupancyTables.build(g)
    assert all(tables.fits[layout_mask(g, lay)] == 0 for lay in maximal)


def test_a100_40gb_without_1g10gb_has_the_19_classic_configurations() -> None:
    from dataclasses import replace

    g = mig_gpu("A100-40GB")
    classic = replace(g, profiles=tuple(p for p in g.profiles if p.name != "1g.10gb"))
    maximal = enumerate_layouts(classic, maximal=True)
    assert len(maximal) == 19
    assert {geometry_name(lay) for lay in maximal} >= {
        "7g.40gb",
        "4g.20gb+3g.20gb",
        "3g.20gb+3g.20gb",
        "4g.20gb+2g.10gb+1g.5gb",
        "2g.10gb+2g.10gb+2g.10gb+1g.5gb",
        "1g.5gb+1g.5gb+1g.5gb+1g.5gb+1g.5gb+1g.5gb+1g.5gb",
    }


@pytest.mark.parametrize(
    "layout",
    [
        ["4g.40gb@0", "2g.20gb@4", "1g.10gb@6"],  # the guide's -lgi example (4g.20gb/2g.10gb/1g.5gb on 40GB)
        ["3g.40gb@0", "3g.40gb@4"],
        [f"1g.10gb@{s}" for s in range(7)],
        [f"1g.20gb@{s}" for s in (0, 2, 4, 6)],
        ["2g.20gb@0", "2g.20gb@2", "3g.40gb@4"],
        ["7g.80gb@0"],
        ["1g.10gb+me@3", "1g.10gb@0"],
    ],
)
def test_known_legal_layouts(layout: list[str]) -> None:
    check_layout(mig_gpu("A100-80GB"), [Instance.parse(x) for x in layout])


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        (["3g.40gb@2"], "may start only at [0, 4]"),
        (["4g.40gb@4"], "may start only at [0]"),
        (["1g.10gb@7"], "may start only at"),
        (["2g.20gb@6"], "may start only at [0, 2, 4]"),
        (["7g.80gb@0", "1g.10gb@6"], "overlaps"),
        (["4g.40gb@0", "3g.40gb@0"], "overlaps"),
        (["1g.10gb+me@0", "1g.10gb+me@1"], "exceeds its limit of 1"),
        (["1g.20gb@0", "1g.10gb@1"], "overlaps"),
        (["9g.90gb@0"], "unknown MIG profile"),
    ],
)
def test_known_illegal_layouts(layout: list[str], reason: str) -> None:
    g = mig_gpu("A100-80GB")
    insts = [Instance.parse(x) for x in layout]
    assert not is_legal(g, insts)
    assert any(reason in p for p in layout_problems(g, insts))
    with pytest.raises(InputError, match="layout"):
        check_layout(g, insts)


def test_instance_parse_rejects_garbage() -> None:
    assert Instance.parse(" MIG 3g.40gb@4 ") == Instance("3g.40gb", 4)
    with pytest.raises(InputError, match="PROFILE@START"):
        Instance.parse("3g.40gb")


def test_occupancy_tables_agree_with_a_direct_check() -> None:
    g = mig_gpu("A100-80GB")
    t = OccupancyTables.build(g)
    assert [p.name for p in t.profiles] == ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    for mask in range(FULL_MASK + 1):
        for j, p in enumerate(t.profiles):
            free = [s for s in p.starts if not mask & p.mask(s)]
            assert bool(t.fits[mask] >> j & 1) == bool(free)
            assert (int(t.start[mask, j]) in free) if free else t.start[mask, j] == -1
    assert t.potential[0] == 7 and t.potential[FULL_MASK] == 0
    # small instances go high, as the driver places them; 3g/4g/7g keep the low slices
    assert t.start[0, t.index["1g.10gb"]] == 6
    assert t.start[0, t.index["3g.40gb"]] == 4
    assert t.start[0, t.index["4g.40gb"]] == 0


def test_smallest_covering_profile_by_compute_then_memory() -> None:
    t = OccupancyTables.build(mig_gpu("A100-80GB"))
    name = [p.name for p in t.profiles]
    assert name[t.smallest_covering(142)] == "1g.10gb"  # 7 * 142 <= 1000
    assert name[t.smallest_covering(143)] == "2g.20gb"
    assert name[t.smallest_covering(100, 15.0)] == "1g.20gb"
    assert name[t.smallest_covering(100, 30.0)] == "3g.40gb"
    assert name[t.smallest_covering(572)] == "7g.80gb"
    assert t.smallest_covering(100, 90.0) == -1

"""Families cite every figure; the non-dominated filter and hypervolume are exact on hand-built fronts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.optimize.families import FAMILIES, PRECISIONS, EncoderShape, get_family
from seedance.optimize.pareto import REFERENCE, HyperBox, nondominated
from seedance.optimize.sources import SOURCES


def test_the_issue_s_families_exist_and_every_figure_cites_a_source() -> None:
    assert {"llama-3", "bert", "resnet", "detr"} <= set(FAMILIES.names())
    for name in FAMILIES.names():
        fam = FAMILIES.get(name)
        assert fam.variants and set(fam.precisions) <= set(PRECISIONS)
        for v in fam.variants:
            assert v.params > 0 and v.gflops > 0 and set(v.sources) <= set(SOURCES)
            assert "fp16" in v.accuracy
            for a in v.accuracy.values():
                assert a.sources and set(a.sources) <= set(SOURCES) and 0 < a.value < 100


def test_published_figures_and_recoveries() -> None:
    llama = get_family("llama3")  # alias
    v8, v70 = llama.variants
    assert round(v8.params / 1e9, 2) == 8.03 and round(v70.params / 1e9, 2) == 70.55  # the shapes' arithmetic
    assert v8.accuracy["fp16"].value == 68.4 and v70.accuracy["fp16"].value == 82.0
    assert v70.accuracy["w8a16"].value == pytest.approx(82.0 * 78.69 / 80.18, abs=1e-3)
    bert = get_family("bert").variant("bert-base")
    assert bert.accuracy["fp16"].value == 78.08
    assert bert.accuracy["int8"].value == pytest.approx(78.08 * 87.74 / 88.46, abs=1e-3)
    assert get_family("detr").variant("detr-r50").accuracy["fp16"].value == 42.0
    assert "int8" not in get_family("resnet").variant("resnet-34").accuracy  # nothing published
    assert EncoderShape(12, 768, 3072, 384).gflops == pytest.approx(
        (2 * 384 * 12 * (4 * 768**2 + 2 * 768 * 3072) + 12 * 4 * 384**2 * 768) / 1e9)


def test_unknown_family_lists_the_valid_ones() -> None:
    with pytest.raises(InputError, match="unknown family 'gpt-5'; valid: llama-3, bert, resnet, detr, yolo"):
        get_family("gpt-5")


def test_nondominated_on_a_hand_built_set() -> None:
    f = np.array([[1, 5, 0], [2, 2, 0], [3, 3, 0], [1, 5, 0], [5, 1, 0], [2, 2, -1]], dtype=float)
    # row 1 is dominated by row 5 (same cost and latency, better accuracy); rows 0 and 3 tie: first kept
    assert nondominated(f).tolist() == [0, 4, 5]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(*(st.integers(0, 6) for _ in range(3))), min_size=1, max_size=40))
def test_nondominated_equals_brute_force(points: list[tuple[int, int, int]]) -> None:
    f = np.array(points, dtype=float)
    got = set(map(tuple, f[nondominated(f)]))
    want = {tuple(a) for a in f if not any((b <= a).all() and (b < a).any() for b in f)}
    assert got == want


def test_hypervolume_of_a_hand_built_front() -> None:
    # two points; cost and latency are logged, so pick powers of ten
    exact = np.array([[1.0, 100.0, -80.0], [10.0, 10.0, -70.0]])
    box = HyperBox.of(exact)
    z = box.normalise(exact)
    assert z.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]
    r = REFERENCE
    # union of boxes [0,r]x[1,r]x[0,r] and [1,r]x[0,r]x[1,r]
    want = r * (r - 1) * r + (r - 1) * r * (r - 1) - (r - 1) * (r - 1) * (r - 1)
    assert box.hypervolume(exact) == pytest.approx(want)
    assert box.hypervolume(exact[:1]) < box.hypervolume(exact)
    assert box.hypervolume(np.zeros((0, 3))) == 0.0

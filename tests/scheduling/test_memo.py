"""ShapeMemo computes each shape's value once and grows with the shape ids."""

from __future__ import annotations

import numpy as np

from seedance.scheduling.memo import ShapeMemo


def test_each_shape_is_computed_once_and_the_table_grows() -> None:
    calls: list[list[int]] = []

    def compute(ids: np.ndarray) -> np.ndarray:
        calls.append(ids.tolist())
        return ids * 10.0

    memo = ShapeMemo()
    out = memo.lookup(np.array([3, 1, 3]), 5, compute)
    assert out.tolist() == [30.0, 10.0, 30.0] and calls == [[1, 3]]
    out = memo.lookup(np.array([1, 200]), 201, compute)
    assert out.tolist() == [10.0, 2000.0] and calls[-1] == [200]
    ints = ShapeMemo(np.int16, -1)
    assert ints.lookup(np.array([0, 0]), 1, lambda ids: ids + 7).tolist() == [7, 7]

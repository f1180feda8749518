"""The fragmentation sum's pairwise tree gives the bits of ``values.sum()`` after every write."""

from __future__ import annotations

import numpy as np
import pytest

from seedance.sim.metrics import PairwiseSum


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 128, 129, 1213, 8192, 8193, 19408])
def test_pairwise_sum_is_numpy_sum_after_random_writes(n: int) -> None:
    rng = np.random.default_rng(n)
    values = rng.random(n) * 7000.0 - rng.random(n)
    tree = PairwiseSum(values)
    assert tree.total == (float(values.sum()) if n else 0.0)
    for _ in range(200 if n else 0):
        i = int(rng.integers(n))
        v = float(rng.random() * 10.0 ** rng.integers(-3, 6))
        values[i] = v
        tree.set(i, v)
        assert tree.total == float(values.sum())  # bit for bit, not approximately
    assert np.array_equal(tree.values, values)


def test_pairwise_sum_differs_from_a_running_sum() -> None:
    """The tree is not a running total: with values of mixed magnitude the two round differently."""
    rng = np.random.default_rng(0)
    values = rng.random(5000) * 10.0 ** rng.integers(-6, 6, size=5000)
    tree = PairwiseSum(values)
    running = float(values.sum())
    for i in range(0, 5000, 7):
        running += 1.0 / 3.0 - float(values[i])
        values[i] = 1.0 / 3.0
        tree.set(i, 1.0 / 3.0)
    assert tree.total == float(values.sum()) != running

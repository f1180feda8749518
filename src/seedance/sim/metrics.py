"""Metric series and their discretisation (the FGD paper's bucketing by arrived workload)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def bucket_by_arrival(
    arrived_milli: NDArray[np.int64],
    used_milli: NDArray[np.int64],
    frag_milli: NDArray[np.float64],
    total_gpus: int,
    top: int,
) -> tuple[list[int], list[float | None], list[float | None]]:
    """Bucket per-event rows by arrived % of capacity (columns ``0..top``).

    Each event's arrived % is ``round(arrived / total_gpus / 10)`` (half to even) and its
    allocation ``round(used / total_gpus / 10, 2)``. A column is the mean over its events; a
    column with no event falls back to the events within ±1; otherwise it is ``None``.
    Fragmentation is reported as % of cluster GPU capacity.

    Returns:
        ``(columns, alloc_pct, frag_pct)``.
    """
    arrive = np.round(arrived_milli / total_gpus / 10.0).astype(np.int64)
    alloc = np.round(used_milli / total_gpus / 10.0, 2)
    cols = list(range(top + 1))
    a_out: list[float | None] = []
    f_out: list[float | None] = []
    # group rows per integer bucket once
    order = np.argsort(arrive, kind="stable")
    sa = arrive[order]
    for c in cols:
        lo, hi = np.searchsorted(sa, c, "left"), np.searchsorted(sa, c, "right")
        if hi <= lo:
            lo, hi = np.searchsorted(sa, c - 1, "left"), np.searchsorted(sa, c + 1, "right")
        if hi <= lo:
            a_out.append(None)
            f_out.append(None)
            continue
        rows = order[lo:hi]
        a_out.append(round(float(alloc[rows].mean()), 2))
        f_out.append(round(float(100.0 * frag_milli[rows].mean() / 1000.0 / total_gpus), 2))
    return cols, a_out, f_out


#: Most elements numpy's pairwise summation adds in one unrolled block (``PW_BLOCKSIZE``).
_PW_BLOCK = 128


class PairwiseSum:
    """``float(values.sum())`` of a float64 array kept current under single-element writes.

    numpy sums a contiguous float64 array pairwise: a block of at most 128 elements in eight
    interleaved partial sums, a longer range split at half its length rounded down to a multiple
    of 8 and the halves' sums added. This keeps that tree: a write re-sums its leaf block with
    numpy (the same bits as the block's part of the whole sum) and re-adds the leaf's ancestors,
    so :attr:`total` is bit for bit ``values.sum()`` at the cost of one block, not the array
    (``tests/sim/test_metrics.py`` checks it against ``values.sum()`` after random writes).

    Args:
        values: The initial values (copied).
    """

    __slots__ = ("_left", "_leaf_of", "_parent", "_right", "_span", "_sums", "values")

    def __init__(self, values: NDArray[np.float64]) -> None:
        self.values: NDArray[np.float64] = np.array(values, dtype=np.float64)
        self._span: list[tuple[int, int]] = []
        self._left: list[int] = []
        self._right: list[int] = []
        self._parent: list[int] = []
        self._sums: list[float] = []
        self._leaf_of = np.zeros(self.values.size, dtype=np.int64)
        self._build(0, self.values.size, -1)

    def _build(self, lo: int, n: int, parent: int) -> int:
        node = len(self._span)
        self._span.append((lo, lo + n))
        self._parent.append(parent)
        self._left.append(-1)
        self._right.append(-1)
        self._sums.append(0.0)
        if n <= _PW_BLOCK:
            self._leaf_of[lo : lo + n] = node
            self._sums[node] = float(self.values[lo : lo + n].sum())
        else:
            half = n // 2
            half -= half % 8
            left = self._left[node] = self._build(lo, half, node)
            right = self._right[node] = self._build(lo + half, n - half, node)
            self._sums[node] = self._sums[left] + self._sums[right]
        return node

    @property
    def total(self) -> float:
        """The sum of :attr:`values`, as ``float(values.sum())`` gives it."""
        return self._sums[0] if self._sums else 0.0

    def set(self, i: int, value: float) -> None:
        """Write ``values[i] = value`` and bring :attr:`total` up to date."""
        values, sums, parent, left, right = self.values, self._sums, self._parent, self._left, self._right
        values[i] = value
        node = int(self._leaf_of[i])
        lo, hi = self._span[node]
        sums[node] = float(values[lo:hi].sum())
        node = parent[node]
        while node >= 0:
            sums[node] = sums[left[node]] + sums[right[node]]
            node = parent[node]

"""Memo tables indexed by node shape id.

A :class:`~seedance.core.cluster.ClusterState` names every distinct node shape with an id that never
changes meaning, so anything that depends only on the shape (a fragmentation value, a node score
for one request) can be computed once per shape and looked up by id afterwards.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

Ids = NDArray[np.int64]


class ShapeMemo:
    """Values per shape id, computed on first use.

    Args:
        dtype: Value type.
        missing: Sentinel for "not computed yet" (NaN for floats; a value never computed otherwise).
    """

    __slots__ = ("_missing", "_vals")

    def __init__(self, dtype: type[np.generic] = np.float64, missing: float = np.nan) -> None:
        self._missing = missing
        self._vals: NDArray[np.generic] = np.full(64, missing, dtype=dtype)

    def lookup(self, sids: Ids, n_shapes: int, compute: Callable[[Ids], NDArray[np.generic]]) -> NDArray[np.generic]:
        """Values of ``sids``; ``compute(ids)`` fills the ones not known yet (each id once)."""
        if n_shapes > len(self._vals):
            grown = np.full(max(n_shapes, 2 * len(self._vals)), self._missing, dtype=self._vals.dtype)
            grown[: len(self._vals)] = self._vals
            self._vals = grown
        vals = self._vals[sids]
        unknown = np.isnan(vals) if np.isnan(self._missing) else vals == self._missing
        if unknown.any():
            todo = np.unique(sids[unknown])
            self._vals[todo] = compute(todo)
            vals = self._vals[sids]
        return vals

"""Pareto fronts and hypervolume on one normalised scale shared by the exact front and NSGA-II.

Objectives are minimised: ``[cost, p95 latency, -accuracy]``. Cost and latency span orders of
magnitude, so the hypervolume is taken on ``[log10 cost, log10 p95, -accuracy]``, each rescaled to
``[0, 1]`` by the ideal and nadir of the **exact** front (the same box for every front compared),
with the reference point at 1.1 in every coordinate: a front's hypervolume ratio is then the share
of the exact front's dominated volume it covers. (Monotone transforms change no dominance
relation, so the fronts are the same sets as in the raw objectives.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

REFERENCE = 1.1


def transform(f: NDArray[np.float64]) -> NDArray[np.float64]:
    """``[cost, p95, -acc]`` -> ``[log10 cost, log10 p95, -acc]``."""
    f = np.asarray(f, dtype=np.float64)
    return np.column_stack([np.log10(f[:, 0]), np.log10(f[:, 1]), f[:, 2]])


def nondominated(f: NDArray[np.float64]) -> NDArray[np.int64]:
    """Indices of the rows of ``f`` no other row dominates (ties: the first of equal rows is kept)."""
    f = np.asarray(f, dtype=np.float64)
    n = len(f)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    keep = np.ones(n, dtype=bool)
    for start in range(0, n, 512):
        blk = f[start:start + 512]
        le = np.all(f[None, :, :] <= blk[:, None, :], axis=2)
        lt = np.any(f[None, :, :] < blk[:, None, :], axis=2)
        dominated = np.any(le & lt, axis=1)
        keep[start:start + 512] &= ~dominated
    idx = np.flatnonzero(keep)
    _, first = np.unique(f[idx], axis=0, return_index=True)
    return idx[np.sort(first)].astype(np.int64)


@dataclass(frozen=True, slots=True)
class HyperBox:
    """The normalisation box: ideal and nadir of the exact front in transformed objectives."""

    ideal: NDArray[np.float64]
    nadir: NDArray[np.float64]

    @classmethod
    def of(cls, exact_f: NDArray[np.float64]) -> HyperBox:
        """The box of an exact front (raw objectives)."""
        t = transform(exact_f)
        ideal, nadir = t.min(axis=0), t.max(axis=0)
        nadir = np.where(nadir - ideal > 1e-12, nadir, ideal + 1.0)
        return cls(ideal, nadir)

    def normalise(self, f: NDArray[np.float64]) -> NDArray[np.float64]:
        """Raw objectives -> the unit box."""
        return (transform(f) - self.ideal) / (self.nadir - self.ideal)

    def hypervolume(self, f: NDArray[np.float64]) -> float:
        """Hypervolume of the points of ``f`` (raw objectives) against the reference point."""
        from pymoo.indicators.hv import HV

        if len(f) == 0:
            return 0.0
        z = self.normalise(f)
        z = z[(z < REFERENCE).all(axis=1)]
        if len(z) == 0:
            return 0.0
        return float(HV(ref_point=np.full(z.shape[1], REFERENCE))(z))

"""Round-based allocation policies of the heterogeneous replay (Gavel-style), registered by name.

Every round (Gavel's default: 360 s) a policy sees a :class:`RoundView` (active jobs, what each has
received, the *profiled* throughput matrix; never a job's true length or true speed) and returns which
jobs run on which GPU type this round. Each family has a heterogeneity-agnostic twin that treats every
GPU as the same (Gavel compares its policies with exactly such versions):

* ``hetero-fair`` / ``agnostic-fair``: max-min fairness. Aware: Gavel's LP over the allocation matrix
  ``X[j, k]`` (share of the round job ``j`` spends on type ``k``), maximising the minimum normalised
  throughput ``sum_k X[j,k] T[j,k] / max_k T[j,k]`` (secondary: their sum), subject to
  ``sum_k X[j,k] <= 1`` and ``sum_j X[j,k] <= GPUs of k`` (scipy ``linprog``, HiGHS). Agnostic: equal
  time shares, spread over types in proportion to their GPU counts. Rounds realise ``X`` with Gavel's
  priorities ``X[j,k] / share of rounds received on k``.
* ``hetero-jct`` / ``agnostic-las``: least attained service first (no job lengths needed). The jobs with
  the least attained service fill the GPUs; aware: they are assigned to types maximising total
  normalised throughput (``linear_sum_assignment``), a move of a running job charged the migration
  planner's cost over its expected remaining time (attained service, the LAS assumption); agnostic:
  running jobs stay, new ones fill free GPUs in fleet order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from seedance.core.registry import Registry


@dataclass(frozen=True, slots=True, eq=False)
class RoundView:
    """What a policy knows at a round boundary (arrays over the active jobs).

    Attributes:
        jobs: Active job ids.
        profile: ``(J, K)`` profiled steps/s of each job on each type (``nan``: cannot run there).
        attained_s: GPU-seconds each job has run (all types alike).
        attained_norm_s: Seconds weighted by ``profile / max profile`` (best-type-equivalent seconds).
        current: Type each job ran on last round (``-1`` none).
        received: ``(J, K)`` rounds each job has run on each type.
        rounds_active: Rounds each job has been active.
        capacity: GPUs per type.
        migration_s: ``(J, K)`` planner cost (s) of moving each job to each type now.
        round_s: Round length.
    """

    jobs: NDArray[np.int64]
    profile: NDArray[np.float64]
    attained_s: NDArray[np.float64]
    attained_norm_s: NDArray[np.float64]
    current: NDArray[np.int64]
    received: NDArray[np.float64]
    rounds_active: NDArray[np.float64]
    capacity: NDArray[np.int64]
    migration_s: NDArray[np.float64]
    round_s: float


class RoundPolicy(ABC):
    """Returns ``assign[j]`` = type index for each active job this round, ``-1`` = does not run."""

    aware: bool = True

    @abstractmethod
    def allocate(self, view: RoundView) -> NDArray[np.int64]: ...


ROUND_POLICIES: Registry[type[RoundPolicy]] = Registry("heterogeneous replay policy")


def _normalised(profile: NDArray[np.float64]) -> NDArray[np.float64]:
    best = np.nanmax(profile, axis=1, keepdims=True)
    return np.asarray(np.nan_to_num(profile / best, nan=0.0), dtype=np.float64)


def maxmin_allocation(norm: NDArray[np.float64], capacity: NDArray[np.int64]) -> NDArray[np.float64]:
    """Gavel's max-min fairness LP over normalised throughputs ``norm`` (J x K), sparse constraints."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    n_jobs, n_types = norm.shape
    nx = n_jobs * n_types
    c = np.zeros(nx + 1)
    c[-1] = -1.0
    c[:-1] = -1e-3 * norm.ravel()  # secondary objective: total normalised throughput
    var = np.arange(nx)
    job_of, type_of = var // n_types, var % n_types
    # rows: [0, J) sum_k X_jk <= 1; [J, J+K) sum_j X_jk <= cap_k; [J+K, 2J+K) t - sum_k norm X <= 0
    r = np.concatenate([job_of, n_jobs + type_of, n_jobs + n_types + job_of, n_jobs + n_types + np.arange(n_jobs)])
    col = np.concatenate([var, var, var, np.full(n_jobs, nx)])
    val = np.concatenate([np.ones(nx), np.ones(nx), -norm.ravel(), np.ones(n_jobs)])
    a = coo_matrix((val, (r, col)), shape=(2 * n_jobs + n_types, nx + 1)).tocsr()
    b = np.concatenate([np.ones(n_jobs), capacity.astype(np.float64), np.zeros(n_jobs)])
    bounds = np.column_stack([np.zeros(nx + 1), np.append(np.where(norm.ravel() > 0, 1.0, 0.0), np.inf)])
    res = linprog(c, A_ub=a, b_ub=b, bounds=bounds, method="highs")
    if not res.success:  # X = 0 is feasible, so this is a solver failure: run nobody rather than guess
        return np.zeros_like(norm)
    return np.asarray(res.x[:-1], dtype=np.float64).reshape(n_jobs, n_types)


def realise(x: NDArray[np.float64], view: RoundView) -> NDArray[np.int64]:
    """Gavel's round mechanism: highest ``X / share of rounds received`` first, within capacities."""
    share = (view.received + 1.0) / (view.rounds_active[:, None] + 1.0)
    prio = np.where(x > 1e-6, x / share, -np.inf)
    free = view.capacity.astype(np.int64).copy()
    assign = np.full(len(view.jobs), -1, dtype=np.int64)
    for flat in np.argsort(-prio, axis=None, kind="stable"):
        j, k = divmod(int(flat), x.shape[1])
        if not np.isfinite(prio[j, k]):
            break
        if assign[j] < 0 and free[k] > 0:
            assign[j] = k
            free[k] -= 1
    return assign


@ROUND_POLICIES.register("hetero-fair")
class HeteroFair(RoundPolicy):
    """Gavel max-min fairness over normalised throughput."""

    def __init__(self) -> None:
        self._last: tuple[tuple[int, ...], NDArray[np.float64]] | None = None

    def allocate(self, view: RoundView) -> NDArray[np.int64]:
        key = tuple(view.jobs.tolist())
        if self._last is None or self._last[0] != key:  # X depends only on the active set: solve on change
            self._last = (key, maxmin_allocation(_normalised(view.profile), view.capacity))
        return realise(self._last[1], view)


@ROUND_POLICIES.register("agnostic-fair")
class AgnosticFair(RoundPolicy):
    """Equal time shares with every GPU alike (Gavel's heterogeneity-agnostic max-min fairness: one pooled
    type); the jobs furthest behind their share run, on their current type when it has room."""

    aware = False

    def allocate(self, view: RoundView) -> NDArray[np.int64]:
        total = int(view.capacity.sum())
        share = min(1.0, total / max(len(view.jobs), 1))
        received = view.received.sum(axis=1)
        prio = share / ((received + 1.0) / (view.rounds_active + 1.0))
        admitted = np.argsort(-prio, kind="stable")[:total]
        return _fill(admitted, view)


def _fill(admitted: NDArray[np.intp], view: RoundView) -> NDArray[np.int64]:
    """Admitted jobs keep their current type when it has room; the others take free GPUs in fleet order."""
    free = view.capacity.astype(np.int64).copy()
    assign = np.full(len(view.jobs), -1, dtype=np.int64)
    for j in admitted:
        k = int(view.current[j])
        if k >= 0 and free[k] > 0 and not np.isnan(view.profile[j, k]):
            assign[j] = k
            free[k] -= 1
    for j in admitted:
        if assign[j] >= 0:
            continue
        for k in range(len(free)):
            if free[k] > 0 and not np.isnan(view.profile[j, k]):
                assign[j] = k
                free[k] -= 1
                break
    return assign


@ROUND_POLICIES.register("hetero-jct")
class HeteroJct(RoundPolicy):
    """Least attained (normalised) service first, placed on the types that run them relatively fastest."""

    def allocate(self, view: RoundView) -> NDArray[np.int64]:
        from scipy.optimize import linear_sum_assignment

        norm = _normalised(view.profile)
        admitted = np.argsort(view.attained_norm_s, kind="stable")[: int(view.capacity.sum())]
        slots = np.repeat(np.arange(len(view.capacity)), view.capacity)
        gain = norm[np.ix_(admitted, slots)].copy()
        cur = view.current[admitted]
        horizon = np.maximum(view.attained_norm_s[admitted], view.round_s)
        moving = (cur[:, None] >= 0) & (slots[None, :] != cur[:, None])
        penalty = view.migration_s[np.ix_(admitted, slots)] / horizon[:, None]
        gain = np.where(moving, gain - penalty, gain + 1e-6)
        gain[norm[np.ix_(admitted, slots)] <= 0] = -1e9
        rows, cols = linear_sum_assignment(-gain)
        assign = np.full(len(view.jobs), -1, dtype=np.int64)
        ok = gain[rows, cols] > -1e8
        assign[admitted[rows[ok]]] = slots[cols[ok]]
        return assign


@ROUND_POLICIES.register("agnostic-las")
class AgnosticLas(RoundPolicy):
    """Least attained GPU-seconds first; running jobs keep their type, others fill free GPUs in fleet order."""

    aware = False

    def allocate(self, view: RoundView) -> NDArray[np.int64]:
        admitted = np.argsort(view.attained_s, kind="stable")[: int(view.capacity.sum())]
        return _fill(admitted, view)

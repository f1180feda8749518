"""The hindsight-optimal purchase plan: an exact MILP over the whole window (HiGHS via SciPy).

Decision space: the same as every other policy's, whole units of each term bought at the start of
a decision epoch, with terms that end inside the window. With the true demand known, minimise

    sum_{e,k} x[e,k] * rate_k * term_k  +  overflow_price * sum_t max(0, d_t - R_e(t))

where ``R_e`` is the number of units in force in epoch ``e``. Within an epoch ``R_e`` is constant
(terms are whole numbers of epochs), so the hours of the epoch enter only through their sorted
demand values: for each distinct value ``v`` seen ``n_v`` times in epoch ``e`` one continuous
``o[e,v] >= v - R_e, >= 0`` costs ``overflow_price * n_v``. This is the hourly program, aggregated
without loss. Solved to optimality (MIP gap 0) by HiGHS, ``scipy.optimize.milp``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from seedance.core.errors import InputError
from seedance.reservations.accounting import EPOCH_HOURS, Plan, allowed_terms, n_epochs
from seedance.reservations.demand import DemandWindow
from seedance.reservations.pricing import TERM_HOURS, TERMS, ReservationPrices


@dataclass(frozen=True, slots=True)
class MilpResult:
    """The optimal plan and facts about the solve."""

    plan: Plan
    objective: float
    status: str
    mip_gap: float
    variables: int
    integer_variables: int
    constraints: int
    solve_s: float


def hindsight_optimal(window: DemandWindow, prices: ReservationPrices, *, epoch_hours: int = EPOCH_HOURS,
                      time_limit_s: float = 600.0) -> MilpResult:
    """Solve the hindsight MILP for ``window``; see the module docstring."""
    d = np.asarray(window.values, dtype=np.int64)
    hours = len(d)
    ne = n_epochs(hours, epoch_hours)
    for t in prices.terms:
        if TERM_HOURS[t] % epoch_hours:
            raise InputError(f"the {t} term is not a whole number of {epoch_hours} h epochs", field="epoch_hours")
    xs = [(e, k) for e in range(ne) for k, ok in enumerate(allowed_terms(e, hours, prices, epoch_hours)) if ok]
    cols_o: list[tuple[int, int, int]] = []  # (epoch, value, count)
    for e in range(ne):
        seg = d[e * epoch_hours:(e + 1) * epoch_hours]
        vals, counts = np.unique(seg[seg > 0], return_counts=True)
        cols_o.extend((e, int(v), int(c)) for v, c in zip(vals, counts, strict=True))
    nx, no = len(xs), len(cols_o)
    cost = np.empty(nx + no)
    for i, (_e, k) in enumerate(xs):
        cost[i] = prices.commitments[TERMS[k]] * TERM_HOURS[TERMS[k]]
    p_over = prices.overflow
    cost[nx:] = [p_over * c for _, _, c in cols_o]
    # covering[e] = the x columns in force in epoch e
    covering: list[list[int]] = [[] for _ in range(ne)]
    for i, (e0, k) in enumerate(xs):
        span = TERM_HOURS[TERMS[k]] // epoch_hours
        for e in range(e0, min(ne, e0 + span)):
            covering[e].append(i)
    rows, cols, data = [], [], []
    lb = np.empty(no)
    for j, (e, v, _c) in enumerate(cols_o):
        rows.append(j)
        cols.append(nx + j)
        data.append(1.0)
        for i in covering[e]:
            rows.append(j)
            cols.append(i)
            data.append(1.0)
        lb[j] = v
    a = sparse.csr_array((data, (rows, cols)), shape=(no, nx + no))
    upper = np.concatenate([np.full(nx, float(d.max(initial=0))), np.full(no, np.inf)])
    integrality = np.concatenate([np.ones(nx), np.zeros(no)])
    t0 = time.perf_counter()
    res = milp(cost, constraints=[LinearConstraint(a, lb, np.inf)] if no else [], integrality=integrality,
               bounds=Bounds(np.zeros(nx + no), upper),
               options={"time_limit": time_limit_s, "mip_rel_gap": 0.0, "disp": False})
    solve_s = time.perf_counter() - t0
    if res.x is None:
        raise InputError(f"the hindsight MILP found no solution: {res.message}", field="milp")
    buys = np.zeros((ne, len(TERMS)), dtype=np.int64)
    for i, (e, k) in enumerate(xs):
        buys[e, k] = int(round(res.x[i]))
    gap = float(getattr(res, "mip_gap", 0.0) or 0.0)
    status = "optimal" if res.status == 0 else f"stopped: {res.message}"
    return MilpResult(plan=Plan(buys, epoch_hours), objective=float(res.fun), status=status, mip_gap=gap,
                      variables=nx + no, integer_variables=nx, constraints=no, solve_s=solve_s)

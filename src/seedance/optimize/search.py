"""The exact Pareto front by enumeration, and NSGA-II (pymoo) over the same grid.

Genes are the six integer grid coordinates (variant, precision, GPU, count, batch, mode). NSGA-II
uses integer random sampling, SBX crossover and polynomial mutation with rounding repair (pymoo's
recipe for integer variables), rank-and-crowding survival and duplicate elimination. Constraints:
the point is a deployment (``reason == ok``), ``p95 <= slo``, ``accuracy >= min``. Objectives in the
search are ``[log10 cost, log10 p95, -accuracy]`` (same dominance as the raw ones; crowding works
on comparable scales).

The whitepaper's settings (§3.1) are the defaults: population 100, 200 generations, crossover
probability 0.9, mutation probability 0.2. NSGA-II's front is the final population's feasible
non-dominated set (its size is bounded by the population); ``archive=True`` keeps every feasible
non-dominated point evaluated during the run instead (an external archive, as in SPEA2 / PAES).
``mating_tries`` bounds how often one generation re-mates to replace duplicate offspring (pymoo
retries up to 100 times; on integer genes SBX often rounds children back onto their parents, and in
a grid of a few hundred to two thousand points the retries then dominate the run time).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.optimize.pareto import HyperBox, nondominated
from seedance.optimize.space import OK, DeploymentSpace


@dataclass(frozen=True, slots=True)
class NsgaSettings:
    """NSGA-II settings (whitepaper §3.1 by default)."""

    pop_size: int = 100
    generations: int = 200
    crossover: float = 0.9
    mutation: float = 0.2
    sbx_eta: float = 15.0
    pm_eta: float = 20.0
    archive: bool = False
    mating_tries: int = 3

    def __post_init__(self) -> None:
        if self.pop_size < 4 or self.generations < 1:
            raise InputError("population must be >= 4 and generations >= 1", source="--pop/--generations")
        if self.mating_tries < 1:
            raise InputError("mating_tries must be >= 1", source="--mating-tries")
        if not (0.0 <= self.crossover <= 1.0 and 0.0 <= self.mutation <= 1.0):
            raise InputError("crossover and mutation probabilities must be in [0, 1]", source="--crossover")


@dataclass(frozen=True, slots=True)
class Slo:
    """The SLO constraints."""

    latency_ms: float | None = None
    min_accuracy: float | None = None


@dataclass(frozen=True, slots=True)
class ExactFront:
    """The exact front of the feasible grid points."""

    indices: NDArray[np.int64]
    feasible: int
    seconds: float


def exact_front(space: DeploymentSpace, slo: Slo) -> ExactFront:
    """Enumerate every grid point, keep the feasible ones, return their non-dominated set."""
    t0 = time.perf_counter()
    ok = np.flatnonzero(space.feasible(slo.latency_ms, slo.min_accuracy))
    if len(ok) == 0:
        raise InputError(infeasible_reason(space, slo), source="--slo-ms/--min-accuracy")
    f = space.objectives(ok)
    front = ok[nondominated(f)]
    return ExactFront(front, int(len(ok)), time.perf_counter() - t0)


def infeasible_reason(space: DeploymentSpace, slo: Slo) -> str:
    """Which constraint binds when no deployment meets the SLO."""
    fam = space.family
    dep = space.reason == OK
    if not dep.any():
        return f"no {fam.name} configuration fits on any GPU of the space"
    best_acc = float(np.nanmax(np.where(dep, space.accuracy, np.nan)))
    if slo.min_accuracy is not None and best_acc < slo.min_accuracy:
        return (f"the accuracy floor binds: the best published {fam.metric} in the {fam.name} family is "
                f"{best_acc:g} < {slo.min_accuracy:g}")
    pool = dep if slo.min_accuracy is None else dep & (space.accuracy >= slo.min_accuracy)
    i = int(np.argmin(np.where(pool, space.p95_ms, np.inf)))
    c = space.config(i)
    what = "" if slo.min_accuracy is None else f" with {fam.metric} >= {slo.min_accuracy:g}"
    j = int(np.argmin(np.where(dep, space.p95_ms, np.inf)))
    alone = ""
    if slo.min_accuracy is not None and space.p95_ms[j] <= (slo.latency_ms or np.inf):
        alone = f"; without the accuracy floor {space.config(j)['variant']} meets it ({space.p95_ms[j]:.1f} ms)"
    return (f"the latency bound binds: the fastest configuration{what} has p95 {c['p95_ms']:.1f} ms > "
            f"{slo.latency_ms:g} ms ({c['variant']} {c['precision']} on {c['count']} x {c['gpu']}, batch "
            f"{c['batch']}, {c['mode']}){alone}")


@dataclass(frozen=True, slots=True)
class NsgaResult:
    """One NSGA-II run."""

    indices: NDArray[np.int64]
    seconds: float
    evaluations: int
    seed: int


def _problem(space: DeploymentSpace, slo: Slo) -> Any:
    from pymoo.core.problem import Problem

    shape = np.array(space.shape)
    big = 1e9

    class DeployProblem(Problem):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(n_var=len(shape), n_obj=3, n_ieq_constr=3, xl=np.zeros(len(shape)),
                             xu=shape - 1.0, vtype=int)
            self.seen: list[NDArray[np.int64]] = []

        def _evaluate(self, x: NDArray[np.float64], out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            idx = space.flat(np.rint(x).astype(np.int64))
            self.seen.append(idx)
            dep = space.reason[idx] == OK
            cost = np.where(dep, space.cost[idx], big)
            lat = np.where(dep, space.p95_ms[idx], big)
            acc = np.where(dep, space.accuracy[idx], -big)
            out["F"] = np.column_stack([np.log10(cost), np.log10(lat), -acc])
            g1 = np.where(dep, 0.0, 1.0)
            g2 = (lat - slo.latency_ms) / slo.latency_ms if slo.latency_ms is not None else np.zeros(len(idx))
            g3 = ((slo.min_accuracy - acc) / max(abs(slo.min_accuracy), 1.0) if slo.min_accuracy is not None
                  else np.zeros(len(idx)))
            out["G"] = np.column_stack([g1, np.where(dep, g2, 1.0), np.where(dep, g3, 1.0)])

    return DeployProblem()


def run_nsga2(space: DeploymentSpace, slo: Slo, settings: NsgaSettings = NsgaSettings(), seed: int = 1) -> NsgaResult:
    """One NSGA-II run; returns the grid indices of its (feasible, non-dominated) front."""
    from pymoo.algorithms.moo.nsga2 import NSGA2, binary_tournament
    from pymoo.core.duplicate import DefaultDuplicateElimination
    from pymoo.core.mating import Mating
    from pymoo.core.repair import NoRepair
    from pymoo.operators.crossover.sbx import SBX
    from pymoo.operators.mutation.pm import PM
    from pymoo.operators.repair.rounding import RoundingRepair
    from pymoo.operators.sampling.rnd import IntegerRandomSampling
    from pymoo.operators.selection.tournament import TournamentSelection
    from pymoo.optimize import minimize

    problem = _problem(space, slo)
    crossover = SBX(prob=settings.crossover, eta=settings.sbx_eta, vtype=float, repair=RoundingRepair())
    mutation = PM(prob=settings.mutation, eta=settings.pm_eta, vtype=float, repair=RoundingRepair())
    dedup = DefaultDuplicateElimination()
    # pymoo's NSGA2 defaults, except how often one generation retries mating to replace duplicates
    # (100 in pymoo): in a grid of a few hundred points the population soon holds most of them, and
    # 100 retries per generation cost more than the whole search
    mating = Mating(TournamentSelection(func_comp=binary_tournament), crossover, mutation, repair=NoRepair(),
                    eliminate_duplicates=dedup, n_max_iterations=settings.mating_tries)
    algo = NSGA2(pop_size=settings.pop_size, sampling=IntegerRandomSampling(), crossover=crossover, mutation=mutation,
                 eliminate_duplicates=dedup, mating=mating)
    t0 = time.perf_counter()
    res = minimize(problem, algo, ("n_gen", settings.generations), seed=seed, verbose=False)
    secs = time.perf_counter() - t0
    if settings.archive:
        cand = np.unique(np.concatenate(problem.seen))
    else:
        pop_x = res.pop.get("X")
        cand = np.unique(space.flat(np.rint(pop_x).astype(np.int64)))
    cand = cand[space.feasible(slo.latency_ms, slo.min_accuracy)[cand]]
    front = cand[nondominated(space.objectives(cand))] if len(cand) else cand
    evals = int(sum(len(s) for s in problem.seen))
    return NsgaResult(front.astype(np.int64), secs, evals, seed)


def hv_ratio(space: DeploymentSpace, exact: ExactFront, found: NDArray[np.int64]) -> tuple[float, float, float]:
    """(hypervolume of ``found``, of the exact front, ratio) on the exact front's box."""
    box = HyperBox.of(space.objectives(exact.indices))
    ex = box.hypervolume(space.objectives(exact.indices))
    hv = box.hypervolume(space.objectives(found)) if len(found) else 0.0
    return hv, ex, (hv / ex if ex > 0 else 0.0)



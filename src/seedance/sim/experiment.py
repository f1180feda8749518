"""Experiment sweeps: policies × traces × seeds, optionally over worker processes.

Each run is independent and deterministic given (trace, policy, seed), so results do not depend
on the number of workers or their order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from seedance.profile import ProfileConfig
from seedance.sim.inflation import InflationRun, run_inflation
from seedance.traces.alibaba import load_nodes, load_pods

S = TypeVar("S")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run of a sweep."""

    nodes: str
    pods: str
    policy: str
    seed: int
    ratio: float
    arrived_max: int | None
    profile: ProfileConfig | None = None


def execute(run: RunSpec) -> InflationRun:
    """Run one inflation experiment (in this process; files are re-read, ~0.1 s)."""
    spec = load_nodes(run.nodes)
    trace = load_pods(run.pods)
    return run_inflation(
        spec,
        trace,
        run.policy,
        run.seed,
        ratio=run.ratio,
        arrived_max=run.arrived_max,
        trace_name=Path(run.pods).stem.removeprefix("openb_pod_list_"),
        profile=run.profile,
    )


def sweep(
    runs: Sequence[S],
    *,
    workers: int = 1,
    progress: Callable[[R], None] | None = None,
    execute: Callable[[S], R] = execute,  # type: ignore[assignment]
) -> list[R]:
    """Execute ``runs`` with ``execute`` (a module-level function, so workers can pickle it).

    Results come back in the order of ``runs``, whatever the number of workers.
    """
    results: list[R | None] = [None] * len(runs)
    if workers <= 1:
        for i, r in enumerate(runs):
            results[i] = res = execute(r)
            if progress:
                progress(res)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futs = {pool.submit(execute, r): i for i, r in enumerate(runs)}
            for fut in as_completed(futs):
                res = fut.result()
                results[futs[fut]] = res
                if progress:
                    progress(res)
    return [r for r in results if r is not None]

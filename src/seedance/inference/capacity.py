"""SLO capacity: the highest load at which a policy still keeps the SLO, and its goodput there.

Goodput at one fixed load cannot exceed that load: when every policy keeps up, each serves the
offered requests per second and the figures tie. The whitepaper's QPS comparison is a capacity
comparison (how many requests per second a fixed set of replicas serves), and so is vLLM's and
Orca's "throughput at the same latency". :func:`slo_capacity` finds it by replaying the same
trace at increasing arrival-rate scales: it doubles the scale until the run misses the SLO, then
bisects (in log scale) to a relative precision ``tol``. The SLO is monotone in load only
approximately (a trace's bursts land differently at each scale), so the search reports the
highest passing scale it saw.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class CapacityResult:
    """The outcome of a capacity search for one policy.

    Attributes:
        rate_scale: Highest scale that kept the SLO (0 if none did).
        row: The result row at that scale (``None`` if none passed).
        tried: ``(scale, meets_slo)`` of every run.
    """

    rate_scale: float
    row: dict[str, Any] | None
    tried: list[tuple[float, bool]] = field(default_factory=list)


def slo_capacity(
    run_at: Callable[[float], dict[str, Any]], *, start: float = 1.0, tol: float = 0.03, max_runs: int = 24,
    floor: float = 1e-4,
) -> CapacityResult:
    """Search the highest rate scale at which ``run_at(scale)["meets_slo"]`` holds.

    Args:
        run_at: Runs the simulation at a rate scale and returns its result row.
        start: First scale tried.
        tol: Stop when the passing and failing scales are within this ratio.
        max_runs: Upper bound on simulations.
        floor: Give up below this scale.
    """
    tried: list[tuple[float, bool]] = []
    best: tuple[float, dict[str, Any]] | None = None
    lo = hi = None
    s = start
    while len(tried) < max_runs:
        row = run_at(s)
        ok = bool(row["meets_slo"])
        tried.append((s, ok))
        if ok:
            if best is None or s > best[0]:
                best = (s, row)
            lo = s if lo is None else max(lo, s)
        else:
            hi = s if hi is None else min(hi, s)
        if lo is None:
            if s < floor:
                break
            s = s / 2.0
        elif hi is None:
            s = s * 2.0
        elif hi / lo <= 1.0 + tol:
            break
        else:
            s = math.sqrt(lo * hi)
    if best is None:
        return CapacityResult(0.0, None, tried)
    return CapacityResult(best[0], best[1], tried)

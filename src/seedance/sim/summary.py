"""Summaries of sweeps: per (trace, policy) means over seeds, beside the paper's numbers."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from seedance.sim.inflation import InflationRun
from seedance.sim.paper import PaperResults


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """Mean over seeds of one (trace, policy)."""

    trace: str
    policy: str
    seeds: tuple[int, ...]
    unallocated_mean: float | None
    unallocated_sd: float | None
    frag_mean: float | None
    paper_unallocated: float | None
    wall_s_mean: float
    bound: float | None = None

    @property
    def delta(self) -> float | None:
        """Ours minus the paper's, in percentage points."""
        if self.unallocated_mean is None or self.paper_unallocated is None:
            return None
        return round(self.unallocated_mean - self.paper_unallocated, 2)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready record."""
        return {
            "trace": self.trace,
            "policy": self.policy,
            "seeds": list(self.seeds),
            "unallocated_pct_at_100_mean": self.unallocated_mean,
            "unallocated_pct_at_100_sd": self.unallocated_sd,
            "frag_pct_at_100_mean": self.frag_mean,
            "paper_unallocated_pct_at_100": self.paper_unallocated,
            "delta_pp": self.delta,
            "bound_unallocated_pct": self.bound,
            "gap_to_bound_pp": None
            if self.bound is None or self.unallocated_mean is None
            else round(self.unallocated_mean - self.bound, 2),
            "wall_s_mean": round(self.wall_s_mean, 3),
        }


def summarize(
    runs: Sequence[InflationRun], paper: PaperResults | None = None, bounds: dict[str, float] | None = None
) -> list[SummaryRow]:
    """Group ``runs`` by (trace, policy) in first-seen order and average over seeds."""
    groups: dict[tuple[str, str], list[InflationRun]] = {}
    for r in runs:
        groups.setdefault((r.trace, r.policy), []).append(r)
    rows = []
    for (trace, policy), rs in groups.items():
        un = [r.unallocated_pct_at_100 for r in rs if r.unallocated_pct_at_100 is not None]
        fr = [r.frag_pct[100] for r in rs if len(r.frag_pct) > 100 and r.frag_pct[100] is not None]
        seeds = tuple(r.seed for r in rs)
        rows.append(
            SummaryRow(
                trace=trace,
                policy=policy,
                seeds=seeds,
                unallocated_mean=round(statistics.fmean(un), 2) if un else None,
                unallocated_sd=round(statistics.stdev(un), 2) if len(un) > 1 else None,
                frag_mean=round(statistics.fmean(fr), 2) if fr else None,
                paper_unallocated=paper.unallocated_at(trace, policy, seeds=list(seeds)) if paper else None,
                wall_s_mean=statistics.fmean(r.wall_s for r in rs),
                bound=(bounds or {}).get(trace),
            )
        )
    return rows

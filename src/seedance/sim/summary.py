"""Summaries of sweeps: per (trace, policy) means over seeds, beside the paper's numbers."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    bill_alloc_usd_h: float | None = None
    cluster_usd_h: float | None = None

    @property
    def bill_idle_usd_h(self) -> float | None:
        """Idle $/h at 100 % arrived: cluster cost minus what the policy's placements are billed."""
        if self.bill_alloc_usd_h is None or self.cluster_usd_h is None:
            return None
        return round(self.cluster_usd_h - self.bill_alloc_usd_h, 2)

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
            "bill_allocated_usd_h": self.bill_alloc_usd_h,
            "bill_idle_usd_h": self.bill_idle_usd_h,
            "bill_total_usd_h": self.cluster_usd_h,
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
        usd = [r.alloc_usd_h_at_100 for r in rs if r.alloc_usd_h_at_100 is not None]
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
                bill_alloc_usd_h=round(statistics.fmean(usd), 2) if usd else None,
                cluster_usd_h=rs[0].cluster_usd_h if usd else None,
            )
        )
    return rows


def summary_cells(payload: Mapping[str, Any], with_bound: bool = False) -> list[list[str]]:
    """The summary table's cells: policies, then each trace's offline bound. Every cell says something:
    ``n/a`` where a figure does not exist (the paper has no ``seedance`` run; an LP has no fragmentation)."""
    out = []
    for s in payload["summary"]:
        cells = [s["trace"], s["policy"], str(len(s["seeds"])), _f(s["unallocated_pct_at_100_mean"]),
                 _f(s["unallocated_pct_at_100_sd"]), _f(s["paper_unallocated_pct_at_100"]), _f(s["delta_pp"])]
        cells += [_f(s["frag_pct_at_100_mean"]), _usd(s.get("bill_allocated_usd_h")), _usd(s.get("bill_idle_usd_h")),
                  _usd(s.get("bill_total_usd_h")), _f(s["wall_s_mean"])]
        out.append(cells)
    for b in payload.get("bound_summary") or []:
        cells = [b["trace"], "bound (LP)", str(len(b["seeds"])), _f(b["unallocated_pct_at_100_mean"]),
                 _f(b["unallocated_pct_at_100_sd"]), "n/a", "n/a"]
        cells += ["n/a", _usd(b["bill_allocated_usd_h"]), _usd(b["bill_idle_usd_h"]), _usd(b["bill_total_usd_h"]),
                  _f(b["wall_s_mean"])]
        out.append(cells)
    return out


SUMMARY_HEADS = ("trace", "policy", "n", "ours %", "sd", "paper %", "Δ pp")
BOUND_HEADS: tuple[str, ...] = ()  # the bound is a row of its own (``gap_to_bound_pp`` stays in the JSON)
TAIL_HEADS = ("frag %", "alloc $/h", "idle $/h", "total $/h", "wall s")


def _f(v: Any) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _usd(v: Any) -> str:
    return "n/a" if v is None else f"{v:,.0f}"

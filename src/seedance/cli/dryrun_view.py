"""Terminal view of a store dry run (``scheduler policy enable --dry-run``): the diff as rich tables."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text


def _num(v: Any, fmt: str = ",.2f") -> str:
    return "-" if v is None else format(v, fmt)


def render_dry_run(p: dict[str, Any]) -> list[Any]:
    """Header line, the metric table, the per-tier table and a sample of the jobs placed differently."""
    w = p["window"]
    head = (f"dry run of {p['policy']!r} on cluster {p['cluster']} (jobs submitted {w['since']} .. {w['until']}); "
            "nothing was changed")
    if "empty" in p:
        return [Text(head), Text(f"nothing to replay: {p['empty']}")]
    a, b, d = p["current"], p["proposed"], p["diff"]
    out: list[Any] = [Text(head), Text(
        f"{p['jobs']:,} jobs on {p['nodes']} nodes ({p['gpus']} GPUs), replay variant {p['variant']}; "
        f"current {a['policy']} ({a['placement']}, {a['queue_order']}) vs proposed {b['policy']} "
        f"({b['placement']}, {b['queue_order']})")]
    t = Table(title="what would change")
    for col in ("metric", "current", "proposed", "change"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    t.add_row("GPU cost (held GPU-hours x catalog $)", f"${_num(a['gpu_cost_usd'])}", f"${_num(b['gpu_cost_usd'])}",
              f"{_num(d['gpu_cost_usd'], '+,.2f')} ({_num(d['gpu_cost_change_pct'], '+.2f')}%)")
    t.add_row("  share of the cluster's cost", "", "", f"{_num(d['gpu_cost_share_of_cluster_cost_pct'], '+.3f')}%")
    t.add_row("$ per GPU-hour served", _num(a["unit_cost_usd_per_gpu_hour"], ".4f"),
              _num(b["unit_cost_usd_per_gpu_hour"], ".4f"), f"{_num(d['unit_cost_change_pct'], '+.2f')}%")
    t.add_row("SLA attainment (all tiers)", f"{a['sla_attainment_pct']:.2f}%", f"{b['sla_attainment_pct']:.2f}%",
              f"{d['sla_attainment_pp']:+.2f} pp")
    t.add_row("queueing delay, mean", f"{a['queue_delay']['all']['mean_s']:,.1f} s",
              f"{b['queue_delay']['all']['mean_s']:,.1f} s", f"{d['queue_delay_mean_s']:+,.1f} s")
    t.add_row("queueing delay, p95", f"{a['queue_delay']['all']['p95_s']:,.1f} s",
              f"{b['queue_delay']['all']['p95_s']:,.1f} s", f"{d['queue_delay_p95_s']:+,.1f} s")
    t.add_row("preemptions", str(a["preemptions"]), str(b["preemptions"]), f"{d['preemptions']:+d}")
    t.add_row("jobs that ran", f"{a['jobs_run']:,}", f"{b['jobs_run']:,}", f"{d['jobs_run']:+,d}")
    t.add_row("jobs placed differently", "", "", f"{d['placed_differently']:,}")
    out.append(t)
    tiers = Table(title="SLA attainment per tier (share of jobs at or above the tier's availability target)")
    for col in ("tier", "jobs", "target", "current", "proposed", "change"):
        tiers.add_column(col, justify="left" if col == "tier" else "right")
    for name, v in d["tiers"].items():
        tiers.add_row(name, f"{v['jobs']:,}", f"{a['tiers'][name]['target_pct']:g}%", f"{v['current_pct']:.2f}%",
                      f"{v['proposed_pct']:.2f}%", f"{v['change_pp']:+.2f} pp")
    out.append(tiers)
    if d["placed_differently_sample"]:
        moved = Table(title=f"jobs placed differently (first {len(d['placed_differently_sample'])})")
        for col in ("job", "current", "proposed"):
            moved.add_column(col)
        for m in d["placed_differently_sample"]:
            moved.add_row(m["job"], m["current"] or "not run", m["proposed"] or "not run")
        out.append(moved)
    comp = p.get("compliance")
    if comp:
        bad = [f"{f['rule']} {f['line']}:{f['column']}" for f in comp["findings"] if f["level"] == "error"
               and not f["suppressed"]]
        out.append(Text("compliance: " + ("errors " + ", ".join(bad) + " (enable would be refused)" if bad
                                          else "no errors")))
    return out

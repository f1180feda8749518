"""HTML reports with plots, written beside the JSON they are drawn from."""

from __future__ import annotations

import base64
import html
import io
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seedance.sim.inflation import InflationRun
from seedance.sim.summary import BOUND_HEADS, SUMMARY_HEADS, TAIL_HEADS, SummaryRow, summary_cells

_CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td:first-child,td:nth-child(2){text-align:left}"
)


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def allocation_figure(runs: Sequence[InflationRun], trace: str) -> Any:
    """Allocation % vs arrived % per policy (mean over seeds) for one trace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    by_policy: dict[str, list[InflationRun]] = {}
    for r in runs:
        if r.trace == trace:
            by_policy.setdefault(r.policy, []).append(r)
    for policy, rs in by_policy.items():
        cols = rs[0].arrived_pct
        vals = np.array([[np.nan if v is None else v for v in r.alloc_pct] for r in rs], dtype=float)
        with warnings.catch_warnings():  # columns with no event in any seed stay NaN (a gap in the line)
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(vals, axis=0)
        ax.plot(cols, mean, label=policy, linewidth=1.4)
    top = max((r.arrived_pct[-1] for r in runs if r.trace == trace), default=130)
    ax.plot([0, top], [0, top], color="grey", linewidth=0.6, linestyle=":", label="arrived")
    ax.set_xlabel("arrived GPU request (% of cluster GPUs)")
    ax.set_ylabel("GPU allocation (%)")
    ax.set_title(f"trace {trace}: allocation vs arrived workload (mean over seeds)")
    ax.set_xlim(50, top)
    ax.set_ylim(50, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def write_inflation_report(
    directory: str | Path,
    runs: Sequence[InflationRun],
    summary: Sequence[SummaryRow],
    payload: dict[str, Any],
    *,
    title: str = "Seedance simulation report",
) -> Path:
    """Write ``report.html`` and ``results.json`` into ``directory``; returns the HTML path."""
    import json

    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")
    traces = list(dict.fromkeys(r.trace for r in runs))
    figs = []
    for t in traces:
        fig = allocation_figure(runs, t)
        figs.append((t, _png(fig)))
        plt.close(fig)
    with_bound = bool(payload.get("bounds"))
    heads = [*SUMMARY_HEADS, *(BOUND_HEADS if with_bound else ()), *TAIL_HEADS]
    head_html = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in cells) + "</tr>"
        for cells in summary_cells(payload, with_bound)
    )
    imgs = "".join(
        f'<h3>{html.escape(t)}</h3><img alt="allocation vs arrived, {html.escape(t)}" '
        f'src="data:image/png;base64,{b64}"/>'
        for t, b64 in figs
    )
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_CSS}</style>
</head><body><h1>{html.escape(title)}</h1>
<p>Inflation mode (FGD paper semantics): pods are submitted in a seeded random order until the arrived GPU
request reaches the target share of cluster GPU capacity; nothing departs. "Unallocated" is 100 − GPU
allocation % when the arrived request equals 100% of capacity, averaged over seeds. The paper column is
computed from the FGD authors' published per-seed results for the same seeds.</p>
<p>Bill: $ per hour at 100% arrived. <i>alloc</i> is what the pods a policy placed are billed (OpenCost's
rules: GPU by the fraction placed at the node's $/GPU-h, CPU per core, memory per GiB; catalog list prices,
CPU and RAM at OpenCost's default rates; the trace's undisclosed G1/G2/G3 GPUs priced as their catalog
proxies), <i>idle</i> what nobody is billed for, <i>total</i> the cluster. The offline bound's row is the
linear relaxation solved once for GPU (its unallocated %) and once for allocated $/h (its bill): no policy
can do better than either. {html.escape(str(payload.get("bill_note", "")))}</p>
<table><tr>{head_html}</tr>{rows}</table>
{imgs}
<p>Data: <code>results.json</code> beside this file.</p></body></html>"""
    path = out / "report.html"
    path.write_text(doc, encoding="utf-8")
    return path


def write_replay_report(directory: str | Path, runs: Sequence[Any], payload: dict[str, Any]) -> Path:
    """Write ``report.html`` (allocation over time per run) and ``results.json`` into ``directory``."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")
    fig, ax = plt.subplots(figsize=(8, 4))
    for r in runs:
        days = [t / 86400.0 for t in r.timeline_t]
        ax.plot(days, r.timeline_alloc_pct, label=f"{r.trace}/{r.policy}/s{r.seed}", linewidth=1.0)
    ax.set_xlabel("trace time (days)")
    ax.set_ylabel("GPU allocation (% of cluster)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    img = _png(fig)
    plt.close(fig)
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (
                r.trace,
                r.policy,
                r.seed,
                r.n_nodes,
                r.total_gpus,
                r.pods,
                r.scheduled,
                r.never_scheduled,
                r.utilization_pct,
                r.queue_delay_s_mean,
                r.queue_delay_s_p99,
            )
        )
        + "</tr>"
        for r in runs
    )
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>Seedance replay report</title>
<style>{_CSS}</style>
</head><body><h1>Seedance replay report</h1><p>Capacity scale {payload.get("capacity_scale")}.</p>
<table><tr><th>trace</th><th>policy</th><th>seed</th><th>nodes</th><th>GPUs</th><th>pods</th><th>scheduled</th>
<th>never scheduled</th><th>utilization %</th><th>queue delay mean s</th><th>p99 s</th></tr>{rows}</table>
<img alt="allocation over time" src="data:image/png;base64,{img}"/></body></html>"""
    path = out / "report.html"
    path.write_text(doc, encoding="utf-8")
    return path

"""HTML report of a deployment search: an interactive 3-D Pareto plot (plotly) and the front's table.

The page is self-contained (plotly.js inlined), so it opens offline. Every deployable grid point is
drawn in grey, the exact front in blue and NSGA-II's front in red; hovering shows the deployment.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np

from seedance.optimize.space import OK, DeploymentSpace

_COLS = ("variant", "precision", "gpu", "count", "batch", "mode", "cost", "p95_ms", "accuracy", "throughput_rps",
         "gflops_per_request", "usd_per_gpu_hour")


def _label(c: dict[str, Any]) -> str:
    return (f"{c['variant']} {c['precision']} {c['count']}x{c['gpu']} b{c['batch']} {c['mode']}<br>"
            f"cost {c['cost']:.4g} p95 {c['p95_ms']:.4g} ms acc {c['accuracy']:.4g}")


def pareto_figure(space: DeploymentSpace, exact: np.ndarray[Any, Any], found: np.ndarray[Any, Any]) -> Any:
    """The plotly figure: deployable points, the exact front, NSGA-II's front."""
    import plotly.graph_objects as go

    dep = np.flatnonzero(space.reason == OK)
    unit = "$ / 1k requests" if space.options.cost == "usd" else "GFLOPs / request"
    fig = go.Figure()
    for name, idx, color, size, symbol in (("deployable", dep, "lightgray", 2, "circle"),
                                           ("exact front", exact, "royalblue", 5, "circle"),
                                           ("NSGA-II front", found, "crimson", 4, "diamond")):
        cfg = [space.config(int(i)) for i in idx]
        fig.add_trace(go.Scatter3d(
            x=space.cost[idx], y=space.p95_ms[idx], z=space.accuracy[idx], mode="markers", name=name,
            marker={"size": size, "color": color, "symbol": symbol, "opacity": 0.5 if name == "deployable" else 0.9},
            text=[_label(c) for c in cfg], hoverinfo="text"))
    fig.update_layout(
        title=f"{space.family.name}: cost / p95 latency / {space.family.metric}", height=720,
        scene={"xaxis": {"title": unit, "type": "log"}, "yaxis": {"title": "p95 latency (ms)", "type": "log"},
               "zaxis": {"title": space.family.metric}}, legend={"x": 0.0, "y": 1.0})
    return fig


def _table(rows: list[dict[str, Any]], cols: tuple[str, ...] = _COLS) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_report(folder: str | Path, payload: dict[str, Any], space: DeploymentSpace, exact: np.ndarray[Any, Any],
                 found: np.ndarray[Any, Any]) -> Path:
    """Write ``index.html`` and ``result.json`` into ``folder``; returns the HTML path."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    fig = pareto_figure(space, exact, found)
    plot = fig.to_html(full_html=False, include_plotlyjs=True)
    keys = ("family", "slo", "enumerated", "deployable", "feasible", "exact_front_size", "enumeration_seconds",
            "hypervolume", "exact_hypervolume", "hypervolume_ratio")
    summary: dict[str, Any] = {k: payload[k] for k in keys if k in payload}
    if "nsga2" in payload:
        n = payload["nsga2"]
        summary["nsga2"] = {**n["settings"], "seeds": n["seeds"], "hypervolume_ratio_mean": n["hypervolume_ratio_mean"],
                            "hypervolume_ratio_min": n["hypervolume_ratio_min"], "seconds_max": n["seconds_max"]}
    beside = payload.get("whitepaper")
    beside_html = ""
    if beside:
        beside_html = "<h2>Beside the whitepaper (§3.1)</h2>" + _table(beside.get("rows", []), ("row", *_COLS)) + (
            f"<p>Whitepaper claim: {html.escape(json.dumps(beside.get('claim')))}</p>")
    title = html.escape(space.family.name)
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>seedance optimize: {title}</title>
<style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}pre{{background:#f6f6f6;padding:8px}}</style></head>
<body><h1>Deployment search: {html.escape(space.family.name)} ({html.escape(space.family.task)})</h1>
<pre>{html.escape(chr(10).join(f"{k}: {json.dumps(v)}" for k, v in summary.items()))}</pre>{plot}
<h2>NSGA-II front (the chosen points)</h2>{_table(payload.get("front", []))}{beside_html}
<h2>Sources</h2><ul>{"".join(f"<li>{html.escape(s)}</li>" for s in payload.get("sources", []))}</ul>
</body></html>"""
    path = out / "index.html"
    path.write_text(doc, encoding="utf-8")
    return path

"""HTML report of a serving comparison: the table, latency CDFs and KV memory over time."""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seedance.inference.metrics import latencies
from seedance.inference.run import ServingRun

COLUMNS = ("policy", "goodput_rps", "completed_rps", "tokens_per_s", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
           "tpot_ms_p99", "peak_kv_mib", "preemptions", "dropped", "meets_slo", "capacity_rps")


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _cdf(ax: Any, values: np.ndarray[Any, Any], label: str) -> None:
    v = np.sort(values[np.isfinite(values)])
    if v.size:
        ax.plot(v, np.arange(1, v.size + 1) / v.size, label=label, linewidth=1.3)


def envelope(t: np.ndarray[Any, Any], v: np.ndarray[Any, Any], bins: int = 400
             ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The maximum of ``v`` in each of ``bins`` equal time bins (bin centres, maxima; empty bins dropped)."""
    edges = np.linspace(t.min(), t.max() + 1e-9, bins + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    top = np.full(bins, -np.inf)
    np.maximum.at(top, idx, v)
    keep = np.isfinite(top)
    return ((edges[:-1] + edges[1:]) / 2)[keep], top[keep]


def figures(runs: Sequence[ServingRun], slo_ttft_ms: float, slo_tpot_ms: float) -> list[tuple[str, str]]:
    """``(title, base64 PNG)`` of the TTFT CDF, TPOT CDF and KV memory over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    for title, pick, target, unit in (("TTFT CDF", 1, slo_ttft_ms, "ms"), ("TPOT CDF", 2, slo_tpot_ms, "ms")):
        fig, ax = plt.subplots(figsize=(7.0, 3.8))
        for r in runs:
            done, *lat = latencies(r)
            _cdf(ax, lat[pick - 1][done], r.policy)
        ax.axvline(target, color="grey", linestyle=":", linewidth=0.9, label="SLO target")
        ax.set_xscale("log")
        ax.set_xlabel(f"{title.split()[0]} ({unit}, log scale)")
        ax.set_ylabel("share of completed requests")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        out.append((title, _png(fig)))
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(7.0, 3.8))
    for r in runs:
        if r.mem_t.size:
            t, v = envelope(r.mem_t - r.arrival.min(), r.mem_mib)
            ax.plot(t / 60.0, v / 1024.0, label=f"{r.policy} (peak {r.mem_mib.max() / 1024:.1f} GiB)",
                    linewidth=0.9)
    ax.set_xlabel("time (min)")
    ax.set_ylabel("KV cache held, all replicas (GiB)")
    ax.set_title("KV memory over time (maximum per time bin)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    out.append(("KV memory over time", _png(fig)))
    plt.close(fig)
    return out


def write_report(directory: str | Path, payload: dict[str, Any], runs: Sequence[ServingRun]) -> Path:
    """Write ``report.html`` and ``results.json`` into ``directory``; returns the HTML path."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")
    slo = payload["setup"]["slo"]
    figs = figures(runs, float(slo["ttft_ms"]), float(slo["tpot_ms"]))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in COLUMNS) + "</tr>"
        for r in payload["results"]
    )
    setup = html.escape(json.dumps(payload["setup"], indent=2))
    claim = payload.get("claim")
    claim_html = ""
    if claim:
        claim_html = "<h2>Beside the whitepaper's claim</h2><table>" + "".join(
            f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>" for k, v in claim.items()
        ) + "</table>"
    imgs = "".join(f'<h2>{html.escape(t)}</h2><img alt="{html.escape(t)}" src="data:image/png;base64,{b}"/>'
                   for t, b in figs)
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>Seedance serving report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}td:first-child{{text-align:left}}</style>
</head><body><h1>Seedance serving report</h1>
<p>Every policy replays the same requests on the same replicas, KV pool and SLO. Goodput counts completed
requests whose TTFT and TPOT both meet the targets, per second of makespan; <em>capacity</em> is the goodput
at the highest load (arrival-rate scale) at which the policy's p99 TTFT and TPOT still meet the targets.</p>
<table><tr>{head}</tr>{rows}</table>{claim_html}{imgs}
<h2>Setup</h2><pre>{setup}</pre><p>Data: <code>results.json</code> beside this file.</p></body></html>"""
    path = out / "report.html"
    path.write_text(doc, encoding="utf-8")
    return path

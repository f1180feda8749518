"""``seedancectl cost``: the FinOps ledger in OpenCost's idiom.

* ``cost allocation --window 7d --aggregate team -o table|json|csv``: who spent what (idle and shared
  lines included); with a context it asks the server's ``/api/v1/allocation``, else the local store.
* ``cost allocation --replay --nodes F --pods F --policy NAME``: replay a trace under a policy,
  write its ledger (source ``replay:<trace>:<policy>:<seed>``) and show the bill it would have had.
* ``cost explain --from W1 --to W2``: the change between two windows split into volume, price, mix,
  idle, efficiency and shared effects, with the hour-by-hour attribution table.
"""

from __future__ import annotations

import csv
import io
import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from seedance.cli.common import emit
from seedance.core.errors import InputError


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"
    csv = "csv"


CSV_FIELDS = ("name", "gpu_hours", "gpu_cost", "cpu_core_hours", "cpu_cost", "ram_byte_hours", "ram_cost",
              "shared_cost", "idle_cost", "total_cost", "cpu_efficiency", "ram_efficiency", "gpu_efficiency",
              "total_efficiency", "minutes")


def _store(database_url: str | None) -> Any:
    from seedance.control.db import migrate
    from seedance.control.db.session import Database
    from seedance.control.paths import local_database_url

    db = Database(database_url or local_database_url(), pool_size=2)
    migrate.upgrade(db)
    return db


def _remote(context: str | None, path: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """GET ``path`` from the active context's server, or ``None`` without a context."""
    from seedance.cli.config import active_context

    ctx = active_context(context)
    if ctx is None:
        return None
    import httpx

    token = ctx.get("token") or os.environ.get("SEEDANCE_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = httpx.get(str(ctx["server"]).rstrip("/") + path, params=params, headers=headers, timeout=60)
    except httpx.HTTPError as exc:
        raise InputError(f"cannot reach {ctx['server']}: {exc}") from None
    if r.status_code >= 400:
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text
        raise InputError(f"{r.status_code}: {detail}", source=str(ctx["server"]))
    out: dict[str, Any] = r.json()
    return out


def _money(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10_000 else f"{v:,.2f}"


def render_allocation(doc: dict[str, Any], output: Output) -> Any:
    """Table, JSON or CSV of an allocation document."""
    if output is Output.json:
        return json.dumps(doc, indent=2)
    if output is Output.csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(CSV_FIELDS), lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        for e in doc["allocations"]:
            w.writerow({k: e[k] for k in CSV_FIELDS})
        return buf.getvalue().rstrip("\n")
    from rich.table import Table

    win = doc["window"]
    t = Table(title=f"cost allocation {win['start']} → {win['end']} by {','.join(doc['aggregate'])} "
                    f"({doc.get('cluster', '')}/{doc.get('source', '')})", show_footer=True)
    cols = [("name", "total"), ("GPU-h", _money(sum(e["gpu_hours"] for e in doc["allocations"]))),
            ("GPU $", _money(sum(e["gpu_cost"] for e in doc["allocations"]))),
            ("CPU $", _money(sum(e["cpu_cost"] for e in doc["allocations"]))),
            ("RAM $", _money(sum(e["ram_cost"] for e in doc["allocations"]))),
            ("shared $", _money(doc["shared_cost"])), ("idle $", _money(doc["idle_cost"])),
            ("total $", _money(doc["total_cost"])), ("efficiency", "")]
    for head, foot in cols:
        t.add_column(head, footer=foot, justify="left" if head == "name" else "right", no_wrap=True)
    for e in doc["allocations"]:
        idle = e["total_cost"] if e["name"].startswith("__idle__") else e["idle_cost"]
        t.add_row(e["name"], _money(e["gpu_hours"]), _money(e["gpu_cost"]), _money(e["cpu_cost"]),
                  _money(e["ram_cost"]), _money(e["shared_cost"]), _money(idle), _money(e["total_cost"]),
                  f"{100 * e['total_efficiency']:.1f}%" if not e["name"].startswith("__") else "n/a")
    if doc.get("warnings"):
        t.caption = "; ".join(doc["warnings"])
    return t


def render_explain(doc: dict[str, Any], output: Output, top: int = 24) -> Any:
    """Table or JSON of an explanation."""
    if output is Output.json:
        return json.dumps(doc, indent=2)
    if output is Output.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["period", "baseline_cost", "cost", "savings", "main_cause"])
        for r in doc["hourly"]:
            w.writerow([r["period"], f"{r['baseline_cost']:.4f}", f"{r['cost']:.4f}", f"{r['savings']:.4f}",
                        r["main_cause"]])
        return buf.getvalue().rstrip("\n")
    from rich.console import Group
    from rich.table import Table

    eff = Table(title=f"cost change {_money(doc['from']['cost'])} → {_money(doc['to']['cost'])} "
                      f"({doc['change']:+,.2f} $); main cause: {doc['main_cause']}")
    eff.add_column("effect")
    eff.add_column("$", justify="right")
    eff.add_column("share of change", justify="right")
    for k, v in doc["effects"].items():
        share = f"{100 * v / doc['change']:.1f}%" if doc["change"] else "n/a"
        eff.add_row(k, f"{v:+,.2f}", share)
    rows = sorted(doc["hourly"], key=lambda r: -abs(r["savings"]))[:top]
    hourly = Table(title=f"attribution by period (the {len(rows)} largest of {len(doc['hourly'])})")
    for c in ("period", "baseline $", "cost $", "savings $", "main cause"):
        hourly.add_column(c, justify="left" if c in ("period", "main cause") else "right")
    for r in sorted(rows, key=lambda r: r["period"]):
        hourly.add_row(r["period"], _money(r["baseline_cost"]), _money(r["cost"]), f"{r['savings']:+,.2f}",
                       r["main_cause"])
    return Group(eff, hourly)


def run_replay_ledger(*, nodes: Path | None, pods: Path | None, policy: str, seed: int, labels: Path | None,
                      start: str, ledger_window: str, prices: Path | None, capacity_scale: float, queue_order: str,
                      end: str, idle_by_node: bool, database_url: str | None, cluster: str) -> tuple[Any, str]:
    """Replay, price and store; returns (store database, source name)."""
    import datetime as dt

    from seedance.finops.ledger import LedgerStore
    from seedance.finops.prices import PriceSheet
    from seedance.finops.replay import load_label_file, replay_ledger, spans_from_replay
    from seedance.finops.window import parse_duration
    from seedance.sim.replay import ReplaySimulation, scale_cluster
    from seedance.traces.alibaba import load_nodes, load_pods
    from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file

    try:
        epoch = dt.datetime.fromisoformat(start.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"not an RFC3339 time: {start!r}", source="--start") from None
    if epoch.tzinfo is None:
        raise InputError("add a zone (Z or +00:00)", source="--start")
    spec = load_nodes(nodes or data_file(DEFAULT_NODES))
    pod_path = pods or data_file(DEFAULT_PODS)
    trace = load_pods(pod_path)
    lab = load_label_file(labels) if labels else None
    sheet = PriceSheet.load(prices) if prices else PriceSheet()
    window_s = parse_duration(ledger_window, source="--ledger-window")
    cl = spec if capacity_scale == 1.0 else scale_cluster(spec, capacity_scale, seed)
    sim = ReplaySimulation(cl, trace, policy, seed=seed, queue_order=queue_order, end=end)
    sim.run()
    name = Path(pod_path).stem.removeprefix("openb_pod_list_")
    source = f"replay:{name}:{policy}:{seed}"[:63]
    lines = replay_ledger(cl, trace, spans_from_replay(sim), sheet, cluster=cluster, source=source, epoch=epoch,
                          window_s=window_s, labels=lab, idle_by_node=idle_by_node)
    db = _store(database_url)
    store = LedgerStore(db)
    lo = min(ln.window_start for ln in lines)
    hi = max(ln.window_end for ln in lines)
    store.replace_windows(lines, cluster=cluster, source=source, start=lo, end=hi)
    return db, source


def register(app: typer.Typer) -> None:
    """Add the ``cost`` command group."""
    cost = typer.Typer(help="FinOps ledger: OpenCost-style allocation, idle and shared costs, explanations.",
                       no_args_is_help=True)
    app.add_typer(cost, name="cost")

    @cost.command("allocation")
    def allocation(
        window: Annotated[str | None, typer.Option(help="today, 7d, lastweek, RFC3339 pair, all (replay default).")]
        = None,
        aggregate: Annotated[str, typer.Option(help="Comma list: namespace, pod, node, team, label:<k>, ...")]
        = "namespace",
        step: Annotated[str | None, typer.Option(help="Split into steps (1h, 1d); JSON lists every step.")] = None,
        idle: Annotated[bool, typer.Option("--idle/--no-idle", help="Show idle as its own __idle__ line.")] = True,
        share_idle: Annotated[str, typer.Option(help="none, weighted (by cost per resource) or even.")] = "none",
        idle_by_node: Annotated[bool, typer.Option(help="Keep/share idle per node.")] = False,
        share_namespaces: Annotated[str, typer.Option(help="Namespaces whose cost is shared by all (kube-system).")]
        = "",
        share_split: Annotated[str, typer.Option(help="weighted or even.")] = "weighted",
        cluster: Annotated[str, typer.Option(help="Cluster name in the ledger.")] = "default",
        source: Annotated[str, typer.Option(help="live, or a replay's source name.")] = "live",
        output: Annotated[Output, typer.Option("-o", "--output", help="table, json or csv.")] = Output.table,
        fmt: Annotated[str, typer.Option("--format", help="JSON shape: seedance or opencost.")] = "seedance",
        context: Annotated[str | None, typer.Option(help="Context (server) to ask; default: the current one.")]
        = None,
        database_url: Annotated[str | None, typer.Option(help="Store to read without a server (default: local).")]
        = None,
        replay: Annotated[bool, typer.Option("--replay", help="Replay a trace and bill it (writes its ledger).")]
        = False,
        nodes: Annotated[Path | None, typer.Option(help="--replay: node list CSV (default trace's).")] = None,
        pods: Annotated[Path | None, typer.Option(help="--replay: pod list CSV (default trace).")] = None,
        policy: Annotated[str, typer.Option(help="--replay: placement policy.")] = "seedance",
        seed: Annotated[int, typer.Option(help="--replay: seed.")] = 42,
        labels: Annotated[Path | None, typer.Option(help="--replay: CSV name,<label>... (team, env, namespace).")]
        = None,
        start: Annotated[str, typer.Option(help="--replay: wall time of trace time 0.")] = "2023-01-01T00:00:00Z",
        ledger_window: Annotated[str, typer.Option(help="--replay: ledger window.")] = "1h",
        prices: Annotated[Path | None, typer.Option(help="--replay: price book YAML/JSON.")] = None,
        capacity_scale: Annotated[float, typer.Option(help="--replay: keep this share of the nodes.")] = 1.0,
        queue_order: Annotated[str, typer.Option(help="--replay: queue order.")] = "fifo",
        end: Annotated[str, typer.Option(help="--replay: fixed or shifted.")] = "fixed",
    ) -> None:
        """Who spent what, OpenCost-style: max(request, usage) × price, idle and shared costs included."""
        from seedance.finops.service import FinopsService, split_csv

        params: dict[str, Any] = {
            "window": window or ("all" if replay else "7d"), "aggregate": split_csv(aggregate), "step": step,
            "idle": idle, "share_idle": share_idle, "idle_by_node": idle_by_node,
            "share_namespaces": split_csv(share_namespaces), "share_split": share_split, "cluster": cluster,
            "source": source, "fmt": fmt}
        if replay:
            db, params["source"] = run_replay_ledger(
                nodes=nodes, pods=pods, policy=policy, seed=seed, labels=labels, start=start,
                ledger_window=ledger_window, prices=prices, capacity_scale=capacity_scale, queue_order=queue_order,
                end=end, idle_by_node=idle_by_node, database_url=database_url, cluster=cluster)
            from seedance.finops.prices import PriceSheet

            doc = FinopsService(db, PriceSheet.load(prices) if prices else None).allocation(**params)
            db.dispose()
        else:
            remote = None if database_url else _remote(context, "/api/v1/allocation", {
                "window": params["window"], "aggregate": aggregate, "step": step, "idle": idle,
                "shareIdle": share_idle, "idleByNode": idle_by_node, "shareNamespaces": share_namespaces,
                "shareSplit": share_split, "cluster": cluster, "source": source, "format": fmt})
            if remote is not None:
                doc = remote
            else:
                db = _store(database_url)
                doc = FinopsService(db).allocation(**params)
                db.dispose()
        if fmt == "opencost" or "allocations" not in doc:
            emit(json.dumps(doc, indent=2))
            return
        emit(render_allocation(doc, output))

    @cost.command("explain")
    def explain_cmd(
        window_from: Annotated[str, typer.Option("--from", help="The baseline window (e.g. lastweek).")],
        window_to: Annotated[str, typer.Option("--to", help="The window to explain (e.g. week).")],
        step: Annotated[str, typer.Option(help="Period of the attribution table.")] = "1h",
        filter_: Annotated[str, typer.Option("--filter", help="k=v[,k=v]: only these allocations (team=nlp).")]
        = "",
        cluster: Annotated[str, typer.Option(help="Cluster name in the ledger.")] = "default",
        source: Annotated[str, typer.Option(help="live, or a replay's source name.")] = "live",
        output: Annotated[Output, typer.Option("-o", "--output", help="table, json or csv.")] = Output.table,
        context: Annotated[str | None, typer.Option(help="Context (server) to ask.")] = None,
        database_url: Annotated[str | None, typer.Option(help="Store to read without a server.")] = None,
    ) -> None:
        """Why the cost changed: volume, price, mix (GPU type), idle, efficiency and shared effects."""
        from seedance.finops.service import FinopsService, split_csv

        filters = []
        for part in split_csv(filter_):
            if "=" not in part:
                raise InputError(f"expected k=v, got {part!r}", source="--filter")
            k, v = part.split("=", 1)
            filters.append((k.strip(), v.strip()))
        remote = None if database_url else _remote(context, "/api/v1/allocation/explain", {
            "from": window_from, "to": window_to, "step": step, "filter": filter_, "cluster": cluster,
            "source": source})
        if remote is not None:
            doc = remote
        else:
            db = _store(database_url)
            doc = FinopsService(db).explain(window_from=window_from, window_to=window_to, step=step,
                                            cluster=cluster, source=source, filters=filters)
            db.dispose()
        emit(render_explain(doc, output))

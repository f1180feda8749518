"""``seedancectl telemetry``: collectors, the node agent, the Prometheus exporter, adaptive batch size.

* ``telemetry collect --collector nvidia-smi|nvml|fake|file``: one tick, printed (GPUs, MIG
  instances, processes, lost GPUs and skipped lines).
* ``telemetry agent --node N``: sample every 5 s, post the node's ledger windows and GPU state to the
  current context's server (``POST /api/v1/telemetry``) or, with ``--database-url``, write them.
* ``telemetry exporter --port 9400``: serve ``/metrics`` (dcgm-exporter names plus ``seedance_*``).
* ``telemetry batch-size --util 85``: the corrected whitepaper mapping (docs/finops.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from seedance.cli.common import emit
from seedance.core.errors import InputError


def _collector(name: str, *, query_file: Path | None, apps_file: Path | None, gpus: int, model: str,
               pmon: bool) -> Any:
    from seedance.telemetry.collector import make_collector

    if name == "file":
        if query_file is None:
            raise InputError("--collector file needs --query-file", source="--query-file")
        return make_collector("file", query=query_file, apps=apps_file)
    if name == "fake":
        return make_collector("fake", gpus=gpus, model=model)
    if name in ("nvidia-smi", "smi"):
        return make_collector(name, pmon=pmon)
    return make_collector(name)


def _pods(path: Path | None, node: str) -> Any:
    from seedance.telemetry.pods import PodDirectory

    if path is None:
        return PodDirectory()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise InputError("cannot open file", source=str(path)) from None
    from seedance.core.yamldoc import compose

    doc = compose(text, source=str(path), what="pod list", allow_empty=True)[1]
    items = doc.get("items", []) if isinstance(doc, dict) else doc
    ns_labels = doc.get("namespaceLabels", {}) if isinstance(doc, dict) else {}
    if not isinstance(items, list):
        raise InputError("expected a Pod list (kubectl get pods -o json)", source=str(path))
    return PodDirectory.from_objects(items, ns_labels, node=node)


def _sampler(node: str, collector: Any, pods: Any, cpu_cores: float | None, ram_gib: float | None,
             processes: bool, usage: str = "cgroup") -> Any:
    import psutil

    from seedance.telemetry.procfs import CgroupSampler, ProcessSampler
    from seedance.telemetry.sampler import NodeSampler

    if usage not in ("cgroup", "process"):
        raise InputError(f"unknown usage source {usage!r}; valid: cgroup, process", source="--usage")
    return NodeSampler(node, gpus=collector, processes=ProcessSampler() if processes else None, pods=pods,
                       cgroups=CgroupSampler() if usage == "cgroup" else None,
                       cpu_cores=cpu_cores if cpu_cores is not None else float(psutil.cpu_count() or 1),
                       ram_bytes=(ram_gib * 2**30) if ram_gib is not None else float(psutil.virtual_memory().total))


CollectorOpt = Annotated[str, typer.Option(help="nvidia-smi, nvml, fake or file.")]
QueryOpt = Annotated[Path | None, typer.Option(help="--collector file: recorded --query-gpu output.")]
AppsOpt = Annotated[Path | None, typer.Option(help="--collector file: recorded --query-compute-apps output.")]
GpusOpt = Annotated[int, typer.Option(help="--collector fake: number of GPUs.")]
ModelOpt = Annotated[str, typer.Option(help="--collector fake: GPU model.")]


def register(app: typer.Typer) -> None:
    """Add the ``telemetry`` command group."""
    tel = typer.Typer(help="GPU and process telemetry: collectors, node agent, Prometheus exporter.",
                      no_args_is_help=True)
    app.add_typer(tel, name="telemetry")

    @tel.command("collect")
    def collect(collector: CollectorOpt = "nvidia-smi", query_file: QueryOpt = None, apps_file: AppsOpt = None,
                gpus: GpusOpt = 8, model: ModelOpt = "H100-80GB",
                pmon: Annotated[bool, typer.Option(help="nvidia-smi: per-process SM % via pmon.")] = False,
                output: Annotated[str, typer.Option("-o", "--output", help="table or json.")] = "table") -> None:
        """Read the GPUs once and print what was read."""
        from dataclasses import asdict

        snap = _collector(collector, query_file=query_file, apps_file=apps_file, gpus=gpus, model=model,
                          pmon=pmon).collect()
        doc = {"t": snap.t, "gpus": [asdict(g) for g in snap.gpus], "slices": [asdict(s) for s in snap.slices],
               "processes": [asdict(p) for p in snap.processes], "lost": [asdict(x) for x in snap.lost],
               "skipped": dict(snap.issues.counts), "skip_messages": snap.issues.messages}
        if output == "json":
            emit(json.dumps(doc, indent=2))
            return
        from rich.table import Table

        t = Table(title=f"{collector}: {len(snap.gpus)} GPUs, {len(snap.slices)} MIG instances, "
                        f"{len(snap.processes)} processes, {len(snap.lost)} lost, {snap.issues.total} skipped")
        for c in ("index", "name", "util %", "mem MiB", "power W", "temp C", "SM MHz", "MIG"):
            t.add_column(c)
        for g in snap.gpus:
            t.add_row(str(g.index), g.name or "?", _v(g.util_pct), f"{_v(g.mem_used_mib)}/{_v(g.mem_total_mib)}",
                      _v(g.power_w), _v(g.temp_c), _v(g.sm_clock_mhz), {True: "on", False: "off"}.get(g.mig, "n/a"))
        for x in snap.lost:
            t.add_row("lost", x.where, x.reason, "", "", "", "", "")
        emit(t)

    @tel.command("agent")
    def agent(
        node: Annotated[str, typer.Option(help="This node's name.")],
        cluster: Annotated[str, typer.Option(help="Cluster name.")] = "default",
        collector: CollectorOpt = "nvidia-smi", query_file: QueryOpt = None, apps_file: AppsOpt = None,
        gpus: GpusOpt = 8, model: ModelOpt = "H100-80GB",
        pods: Annotated[Path | None, typer.Option(help="Pods of this node (kubectl get pods -o json).")] = None,
        interval: Annotated[float, typer.Option(help="Seconds between ticks.")] = 5.0,
        ticks: Annotated[int | None, typer.Option(help="Stop after this many ticks.")] = None,
        window: Annotated[str, typer.Option(help="Ledger window.")] = "1h",
        cpu_cores: Annotated[float | None, typer.Option(help="Node cores (default: this machine's).")] = None,
        ram_gib: Annotated[float | None, typer.Option(help="Node memory GiB (default: this machine's).")] = None,
        processes: Annotated[bool, typer.Option("--processes/--no-processes", help="Sample /proc.")] = True,
        usage: Annotated[str, typer.Option(help="Container usage from 'cgroup' files (default) or summed "
                                                "'process' readings.")] = "cgroup",
        kube: Annotated[bool, typer.Option("--kube", help="Read this node's pods from the API server.")] = False,
        kubeconfig: Annotated[str | None, typer.Option(help="--kube: kubeconfig (default: in-cluster).")] = None,
        context: Annotated[str | None, typer.Option(help="Context (server) to post to.")] = None,
        database_url: Annotated[str | None, typer.Option(help="Write to this store instead of a server.")] = None,
    ) -> None:
        """Sample this node every few seconds and ship its ledger windows and GPU state."""
        from seedance.finops.window import parse_duration
        from seedance.telemetry.agent import Agent

        window_s = parse_duration(window, source="--window")
        col = _collector(collector, query_file=query_file, apps_file=apps_file, gpus=gpus, model=model, pmon=False)
        sampler = _sampler(node, col, _pods(pods, node), cpu_cores, ram_gib, processes, usage)
        send = _sender(context, database_url)
        refresh = None
        if kube:
            from seedance.k8s.kubeapi import KubernetesApi
            from seedance.telemetry.pods import from_kubernetes

            api = KubernetesApi.from_environment(kubeconfig)
            refresh = lambda: from_kubernetes(api, node)  # noqa: E731
        Agent(sampler, cluster=cluster, send=send, window_s=window_s, refresh_pods=refresh).run(interval, ticks=ticks)

    @tel.command("exporter")
    def exporter(
        node: Annotated[str, typer.Option(help="This node's name (Hostname label).")],
        port: Annotated[int, typer.Option(help="Port of /metrics (dcgm-exporter uses 9400).")] = 9400,
        collector: CollectorOpt = "nvidia-smi", query_file: QueryOpt = None, apps_file: AppsOpt = None,
        gpus: GpusOpt = 8, model: ModelOpt = "H100-80GB",
        pods: Annotated[Path | None, typer.Option(help="Pods of this node (kubectl get pods -o json).")] = None,
        interval: Annotated[float, typer.Option(help="Seconds between ticks.")] = 5.0,
    ) -> None:
        """Serve Prometheus metrics with dcgm-exporter's names plus per-slice attribution and cost."""
        import threading
        import time
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from seedance.telemetry.exporter import Exporter

        col = _collector(collector, query_file=query_file, apps_file=apps_file, gpus=gpus, model=model, pmon=False)
        sampler = _sampler(node, col, _pods(pods, node), None, None, True)
        exp = Exporter(node)
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                with lock:
                    body = exp.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        typer.echo(f"serving http://0.0.0.0:{port}/metrics", err=True)
        try:
            while True:
                tick = sampler.tick()
                with lock:
                    exp.update(tick)
                time.sleep(interval)
        except KeyboardInterrupt:
            server.shutdown()

    @tel.command("batch-size")
    def batch_size(util: Annotated[list[float], typer.Option(help="Mean GPU utilisation %, repeatable.")]) -> None:
        """Batch size for a mean GPU utilisation (128 at ≤ 50 %, 32 at 90 %, within [8, 128])."""
        from seedance.telemetry.heatmap import batch_size_for

        emit("\n".join(f"{u:g}% -> {batch_size_for(u)}" for u in util))


def _v(x: float | None) -> str:
    return "n/a" if x is None else f"{x:g}"


def _sender(context: str | None, database_url: str | None) -> Any:
    if database_url:
        from seedance.cli.cost import _store
        from seedance.finops.service import FinopsService
        from seedance.finops.wire import TelemetryPost

        svc = FinopsService(_store(database_url))
        return lambda body: svc.ingest(TelemetryPost.model_validate(body))
    from seedance.cli.config import active_context

    ctx = active_context(context)
    if ctx is None:
        raise InputError("no server: set a context (seedancectl config set-context) or give --database-url",
                         source="--context")
    import httpx

    token = ctx.get("token") or os.environ.get("SEEDANCE_TOKEN")
    client = httpx.Client(base_url=str(ctx["server"]).rstrip("/"), timeout=30,
                          headers={"Authorization": f"Bearer {token}"} if token else {})

    def send(body: dict[str, Any]) -> None:
        r = client.post("/api/v1/telemetry", json=body)
        r.raise_for_status()

    return send

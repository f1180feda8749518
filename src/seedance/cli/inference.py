"""``seedancectl inference``: LLM serving with task-profile batching, simulated and executed.

``simulate`` replays an Azure-format request trace on simulated replicas under several batchers
and compares them at one load (by default the highest load at which static batching still keeps
the SLO); ``--capacity`` also finds each batcher's SLO capacity. ``execute`` runs the same
batchers on a real PyTorch model on the CPU and checks its outputs and KV accounting.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from seedance.cli.common import dumps, split_names, write_text
from seedance.core.errors import InputError

DEFAULT_POLICIES = "static,dynamic,continuous,continuous-chunked,seedance"


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"


def parse_batcher_options(items: list[str] | None) -> dict[str, dict[str, str]]:
    """``["seedance.delta=0.5", "static.batch_size=8"]`` → ``{"seedance": {"delta": "0.5"}, ...}``.

    >>> parse_batcher_options(["seedance.delta=0.5"])
    {'seedance': {'delta': '0.5'}}
    """
    out: dict[str, dict[str, str]] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        policy, dot, name = key.strip().partition(".")
        if not sep or not dot or not policy or not name:
            raise InputError(f"expected POLICY.OPTION=VALUE, got {item!r}", source="--batcher-option")
        out.setdefault(policy.lower(), {})[name.strip()] = value.strip()
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 1e5 else f"{v:,.0f}"
    return str(v)


def _table(payload: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    cols = ["policy", "goodput_rps", "completed_rps", "tokens_per_s", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
            "tpot_ms_p99", "peak_kv_mib", "preemptions", "meets_slo"]
    if any("capacity_rps" in r for r in payload["results"]):
        cols += ["capacity_rps", "capacity_rate_scale"]
    for extra in ("prefix_hit_rate", "rejected"):
        if any(r.get(extra) for r in payload["results"]):
            cols.append(extra)
    if any("tuned_options" in r for r in payload["results"]):
        cols += ["default_capacity_rps", "tuned_options"]
    setup = payload["setup"]
    slo = setup["slo"]
    table = Table(title=(
        f"{setup['deployment']['replicas']} x {setup['deployment']['model']} on {setup['deployment']['tp']} x "
        f"{setup['deployment']['gpu']}; load {setup['load_rps']} req/s (rate scale {setup['rate_scale']}, "
        f"{setup['load_chosen_as']}); SLO p{slo['quantile']:g} TTFT <= {slo['ttft_ms']:g} ms, "
        f"TPOT <= {slo['tpot_ms']:g} ms"))
    for c in cols:
        table.add_column(c, justify="left" if c == "policy" else "right")
    for r in payload["results"]:
        table.add_row(*(_fmt(r.get(c, "")) for c in cols))
    console = Console(width=200)
    console.print(table)
    claim = payload.get("claim")
    if claim:
        t2 = Table(title="beside the whitepaper's claim (§2.1, static batch 16 vs dynamic batching + elastic reuse)")
        t2.add_column("figure")
        t2.add_column("value", justify="right")
        for k, v in claim.items():
            t2.add_row(k, _fmt(v))
        console.print(t2)


def register(app: typer.Typer) -> None:
    """Add the ``inference`` command group."""
    group = typer.Typer(help="LLM serving: task-profile batching, simulated and on a real model.",
                        no_args_is_help=True)
    app.add_typer(group, name="inference")

    @group.command("batchers")
    def batchers() -> None:
        """List the registered batchers and their options."""
        from seedance.inference.batchers import BATCHERS

        for name in BATCHERS.names():
            cls = BATCHERS.get(name)
            opts = ", ".join(f"{k}={v}" for k, v in cls.options.items())
            typer.echo(f"{name}: {cls.summary}\n    options: {opts}")

    @group.command("simulate")
    def simulate(
        trace: Annotated[Path | None, typer.Option(help="Azure-format trace CSV (default: the conversation trace).")]
        = None,
        policy: Annotated[str, typer.Option(help="Batchers, comma-separated registry names.")] = DEFAULT_POLICIES,
        gpu: Annotated[str, typer.Option(help="GPU type (catalog name).")] = "A100-80GB",
        model: Annotated[str, typer.Option(help="Model (llama2-70b, llama2-7b, bloom-176b).")] = "llama2-70b",
        tp: Annotated[int, typer.Option(help="Tensor-parallel degree: GPUs per replica.")] = 8,
        replicas: Annotated[int, typer.Option(help="Replicas serving the trace.")] = 4,
        rate_scale: Annotated[
            float | None, typer.Option(help="Arrival-rate scale (default: the highest at which static keeps the SLO).")
        ] = None,
        ttft_ms: Annotated[float, typer.Option(help="SLO: TTFT target (ms).")] = 10_000.0,
        tpot_ms: Annotated[float, typer.Option(help="SLO: TPOT target (ms).")] = 200.0,
        slo_quantile: Annotated[float, typer.Option(help="SLO percentile for the run-level check.")] = 99.0,
        capacity: Annotated[bool, typer.Option(help="Also search each batcher's SLO capacity.")] = False,
        tune_baselines: Annotated[bool, typer.Option(
            help="With --capacity: sweep each baseline's knobs; report tuned_options and the tuned capacity_rps.")]
        = False,
        duration_s: Annotated[float | None, typer.Option(help="Replay only this many seconds of the trace.")] = None,
        history_s: Annotated[float, typer.Option(help="Seconds at the start used as history only.")] = 0.0,
        batcher_option: Annotated[
            list[str] | None, typer.Option(help="POLICY.OPTION=VALUE, repeatable (see `inference batchers`).")
        ] = None,
        router: Annotated[str | None, typer.Option(
            help="Router for every batcher (shared, least-loaded, prefix-aware).")] = None,
        workload: Annotated[str, typer.Option(
            help="conversation (the trace as is), multi-turn (sessions, LMSYS-Chat-1M mean turns), system-prompt.")]
        = "conversation",
        prefix_cache: Annotated[bool, typer.Option(help="Block-level prefix caching with LRU eviction.")] = False,
        admission: Annotated[bool, typer.Option(help="Reject early when the predicted TTFT misses the target.")]
        = False,
        prefill_replicas: Annotated[int | None, typer.Option(
            help="Disaggregate: this many prefill replicas, the rest decode.")] = None,
        kv_link: Annotated[str, typer.Option(help="KV transfer link (ib-hdr, ib-ndr, nvlink3, nvlink4).")] = "ib-hdr",
        kv_budget_gib: Annotated[float | None, typer.Option(help="KV pool per replica (GiB), instead of derived.")]
        = None,
        block_tokens: Annotated[int, typer.Option(help="Tokens per KV block.")] = 16,
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
        out: Annotated[Path | None, typer.Option(help="Also write the JSON to this file.")] = None,
        report: Annotated[Path | None, typer.Option(help="Write an HTML report (CDFs, memory) here.")] = None,
    ) -> None:
        """Replay a request trace under batchers and compare goodput, latency and KV memory."""
        from seedance.inference.experiment import Deployment, Experiment, compare
        from seedance.inference.metrics import SLO
        from seedance.inference.trace import CONV_TRACE, load_azure_trace
        from seedance.traces.paths import data_file

        names = split_names(policy)
        if not names:
            raise InputError("no policy given", source="--policy")
        from seedance.inference.batchers import BATCHERS

        for n in names:
            BATCHERS.get(n)
        if rate_scale is not None and not rate_scale > 0:
            raise InputError(f"must be > 0, got {rate_scale}", source="--rate-scale")
        opts = parse_batcher_options(batcher_option)
        for pol in opts:
            if pol not in BATCHERS:
                raise InputError(f"option for unknown batcher {pol!r}", source="--batcher-option")
        tr = load_azure_trace(trace if trace is not None else data_file(CONV_TRACE))
        from seedance.inference import workloads as wl

        builders = {"conversation": lambda t: t, "multi-turn": wl.multi_turn, "system-prompt": wl.system_prompts}
        if workload not in builders:
            raise InputError(f"unknown workload {workload!r}; valid workloads: {', '.join(builders)}",
                             source="--workload")
        tr = builders[workload](tr)
        engine: dict[str, Any] = {"prefix_cache": prefix_cache}
        if admission:
            from seedance.inference.routing import Admission

            engine["admission"] = Admission(ttft_ms=(ttft_ms,))
        if prefill_replicas is not None:
            from seedance.inference.disagg import Disaggregation, link_gbs

            engine["disaggregate"] = Disaggregation(prefill=prefill_replicas, link_gbs=link_gbs(kv_link, tp))
        exp = Experiment(
            tr, Deployment(model=model, gpu=gpu, tp=tp, replicas=replicas, block_tokens=block_tokens,
                           kv_budget_gib=kv_budget_gib),
            SLO(ttft_ms=ttft_ms, tpot_ms=tpot_ms, quantile=slo_quantile), history_s=history_s, duration_s=duration_s,
        )
        opts_by_canonical = {BATCHERS.get(k).name: v for k, v in opts.items()}
        payload, runs = compare(exp, names, rate_scale=rate_scale, capacity=capacity,
                                options=opts_by_canonical, router=router, tune_baselines=tune_baselines,
                                engine=engine)
        text = dumps(payload)
        if out is not None:
            write_text(out, text)
        if report is not None:
            from seedance.inference.report import write_report

            path = write_report(report, payload, runs)
            typer.echo(f"report: {path}", err=True)
        if output is Output.json:
            typer.echo(text)
        else:
            _table(payload)

    @group.command("execute")
    def execute(
        trace: Annotated[Path | None, typer.Option(help="Azure-format trace CSV (default: the conversation trace).")]
        = None,
        policy: Annotated[str, typer.Option(help="Batchers, comma-separated.")] = "static,continuous,seedance",
        requests: Annotated[int, typer.Option(help="Requests taken from the start of the trace.")] = 48,
        token_scale: Annotated[float, typer.Option(help="Multiply prompt and output lengths by this (CPU-sized).")]
        = 0.05,
        rate_scale: Annotated[float, typer.Option(help="Arrival-rate scale of the trace.")] = 1.0,
        kv_blocks: Annotated[int, typer.Option(help="KV blocks of the executor's pool.")] = 256,
        block_tokens: Annotated[int, typer.Option(help="Tokens per KV block.")] = 16,
        seed: Annotated[int, typer.Option(help="Seed of the random weights and prompt tokens.")] = 0,
        batcher_option: Annotated[list[str] | None, typer.Option(help="POLICY.OPTION=VALUE, repeatable.")] = None,
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
        out: Annotated[Path | None, typer.Option(help="Also write the JSON to this file.")] = None,
    ) -> None:
        """Run batchers on a real small PyTorch decoder (CPU), check outputs and KV accounting."""
        from seedance.inference.executor import ExecutorConfig, run_executor_comparison
        from seedance.inference.trace import CONV_TRACE, load_azure_trace
        from seedance.traces.paths import data_file

        names = split_names(policy)
        if not names:
            raise InputError("no policy given", source="--policy")
        tr = load_azure_trace(trace if trace is not None else data_file(CONV_TRACE))
        cfg = ExecutorConfig(kv_blocks=kv_blocks, block_tokens=block_tokens, seed=seed)
        payload = run_executor_comparison(
            tr, names, requests=requests, token_scale=token_scale, rate_scale=rate_scale, config=cfg,
            options=dict(parse_batcher_options(batcher_option)),
        )
        text = dumps(payload)
        if out is not None:
            write_text(out, text)
        if output is Output.json:
            typer.echo(text)
        else:
            from rich.console import Console
            from rich.table import Table

            cols = ["policy", "requests", "iterations", "outputs_equal_reference", "kv_block_accounting_max_rel_err",
                    "kv_unused_tensor_share", "peak_kv_mib", "peak_kv_tensor_mib", "preemptions", "wall_s"]
            table = Table(title=f"real executor: {payload['setup']['model']}")
            for c in cols:
                table.add_column(c, justify="left" if c == "policy" else "right")
            for r in payload["results"]:
                table.add_row(*(_fmt(r.get(c, "")) for c in cols))
            Console(width=200).print(table)

"""``seedancectl kernels``: the fused kernel and compiled graphs, measured.

``bench`` times eager vs ``torch.compile`` vs fused BERT-base and ResNet-50 (p50 / p95 latency over
``--runs`` timed forwards after warm-up, peak memory per batch size) and writes the measured profile
that ``seedancectl optimize deploy --profile`` reads. ``show`` prints a saved profile with its ratios.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from seedance.cli.common import dumps, split_names, write_text


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"


def _table(doc: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=(f"{doc['device']} ({doc['device_name']}), {doc['dtype']}, torch {doc.get('torch', '?')}, "
                     f"{doc.get('runs', '?')} runs after {doc.get('warmup', '?')} warm-up, "
                     f"threads {doc.get('threads', '?')}, load average {doc.get('load_average')}"))
    for c in ("model", "variant", "batch", "p50 ms", "p95 ms", "peak MiB", "act. peak MiB", "p50 x eager",
              "memory x eager"):
        t.add_column(c, justify="left" if c in ("model", "variant") else "right")
    for r in rows:
        t.add_row(r["model"], r["variant"], str(r["batch"]), f"{r['p50_ms']:.2f}", f"{r['p95_ms']:.2f}",
                  f"{r['peak_mib']:.1f}", f"{r['activation_peak_mib']:.2f}", f"{r.get('latency_x_eager', 0):.3f}",
                  f"{r.get('memory_x_eager') or 0:.3f}")
    Console(width=160).print(t)


def register(app: typer.Typer) -> None:
    """Add the ``kernels`` command group."""
    grp = typer.Typer(help="Fused kernels and compiled graphs: benchmarks and profiles.", no_args_is_help=True)
    app.add_typer(grp, name="kernels")

    @grp.command("bench")
    def bench(
        models: Annotated[str, typer.Option(help="Comma-separated: bert-base, resnet-50.")] = "bert-base,resnet-50",
        variants: Annotated[str, typer.Option(help="Comma-separated: eager, compiled, fused.")
                            ] = "eager,compiled,fused",
        batches: Annotated[str, typer.Option(help="Comma-separated batch sizes.")] = "1,2",
        runs: Annotated[int, typer.Option(help="Timed forwards per variant (after warm-up).")] = 100,
        warmup: Annotated[int, typer.Option(help="Untimed forwards first (compilation happens here).")] = 5,
        device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
        dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16.")] = "float32",
        seq_len: Annotated[int, typer.Option(help="BERT sequence length.")] = 128,
        image_size: Annotated[int, typer.Option(help="ResNet-50 image side (pixels).")] = 224,
        threads: Annotated[int | None, typer.Option(help="torch.set_num_threads (default: torch's).")] = None,
        output: Annotated[Output, typer.Option("-o", "--output")] = Output.table,
        out: Annotated[Path | None, typer.Option("--out", help="Write the measured profile (JSON) here.")] = None,
    ) -> None:
        """Eager vs torch.compile vs fused: p50/p95 latency and peak memory per batch size."""
        from seedance.core.errors import InputError
        from seedance.kernels.bench import BenchOptions, ratios, run_bench
        from seedance.kernels.profile import parse_profile

        try:
            bs = tuple(int(b) for b in split_names(batches))
        except ValueError:
            raise InputError(f"not a list of integers: {batches!r}", source="--batches") from None
        opts = BenchOptions(models=tuple(split_names(models)), variants=tuple(split_names(variants)), batches=bs,
                            runs=runs, warmup=warmup, device=device, dtype=dtype, seq_len=seq_len,
                            image_size=image_size, threads=threads)
        doc = run_bench(opts, progress=lambda msg: typer.echo(msg, err=True))
        doc["command"] = "seedancectl kernels bench " + " ".join(
            f"--{k} {v}" for k, v in (("models", models), ("variants", variants), ("batches", batches),
                                       ("runs", runs), ("warmup", warmup), ("device", device), ("dtype", dtype),
                                       ("seq-len", seq_len), ("image-size", image_size)))
        if out:
            write_text(out, dumps(doc) + "\n")
        rows = ratios(parse_profile(doc, source="measurement"))
        if output is Output.json:
            typer.echo(dumps({**doc, "rows": rows}))
        else:
            _table(doc, rows)

    @grp.command("show")
    def show(
        profile: Annotated[Path, typer.Argument(help="A profile written by `kernels bench --out`.")],
        output: Annotated[Output, typer.Option("-o", "--output")] = Output.table,
    ) -> None:
        """Print a measured profile with each variant's ratios to eager."""
        from seedance.kernels.bench import ratios
        from seedance.kernels.profile import load_profile

        prof = load_profile(profile)
        rows = ratios(prof)
        doc = prof.as_dict()
        if output is Output.json:
            typer.echo(json.dumps({**doc, "rows": rows}, indent=2))
        else:
            _table(doc, rows)

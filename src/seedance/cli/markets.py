"""``seedancectl markets``: the GPU capacity markets of the catalog and of price books."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from seedance.cli.common import dumps, split_names


def register(app: typer.Typer) -> None:
    """Add the ``markets`` command group."""
    mk = typer.Typer(help="GPU instance offers: on-demand, spot (and interruption rate), 1-/3-year commitments.",
                     no_args_is_help=True)
    app.add_typer(mk, name="markets")

    @mk.command("list")
    def list_cmd(
        price_book: Annotated[Path | None, typer.Option(help="Price book YAML merged over the catalog.")] = None,
        cloud: Annotated[str | None, typer.Option(help="Clouds, comma-separated.")] = None,
        gpu: Annotated[str | None, typer.Option(help="GPU models (catalog names), comma-separated.")] = None,
        spot_history: Annotated[Path | None, typer.Option(
            help="aws ec2 describe-spot-price-history JSON: its last 30 days set the spot prices.")] = None,
        spot_stat: Annotated[str, typer.Option(help="Statistic of the history: mean, p90, min, max.")] = "mean",
        output: Annotated[str, typer.Option("-o", "--output", help="table or json.")] = "table",
    ) -> None:
        """Every offer with its prices per market, source and date."""
        from seedance.markets.book import market_book
        from seedance.markets.spot import with_history

        book = with_history(market_book(price_book), spot_history, stat=spot_stat)
        book = book.select(clouds=split_names(cloud) if cloud else None, gpus=split_names(gpu) if gpu else None)
        if output == "json":
            typer.echo(dumps({"sources": list(book.sources), "offers": [o.to_json() for o in book]}))
            return
        t = Table(title="GPU capacity markets (USD per instance-hour); blank = no public figure found")
        for col in ("cloud", "instance", "region", "GPUs", "on-demand", "spot", "interruption/mo", "1y", "3y",
                    "date (on-demand)"):
            t.add_column(col, justify="left" if col in ("cloud", "instance", "region", "date (on-demand)") else "right")
        for o in book:
            rate = o.spot_interruption_per_month
            t.add_row(o.cloud, o.instance_type, o.region, f"{o.gpu_count}x{o.gpu_model or o.gpu_name}",
                      f"{o.on_demand:.4f}", "" if o.spot is None else f"{o.spot:.4f}",
                      "" if rate is None else (">=" if o.spot_interruption_lower_bound else "") + f"{rate:.1%}",
                      f"{o.commitments['1y']:.4f}" if "1y" in o.commitments else "",
                      f"{o.commitments['3y']:.4f}" if "3y" in o.commitments else "", o.dates.get("on_demand", ""))
        Console().print(t)

    @mk.command("validate")
    def validate_cmd(path: Annotated[Path, typer.Argument(help="Price book YAML.")]) -> None:
        """Check a price book (exit 2 with file:line: field on the first error)."""
        from seedance.markets.book import load_catalog, load_price_book

        book = load_price_book(path, base=load_catalog())
        typer.echo(f"{path}: {len(book)} offer(s) OK")

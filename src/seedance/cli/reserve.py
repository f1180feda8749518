"""``seedancectl reserve``: plan 1-/3-year commitments (PPO engine, baselines, the hindsight MILP).

Commands: ``plan`` (every policy on the hours after ``--train-until``, the plan and its hourly
attribution), ``train`` (train and save a PPO policy), ``demand`` (write a demand CSV from a pod
trace, a scenario or the PAI-calibrated generator).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from seedance.cli.common import dumps, split_names, write_text
from seedance.core.errors import InputError


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"


def _offer_ref(text: str | None, cfg: Any) -> tuple[str, str, str]:
    if text is None:
        o = cfg.spec.offer
        return o.cloud, o.instance_type, o.region
    parts = text.split("/")
    if len(parts) != 3 or not all(parts):
        raise InputError(f"expected CLOUD/INSTANCE/REGION, got {text!r}", source="--offer")
    return parts[0], parts[1], parts[2]


def register(app: typer.Typer) -> None:
    """Add the ``reserve`` command group."""
    rv = typer.Typer(help="Reservation planning: 1-/3-year commitments with PPO, baselines and the hindsight MILP.",
                     no_args_is_help=True)
    app.add_typer(rv, name="reserve")

    @rv.command("plan")
    def plan_cmd(
        demand: Annotated[Path, typer.Option(help="Hourly demand CSV: timestamp,gpus (UTC ISO 8601).")],
        train_until: Annotated[str, typer.Option(help="Train and tune on hours before this; evaluate after it.")],
        config: Annotated[Path | None, typer.Option(help="ReservationConfig YAML.")] = None,
        price_book: Annotated[Path | None, typer.Option(help="Price book YAML merged over the catalog.")] = None,
        offer: Annotated[str | None, typer.Option(help="CLOUD/INSTANCE/REGION whose per-GPU prices to use.")] = None,
        policy: Annotated[Path | None, typer.Option(help="A trained PPO policy (zip) instead of training.")] = None,
        timesteps: Annotated[int | None, typer.Option(help="PPO training steps (default: the config's).")] = None,
        save_policy: Annotated[Path | None, typer.Option(help="Save the trained PPO policy here.")] = None,
        policies: Annotated[str, typer.Option(help="Policies to evaluate, comma-separated.")]
        = "none,percentile,best-fixed,online,forecast-mpc,ppo,hindsight-optimal",
        tune_windows: Annotated[int, typer.Option(help="Windows drawn from the history to tune the baselines.")] = 12,
        hourly_out: Annotated[Path | None, typer.Option(help="Write the PPO plan's hourly attribution CSV here.")]
        = None,
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
        out: Annotated[Path | None, typer.Option(help="Also write the output here.")] = None,
    ) -> None:
        """Evaluate every reservation policy on the hours after --train-until; print the plan and attribution."""
        from seedance.reservations.planrun import plan_demand_file

        err = Console(stderr=True)
        payload, attribution = plan_demand_file(
            demand, train_until, config=config, price_book=price_book, offer=offer, policy=policy,
            timesteps=timesteps, save_policy=save_policy, policies=split_names(policies), tune_windows=tune_windows,
            progress=lambda m: err.print(f"[dim]{m}[/dim]"), offer_parser=_offer_ref)
        if hourly_out is not None and attribution is not None:
            attribution.write_csv(hourly_out)
        if output is Output.json:
            text = dumps(payload)
            typer.echo(text)
            if out:
                write_text(out, text)
            return
        console = Console(record=out is not None)
        for t in _tables(payload):
            console.print(t)
        if out:
            write_text(out, console.export_text())

    @rv.command("train")
    def train_cmd(
        out: Annotated[Path, typer.Option(help="Write the trained policy (zip) here.")],
        timesteps: Annotated[int, typer.Option(help="PPO training steps.")] = 125_000,
        seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    ) -> None:
        """Train a PPO policy on the engine's training windows (synthetic, replayed traces, PAI) and save it."""
        from seedance.reservations.ppo import TrainConfig, train_ppo
        from seedance.reservations.scenarios import WindowFactory

        res = train_ppo(WindowFactory("train").draw, TrainConfig(timesteps=timesteps, seed=seed))
        res.model.save(str(out))
        typer.echo(f"trained {timesteps} steps ({res.episodes} episodes) in {res.wall_s:.1f} s; saved {out}")

    @rv.command("demand")
    def demand_cmd(
        out: Annotated[Path, typer.Option("-o", "--out", help="Demand CSV to write.")],
        start: Annotated[str, typer.Option(help="First hour, UTC ISO 8601.")] = "2023-01-01T00:00:00Z",
        hours: Annotated[int, typer.Option(help="Hours to write.")] = 5 * 8760,
        pods: Annotated[Path | None, typer.Option(help="Replay this pod trace (Alibaba openb format).")] = None,
        pai: Annotated[bool, typer.Option(help="The PAI-2020-calibrated job stream.")] = False,
        scale: Annotated[float, typer.Option(help="Multiply the demand (pods, PAI).")] = 1.0,
        base: Annotated[float, typer.Option(help="Scenario: mean units in the first year.")] = 100.0,
        growth: Annotated[float, typer.Option(help="Scenario (or over pods/PAI): growth per year.")] = 0.0,
        seasonal: Annotated[float, typer.Option(help="Scenario: yearly amplitude.")] = 0.0,
        bursts_per_year: Annotated[float, typer.Option(help="Scenario: bursts per year.")] = 0.0,
        seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    ) -> None:
        """Write an hourly demand CSV (timestamp,gpus)."""
        from seedance.reservations.demand import (
            Scenario,
            modulate,
            pai_calibrated_demand,
            scenario_demand,
            write_demand_csv,
        )
        from seedance.signals.series import parse_utc

        t0 = int(parse_utc(start, source="--start"))
        if t0 % 3600:
            raise InputError("must be the start of an hour", source="--start")
        if hours < 1:
            raise InputError("must be >= 1", source="--hours")
        sc = Scenario(base=base, growth=growth, seasonal=seasonal, bursts_per_year=bursts_per_year, name="cli")
        if pods is not None:
            from seedance.reservations.demand import demand_from_pods

            d = modulate(demand_from_pods(pods, start=t0, hours=hours, scale=scale), sc, seed=seed)
        elif pai:
            d = modulate(pai_calibrated_demand(start=t0, hours=hours, seed=seed, scale=scale), sc, seed=seed)
        else:
            d = scenario_demand(sc, start=t0, hours=hours, seed=seed)
        write_demand_csv(d, out)
        typer.echo(f"wrote {len(d)} hours ({d.source}) to {out}")


def _tables(p: dict[str, Any]) -> list[Any]:
    w = p["window"]
    t = Table(title=f"reservation policies on the held-out hours {w['start']} .. {w['end']} ({w['hours']} h, "
                    f"mean {w['mean_gpus']:.1f} / peak {w['peak_gpus']} GPUs); {p['prices']['label']}")
    for col in ("policy", "total cost", "baseline", "savings", "vs optimal", "committed used", "idle", "on demand",
                "spot", "purchases"):
        t.add_column(col, justify="left" if col in ("policy", "purchases") else "right")
    for r in p["results"]:
        a = r["attribution"]
        buys = ", ".join(f"{b['at'][:7]} {b['units']}x{b['term']}" for b in r["purchases"][:4])
        if len(r["purchases"]) > 4:
            buys += f", ... ({len(r['purchases'])} purchases)"
        vs = r["vs_hindsight_optimal"]
        t.add_row(r["policy"], f"{r['total_cost']:,.0f}", f"{r['baseline_cost']:,.0f}",
                  f"{r['savings_pct']:+.1f}%", "-" if vs is None else f"{vs:.4f}", f"{a['committed_used']:,.0f}",
                  f"{a['committed_idle']:,.0f}", f"{a['on_demand']:,.0f}", f"{a['spot'] + a['spot_interruption']:,.0f}",
                  buys or "(none)")
    out: list[Any] = [t]
    if p.get("attribution_by_slot"):
        s = Table(title=f"hourly attribution of the {p['attribution_policy']} plan, summed by time of day (UTC)")
        for col in ("slot", "baseline cost", "savings", "main cause"):
            s.add_column(col, justify="left" if col in ("slot", "main cause") else "right")
        for row in p["attribution_by_slot"]:
            s.add_row(row["slot"], f"{row['baseline_cost']:,.0f}", f"{row['savings']:+,.0f}", row["main_cause"])
        out.append(s)
    out.extend(p.get("notes", []))
    return out

"""``seedancectl costmodel``: the price- and carbon-aware cost model.

Commands: ``regions`` (which regions have data), ``describe --active`` (the enabled policies'
weights and signals), ``estimate`` (one training job: every GPU x count x market option and its best
window), ``finetune`` (the whitepaper's fine-tune re-measured), ``forecast``
(forecast error on held-out months), ``evaluate`` (the year-long policy comparison).
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
    yaml = "yaml"


OutputOpt = Annotated[Output, typer.Option("-o", "--output", help="Output format.")]
RegionOpt = Annotated[str, typer.Option(help="Region (grid zone) with price and carbon data, e.g. US-CAL-CISO.")]
PricesOpt = Annotated[Path | None, typer.Option(help="Hourly price CSV (default: by region, ../shared/data).")]
CarbonOpt = Annotated[Path | None, typer.Option(help="Hourly carbon-intensity CSV (default: by region).")]
PriceTzOpt = Annotated[str | None, typer.Option(help="IANA timezone of naive price timestamps (default: documented).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config-file", help="Cost policy YAML (default: built-in).")]


def emit(payload: Any, output: Output, table: Any = None, out: Path | None = None) -> None:
    """Print ``payload`` as JSON/YAML, or ``table`` (a rich renderable or a list of them)."""
    if output is Output.table and table is not None:
        console = Console(record=out is not None)
        for t in table if isinstance(table, list) else [table]:
            console.print(t)
        if out:
            write_text(out, console.export_text())
        return
    if output is Output.yaml:
        import yaml

        text = yaml.safe_dump(payload, sort_keys=False, allow_unicode=True)
    else:
        text = dumps(payload)
    typer.echo(text)
    if out:
        write_text(out, text)


def _policy(config: Path | None) -> Any:
    from seedance.costmodel.policy import CostPolicy, load_policy

    return load_policy(config) if config else CostPolicy()


def register(app: typer.Typer) -> None:
    """Add the ``costmodel`` command group."""
    cm = typer.Typer(help="Price- and carbon-aware cost model: signals, cost_score, estimates, evaluation.",
                     no_args_is_help=True)
    app.add_typer(cm, name="costmodel")

    @cm.command("regions")
    def regions(year: Annotated[int, typer.Option(help="Year of the data files.")] = 2023,
                output: OutputOpt = Output.table) -> None:
        """List regions with both a price and a carbon file in ../shared/data."""
        from seedance.signals import known_regions

        names = known_regions(year)
        if output is Output.table:
            typer.echo("\n".join(names) if names else "(none)")
        else:
            emit({"year": year, "regions": names}, output)

    @cm.command("describe")
    def describe(
        active: Annotated[bool, typer.Option("--active", help="Describe the enabled policies.")] = False,
        name: Annotated[str | None, typer.Option(help="Describe this stored policy (enabled or not).")] = None,
        at: Annotated[str | None, typer.Option(help="Show signal values at this UTC time (default: now or latest).")]
        = None,
        output: OutputOpt = Output.table,
    ) -> None:
        """Print the active cost-weight model: weights, shadow prices, forecaster and the live signals."""
        from seedance.costmodel.store import PolicyStore

        store = PolicyStore()
        if name:
            found = store.get(name)
            if found is None:
                raise InputError(f"no stored policy {name!r}; stored: "
                                 f"{', '.join(p.name for p in store.all()) or '(none)'}", source="--name")
            chosen = [found]
        elif active:
            chosen = store.active()
        else:
            raise InputError("give --active or --name NAME", source="costmodel describe")
        if not chosen:
            typer.echo("no cost policy is active; enable one with: seedancectl scheduler policy enable "
                       "--name=peak-aware --plugin=electricity-pricing --region=US-CAL-CISO "
                       "--config-file=./policies/peak_aware.yaml", err=True)
            if output is not Output.table:
                emit({"active": []}, output)
            return
        payload = {"active": [describe_policy(p, at) for p in chosen]}
        emit(payload, output, [_describe_table(d) for d in payload["active"]])

    @cm.command("estimate")
    def estimate_cmd(
        region: RegionOpt = "US-CAL-CISO",
        params: Annotated[float, typer.Option(help="Model parameters N.")] = 8.03e9,
        tokens: Annotated[float, typer.Option(help="Training tokens D (all epochs).")] = 1e8,
        flops_per_param_token: Annotated[float, typer.Option(help="FLOPs per parameter and token.")] = 6.0,
        mfu: Annotated[float, typer.Option(help="Model FLOPs utilisation.")] = 0.4,
        gpu: Annotated[str, typer.Option(help="GPU model (catalog name).")] = "A100-80GB",
        gpus: Annotated[int, typer.Option(help="Number of GPUs.")] = 8,
        deadline_hours: Annotated[float, typer.Option(help="Finish within this many hours from now.")] = 24.0,
        now: Annotated[str | None, typer.Option(help="Decision time, ISO UTC (default: wall clock or latest).")]
        = None,
        config_file: ConfigOpt = None,
        prices: PricesOpt = None,
        carbon: CarbonOpt = None,
        price_tz: PriceTzOpt = None,
        price_book: Annotated[Path | None, typer.Option(help="Price book YAML merged over the catalog.")] = None,
        spot_history: Annotated[Path | None, typer.Option(
            help="Planner: spot prices from this describe-spot-price-history JSON (mean of its last 30 days).")]
        = None,
        clouds: Annotated[str | None, typer.Option(help="Planner: clouds to consider, comma-separated.")] = None,
        markets: Annotated[str, typer.Option(help="Planner: markets (on-demand, spot).")] = "on-demand,spot",
        with_commitments: Annotated[bool, typer.Option(help="Planner: also cost existing 1-/3-year commitments.")]
        = False,
        max_gpus: Annotated[int, typer.Option(help="Planner: most GPUs per option.")] = 64,
        gpu_mfu: Annotated[list[str] | None, typer.Option(help="Planner: MFU of a GPU, GPU=VALUE (repeatable).")]
        = None,
        checkpoint_minutes: Annotated[float, typer.Option(help="Planner: checkpoint interval (spot).")] = 30.0,
        restart_minutes: Annotated[float, typer.Option(help="Planner: restart time after an interruption.")] = 10.0,
        assume_interruption: Annotated[float | None, typer.Option(
            help="Planner: monthly spot interruption share for offers without a known one.")] = None,
        plan_options: Annotated[bool, typer.Option("--plan/--no-plan", help="Run the job planner too.")] = True,
        output: OutputOpt = Output.table,
    ) -> None:
        """$ and kgCO2 of a training job: every GPU x count x market option, the cheapest feasible one, and
        the energy window of the given GPU setup."""
        from seedance.cli.planner_view import parse_mfu, plan_payload, plan_table
        from seedance.costmodel.estimate import TrainingJob, estimate

        job = TrainingJob(params=params, tokens=tokens, flops_per_param_token=flops_per_param_token, mfu=mfu,
                          gpu_model=gpu, gpus=gpus, deadline_hours=deadline_hours)
        payload = estimate(job, region=region, policy=_policy(config_file), now=now, prices=prices, carbon=carbon,
                           price_tz=price_tz)
        tables = _estimate_tables(payload)
        if plan_options:
            from seedance.costmodel.planner import MFU_TABLE, PlanJob, PlannerSettings, plan
            from seedance.markets.book import market_book
            from seedance.markets.spot import with_history
            from seedance.signals.series import parse_utc

            book = with_history(market_book(price_book), spot_history)
            if clouds:
                book = book.select(clouds=split_names(clouds))
            ms = tuple(split_names(markets))
            for m in ms:
                if m not in ("on-demand", "spot"):
                    raise InputError(f"unknown market {m!r}; valid: on-demand, spot (and --with-commitments)",
                                     source="--markets")
            settings = PlannerSettings(max_gpus=max_gpus, markets=ms, use_commitments=with_commitments,
                                       mfu=dict(MFU_TABLE) | parse_mfu(gpu_mfu),
                                       assume_interruption_per_month=assume_interruption)
            pj = PlanJob(params=params, tokens=tokens, flops_per_param_token=flops_per_param_token,
                         deadline_hours=deadline_hours, checkpoint_minutes=checkpoint_minutes,
                         restart_minutes=restart_minutes, name=job.name)
            best, opts = plan(pj, book, parse_utc(payload["assumptions"]["now"]), settings)
            payload["planner"] = plan_payload(best, opts, settings)
            tables.append(plan_table(payload["planner"], f"{job.name}: every offer x market (cheapest GPU count), "
                                     "* = chosen"))
        emit(payload, output, tables)

    @cm.command("finetune")
    def finetune_cmd(
        deadline_hours: Annotated[float, typer.Option(help="Finish within this many hours.")] = 24.0,
        tokens: Annotated[float | None, typer.Option(
            help="Tokens D (default: sized so the baseline costs the whitepaper's $217.40).")] = None,
        price_book: Annotated[Path | None, typer.Option(help="Price book YAML merged over the catalog.")] = None,
        now: Annotated[str, typer.Option(help="Decision time, ISO UTC.")] = "2026-08-01T00:00:00Z",
        output: OutputOpt = Output.table,
    ) -> None:
        """Re-measure the whitepaper's LLaMA-3-8B fine-tune ($217.40 -> $112.90) and attribute the levers."""
        from seedance.cli.planner_view import finetune_tables
        from seedance.costmodel.finetune import remeasure
        from seedance.markets.book import market_book
        from seedance.signals.series import parse_utc

        r = remeasure(market_book(price_book), now=parse_utc(now, source="--now"), deadline_hours=deadline_hours,
                      tokens=tokens)
        emit(r, output, finetune_tables(r))

    @cm.command("forecast")
    def forecast_cmd(
        region: Annotated[str, typer.Option(help="Regions, comma-separated.")] = "US-CAL-CISO,DE-LU",
        forecaster: Annotated[str, typer.Option(help="Forecasters, comma-separated.")] = "profile-ridge,seasonal-naive",
        holdout_from: Annotated[str, typer.Option(help="Held-out months start here (UTC date).")] = "2023-07-01",
        start: Annotated[str, typer.Option(help="Tuning months start here.")] = "2023-01-01",
        end: Annotated[str, typer.Option(help="Held-out months end here.")] = "2024-01-01",
        horizon: Annotated[int, typer.Option(help="Leads scored (hours).")] = 24,
        output: OutputOpt = Output.table,
    ) -> None:
        """Day-ahead forecast error (MAE, quantile-band coverage) on tuning and held-out months."""
        from seedance.costmodel.evaluation import policy_signals
        from seedance.costmodel.policy import CostPolicy
        from seedance.signals.forecast import backtest, make_forecaster
        from seedance.signals.series import parse_utc

        t0, t1, t2 = (parse_utc(x, source=o) for x, o in ((start, "--start"), (holdout_from, "--holdout-from"),
                                                           (end, "--end")))
        if not t0 < t1 < t2:
            raise InputError("need --start < --holdout-from < --end", source="--holdout-from")
        rows = []
        for reg in split_names(region):
            rs = policy_signals(CostPolicy(), reg)
            for series in (rs.price, rs.carbon):
                for name in split_names(forecaster):
                    f = make_forecaster(name)
                    for period, a, b in (("tuning", t0, t1), ("held-out", t1, t2)):
                        sc = backtest(series, f, start=a, end=b, horizon=horizon).to_json()
                        rows.append({"region": rs.region, "signal": series.kind, "period": period} | sc)
        payload = {"leads_hours": horizon, "scores": rows}
        emit(payload, output, _forecast_table(payload))

    @cm.command("evaluate")
    def evaluate(
        region: Annotated[str, typer.Option(help="Regions, comma-separated.")] = "US-CAL-CISO,DE-LU",
        policy: Annotated[str, typer.Option(help="Schedule policies, comma-separated.")]
        = "immediate,day-ahead-rule,peak-aware,peak-aware-cost,peak-aware-co2,optimal-cost,optimal-co2,optimal-score",
        config_file: ConfigOpt = None,
        prices: PricesOpt = None,
        carbon: CarbonOpt = None,
        price_tz: PriceTzOpt = None,
        start_date: Annotated[str, typer.Option(help="Lay the trace from this UTC date.")] = "2023-01-01",
        days: Annotated[float | None, typer.Option(help="Evaluate only this many days (default: all).")] = None,
        flexible_share: Annotated[float, typer.Option(help="Share of GPU jobs marked flexible.")] = 0.3,
        slack_hours: Annotated[float | None, typer.Option(help="Deadline slack of flexible jobs (h).")] = None,
        pods: Annotated[Path | None, typer.Option(help="Pod trace CSV (default: Alibaba default).")] = None,
        gpu_model: Annotated[str, typer.Option(help="GPU model of pods without a type constraint.")] = "G2",
        capacity_gpus: Annotated[float | None, typer.Option(help="GPU capacity per hour (default: none).")] = None,
        seed: Annotated[int, typer.Option(help="Seed of the flexible-job draw.")] = 0,
        output: OutputOpt = Output.table,
        out: Annotated[Path | None, typer.Option(help="Also write the output to this file.")] = None,
    ) -> None:
        """Compare run-immediately, the day-ahead rule, peak-aware and each objective's exact optimum over a year."""
        from seedance.costmodel.evaluation import render_table, run_evaluation

        err = Console(stderr=True)
        payload = run_evaluation(
            regions=split_names(region), policies=split_names(policy), policy_file=config_file, prices=prices,
            carbon=carbon, price_tz=price_tz, start_date=start_date, days=days, flexible_share=flexible_share,
            slack_hours=slack_hours, pods=pods, gpu_model=gpu_model, capacity_gpus=capacity_gpus, seed=seed,
            progress=lambda m: err.print(f"[dim]{m}[/dim]"))
        emit(payload, output, [render_table(payload), *_forecast_rows(payload)], out)


def describe_policy(stored: Any, at: str | None) -> dict[str, Any]:
    """Weights, models and live signals of one stored policy."""
    import time

    from seedance.costmodel.evaluation import policy_signals
    from seedance.costmodel.policy import COST_PLUGINS
    from seedance.signals.series import HOUR, iso, parse_utc

    pol = stored.policy()
    rs = policy_signals(pol, stored.region)
    t = parse_utc(at, source="--at") if at else time.time()
    when = "given" if at else "now"
    if not rs.start <= t < rs.end:
        if at:
            raise InputError(f"outside the signals ({iso(rs.start)} .. {iso(rs.end)})", source="--at")
        t, when = rs.end - HOUR, "latest hour in the data"
    w = pol.weights(rs.currency)
    signals = {}
    for s in (rs.price, rs.carbon):
        signals[s.kind] = {"source": s.source, "unit": s.unit, "from": iso(s.start), "to": iso(s.end),
                           "value": s.value_at(t), "at": iso(t), "at_is": when, **s.stats(), "notes": list(s.notes)}
    return {
        "name": stored.name, "plugin": stored.plugin, "region": rs.region, "enabled": stored.enabled,
        "enabled_at": stored.enabled_at, "config_path": stored.config_path, "currency": rs.currency,
        "weights": {"price": w.price, "carbon": w.carbon, "delay": w.delay,
                    "carbon_price_per_tonne": w.carbon_price_per_tonne, "delay_per_mwh_hour": w.delay_per_mwh_hour,
                    "delay_per_gpu_hour": w.delay_per_gpu_hour, "max_delay_h": w.max_delay_h, "min_gain": w.min_gain},
        "energy": {"gpu_util": w.energy.gpu_util, "host_w_per_gpu": w.energy.host_w_per_gpu, "pue": w.energy.pue},
        "carbon_accounting": w.accounting.method,
        "plugin_summary": COST_PLUGINS.get(stored.plugin)().describe(pol),
        "signals": signals,
    }


def _kv_table(title: str, rows: list[tuple[str, Any]]) -> Table:
    t = Table(title=title, show_header=False)
    t.add_column("key", style="bold")
    t.add_column("value")
    for k, v in rows:
        t.add_row(k, v if isinstance(v, str) else f"{v:,.4g}" if isinstance(v, float) else str(v))
    return t


def _describe_table(d: dict[str, Any]) -> Table:
    w = d["weights"]
    cur = d["currency"]
    rows: list[tuple[str, Any]] = [
        ("policy", f"{d['name']} ({'enabled' if d['enabled'] else 'disabled'} since {d['enabled_at']})"),
        ("plugin", d["plugin"]), ("region", d["region"]), ("config", d["config_path"]),
        ("cost_score", d["plugin_summary"]["score"]),
        ("weights", f"price {w['price']:g}, carbon {w['carbon']:g}, delay {w['delay']:g}"),
        ("carbon shadow price", f"{w['carbon_price_per_tonne']:g} {cur}/tCO2 ({d['carbon_accounting']}-based)"),
        ("delay penalty", f"{w['delay_per_mwh_hour']:g} {cur}/MWh/h + {w['delay_per_gpu_hour']:g} {cur}/GPU-h"),
        ("deferral", f"at most {w['max_delay_h']:g} h, min gain {w['min_gain']:g}"),
        ("energy model", f"util {d['energy']['gpu_util']:g}, host {d['energy']['host_w_per_gpu']:g} W/GPU, "
                         f"PUE {d['energy']['pue']:g}"),
        ("forecaster", f"{d['plugin_summary']['forecaster']} ({d['plugin_summary']['horizon_hours']} h)"),
    ]
    for kind, s in d["signals"].items():
        rows.append((f"{kind} signal", f"{s['value']:.2f} {s['unit']} at {s['at']} ({s['at_is']}); "
                                       f"mean {s['mean']:.2f}, min {s['min']:.2f}, max {s['max']:.2f}"))
        rows.append((f"{kind} source", f"{s['source']} [{s['from']} .. {s['to']}]"))
        for note in s["notes"]:
            rows.append((f"{kind} note", note))
    return _kv_table(f"active cost model: {d['name']}", rows)


def _estimate_tables(p: dict[str, Any]) -> list[Any]:
    a = p["assumptions"]
    rows = [(k, v) for k, v in a.items() if k != "weights"]
    t = Table(title=f"{p['job']} in {p['region']}: run now vs best window (costed on actual signals)")
    for col in ("scenario", "start", "energy kWh", f"energy {p['currency']}", "kgCO2", "GPU rental USD", "total USD"):
        t.add_column(col, justify="left" if col in ("scenario", "start") else "right")
    for r in p["scenarios"]:
        t.add_row(r["scenario"], r["start"], f"{r['energy_kwh']:.2f}", f"{r['energy_cost']:.4f}", f"{r['co2_kg']:.3f}",
                  f"{r['gpu_rental_usd']:.2f}", f"{r['total_usd']:.2f}" if "total_usd" in r else "-")
    c = p["whitepaper_claim_usd"]
    claim = f"{c['before']:.2f} → {c['after']:.2f} ({c['pct']:+.1f}%)"
    t.add_row("whitepaper claim (§1)", "-", "-", "-", "-", "-", claim)
    s = p["saving_vs_now"]
    total = "-" if s["total_usd_pct"] is None else f"{s['total_usd_pct']:+.2f}%"
    summary = (f"Seedance window vs now: energy {s['energy_cost_pct']:+.2f}%, CO2 {s['co2_pct']:+.2f}%, "
               f"total {total}")
    return [_kv_table("assumptions", rows), t, summary]


def _forecast_table(p: dict[str, Any]) -> Table:
    t = Table(title=f"day-ahead forecast error, leads 1-{p['leads_hours']} h, issued hourly (past data only)")
    for col in ("region", "signal", "forecaster", "period", "months", "MAE", "MAE naive", "skill", "coverage",
                "nominal", "unit"):
        t.add_column(col, justify="left" if col in ("region", "signal", "forecaster", "period", "months", "unit")
                     else "right")
    for r in p["scores"]:
        months = f"{r['months'][0]}..{r['months'][-1]}" if r["months"] else "-"
        t.add_row(r["region"], r["signal"], r["forecaster"], r["period"], months, f"{r['mae']:.2f}",
                  f"{r['mae_naive']:.2f}", f"{r['skill_vs_naive']:+.1%}", f"{r['coverage']:.1%}",
                  f"{r['nominal_coverage']:.0%}", r["unit"])
    return t


def _forecast_rows(payload: dict[str, Any]) -> list[Any]:
    rows = [{"region": reg["region"], "signal": s["kind"], "period": "evaluated span"} | s
            for reg in payload["regions"] for s in reg.get("forecast_scores", [])]
    return [_forecast_table({"leads_hours": 24, "scores": rows})] if rows else []

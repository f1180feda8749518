"""``seedancectl rollout``: flag files (validate, evaluate) and canary rollouts of cost actions.

``rollout run --config canary.yaml --flag-file flags.json`` runs the canary controller until the
flag is promoted (exit 0) or rolled back (exit 1); its metrics (``cost_action_rollback_total``
and the rollout gauges) are served at ``--metrics-listen`` and its events go to the event log of
the current context's control plane (or the local store).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from seedance.core.errors import InputError


def _attrs(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in items or []:
        k, sep, v = a.partition("=")
        if not sep or not k:
            raise InputError(f"expected KEY=VALUE, got {a!r}", source="--attr")
        out[k] = v
    return out


def _default(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def register(app: typer.Typer) -> None:
    """Add the ``rollout`` command group."""
    ro = typer.Typer(help="Progressive delivery: flag files, evaluation, canary rollouts.", no_args_is_help=True)
    app.add_typer(ro, name="rollout")

    @ro.command("validate")
    def validate(file: Annotated[Path, typer.Argument(help="flagd flag file (JSON).")]) -> None:
        """Check a flag file; list its flags."""
        from rich.console import Console
        from rich.table import Table

        from seedance.rollout.flags import load_flag_file

        ff = load_flag_file(file)
        t = Table(title=f"flags in {file}")
        for col in ("flag", "state", "variants", "default", "targeting"):
            t.add_column(col)
        for key, f in ff.data["flags"].items():
            t.add_row(key, f["state"], ", ".join(f"{k}={json.dumps(v)}" for k, v in f["variants"].items()),
                      f["defaultVariant"], "yes" if f.get("targeting") else "no")
        Console(width=160).print(t)

    @ro.command("eval")
    def evaluate(
        file: Annotated[Path, typer.Argument(help="flagd flag file.")],
        flag: Annotated[str, typer.Argument(help="Flag key.")],
        key: Annotated[str, typer.Option("--key", help="Targeting key (user, job or team).")],
        attr: Annotated[list[str] | None, typer.Option("--attr", help="Context attribute KEY=VALUE.")] = None,
        default: Annotated[str, typer.Option("--default", help="Default value (JSON).")] = "false",
    ) -> None:
        """Evaluate a flag for one context through OpenFeature (flagd provider, file mode)."""
        from seedance.rollout.evaluator import FlagEvaluator

        ev = FlagEvaluator(file)
        try:
            d = ev.details(flag, _default(default), key, **_attrs(attr))
        finally:
            ev.close()
        typer.echo(json.dumps({"flag": flag, "value": d.value, "variant": d.variant, "reason": str(d.reason),
                               "error": str(d.error_code) if d.error_code else None,
                               "metadata": dict(d.flag_metadata or {})}, indent=2, default=str))

    @ro.command("run")
    def run(
        config: Annotated[Path, typer.Option("--config", help="Canary settings (YAML).")],
        flag_file: Annotated[Path, typer.Option("--flag-file", help="flagd flag file the service reads.")],
        metrics_listen: Annotated[str | None, typer.Option(help="Serve the controller's metrics at HOST:PORT.")]
        = None,
        events: Annotated[str, typer.Option(help="Event log: context (current or local store) or none.")]
        = "context",
        context: Annotated[str | None, typer.Option("--context", help="Context for the event log.")] = None,
        timeout: Annotated[float | None, typer.Option(help="Give up after this many seconds.")] = None,
    ) -> None:
        """Run a canary rollout until it is promoted (exit 0) or rolled back (exit 1)."""
        from seedance.rollout.canary import CanaryController, HttpMetrics, Phase, served_weight_probe
        from seedance.rollout.config import load_canary
        from seedance.rollout.evaluator import FlagEvaluator
        from seedance.rollout.flags import FlagRollout
        from seedance.rollout.metrics import RolloutMetrics

        cfg = load_canary(config)
        if events not in ("context", "none"):
            raise InputError("must be context or none", source="--events")
        rollout = FlagRollout(flag_file, cfg.flag, cfg.candidate, cfg.baseline)
        metrics = RolloutMetrics()
        if metrics_listen:
            from prometheus_client import start_http_server

            host, _, port = metrics_listen.rpartition(":")
            if not port.isdigit():
                raise InputError("expected HOST:PORT", source="--metrics-listen")
            start_http_server(int(port), addr=host or "127.0.0.1", registry=metrics.registry)
        sink = _sink(context) if events == "context" else None
        ev = FlagEvaluator(flag_file)
        source = HttpMetrics(cfg.metrics_url, cfg.scrape_timeout_s)
        try:
            ctl = CanaryController(cfg, rollout, source, metrics=metrics, events=sink,
                                   served_weight=served_weight_probe(ev, cfg.flag))
            state = ctl.run(timeout_s=timeout)
        finally:
            source.close()
            ev.close()
            if sink is not None:
                sink.close()
        typer.echo(json.dumps(state.to_json(), indent=2, default=str))
        if state.phase is Phase.ROLLED_BACK:
            raise typer.Exit(1)
        if state.phase is Phase.PROGRESSING:
            typer.echo("error: the rollout did not finish before --timeout", err=True)
            raise typer.Exit(3)


def _sink(context: str | None) -> Any:
    import os

    from seedance.cli.config import active_context
    from seedance.control.paths import local_database_url
    from seedance.rollout.events import RemoteEventSink, StoreEventSink

    ctx = active_context(context)
    if ctx is None:
        return StoreEventSink(local_database_url())
    return RemoteEventSink(str(ctx["server"]), ctx.get("token") or os.environ.get("SEEDANCE_TOKEN"))

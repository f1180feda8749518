"""``seedancectl`` entry point.

Each command group lives in its own module under ``seedance.cli`` and exposes
``register(app)``; :data:`COMMAND_MODULES` lists them. Heavy imports (web, database, torch)
happen inside command functions, never at module import, so ``seedancectl --help`` stays fast.

Bad input (``InputError``, an unknown registry name) prints one line on stderr and exits with
code 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer

from seedance.core.errors import InputError, UnknownNameError

COMMAND_MODULES: tuple[str, ...] = (
    "seedance.cli.simulate",
    "seedance.cli.policies",
    "seedance.cli.costmodel",
    "seedance.cli.scheduler_policy",
    "seedance.cli.scheduler_run",  # after scheduler_policy: adds ``scheduler run`` to that group
    "seedance.cli.policy",
    "seedance.cli.rollout",
    "seedance.cli.inference",
    "seedance.cli.k8s",
    "seedance.cli.mig",
    "seedance.cli.trust",
    "seedance.cli.explain",
    "seedance.cli.serve",
    "seedance.cli.config",
    "seedance.cli.jobs",  # after explain: adds ``explain job`` to that group
    "seedance.cli.logs",
    "seedance.cli.kernels",
    "seedance.cli.optimize",
    "seedance.cli.privacy",
    "seedance.cli.cost",
    "seedance.cli.telemetry",
    "seedance.cli.reserve",
    "seedance.cli.markets",
    "seedance.cli.trace",
    "seedance.cli.hetero",  # after explain: adds ``explain migration`` to that group
    "seedance.cli.tenants",
)

EXIT_BAD_INPUT = 2


def build_app() -> typer.Typer:
    """The Typer application with every command group registered."""
    app = typer.Typer(
        name="seedancectl",
        help="Seedance: cost-aware GPU scheduling. Replay traces under policies, then run them live.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for mod in COMMAND_MODULES:
        importlib.import_module(mod).register(app)
    return app


def fail(message: str) -> typer.Exit:
    """Print ``message`` as one error line and return the exit to raise (code 2)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    app = build_app()
    try:
        # without standalone mode, click *returns* the code of a ``typer.Exit`` instead of raising it
        rc = app(args=argv, standalone_mode=False)
    except (InputError, UnknownNameError) as exc:
        typer.echo(f"error: {exc}", err=True)
        return EXIT_BAD_INPUT
    except typer.Exit as exc:
        return int(exc.exit_code)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # click usage errors and friends (typer vendors its own click)
        import click

        if isinstance(exc, click.exceptions.Abort | typer.Abort):
            return 1
        if isinstance(exc, click.ClickException | typer.exceptions.TyperException) and hasattr(exc, "format_message"):
            ctx = getattr(exc, "ctx", None)  # one "error:" line like every other failure
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.echo(f"error: {exc.format_message()}{hint}", err=True)
            return EXIT_BAD_INPUT
        raise
    return rc if isinstance(rc, int) and not isinstance(rc, bool) else 0


if __name__ == "__main__":
    sys.exit(main())

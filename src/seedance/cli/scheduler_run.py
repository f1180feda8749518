"""``seedancectl scheduler run``: the scheduling loop in a process of its own, no HTTP.

Pair it with ``seedancectl serve --no-scheduler``, so the API process only serves requests.
The store is migrated first; one process per store schedules (the others wait as standbys, see
``seedance.control.services.lease``); SIGTERM or SIGINT finishes the cycle in progress and
exits 0. Options become ``SEEDANCE_*`` settings like ``serve``'s.
"""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from seedance.cli.common import command_group


def register(app: typer.Typer) -> None:
    """Add ``run`` to the ``scheduler`` command group (registered by ``seedance.cli.scheduler_policy``)."""
    group = command_group(app, "scheduler", "Scheduler: run the loop on its own (run).")

    @group.command("run")
    def run(
        database_url: Annotated[str | None, typer.Option(
            help="sqlite:///path.db (default: seedance.db in $SEEDANCE_HOME) or postgresql+psycopg://user@host/db."
        )] = None,
        placement: Annotated[str | None, typer.Option(
            help="Placement policy when no scheduling policy is enabled (default best-fit).")] = None,
        dispatcher: Annotated[str | None, typer.Option(help="Backend for placed jobs (default noop).")] = None,
        interval: Annotated[float | None, typer.Option(
            help="Seconds between cycles when nothing wakes the loop (default 0.5; PostgreSQL wakes it at "
            "each submission).")] = None,
        min_gap: Annotated[float | None, typer.Option(
            help="Seconds a woken loop waits for more submissions before its cycle (default 0.05).")] = None,
    ) -> None:
        """Run only the scheduling loop of a store (no API) until SIGTERM or SIGINT."""
        from seedance.cli.serve import control_settings
        from seedance.control.loop_process import run_scheduler

        settings, _ = control_settings({"database_url": database_url, "scheduler_interval_s": interval,
                                        "scheduler_min_gap_s": min_gap}, placement=placement, dispatcher=dispatcher)
        stop = threading.Event()

        def on_signal(_sig: int, _frame: object) -> None:
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        run_scheduler(settings, stop, report=lambda line: typer.echo(f"seedance scheduler: {line}", err=True))

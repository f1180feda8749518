"""``seedancectl serve``: run the control-plane API service (FastAPI on uvicorn).

Options become ``SEEDANCE_*`` settings (see ``seedance.control.settings``). Before the workers
start, the store is migrated to the newest schema; if it holds no admin token, one is created and
printed once on stderr (only its hash is stored).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from seedance.control.settings import ControlSettings


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command."""

    @app.command("serve")
    def serve(
        host: Annotated[str | None, typer.Option(help="Address to listen on (default 127.0.0.1).")] = None,
        port: Annotated[int | None, typer.Option(help="TCP port (default 8080).")] = None,
        database_url: Annotated[str | None, typer.Option(
            help="sqlite:///path.db (default: seedance.db in $SEEDANCE_HOME) or postgresql+psycopg://user@host/db."
        )] = None,
        workers: Annotated[int | None, typer.Option(help="uvicorn worker processes (default 1).")] = None,
        scheduler: Annotated[bool, typer.Option("--scheduler/--no-scheduler",
                                                help="Run the scheduling loop in the service.")] = True,
        placement: Annotated[str | None, typer.Option(
            help="Placement policy when no scheduling policy is enabled (default best-fit).")] = None,
        dispatcher: Annotated[str | None, typer.Option(help="Backend for placed jobs (default noop).")] = None,
        log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
        fd: Annotated[int | None, typer.Option(
            help="Serve on this inherited, already listening socket (socket activation) instead of --port."
        )] = None,
    ) -> None:
        """Serve the control-plane API, dashboard and metrics."""
        import uvicorn

        from seedance.control.db import migrate
        from seedance.control.db.session import Database
        from seedance.control.services import tokens

        settings, chosen = control_settings(
            {"host": host, "port": port, "database_url": database_url, "workers": workers},
            placement=placement, dispatcher=dispatcher, scheduler_enabled=scheduler,
        )
        db = Database(settings.database_url, pool_size=2)
        migrate.upgrade(db)
        with db.write() as s:
            secret = settings.bootstrap_token.get_secret_value() if settings.bootstrap_token else None
            fresh = tokens.ensure_admin_token(session=s, value=secret)
        db.dispose()
        if fresh:
            typer.echo(f"admin token (shown once; only its hash is stored): {fresh}", err=True)
        where = f"fd {fd}" if fd is not None else f"http://{settings.host}:{settings.port}"
        typer.echo(f"seedance control plane on {where} ({db.describe()})", err=True)
        for key, value in chosen.items():  # the workers read their settings from the environment
            os.environ[f"SEEDANCE_{key.upper()}"] = str(value).lower() if isinstance(value, bool) else str(value)
        uvicorn.run(
            "seedance.control.app:create_app_from_env", factory=True, host=settings.host, port=settings.port,
            fd=fd, workers=settings.workers, log_level=log_level, access_log=False, timeout_graceful_shutdown=5,
            **uvicorn_limits(settings),
        )


def control_settings(
    options: dict[str, Any], *, placement: str | None, dispatcher: str | None, **fixed: Any
) -> tuple[ControlSettings, dict[str, Any]]:
    """``ControlSettings`` from a command's options (``None``: not given) and ``fixed`` values; also the
    settings chosen, by name. The placement and dispatcher names are checked and canonicalised; a bad
    value is an ``InputError`` naming the setting (exit code 2)."""
    from pydantic import ValidationError

    from seedance.backends.dispatch import DISPATCHERS
    from seedance.control.policydoc import canonical_placement
    from seedance.control.settings import ControlSettings
    from seedance.core.errors import InputError

    named = {**options, "default_placement": canonical_placement(placement) if placement else None,
             "dispatcher": DISPATCHERS.get(dispatcher).name if dispatcher else None}
    chosen = {**{k: v for k, v in named.items() if v is not None}, **fixed}
    try:
        return ControlSettings(**chosen), chosen
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"], source="settings", field=".".join(str(x) for x in err["loc"])) from None


def uvicorn_limits(settings: Any) -> dict[str, Any]:
    """The uvicorn options enforcing the settings' header-size limit and idle timeout."""
    from seedance.control.httpguard import GuardedHttpToolsProtocol

    return {"http": GuardedHttpToolsProtocol, "h11_max_incomplete_event_size": settings.max_header_bytes,
            "timeout_keep_alive": settings.idle_timeout_s}

"""``seedancectl config``: kubectl-style contexts (which control-plane server the CLI talks to).

The contexts file is ``$SEEDANCE_HOME/config.yaml`` (the user data folder by default), written
with mode 0600 since it holds tokens::

    current-context: prod
    contexts:
      - name: prod
        server: https://seedance.example:8080
        token: sdt_...
        cluster: default

With no current context (``seedancectl config use-local``), job commands work on the local
embedded store. ``--context NAME`` or ``$SEEDANCE_CONTEXT`` pick a context for one command.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from seedance.core.errors import InputError
from seedance.core.yamldoc import compose

CONTEXT_ENV = "SEEDANCE_CONTEXT"


def config_path() -> Path:
    """Where the contexts file lives."""
    from seedance.control.paths import home_dir

    return home_dir() / "config.yaml"


def load_config() -> dict[str, Any]:
    """The contexts file as a mapping (empty when absent)."""
    path = config_path()
    if not path.exists():
        return {"current-context": None, "contexts": []}
    data = compose(path.read_text(encoding="utf-8"), source=str(path), what="config", allow_empty=True)[1] or {}
    if not isinstance(data, dict) or not isinstance(data.get("contexts", []), list):
        raise InputError("expected a mapping with a 'contexts' list", source=str(path))
    data.setdefault("contexts", [])
    data.setdefault("current-context", None)
    return data


def save_config(data: dict[str, Any]) -> None:
    """Write the contexts file (mode 0600)."""
    path = config_path()
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    os.replace(tmp, path)


def find_context(data: dict[str, Any], name: str) -> dict[str, Any]:
    """The context called ``name`` (unknown names list the known ones)."""
    for ctx in data["contexts"]:
        if ctx.get("name") == name:
            return dict(ctx)
    known = ", ".join(str(c.get("name")) for c in data["contexts"]) or "none"
    raise InputError(f"no context {name!r}; known contexts: {known}", source=str(config_path()))


def active_context(override: str | None = None) -> dict[str, Any] | None:
    """The context to use: ``override``, else ``$SEEDANCE_CONTEXT``, else the current one (or None)."""
    data = load_config()
    name = override or os.environ.get(CONTEXT_ENV) or data.get("current-context")
    return find_context(data, name) if name else None


def register(app: typer.Typer) -> None:
    """Add the ``config`` command group."""
    cfg = typer.Typer(help="Contexts: which control-plane server the CLI talks to (kubectl-style).",
                      no_args_is_help=True)
    app.add_typer(cfg, name="config")

    @cfg.command("set-context")
    def set_context(
        name: Annotated[str, typer.Argument(help="Context name.")],
        server: Annotated[str, typer.Option(help="Server URL, e.g. http://127.0.0.1:8080.")],
        token: Annotated[str | None, typer.Option(help="API token (or set $SEEDANCE_TOKEN when using it).")] = None,
        cluster: Annotated[str, typer.Option(help="Default cluster.")] = "default",
        use: Annotated[bool, typer.Option("--use/--no-use", help="Also make it the current context.")] = False,
    ) -> None:
        """Create or replace a context."""
        if not server.startswith(("http://", "https://")):
            raise InputError("must start with http:// or https://", source="--server")
        data = load_config()
        entry: dict[str, Any] = {"name": name, "server": server.rstrip("/"), "cluster": cluster}
        if token:
            entry["token"] = token
        data["contexts"] = [c for c in data["contexts"] if c.get("name") != name] + [entry]
        if use:
            data["current-context"] = name
        save_config(data)
        typer.echo(f"context {name!r} set" + (" and in use" if use else ""))

    @cfg.command("use-context")
    def use_context(name: Annotated[str, typer.Argument(help="Context name.")]) -> None:
        """Make a context the current one."""
        data = load_config()
        find_context(data, name)
        data["current-context"] = name
        save_config(data)
        typer.echo(f"switched to context {name!r}")

    @cfg.command("use-local")
    def use_local() -> None:
        """Clear the current context: job commands use the local embedded store."""
        data = load_config()
        data["current-context"] = None
        save_config(data)
        typer.echo("no current context: using the local store")

    @cfg.command("current-context")
    def current_context() -> None:
        """Print the current context's name (or 'local')."""
        typer.echo(load_config().get("current-context") or "local")

    @cfg.command("get-contexts")
    def get_contexts() -> None:
        """List contexts (tokens are not shown)."""
        data = load_config()
        cur = data.get("current-context")
        for c in data["contexts"]:
            mark = "*" if c.get("name") == cur else " "
            typer.echo(f"{mark} {c.get('name')}\t{c.get('server')}\tcluster={c.get('cluster', 'default')}")

    @cfg.command("delete-context")
    def delete_context(name: Annotated[str, typer.Argument(help="Context name.")]) -> None:
        """Remove a context."""
        data = load_config()
        find_context(data, name)
        data["contexts"] = [c for c in data["contexts"] if c.get("name") != name]
        if data.get("current-context") == name:
            data["current-context"] = None
        save_config(data)
        typer.echo(f"deleted context {name!r}")

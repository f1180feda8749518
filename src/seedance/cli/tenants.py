"""Tenant and token commands: ``tenant create|list``, ``token create|list|revoke``.

They talk to the server of the current context (``seedancectl config set-context``) with its
token: creating tenants takes an admin token; an operator creates and revokes its own tenant's
tokens. ``token create`` prints the new token's value once (``-o json``: the whole answer,
``token`` included); only its hash is stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from seedance.cli.jobs import ContextOpt, Output, OutputOpt, _emit
from seedance.core.errors import InputError

if TYPE_CHECKING:
    from seedance.control.client import RemoteClient

ROLES = ("admin", "cluster-admin", "operator", "member", "viewer")


def _remote(context: str | None) -> RemoteClient:
    import os

    from seedance.cli.config import active_context
    from seedance.cli.jobs import TOKEN_ENV
    from seedance.control.client import RemoteClient

    ctx = active_context(context)
    if ctx is None:
        raise InputError("tenants and tokens live on a server: add one with 'seedancectl config set-context NAME "
                         "--server URL --token TOKEN --use'", source="--context")
    return RemoteClient(str(ctx["server"]), ctx.get("token") or os.environ.get(TOKEN_ENV), retries=1)


def _call(context: str | None, method: str, path: str, **kw: Any) -> Any:
    from seedance.control.client import ClientError
    from seedance.control.errors import ControlError

    client = _remote(context)
    try:
        return client._call(method, path, retry=False, **kw)
    except ClientError as exc:
        raise InputError(str(exc)) from None
    except ControlError as exc:
        raise InputError(f"{exc.status}: {exc}") from None
    finally:
        client.close()


def _table(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table()
    for col in columns:
        t.add_column(col.upper())
    for r in rows:
        t.add_row(*("-" if r.get(c) is None else str(r.get(c)) for c in columns))
    return t


def register(app: typer.Typer) -> None:
    """Add the ``tenant`` and ``token`` command groups."""
    tenant = typer.Typer(help="Tenants (admin: create; everyone: list those visible).", no_args_is_help=True)
    token = typer.Typer(help="API tokens: create (value shown once), list, revoke.", no_args_is_help=True)
    app.add_typer(tenant, name="tenant")
    app.add_typer(token, name="token")

    @tenant.command("create")
    def tenant_create(
        name: Annotated[str, typer.Argument(help="Tenant name (DNS label).")],
        display_name: Annotated[str, typer.Option(help="Free text shown in listings.")] = "",
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """Create a tenant (admin token)."""
        out = _call(context, "POST", "/api/v1/tenants", json={"name": name, "display_name": display_name})
        _emit(out, output, lambda: _table(("id", "name", "display_name", "created_at"), [out]))

    @tenant.command("list")
    def tenant_list(output: OutputOpt = Output.table, context: ContextOpt = None) -> None:
        """Tenants visible to the token (admins: all)."""
        out = _call(context, "GET", "/api/v1/tenants")
        _emit(out, output, lambda: _table(("id", "name", "display_name", "created_at"), out))

    @token.command("create")
    def token_create(
        name: Annotated[str, typer.Argument(help="What or who uses the token (DNS label).")],
        role: Annotated[str, typer.Option(help=f"One of {', '.join(ROLES)}.")] = "member",
        tenant_id: Annotated[int | None, typer.Option("--tenant-id", help="Tenant (default: the caller's).")] = None,
        tenant_name: Annotated[str | None, typer.Option("--tenant", help="Tenant by name instead of id.")] = None,
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """Create a token; its value is printed this once (store it now)."""
        if role not in ROLES:
            raise InputError(f"unknown role {role!r}; valid: {', '.join(ROLES)}", source="--role")
        if tenant_name is not None:
            found = [t["id"] for t in _call(context, "GET", "/api/v1/tenants") if t["name"] == tenant_name]
            if not found:
                raise InputError(f"no tenant {tenant_name!r} visible to this token", source="--tenant")
            tenant_id = found[0]
        body: dict[str, Any] = {"name": name, "role": role}
        if tenant_id is not None:
            body["tenant_id"] = tenant_id
        out = _call(context, "POST", "/api/v1/tokens", json=body)
        if output is Output.table:
            typer.echo(f"token {out['name']} (id {out['id']}, role {out['role']}, tenant {out['tenant_id']}); "
                       "its value, shown once:", err=True)
            typer.echo(out["token"])
            return
        _emit(out, output, None)

    @token.command("list")
    def token_list(output: OutputOpt = Output.table, context: ContextOpt = None) -> None:
        """Tokens visible to the caller (never their values)."""
        out = _call(context, "GET", "/api/v1/tokens")
        _emit(out, output, lambda: _table(("id", "name", "role", "tenant_id", "prefix", "created_at", "revoked_at"),
                                          out))

    @token.command("revoke")
    def token_revoke(
        token_id: Annotated[int, typer.Argument(help="Token id (see 'token list').")],
        output: OutputOpt = Output.table, context: ContextOpt = None,
    ) -> None:
        """Revoke a token; it is refused from then on (the last admin token cannot be revoked)."""
        out = _call(context, "DELETE", f"/api/v1/tokens/{token_id}")
        _emit(out, output, lambda: _table(("id", "name", "role", "tenant_id", "revoked_at"), [out]))

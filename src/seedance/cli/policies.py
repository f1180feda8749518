"""``seedancectl policies``: list the registered placement policies and queue orders."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table


def register(app: typer.Typer) -> None:
    """Add the ``policies`` command."""

    @app.command("policies")
    def policies() -> None:
        """List placement policies and queue orders by registry name."""
        from seedance.scheduling import PLACEMENT_POLICIES, QUEUE_ORDERS

        table = Table(title="placement policies")
        table.add_column("name")
        table.add_column("what it does")
        for name in PLACEMENT_POLICIES.names():
            table.add_row(name, PLACEMENT_POLICIES.get(name).summary)
        console = Console()
        console.print(table)
        console.print("queue orders: " + ", ".join(QUEUE_ORDERS.names()))

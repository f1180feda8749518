"""Where the canary controller records what it did: the control plane's append-only event log.

``StoreEventSink`` appends to a store directly (the local store, or a server's own process);
``RemoteEventSink`` posts to a server's ``POST /api/v1/rollout/events``. Kinds are
``rollout.started``, ``rollout.advanced``, ``rollout.promoted`` and ``rollout.rolled_back``.
"""

from __future__ import annotations

from typing import Any, Protocol


class EventSink(Protocol):
    """Receives the controller's events."""

    def record(self, kind: str, message: str, data: dict[str, Any]) -> None:
        """Record one event."""


class StoreEventSink:
    """Appends to a control-plane store's event log."""

    def __init__(self, database_url: str) -> None:
        from seedance.control.db import migrate
        from seedance.control.db.session import Database

        self.db = Database(database_url, pool_size=1)
        migrate.upgrade(self.db)

    def record(self, kind: str, message: str, data: dict[str, Any]) -> None:
        from seedance.control.services import events

        with self.db.write() as s:
            events.record(session=s, kind=kind, message=message, data=data)

    def close(self) -> None:
        """Close the store connection."""
        self.db.dispose()


class RemoteEventSink:
    """Posts events to a control-plane server (operator token)."""

    def __init__(self, server: str, token: str | None, *, timeout: float = 5.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=timeout)

    def record(self, kind: str, message: str, data: dict[str, Any]) -> None:
        r = self._http.post("/api/v1/rollout/events", json={"kind": kind, "message": message, "data": data})
        r.raise_for_status()

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()

"""Fixtures for the control-plane tests: stores (SQLite file, PostgreSQL schema), services, live servers.

PostgreSQL tests use the real server at 127.0.0.1:5432 (database ``test``), each in a fresh
schema dropped afterwards, so runs never see each other's data. If the server is down the
tests fail (never skip): ``bash scripts/test.sh`` starts it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from seedance.control.service import ControlService
from tests.control.helpers import ADMIN_TOKEN, serve_in_thread, settings_for

PG_BASE = os.environ.get("SEEDANCE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_connect() -> Any:
    import psycopg

    try:
        return psycopg.connect(PG_BASE, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is required at {PG_BASE} (start it with scripts/test.sh): {exc}")


@pytest.fixture(autouse=True)
def _privacy_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Apps built here get a per-test Redis prefix, master key and folders for their privacy routes."""
    from tests.privacy.isolation import isolated_privacy_env

    for _ in isolated_privacy_env(tmp_path, monkeypatch):
        yield


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A SQLAlchemy URL of a fresh, empty PostgreSQL schema (dropped afterwards)."""
    schema = f"sd_test_{os.getpid()}_{secrets.token_hex(4)}"
    with _pg_connect() as c:
        c.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG_BASE.replace('postgresql://', 'postgresql+psycopg://')}?options=-csearch_path%3D{schema}"
    finally:
        with _pg_connect() as c:
            c.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL, once per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return str(request.getfixturevalue("pg_schema_url"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite store URL."""
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
def make_service() -> Iterator[Callable[..., ControlService]]:
    """Build services on a URL; all are closed after the test."""
    made: list[ControlService] = []

    def make(url: str, **kw: Any) -> ControlService:
        svc = ControlService(settings_for(url), **kw)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.close()


@dataclass
class LiveServer:
    """A real uvicorn server in a thread, over real HTTP."""

    url: str
    service: ControlService
    app: Any

    def client(self, token: str | None = ADMIN_TOKEN) -> httpx.Client:
        """An HTTP client with ``token`` as bearer."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def start_live_server(url: str, **settings: Any) -> tuple[LiveServer, Callable[[], None]]:
    """Start uvicorn in a thread on a free port; returns the server and a function stopping it."""
    from seedance.control.app import create_app

    svc = ControlService(settings_for(url, **settings))
    app = create_app(service=svc)
    base, stop = serve_in_thread(app)
    return LiveServer(base, svc, app), stop


@pytest.fixture
def live_server_factory() -> Iterator[Callable[..., LiveServer]]:
    """Start uvicorn servers in threads on free ports; all are stopped after the test."""
    stops: list[Callable[[], None]] = []

    def start(url: str, **settings: Any) -> LiveServer:
        server, stop = start_live_server(url, **settings)
        stops.append(stop)
        return server

    yield start
    for stop in stops:
        stop()


@pytest.fixture
def live_server(live_server_factory: Callable[..., LiveServer], sqlite_url: str) -> LiveServer:
    """A live server on a fresh SQLite store, scheduling loop off."""
    return live_server_factory(sqlite_url)

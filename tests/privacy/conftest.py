"""Fixtures of the privacy tests: a control service + privacy service on a fresh store, real Redis
under a per-test key prefix (deleted afterwards), a settable clock, temporary audit and backup folders.

Redis is the real server at 127.0.0.1:6379; when it is down the tests fail (never skip).
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from seedance.control.service import ControlService
from seedance.privacy.crypto import encode_key, new_key
from seedance.privacy.service import PrivacyService
from seedance.privacy.settings import PrivacySettings
from tests.control.conftest import pg_schema_url, sqlite_url  # noqa: F401  (fixtures)
from tests.control.helpers import ADMIN_TOKEN, settings_for

REDIS_URL = os.environ.get("SEEDANCE_TEST_REDIS", "redis://127.0.0.1:6379/0")


class Clock:
    """A clock the test moves (starts at the real time, so Redis key expiries stay meaningful)."""

    def __init__(self) -> None:
        self.t = dt.datetime.now(dt.UTC).replace(microsecond=0)

    def __call__(self) -> dt.datetime:
        return self.t

    def advance(self, **kw: float) -> None:
        self.t += dt.timedelta(**kw)


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A unique key prefix; every key under it is deleted after the test."""
    import redis

    prefix = f"sdtest:{os.getpid()}:{secrets.token_hex(4)}:"
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis is required at {REDIS_URL} (start it with scripts/test.sh): {exc}")
    yield prefix
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@dataclass
class Env:
    """A control service, its privacy service and the clock driving it."""

    control: ControlService
    privacy: PrivacyService
    clock: Clock
    tmp: Path

    def admin(self) -> Any:
        return self.control.authenticate(ADMIN_TOKEN)


@pytest.fixture
def make_env(redis_prefix: str, tmp_path: Path) -> Iterator[Callable[..., Env]]:
    """Build ``Env`` on a store URL with privacy settings overrides; all closed after the test."""
    made: list[Env] = []

    def make(url: str, **privacy: Any) -> Env:
        control = ControlService(settings_for(url))
        clock = Clock()
        base: dict[str, Any] = {
            "redis_url": REDIS_URL, "redis_prefix": redis_prefix, "master_key": encode_key(new_key()),
            "audit_dir": tmp_path / "audit_logs", "backup_dir": tmp_path / "backups", "worker_enabled": False,
        }
        base.update(privacy)
        svc = PrivacyService(control, PrivacySettings(**base), clock=clock)
        env = Env(control, svc, clock, tmp_path)
        made.append(env)
        return env

    yield make
    for env in made:
        env.privacy.close()
        env.control.close()


@pytest.fixture
def env(make_env: Callable[..., Env], sqlite_url: str) -> Env:  # noqa: F811
    """An environment on a fresh SQLite store."""
    return make_env(sqlite_url)


@pytest.fixture
def pg_env(make_env: Callable[..., Env], pg_schema_url: str) -> Env:  # noqa: F811
    """An environment on a fresh PostgreSQL schema."""
    return make_env(pg_schema_url)


def client_for(env: Env, token: str | None = ADMIN_TOKEN) -> Any:
    """An in-process HTTP client of the app, with ``env``'s privacy service installed."""
    from fastapi.testclient import TestClient

    from seedance.control.app import create_app

    app = create_app(service=env.control)
    app.state.privacy = env.privacy
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return TestClient(app, headers=headers, raise_server_exceptions=True)

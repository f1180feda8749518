"""Store fixtures shared with the control-plane tests (fresh SQLite file or PostgreSQL schema per test)."""

from __future__ import annotations

from tests.control.conftest import db_url, pg_schema_url, sqlite_url  # noqa: F401  (pytest fixtures)

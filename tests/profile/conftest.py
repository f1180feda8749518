"""The control-plane fixtures (fresh SQLite / PostgreSQL stores, services) for the parity tests."""

from tests.control.conftest import _privacy_isolated, make_service, pg_schema_url, sqlite_url  # noqa: F401

"""The control-plane fixtures (fresh SQLite stores, services) for the scorer's parity test."""

from tests.control.conftest import _privacy_isolated, make_service, sqlite_url  # noqa: F401

"""Alembic migrations of the control-plane store."""

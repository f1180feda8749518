"""Apply the Alembic migrations (``upgrade head``); safe to call from several processes at once."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from seedance.control.db.session import Database

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_PG_LOCK_KEY = 0x5EEDA  # advisory lock serialising concurrent upgrades


def alembic_config() -> Config:
    """An Alembic config pointing at the packaged migrations."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def upgrade(db: Database, revision: str = "head") -> None:
    """Bring the store to ``revision`` (default: the newest)."""
    cfg = alembic_config()
    engine = db.engine.execution_options(sqlite_begin="IMMEDIATE")
    with engine.begin() as conn:
        if db.dialect == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK_KEY})")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def current_revision(db: Database) -> str | None:
    """The store's revision (``None`` for an empty store)."""
    with db.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    """The newest packaged revision."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()

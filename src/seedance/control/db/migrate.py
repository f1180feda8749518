"""Apply the Alembic migrations (``upgrade head``); safe to call from several processes at once."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from seedance.control.db.session import Database

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
HEAD_REVISION = "0005_i20"
"""The newest revision in ``migrations/versions`` (a test checks it against Alembic's head). A store
already at this revision starts without importing Alembic at all (faster restarts)."""
_PG_LOCK_KEY = 0x5EEDA  # advisory lock serialising concurrent upgrades


def alembic_config() -> Config:
    """An Alembic config pointing at the packaged migrations."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def upgrade(db: Database, revision: str = "head") -> None:
    """Bring the store to ``revision`` (default: the newest)."""
    if revision == "head" and _stored_revision(db) == HEAD_REVISION:
        return
    from alembic import command

    cfg = alembic_config()
    engine = db.engine.execution_options(sqlite_begin="IMMEDIATE")
    with engine.begin() as conn:
        if db.dialect == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK_KEY})")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def _stored_revision(db: Database) -> str | None:
    try:
        with db.engine.connect() as conn:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except DBAPIError:  # no version table yet
        return None


def current_revision(db: Database) -> str | None:
    """The store's revision (``None`` for an empty store)."""
    from alembic.runtime.migration import MigrationContext

    with db.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    """The newest packaged revision, according to Alembic."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()

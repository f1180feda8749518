"""The ``Database`` handle: one engine, read and write sessions, SQLite and PostgreSQL alike.

SQLite runs in WAL mode with ``synchronous=NORMAL``: a committed transaction survives the
process being killed (only a power cut can lose the last ones). Write sessions start with
``BEGIN IMMEDIATE`` so that concurrent writers queue on the busy timeout instead of failing
with ``SQLITE_BUSY`` when a read lock cannot be upgraded; read sessions start ``DEFERRED`` and
never block. PostgreSQL uses its default READ COMMITTED isolation. The SQLite file is mode 0600.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from seedance.core.errors import InputError


class Database:
    """An engine plus session factories for one store.

    Args:
        url: ``sqlite:///path.db`` or ``postgresql+psycopg://user@host:port/db`` (a plain
            ``postgresql://`` URL gets the psycopg driver).
        pool_size: Connections kept per process.
    """

    def __init__(self, url: str, *, pool_size: int = 16) -> None:
        parsed = make_url(url)
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        self.url = parsed
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            db = parsed.database
            if not db or db == ":memory:":
                raise InputError("an in-memory SQLite store cannot be shared; give a file path", source="database_url")
            Path(db).parent.mkdir(parents=True, exist_ok=True)
            private_file(Path(db))
            self.engine: Engine = create_engine(
                parsed, pool_size=pool_size, max_overflow=pool_size, pool_timeout=60,
                connect_args={"check_same_thread": False, "timeout": 60},
            )
            _sqlite_setup(self.engine)
            self._write_engine: Engine = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        elif self.dialect == "postgresql":
            self.engine = create_engine(
                parsed, pool_size=pool_size, max_overflow=pool_size, pool_timeout=60, pool_recycle=1800
            )
            self._write_engine = self.engine
        else:
            raise InputError(f"unsupported database {self.dialect!r}; use sqlite or postgresql", source="database_url")
        self._write_lock = threading.Lock() if self.dialect == "sqlite" else None
        self._read = sessionmaker(self.engine, expire_on_commit=False, autoflush=False)
        self._write = sessionmaker(self._write_engine, expire_on_commit=False, autoflush=False)

    @property
    def is_sqlite(self) -> bool:
        """True for an SQLite store."""
        return self.dialect == "sqlite"

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reads; closed (its transaction rolled back) at the end.

        Objects loaded through it stay usable afterwards (detached with their loaded columns).
        """
        session = self._read()
        try:
            yield session
        finally:
            session.close()

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session for one write transaction: committed at the end, rolled back on error.

        On SQLite, writers of this process queue on a lock first: SQLite's own busy handler
        sleeps in steps of up to 100 ms, which would turn brief contention into long stalls.
        """
        lock = self._write_lock
        if lock is not None:
            lock.acquire()
        session = self._write()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()
            if lock is not None:
                lock.release()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    def describe(self) -> str:
        """The URL without a password."""
        return self.url.render_as_string(hide_password=True)


def private_file(path: Path) -> None:
    """Create ``path`` (and fix an existing one and its WAL/SHM files) readable by its owner only.

    SQLite gives its ``-wal`` and ``-shm`` files the mode of the database file, so 0600 here keeps
    tokens' hashes and job data away from other local users.
    """
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if p.exists() and (p.stat().st_mode & 0o077):
            os.chmod(p, 0o600)


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _rec: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself (see _on_begin)
        cur = dbapi_conn.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=60000", "foreign_keys=ON"):
            cur.execute(f"PRAGMA {pragma}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

"""Data backups without the key vault, restores into a scratch database, and the ledger replay.

* PostgreSQL: ``pg_dump --format=custom --schema=<the store's schema>`` with every key table
  excluded (``--exclude-table``); restored with ``pg_restore`` into a scratch database created for
  the purpose and dropped afterwards.
* SQLite: the online-backup API into a new file, the key tables dropped from the copy and the file
  ``VACUUM``-ed (so no page of the key tables survives in free space).

A backup holds subjects' rows sealed under their data keys; the keys stay in the live vault
only. Destroying a key there therefore makes every earlier backup's copy of that subject
unreadable (crypto-shredding). ``replay_ledger`` is run on every restore: it deletes the rows of
every subject erased since (by its random id), so a restored store never resurrects them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import secrets
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import insert, select, text, update
from sqlalchemy.engine import URL

from seedance.control.db.session import Database
from seedance.core.errors import InputError
from seedance.privacy.errors import ServiceUnavailable
from seedance.privacy.models import KEY_TABLES, BackupRecord, ErasureRequest, Tombstone
from seedance.privacy.registry import SUBJECT_DATA

if TYPE_CHECKING:
    from seedance.privacy.service import PrivacyService

PG_DUMP_FORMAT = "pg_dump-custom"
SQLITE_FORMAT = "sqlite"


def pg_tool(name: str) -> str:
    """Path of a PostgreSQL client tool (``PATH``, else the newest ``/usr/lib/postgresql/*/bin``)."""
    found = shutil.which(name)
    if found:
        return found
    base = Path("/usr/lib/postgresql")
    versions = sorted((p for p in base.glob("*/bin") if (p / name).exists()), key=lambda p: p.parent.name)
    if versions:
        return str(versions[-1] / name)
    raise ServiceUnavailable(f"{name} is required for PostgreSQL backups and is not installed (apt-get install "
                             "postgresql-client)")


def _pg_args(url: URL) -> tuple[list[str], dict[str, str]]:
    args = ["--host", url.host or "127.0.0.1", "--port", str(url.port or 5432),
            "--username", url.username or "postgres"]
    env = dict(os.environ)
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    return args, env


def _schema(db: Database) -> str:
    with db.engine.connect() as conn:
        return str(conn.execute(text("SELECT current_schema()")).scalar())


def _run(cmd: list[str], env: dict[str, str], what: str) -> None:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        raise ServiceUnavailable(f"{what} failed ({proc.returncode}): {proc.stderr.strip()[:500]}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def take_backup(svc: PrivacyService) -> BackupRecord:
    """Back up the store (without the key vault) and register the backup."""
    db = svc.db
    now = svc.now()
    folder = svc.backup_dir
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"seedance-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
    if db.is_sqlite:
        path = folder / f"{stem}.db"
        _sqlite_backup(Path(str(db.url.database)), path)
        fmt = SQLITE_FORMAT
    else:
        path = folder / f"{stem}.dump"
        schema = _schema(db)
        args, env = _pg_args(db.url)
        cmd = [pg_tool("pg_dump"), *args, "--dbname", str(db.url.database), "--format=custom", "--no-owner",
               f"--schema={schema}", *[f"--exclude-table={schema}.{t}" for t in KEY_TABLES], f"--file={path}"]
        _run(cmd, env, "pg_dump")
        fmt = PG_DUMP_FORMAT
    with db.write() as s:
        rid = s.execute(insert(BackupRecord).values(
            path=str(path), fmt=fmt, taken_at=now, sha256=_sha256(path), size_bytes=path.stat().st_size,
            excluded=list(KEY_TABLES)).returning(BackupRecord.id)).scalar_one()
        rec = s.get(BackupRecord, rid)
        assert rec is not None
        return rec


def _sqlite_backup(src: Path, dst: Path) -> None:
    with sqlite3.connect(src) as source, sqlite3.connect(dst) as target:
        source.backup(target)
    con = sqlite3.connect(dst, isolation_level=None)
    try:
        for t in KEY_TABLES:
            con.execute(f'DROP TABLE IF EXISTS "{t}"')
        con.execute("PRAGMA journal_mode=DELETE")
        con.execute("VACUUM")
    finally:
        con.close()


def list_backups(svc: PrivacyService) -> list[BackupRecord]:
    """Registered backups, newest first."""
    with svc.db.read() as s:
        return list(s.scalars(select(BackupRecord).order_by(BackupRecord.id.desc())))


@contextmanager
def restored(svc: PrivacyService, record: BackupRecord) -> Iterator[Database]:
    """The backup restored into a scratch database (or file), dropped when the block ends."""
    path = Path(record.path)
    if not path.exists():
        raise InputError(f"backup {record.id} is gone from disk", source=record.path)
    if _sha256(path) != record.sha256:
        raise InputError(f"backup {record.id} does not match its recorded SHA-256 (changed or damaged)",
                         source=record.path)
    if record.fmt == SQLITE_FORMAT:
        with tempfile.TemporaryDirectory(prefix="sd-restore-") as tmp:
            copy = Path(tmp) / "restore.db"
            shutil.copyfile(path, copy)
            lite = Database(f"sqlite:///{copy}", pool_size=2)
            try:
                yield lite
            finally:
                lite.dispose()
        return
    live = svc.db.url
    scratch = f"sd_restore_{secrets.token_hex(6)}"
    admin_args, env = _pg_args(live)
    _admin(live, f'CREATE DATABASE "{scratch}"')
    db: Database | None = None
    try:
        _run([pg_tool("pg_restore"), *admin_args, "--dbname", scratch, "--no-owner", "--no-privileges",
              "--exit-on-error", str(path)], env, "pg_restore")
        schema = _schema(svc.db)
        url = live.set(database=scratch, query={"options": f"-csearch_path={schema}"})
        db = Database(url.render_as_string(hide_password=False), pool_size=2)
        yield db
    finally:
        if db is not None:
            db.dispose()
        _admin(live, f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')


def _admin(url: URL, sql: str) -> None:
    import psycopg

    conninfo = url.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.encode())


def replay_ledger(live: Database, target: Database) -> dict[str, int]:
    """Delete, in ``target`` (a restored backup), every row of every subject erased in ``live``."""
    with live.read() as s:
        erased = list(s.scalars(select(Tombstone.subject_id)))
    deleted: dict[str, int] = {}
    with target.write() as s:
        for start in range(0, len(erased), 500):
            chunk = erased[start:start + 500]
            for item in SUBJECT_DATA:
                deleted[item.table] = deleted.get(item.table, 0) + item.delete(s, chunk)
        s.execute(update(ErasureRequest).where(ErasureRequest.identity_ct.is_not(None),
                                               ErasureRequest.status.in_(("erased", "verified")))
                  .values(identity_ct=None))
    return deleted


def backups_in_scope(svc: PrivacyService, now: dt.datetime) -> list[BackupRecord]:
    """Backups the verification restores: every registered one still on disk."""
    return [b for b in list_backups(svc) if Path(b.path).exists() and b.taken_at <= now]

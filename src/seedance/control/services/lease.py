"""The scheduler lease: at most one ``seedancectl scheduler run`` process schedules a store at a time.

Several loops on one store are safe without it (every commit is a compare-and-swap on the
cluster's ``sched_version``; the loser re-plans), but they would duplicate the reads and the
decisions and lose commits to each other. So a loop process first takes the lease and the others
wait as standbys, retrying every second:

* PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) keyed by the schema, held by a
  connection of its own; the server releases it when that connection closes, also when the
  holder is killed or its host dies (TCP keep-alive), so a standby takes over.
* SQLite: an exclusive ``flock`` on ``<store>.scheduler.lock`` next to the store file; the kernel
  releases it when the holder exits.

A loop started inside an API process (``seedancectl serve`` with its scheduler on) takes no lease;
the compare-and-swap keeps it correct next to a loop process.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from typing import Any

from seedance.control.db.session import Database

_KEY_SQL = "hashtext('seedance.scheduler:' || current_schema())"


@dataclass(slots=True)
class Lease:
    """A held lease. ``conn``: the PostgreSQL connection holding the lock (``None`` on SQLite)."""

    conn: Any = None
    fd: int | None = None

    def release(self) -> None:
        """Give the lease up (closing the connection or the lock file)."""
        if self.conn is not None:
            self.conn.close()  # the server releases the session's advisory lock with it
            self.conn = None
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None


def lock_path(db: Database) -> str:
    """The lock file of an SQLite store."""
    return f"{db.url.database}.scheduler.lock"


def try_lease(db: Database) -> Lease | None:
    """Take the store's scheduler lease now, or ``None`` when another process holds it."""
    if db.is_sqlite:
        fd = os.open(lock_path(db), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return Lease(fd=fd)
    import psycopg

    from seedance.control.services.wakeup import conninfo

    conn = psycopg.connect(conninfo(db), autocommit=True, connect_timeout=10,
                           keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3)
    try:
        row = conn.execute(f"SELECT pg_try_advisory_lock({_KEY_SQL})").fetchone()
    except BaseException:
        conn.close()
        raise
    if not row or not row[0]:
        conn.close()
        return None
    return Lease(conn=conn)

"""Waking a scheduling loop in another process: PostgreSQL ``NOTIFY`` from the API, ``LISTEN`` in the loop.

An API process started with ``--no-scheduler`` has no loop to wake after a submission; a loop in
its own process (``seedancectl scheduler run``) would only see the job at its next interval. On
PostgreSQL the API's :class:`NotifyWaker` sends ``NOTIFY`` on the store's channel instead, from its
own thread and connection, at most once per ``min_gap_s`` (a burst of submissions costs one
notification, and the request path only sets an event); the loop process listens on that channel
(:func:`listen`) and starts a cycle. SQLite has no notifications: the loop runs every interval.

The channel is per schema (``channel_for``), so stores sharing one database never wake each other.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from seedance.control.db.session import Database

log = logging.getLogger("seedance.control.wakeup")

_PREFIX = "seedance_sched_"


def conninfo(db: Database) -> str:
    """A libpq connection string of the store (its ``options``, e.g. the schema's ``search_path``, kept)."""
    return db.url.set(drivername="postgresql").render_as_string(hide_password=False)


def channel_for(schema: str) -> str:
    """The notification channel of the store in ``schema`` (an identifier, never quoted)."""
    return _PREFIX + hashlib.sha256(schema.encode()).hexdigest()[:16]


def current_channel(conn: Any) -> str:
    """The channel of the schema a psycopg connection writes to."""
    row = conn.execute("SELECT current_schema()").fetchone()
    return channel_for(str(row[0] if row else "public"))


class NotifyWaker:
    """Sends ``NOTIFY`` on the store's channel after :meth:`wake` (a thread and a connection of its own).

    Args:
        db: A PostgreSQL store.
        min_gap_s: Least seconds between two notifications (wakes meanwhile are merged into the next).
    """

    def __init__(self, db: Database, *, min_gap_s: float = 0.02) -> None:
        if db.is_sqlite:
            raise ValueError("notifications need PostgreSQL")
        self._dsn = conninfo(db)
        self.min_gap_s = min_gap_s
        self._event = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.sent = 0

    def wake(self) -> None:
        """Ask for a notification (returns at once; the thread started on first use)."""
        if self._thread is None:
            with self._start_lock:
                if self._thread is None and not self._stop.is_set():
                    self._thread = threading.Thread(target=self._run, name="seedance-notify", daemon=True)
                    self._thread.start()
        self._event.set()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread and close its connection."""
        self._stop.set()
        self._event.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        import psycopg

        conn: Any = None
        try:
            while True:
                self._event.wait()
                if self._stop.is_set():
                    return
                self._event.clear()
                try:
                    if conn is None or conn.closed:
                        conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=5)
                        channel = current_channel(conn)
                    conn.execute(f"NOTIFY {channel}")
                    self.sent += 1
                except psycopg.Error as exc:  # the loop still runs every interval; retry at the next wake
                    log.warning("scheduler notification failed: %s", exc)
                    if conn is not None:
                        conn.close()
                    conn = None
                self._stop.wait(self.min_gap_s)
        finally:
            if conn is not None:
                conn.close()


def listen(conn: Any, on_notify: Callable[[], None], stop: threading.Event, *, poll_s: float = 0.25) -> None:
    """Call ``on_notify`` for every notification on the store's channel until ``stop`` is set.

    ``conn`` is an autocommit psycopg connection to the store; a broken connection raises
    ``psycopg.Error`` (the caller decides whether to reconnect).
    """
    conn.execute(f"LISTEN {current_channel(conn)}")
    while not stop.is_set():
        for _ in conn.notifies(timeout=poll_s):
            on_notify()

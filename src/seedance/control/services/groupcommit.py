"""Group commit of job submissions: concurrent requests' inserts share one transaction.

Requests hand a prepared job row and its ``job.submitted`` event to :class:`GroupCommitter` and
wait (an ``asyncio`` future on the server's event loop, or a blocking call); a committer thread
(``threads`` of them, each with its own connection, so the store's round trips overlap) takes
everything queued (up to ``max_batch``), stores each row with its event, commits once, and only
then answers each request. An acknowledged job is therefore as durable as before (committed
before its answer) and a retry with the same idempotency key still returns the stored job; what
is shared is the transaction's fixed cost (pool checkout, BEGIN, COMMIT and its WAL flush), which
is most of a small insert's cost. While one batch commits the next one fills, so batches grow
with the load and a lone request waits for no one.

How a batch is written is a :data:`BATCH_WRITERS` entry per store dialect:

* ``postgresql``: one statement per submission, ``WITH j AS (INSERT INTO jobs ... ON CONFLICT DO
  NOTHING RETURNING ...) INSERT INTO events ... SELECT ... FROM j RETURNING job_id`` (the event is
  stored only when the job was), sent for the whole batch with psycopg's ``executemany`` in
  pipeline mode (one round trip, a server-side prepared statement per connection), then one COMMIT.
  No SQLAlchemy statement execution per row: the SQL is compiled once.
* ``sqlite``: SQLAlchemy Core ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` per row plus the
  event insert (SQLite writes one transaction at a time; there is no round trip to save).

A taken name or idempotency key stores nothing for that request (``None`` is its answer), the
rest of the batch goes on. If a batch fails as a whole (the store went away, an unexpected
constraint), each of its requests is retried alone, so one bad row fails only its own request.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, cast

from sqlalchemy import Table, insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError

from seedance.control.db.models import EventRecord, Job
from seedance.control.db.session import Database
from seedance.core.registry import Registry

_JOBS = cast(Table, Job.__table__)
_EVENTS = cast(Table, EventRecord.__table__)
_log = logging.getLogger("seedance.control.groupcommit")

Resolve = Callable[[int | None, BaseException | None], None]
"""Called once per submission from a committer thread: ``(job id or None, None)`` or ``(None, error)``."""
_Item = tuple[dict[str, Any], dict[str, Any], Resolve]

JOB_COLUMNS = (
    "tenant_id", "cluster_id", "name", "kind", "tier", "priority", "cpu_milli", "memory_mib", "num_gpu",
    "gpu_milli", "gpu_types", "deadline", "flexibility_hours", "duration_hours", "labels", "idempotency_key",
    "request_hash", "status", "status_reason", "node_name", "gpu_indices", "cost_score", "cost_basis",
    "version", "attempt_capacity_version", "attempt", "created_at", "updated_at",
)
"""Columns a submission sets (the rest are NULL until the job is bound)."""
_JSON_COLUMNS = frozenset({"gpu_types", "labels", "gpu_indices"})


class BatchWriter:
    """Stores one batch of (job row, event) pairs in one transaction; returns each job's id or ``None``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def write(self, batch: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> list[int | None]:
        raise NotImplementedError


BATCH_WRITERS: Registry[type[BatchWriter]] = Registry("group-commit batch writer")


@BATCH_WRITERS.register("sqlite")
class CoreBatchWriter(BatchWriter):
    """SQLAlchemy Core, one insert per row and one per event, in one write session."""

    _stmt = sqlite_insert(_JOBS).on_conflict_do_nothing().returning(_JOBS.c.id)
    _event = insert(_EVENTS)

    def write(self, batch: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> list[int | None]:
        ids: list[int | None] = []
        with self.db.write() as s:
            conn = s.connection()
            for values, event in batch:
                job_id = conn.execute(self._stmt, {**values, "attempt": 0}).scalar()
                if job_id is not None:
                    conn.execute(self._event, {**event, "job_id": job_id})
                ids.append(None if job_id is None else int(job_id))
        return ids


@BATCH_WRITERS.register("postgresql")
class PipelineBatchWriter(BatchWriter):
    """psycopg ``executemany`` of one job-and-event statement per row, pipelined, then one COMMIT."""

    SQL = (
        "WITH j AS (INSERT INTO jobs (" + ", ".join(JOB_COLUMNS) + ") VALUES ("
        + ", ".join(f"%({c})s" for c in JOB_COLUMNS) + ") ON CONFLICT DO NOTHING RETURNING id, tenant_id, cluster_id) "
        "INSERT INTO events (tenant_id, job_id, cluster_id, kind, message, data, created_at) "
        "SELECT j.tenant_id, j.id, j.cluster_id, %(ev_kind)s, %(ev_message)s, %(ev_data)s, %(ev_created_at)s "
        "FROM j RETURNING job_id"
    )

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        from psycopg.types.json import Jsonb

        self._jsonb = Jsonb

    def _params(self, values: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
        p = {c: values.get(c) for c in JOB_COLUMNS}
        p["attempt"] = 0
        for c in _JSON_COLUMNS:
            p[c] = self._jsonb(p[c])
        p["ev_kind"] = event["kind"]
        p["ev_message"] = event["message"]
        p["ev_data"] = self._jsonb(event["data"])
        p["ev_created_at"] = event["created_at"]
        return p

    def write(self, batch: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> list[int | None]:
        import psycopg

        params = [self._params(v, e) for v, e in batch]
        raw = self.db.engine.raw_connection()
        pg = cast(psycopg.Connection[Any], raw.driver_connection)
        try:
            ids: list[int | None] = []
            with pg.cursor() as cur:
                cur.executemany(self.SQL, params, returning=True)
                while True:
                    row = cur.fetchone()
                    ids.append(None if row is None else int(row[0]))
                    if not cur.nextset():
                        break
            pg.commit()
            return ids
        except psycopg.Error as exc:
            broken = pg.broken or pg.closed
            try:
                if not broken:
                    pg.rollback()
            except psycopg.Error:
                broken = True
            if broken:
                raw.invalidate()
            raise DBAPIError.instance(self.SQL, None, exc, psycopg.Error, connection_invalidated=broken) from exc
        finally:
            raw.close()  # back to the pool (or discarded when invalidated)


class GroupCommitter:
    """Committer threads of one service; ``submit`` blocks, ``submit_async`` awaits, until the row is committed.

    Args:
        db: The store.
        max_batch: Most submissions per transaction.
        threads: Committer threads (SQLite writes one at a time anyway: 1 there).
    """

    def __init__(self, db: Database, *, max_batch: int = 256, threads: int = 4) -> None:
        self.db = db
        self.max_batch = max_batch
        self.threads = 1 if db.is_sqlite else threads
        self.writer = BATCH_WRITERS.get(db.dialect)(db)
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.batches = 0
        self.items = 0

    def submit(self, values: dict[str, Any], event: dict[str, Any], timeout: float = 120.0) -> int | None:
        """Store one job row and its event; its id once committed, ``None`` if a unique key was taken."""
        fut: Future[int | None] = Future()

        def resolve(job_id: int | None, exc: BaseException | None) -> None:
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(job_id)

        self._put((values, event, resolve))
        return fut.result(timeout)

    async def submit_async(self, values: dict[str, Any], event: dict[str, Any]) -> int | None:
        """:meth:`submit` for a coroutine on the running event loop (no thread of its own waits)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int | None] = loop.create_future()

        def resolve(job_id: int | None, exc: BaseException | None) -> None:
            loop.call_soon_threadsafe(_settle, fut, job_id, exc)

        self._put((values, event, resolve))
        return await fut

    def _put(self, item: _Item) -> None:
        if not self._workers:
            self._start()
        self._queue.put(item)

    def _start(self) -> None:
        with self._lock:
            if not self._workers:
                for i in range(self.threads):
                    t = threading.Thread(target=self._run, name=f"seedance-group-commit-{i}", daemon=True)
                    t.start()
                    self._workers.append(t)

    def close(self) -> None:
        """Finish what is queued, then stop the threads."""
        workers, self._workers = self._workers, []
        for _ in workers:
            self._queue.put(None)
        for t in workers:
            t.join(30)

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:  # one sentinel per thread: this one is ours
                    stop = True
                    break
                batch.append(nxt)
            self._commit(batch)

    def _commit(self, batch: list[_Item]) -> None:
        try:
            ids = self.writer.write([(v, e) for v, e, _ in batch])
        except Exception as exc:  # the whole transaction is gone: nothing of it was stored
            if len(batch) == 1:
                _log.warning("submission failed", exc_info=True)
                batch[0][2](None, exc)
                return
            for item in batch:  # one by one, so only the culprit fails
                self._commit([item])
            return
        self.batches += 1
        self.items += len(batch)
        for (_, _, resolve), job_id in zip(batch, ids, strict=True):
            resolve(job_id, None)


def _settle(fut: asyncio.Future[int | None], job_id: int | None, exc: BaseException | None) -> None:
    if fut.cancelled():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(job_id)

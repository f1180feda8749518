"""Group commit of job submissions: concurrent requests' inserts share one transaction.

Request threads hand a prepared job row and its ``job.submitted`` event to :class:`GroupCommitter`
and wait; a committer thread (``threads`` of them, each with its own connection, so the store's
round trips overlap) takes everything queued (up to ``max_batch``), inserts each row
(``INSERT ... ON CONFLICT DO NOTHING RETURNING id``: a taken name or idempotency key stores
nothing for that request, the rest of the batch goes on) with its event, commits once, and only
then answers each request. An acknowledged job is therefore as durable as before (committed
before its answer) and a retry with the same idempotency key still returns the stored job; what
is shared is the transaction's fixed cost (pool checkout, BEGIN, COMMIT and its WAL flush), which
is most of a small insert's cost. While one batch commits the next one fills, so batches grow
with the load and a lone request waits for no one.

If a batch fails as a whole (the store went away, an unexpected constraint), each of its requests
is retried alone, so one bad row fails only its own request.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from typing import Any, cast

from sqlalchemy import Table, insert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from seedance.control.db.models import EventRecord, Job
from seedance.control.db.session import Database

_JOBS = cast(Table, Job.__table__)
_INSERT_EVENT = insert(cast(Table, EventRecord.__table__))
_INSERT_ANY = {
    "postgresql": pg_insert(_JOBS).on_conflict_do_nothing().returning(_JOBS.c.id),
    "sqlite": sqlite_insert(_JOBS).on_conflict_do_nothing().returning(_JOBS.c.id),
}
_log = logging.getLogger("seedance.control.groupcommit")
_Item = tuple[dict[str, Any], dict[str, Any], "Future[int | None]"]


class GroupCommitter:
    """Committer threads of one service; ``submit`` blocks until the row is committed (or refused).

    Args:
        db: The store.
        max_batch: Most submissions per transaction.
        threads: Committer threads (SQLite writes one at a time anyway: 1 there).
    """

    def __init__(self, db: Database, *, max_batch: int = 256, threads: int = 4) -> None:
        self.db = db
        self.max_batch = max_batch
        self.threads = 1 if db.is_sqlite else threads
        self._stmt = _INSERT_ANY[db.dialect]
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.batches = 0
        self.items = 0

    def submit(self, values: dict[str, Any], event: dict[str, Any], timeout: float = 120.0) -> int | None:
        """Store one job row and its event; its id once committed, ``None`` if a unique key was taken."""
        if not self._workers:
            self._start()
        fut: Future[int | None] = Future()
        self._queue.put((values, event, fut))
        return fut.result(timeout)

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

    def _insert(self, conn: Any, values: dict[str, Any], event: dict[str, Any]) -> int | None:
        job_id = conn.execute(self._stmt, values).scalar()
        if job_id is not None:
            conn.execute(_INSERT_EVENT, {**event, "job_id": job_id})
        return None if job_id is None else int(job_id)

    def _commit(self, batch: list[_Item]) -> None:
        try:
            with self.db.write() as s:
                conn = s.connection()
                ids = [self._insert(conn, v, e) for v, e, _ in batch]
        except Exception:  # the whole transaction is gone: nothing of it was stored
            if len(batch) == 1:
                _log.warning("submission failed", exc_info=True)
                self._fail(batch[0][2])
                return
            for item in batch:  # one by one, so only the culprit fails
                self._commit([item])
            return
        self.batches += 1
        self.items += len(batch)
        for (_, _, fut), job_id in zip(batch, ids, strict=True):
            fut.set_result(job_id)

    @staticmethod
    def _fail(fut: Future[int | None]) -> None:
        import sys

        exc = sys.exc_info()[1]
        fut.set_exception(exc if exc is not None else RuntimeError("submission failed"))

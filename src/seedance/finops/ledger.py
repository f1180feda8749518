"""The ledger in the store: replace a node-window or whole windows atomically, read a range.

Writes are idempotent per window: :meth:`LedgerStore.replace_node_window` deletes the node's
lines of that window (allocations and idle) and inserts the new ones in one transaction, so an
agent may post the running window every tick and re-post after a failure; a replay rewrites its
windows with :meth:`replace_windows`. A failing write rolls back: what was stored stays.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import and_, delete, func, insert, select, tuple_

from seedance.control.db.finops import GpuStateRow, LedgerRow
from seedance.control.db.models import utcnow
from seedance.control.db.session import Database
from seedance.finops.lines import ALLOC, IDLE, NUMERIC, SHARED, TEXT, LedgerFrame, LedgerLine

_COLUMNS = ("window_start", "window_end", "labels", *NUMERIC, *TEXT)
_BATCH = 5000


class LedgerStore:
    """Reads and writes ``finops_ledger`` and ``finops_gpu_state``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _insert(self, s: Any, lines: Sequence[LedgerLine]) -> None:
        now = utcnow()
        rows = []
        for ln in lines:
            r = ln.as_row()
            r["updated_at"] = now
            rows.append(r)
        conn = s.connection()  # Core executemany: the ORM's bulk path costs ~10x more per row
        table: Any = LedgerRow.__table__
        for i in range(0, len(rows), _BATCH):
            conn.execute(table.insert(), rows[i:i + _BATCH])

    def replace_node_window(self, lines: Sequence[LedgerLine], *, cluster: str, source: str,
                            window_start: dt.datetime, node: str, shared: LedgerLine | None = None) -> int:
        """Replace one node's lines of one window (and the window's shared line when given)."""
        with self.db.write() as s:
            s.execute(delete(LedgerRow).where(and_(
                LedgerRow.cluster == cluster, LedgerRow.source == source, LedgerRow.window_start == window_start,
                LedgerRow.node == node, LedgerRow.kind.in_((ALLOC, IDLE)))))
            if shared is not None:
                s.execute(delete(LedgerRow).where(and_(
                    LedgerRow.cluster == cluster, LedgerRow.source == source,
                    LedgerRow.window_start == window_start, LedgerRow.kind == SHARED)))
            self._insert(s, [*lines, *([shared] if shared is not None else [])])
        return len(lines)

    def upsert_containers(self, lines: Sequence[LedgerLine], *, cluster: str, source: str,
                          window_start: dt.datetime, node: str,
                          idle: Callable[[dict[str, float]], Sequence[LedgerLine]],
                          shared: LedgerLine | None = None) -> int:
        """Replace the lines of these containers in a node-window, then recompute the node's idle lines
        from *all* its stored allocations (``idle(billed hours) -> lines``), in one transaction.

        An agent may send a node-window's containers in several parts: each part replaces its own
        containers' running sums, so any part can be re-sent and the result is the same."""
        where = and_(LedgerRow.cluster == cluster, LedgerRow.source == source, LedgerRow.window_start == window_start,
                     LedgerRow.node == node)
        with self.db.write() as s:
            keys = {(ln.namespace, ln.pod, ln.container, ln.gpu_model) for ln in lines}
            for chunk in _chunks(sorted(keys), 200):
                s.execute(delete(LedgerRow).where(where, LedgerRow.kind == ALLOC, tuple_(
                    LedgerRow.namespace, LedgerRow.pod, LedgerRow.container, LedgerRow.gpu_model).in_(chunk)))
            self._insert(s, lines)
            billed: dict[str, float] = {"cpu": 0.0, "ram": 0.0}
            for cpu_h, ram_h, gpu_h, model in s.execute(select(
                    func.sum(LedgerRow.cpu_h), func.sum(LedgerRow.ram_h), func.sum(LedgerRow.gpu_h),
                    LedgerRow.gpu_model).where(where, LedgerRow.kind == ALLOC).group_by(LedgerRow.gpu_model)):
                billed["cpu"] += float(cpu_h or 0.0)
                billed["ram"] += float(ram_h or 0.0)
                if gpu_h:
                    billed[f"gpu:{model}"] = billed.get(f"gpu:{model}", 0.0) + float(gpu_h)
            s.execute(delete(LedgerRow).where(where, LedgerRow.kind == IDLE))
            extra = list(idle(billed))
            if shared is not None:
                s.execute(delete(LedgerRow).where(
                    LedgerRow.cluster == cluster, LedgerRow.source == source,
                    LedgerRow.window_start == window_start, LedgerRow.kind == SHARED))
                extra.append(shared)
            self._insert(s, extra)
        return len(lines)

    def replace_windows(self, lines: Sequence[LedgerLine], *, cluster: str, source: str,
                        start: dt.datetime, end: dt.datetime) -> int:
        """Replace every line of ``[start, end)`` of a source (a replay writes its whole range)."""
        with self.db.write() as s:
            s.execute(delete(LedgerRow).where(and_(
                LedgerRow.cluster == cluster, LedgerRow.source == source, LedgerRow.window_start >= start,
                LedgerRow.window_start < end)))
            self._insert(s, lines)
        return len(lines)

    def read(self, *, cluster: str, source: str, start: dt.datetime, end: dt.datetime) -> LedgerFrame:
        """Lines whose window starts in ``[start, end)``."""
        cols = [getattr(LedgerRow, c) for c in _COLUMNS]
        with self.db.read() as s:
            res = s.execute(select(*cols).where(and_(
                LedgerRow.cluster == cluster, LedgerRow.source == source, LedgerRow.window_start >= start,
                LedgerRow.window_start < end)).order_by(LedgerRow.window_start, LedgerRow.id))
            rows = [dict(zip(_COLUMNS, r, strict=True)) for r in res]
        return LedgerFrame.from_rows(rows)

    def extent(self, *, cluster: str, source: str) -> tuple[dt.datetime, dt.datetime] | None:
        """First window start and last window end of a source (``None``: empty)."""
        with self.db.read() as s:
            lo, hi = s.execute(select(func.min(LedgerRow.window_start), func.max(LedgerRow.window_end)).where(
                LedgerRow.cluster == cluster, LedgerRow.source == source)).one()
        if lo is None:
            return None
        return _utc(lo), _utc(hi)

    def sources(self, *, cluster: str) -> list[str]:
        """Sources present for a cluster."""
        with self.db.read() as s:
            return sorted(r[0] for r in s.execute(select(LedgerRow.source).where(
                LedgerRow.cluster == cluster).distinct()))

    # -------------------------------------------------------------------------------- gpu state
    def replace_gpu_state(self, cluster: str, node: str, rows: Iterable[dict[str, Any]]) -> int:
        """Replace a node's GPU state rows."""
        now = utcnow()
        items = [{**r, "cluster": cluster, "node": node, "updated_at": now} for r in rows]
        with self.db.write() as s:
            s.execute(delete(GpuStateRow).where(and_(GpuStateRow.cluster == cluster, GpuStateRow.node == node)))
            if items:
                s.execute(insert(GpuStateRow), items)
        return len(items)

    def gpu_state(self, cluster: str) -> list[dict[str, Any]]:
        """Every GPU state row of a cluster, by node and GPU."""
        names = [c.name for c in GpuStateRow.__table__.columns if c.name not in ("id",)]
        with self.db.read() as s:
            res = s.execute(select(*[getattr(GpuStateRow, n) for n in names]).where(
                GpuStateRow.cluster == cluster).order_by(GpuStateRow.node, GpuStateRow.gpu, GpuStateRow.slice))
            return [dict(zip(names, r, strict=True)) for r in res]


def _chunks(items: list[Any], n: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def _utc(v: dt.datetime) -> dt.datetime:
    return v.replace(tzinfo=dt.UTC) if v.tzinfo is None else v.astimezone(dt.UTC)

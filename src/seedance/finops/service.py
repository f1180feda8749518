"""What the API and the CLI call: allocation and explain queries, telemetry ingestion, replay → ledger."""

from __future__ import annotations

import datetime as dt
import functools
import os
from collections.abc import Sequence
from typing import Any

from seedance.control.db.session import Database
from seedance.core.errors import InputError
from seedance.finops.allocation import AllocationQuery, allocate, to_opencost
from seedance.finops.explain import explain, label_mask
from seedance.finops.ingest import LedgerIngestor
from seedance.finops.ledger import LedgerStore
from seedance.finops.lines import SHARED, LedgerLine
from seedance.finops.prices import PriceSheet
from seedance.finops.window import parse_duration, parse_window
from seedance.finops.wire import TelemetryPost, to_node_window

PRICE_BOOK_ENV = "SEEDANCE_PRICE_BOOK"
SHARE_IDLE_ALIASES = {"true": "weighted", "false": "none", "": "none"}


def default_prices() -> PriceSheet:
    """The price book named by ``$SEEDANCE_PRICE_BOOK``, else the defaults."""
    path = os.environ.get(PRICE_BOOK_ENV)
    return PriceSheet.load(path) if path else PriceSheet()


def split_csv(text: str | None) -> tuple[str, ...]:
    """``"a, b"`` → ``("a", "b")``."""
    return tuple(x.strip() for x in (text or "").split(",") if x.strip())


class FinopsService:
    """The ledger of one store, priced by one price sheet."""

    def __init__(self, db: Database, prices: PriceSheet | None = None) -> None:
        self.db = db
        self.store = LedgerStore(db)
        self.prices = prices or default_prices()

    # ------------------------------------------------------------------------------------ queries
    def _range(self, window: str, *, cluster: str, source: str, now: dt.datetime | None, param: str = "window"
               ) -> tuple[dt.datetime, dt.datetime]:
        """``[start, end)`` of a window expression; ``all`` of an empty ledger is the empty range at the epoch."""
        extent = self.store.extent(cluster=cluster, source=source)
        if now is None and source != "live" and extent is not None:
            now = extent[1]  # a replay's relative windows end where the replay ends
        return parse_window(window, now=now, all_range=extent or (dt.datetime.fromtimestamp(0, dt.UTC),) * 2,
                            source=param)

    def allocation(self, *, window: str, aggregate: Sequence[str] = ("namespace",), step: str | None = None,
                   idle: bool = True, share_idle: str = "none", idle_by_node: bool = False,
                   share_namespaces: Sequence[str] = (), share_split: str = "weighted", cluster: str = "default",
                   source: str = "live", fmt: str = "seedance", now: dt.datetime | None = None) -> dict[str, Any]:
        """OpenCost's ``/allocation`` over the ledger."""
        start, end = self._range(window, cluster=cluster, source=source, now=now)
        rule = SHARE_IDLE_ALIASES.get(share_idle.strip().lower(), share_idle.strip().lower())
        q = AllocationQuery(start=start, end=end, aggregate=tuple(aggregate) or ("namespace",),
                            step_s=parse_duration(step) if step else None, idle=idle, share_idle=rule,
                            idle_by_node=idle_by_node, share_namespaces=tuple(share_namespaces),
                            share_split=share_split)
        frame = self.store.read(cluster=cluster, source=source, start=start, end=end)
        doc = allocate(frame, q, cluster=cluster)
        doc.update(cluster=cluster, source=source, prices=self.prices.source)
        if fmt == "opencost":
            return to_opencost(doc)
        if fmt != "seedance":
            raise InputError(f"unknown format {fmt!r}; valid: seedance, opencost", source="format")
        return doc

    def explain(self, *, window_from: str, window_to: str, step: str = "1h", cluster: str = "default",
                source: str = "live", filters: Sequence[tuple[str, str]] = (), now: dt.datetime | None = None
                ) -> dict[str, Any]:
        """Decompose the cost change from ``window_from`` to ``window_to``."""
        w0 = self._range(window_from, cluster=cluster, source=source, now=now, param="from")
        w1 = self._range(window_to, cluster=cluster, source=source, now=now, param="to")
        f0 = self.store.read(cluster=cluster, source=source, start=w0[0], end=w0[1])
        f1 = self.store.read(cluster=cluster, source=source, start=w1[0], end=w1[1])
        m0 = label_mask(f0, filters) if filters else None
        m1 = label_mask(f1, filters) if filters else None
        doc = explain(f0, f1, w0=w0, w1=w1, step_s=parse_duration(step), mask0=m0, mask1=m1,
                      include_idle=not filters)
        doc.update(cluster=cluster, source=source, filters=[f"{k}={v}" for k, v in filters])
        return doc

    # ---------------------------------------------------------------------------------- ingestion
    def ingest(self, post: TelemetryPost) -> dict[str, Any]:
        """Price and store a telemetry post: its containers' lines replace theirs, the node's idle is
        recomputed (idempotent per node-window and per part)."""
        ing = LedgerIngestor(post.cluster, self.prices, window_s=post.window_s, source=post.source)
        written = 0
        # every window is checked before any is stored: a refused post stores nothing
        nws = [to_node_window(post.node, w, post.window_s, field=f"windows.{i}.window_start")
               for i, w in enumerate(post.windows)]
        for nw in nws:
            lines = ing.alloc_lines(nw)
            start, end = ing.window_bounds(nw.window)
            shared = None
            if self.prices.shared_overhead_per_hour:
                oc = self.prices.shared_overhead_per_hour * post.window_s / 3600.0
                shared = LedgerLine(cluster=post.cluster, source=post.source, window_start=start, window_end=end,
                                    kind=SHARED, first_seen=start.timestamp(), last_seen=end.timestamp(),
                                    run_s=post.window_s, other_cost=oc, total_cost=oc)
            written += self.store.upsert_containers(
                lines, cluster=post.cluster, source=post.source, window_start=start, node=post.node,
                idle=functools.partial(ing.idle_lines, nw), shared=shared)
        gpus = 0
        if post.gpus is not None:
            gpus = self.store.replace_gpu_state(post.cluster, post.node, [
                {**g.model_dump(exclude={"holders"}), "holders": [h.model_dump() for h in g.holders]}
                for g in post.gpus])
        return {"lines": written, "windows": len(post.windows), "gpus": gpus}

    def heatmap(self, cluster: str) -> dict[str, Any]:
        """Every GPU and MIG instance of a cluster with its holders, for the heatmap page."""
        rows = self.store.gpu_state(cluster)
        for r in rows:
            r["updated_at"] = r["updated_at"].isoformat() if r.get("updated_at") else None
        return {"cluster": cluster, "gpus": rows, "count": len(rows)}

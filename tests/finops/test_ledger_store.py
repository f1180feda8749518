"""The ledger in real SQLite and PostgreSQL: idempotent node-window replace, rollback, range reads."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from sqlalchemy import func, select

from seedance.control.db import migrate
from seedance.control.db.finops import LedgerRow
from seedance.control.db.session import Database
from seedance.finops.ingest import ContainerKey, LedgerIngestor
from seedance.finops.ledger import LedgerStore
from seedance.finops.lines import LedgerLine
from seedance.finops.prices import PriceSheet
from tests.finops.helpers import GIB, assets, ticks, usage

T0 = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
KEY = ContainerKey("ml", "train", "main", labels=(("team", "nlp"),))


def lines_for(minutes: int) -> tuple[LedgerIngestor, list[LedgerLine]]:
    e0 = T0.timestamp()
    ts = ticks(e0, e0 + minutes * 60, 60.0)
    ing = LedgerIngestor("c", PriceSheet(gpu={"H100-80GB": 10.0}))
    ing.add(usage([(t, 60.0, 0, 0, 1, 2.0, 1.0, GIB, GIB, 1.0, 1.0) for t in ts], nodes=["n1"], keys=[KEY],
                  models=["", "H100-80GB"]),
            assets([(t, 60.0, 0, 8.0, 64 * GIB, 0, 2.0, 1) for t in ts], nodes=["n1"], models=["H100-80GB"]))
    (nw,) = ing.node_windows()
    return ing, ing.lines(nw)


def test_running_window_is_replaced_not_added(db_url: str) -> None:
    db = Database(db_url)
    migrate.upgrade(db)
    store = LedgerStore(db)
    _, half = lines_for(30)
    _, full = lines_for(60)
    for lines in (half, half, full, full):  # an agent re-posts the running window every tick
        store.replace_node_window(lines, cluster="c", source="live", window_start=T0, node="n1")
    frame = store.read(cluster="c", source="live", start=T0, end=T0 + dt.timedelta(hours=1))
    assert len(frame) == len(full) == 3  # allocation, CPU/RAM idle, GPU idle
    node_cost = 2 * 10.0 + 8 * PriceSheet().cpu + 64 * PriceSheet().ram_gib
    assert math.isclose(frame.total(), node_cost)
    assert frame.labels[0] == {"team": "nlp"}
    assert store.extent(cluster="c", source="live") == (T0, T0 + dt.timedelta(hours=1))
    assert store.sources(cluster="c") == ["live"]
    db.dispose()


def test_failed_write_keeps_what_was_stored(sqlite_url: str) -> None:
    db = Database(sqlite_url)
    migrate.upgrade(db)
    store = LedgerStore(db)
    _, full = lines_for(60)
    store.replace_node_window(full, cluster="c", source="live", window_start=T0, node="n1")
    bad = [*full, full[0]]  # a duplicate line violates the unique key: the whole replace rolls back
    with pytest.raises(Exception, match="UNIQUE|unique"):
        store.replace_node_window(bad, cluster="c", source="live", window_start=T0, node="n1")
    with db.read() as s:
        assert s.execute(select(func.count()).select_from(LedgerRow)).scalar() == 3
    db.dispose()


def test_gpu_state_is_replaced_per_node(db_url: str) -> None:
    db = Database(db_url)
    migrate.upgrade(db)
    store = LedgerStore(db)
    row = {"gpu": 0, "slice": "", "uuid": "GPU-1", "model": "H100-80GB", "profile": "", "fraction": 1.0,
           "util_pct": 50.0, "mem_used_mib": 1.0, "mem_total_mib": 2.0, "power_w": None, "temp_c": None,
           "sm_clock_mhz": None, "lost": False, "holders": [{"namespace": "a", "pod": "b", "container": "",
                                                             "allocated": 1.0, "used": None}], "cost_usd_h": 12.29}
    store.replace_gpu_state("c", "n1", [row, {**row, "gpu": 1, "uuid": "GPU-2"}])
    store.replace_gpu_state("c", "n1", [{**row, "util_pct": 75.0}])
    store.replace_gpu_state("c", "n2", [{**row, "uuid": "GPU-3"}])
    got = store.gpu_state("c")
    assert [(r["node"], r["gpu"], r["util_pct"]) for r in got] == [("n1", 0, 75.0), ("n2", 0, 50.0)]
    assert got[0]["holders"][0]["pod"] == "b"
    db.dispose()


def test_a_window_posted_in_parts_equals_one_post_and_parts_can_be_resent(db_url: str) -> None:
    from seedance.finops.service import FinopsService
    from seedance.finops.wire import TelemetryPost

    e0 = T0.timestamp()
    keys = [ContainerKey("ns", f"p{i}", "main", labels=(("team", f"t{i % 3}"),)) for i in range(120)]
    rows = [(e0 + 300.0, 300.0, 0, k, 1, 1.0, 0.5, GIB, GIB, 0.125, 0.1) for k in range(120)]
    ing = LedgerIngestor("c", PriceSheet())
    ing.add(usage(rows, nodes=["n1"], keys=keys, models=["", "H100-80GB"]),
            assets([(e0 + 300.0, 300.0, 0, 192.0, 2048 * GIB, 0, 16.0, 1)], nodes=["n1"], models=["H100-80GB"]))
    from seedance.finops.wire import from_node_window

    (nw,) = ing.node_windows()
    w = from_node_window(nw, 3600.0)
    parts = [{**w, "containers": w["containers"][i:i + 50]} for i in range(0, 120, 50)]
    totals = []
    other = [{**w, "containers": w["containers"][i:i + 64]} for i in range(0, 120, 64)]
    for bodies in (parts, parts + [parts[1]], other[::-1]):  # 50/50/20, a part re-sent, 64/56 in reverse
        db = Database(db_url)
        migrate.upgrade(db)
        svc = FinopsService(db, PriceSheet())
        for b in bodies:
            svc.ingest(TelemetryPost.model_validate({"cluster": "c", "node": "n1", "windows": [b]}))
        frame = svc.store.read(cluster="c", source="live", start=T0, end=T0 + dt.timedelta(hours=1))
        totals.append((len(frame), round(frame.total(), 9), round(float(frame.num["gpu_cost"].sum()), 9)))
        with db.write() as s:
            s.execute(LedgerRow.__table__.delete())
        db.dispose()
    want = sum(ln.total_cost for ln in ing.lines(nw))
    assert totals[0] == totals[1] == totals[2]
    assert totals[0][0] == 120 + 2 and math.isclose(totals[0][1], want)  # 120 allocations, CPU/RAM and GPU idle

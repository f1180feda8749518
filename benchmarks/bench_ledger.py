"""Ledger ingestion: 1 million usage samples → priced ledger lines in the store.

The samples are what 100 nodes × 20 containers report over 500 five-second ticks (about 42 minutes,
one ledger window: 2 200 lines): CPU/RAM requests and usage, GPU requests (whole GPUs and shares) and usage.
Timed end to end, median of ``--repeat`` runs on a fresh store each time:

* ``bulk``: one ``LedgerIngestor.add`` of all samples (columnar), pricing, one replace per node-window;
* ``stream``: the same samples arriving one tick × node at a time (20 samples per call), as agents send
  them, then priced and written.

Baseline in the same run: the bare numpy group-by of the same samples (``np.unique`` + ``np.add.at``),
the least any ingestion must do. Goal: ≤ 60 s for 1 M samples. SQLite by default; ``--pg URL`` adds
PostgreSQL (a throwaway schema).

    flock /tmp/seedance-bench.lock .venv/bin/python benchmarks/bench_ledger.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from seedance.control.db import migrate
from seedance.control.db.session import Database
from seedance.finops.ingest import AssetBatch, ContainerKey, LedgerIngestor, UsageBatch
from seedance.finops.ledger import LedgerStore
from seedance.finops.prices import PriceSheet

GIB = float(2**30)
T0 = 1772409600.0  # a window edge


def samples(nodes: int, containers: int, ticks: int, seed: int = 1) -> tuple[UsageBatch, AssetBatch]:
    rng = np.random.default_rng(seed)
    n = nodes * containers * ticks
    tick = np.repeat(np.arange(1, ticks + 1), nodes * containers)
    node = np.tile(np.repeat(np.arange(nodes), containers), ticks)
    key = np.tile(np.arange(nodes * containers), ticks)
    cpu_req = np.tile(rng.choice([0.5, 1, 2, 4, 8], nodes * containers), ticks)
    gpu_req = np.tile(rng.choice([0.0, 0.25, 0.5, 1.0, 2.0], nodes * containers), ticks)
    model = (gpu_req > 0).astype(np.int64)
    keys = [ContainerKey(f"ns{k % 13}", f"pod-{k}", "main", labels=(("env", "prod"), ("team", f"t{k % 7}")))
            for k in range(nodes * containers)]
    u = UsageBatch(t=T0 + 5.0 * tick, dt=np.full(n, 5.0), node=node, key=key, model=model, cpu_req=cpu_req,
                   cpu_use=cpu_req * rng.random(n) * 1.2, ram_req=np.full(n, 16 * GIB),
                   ram_use=rng.random(n) * 20 * GIB,
                   gpu_req=gpu_req, gpu_use=gpu_req * rng.random(n), nodes=[f"node-{i}" for i in range(nodes)],
                   keys=keys, models=["", "H100-80GB"])
    at = np.repeat(np.arange(1, ticks + 1), nodes)
    a = AssetBatch(t=T0 + 5.0 * at, dt=np.full(at.size, 5.0), node=np.tile(np.arange(nodes), ticks),
                   cpu_cores=np.full(at.size, 96.0), ram_bytes=np.full(at.size, 1024 * GIB),
                   model=np.zeros(at.size, dtype=np.int64), gpus=np.full(at.size, 8.0),
                   primary=np.ones(at.size, dtype=bool), nodes=u.nodes, models=["H100-80GB"])
    return u, a


def write(ing: LedgerIngestor, db: Database) -> int:
    store = LedgerStore(db)
    n = 0
    for nw in ing.node_windows():
        start, _ = ing.window_bounds(nw.window)
        n += store.replace_node_window(ing.lines(nw), cluster="c", source="bench", window_start=start, node=nw.node)
    return n


def run_bulk(u: UsageBatch, a: AssetBatch, url: str) -> tuple[float, int]:
    db = Database(url)
    migrate.upgrade(db)
    t0 = time.perf_counter()
    ing = LedgerIngestor("c", PriceSheet())
    ing.add(u, a)
    lines = write(ing, db)
    dt = time.perf_counter() - t0
    db.dispose()
    return dt, lines


def run_stream(u: UsageBatch, a: AssetBatch, url: str, per_call: int) -> tuple[float, int]:
    db = Database(url)
    migrate.upgrade(db)
    per_asset = per_call // (len(u.keys) // len(u.nodes))
    t0 = time.perf_counter()
    ing = LedgerIngestor("c", PriceSheet())
    for i, j in zip(range(0, len(u), per_call), range(0, a.t.size, per_asset), strict=True):
        sl, al = slice(i, i + per_call), slice(j, j + per_asset)
        ing.add(UsageBatch(u.t[sl], u.dt[sl], u.node[sl], u.key[sl], u.model[sl], u.cpu_req[sl], u.cpu_use[sl],
                           u.ram_req[sl], u.ram_use[sl], u.gpu_req[sl], u.gpu_use[sl], u.nodes, u.keys, u.models),
                AssetBatch(a.t[al], a.dt[al], a.node[al], a.cpu_cores[al], a.ram_bytes[al], a.model[al], a.gpus[al],
                           a.primary[al], a.nodes, a.models))
    lines = write(ing, db)
    dt = time.perf_counter() - t0
    db.dispose()
    return dt, lines


def baseline(u: UsageBatch) -> float:
    t0 = time.perf_counter()
    w = np.floor((u.t - u.dt) / 3600).astype(np.int64)
    code = (w * len(u.nodes) + u.node) * len(u.keys) + u.key
    uniq, inv = np.unique(code, return_inverse=True)
    out = np.zeros((uniq.size, 3))
    np.add.at(out, inv, np.stack([u.cpu_req * u.dt, u.ram_req * u.dt, u.gpu_req * u.dt], axis=1))
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--containers", type=int, default=20)
    ap.add_argument("--ticks", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pg", default=None, help="Also PostgreSQL, e.g. postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    u, a = samples(args.nodes, args.containers, args.ticks)
    print(f"{len(u):,} usage samples ({args.nodes} nodes x {args.containers} containers x {args.ticks} ticks of 5 s)")
    rows: list[dict[str, Any]] = []
    base = statistics.median(baseline(u) for _ in range(args.repeat))
    stores = [("sqlite", None)] + ([("postgresql", args.pg)] if args.pg else [])
    for name, pg in stores:
        for mode in ("bulk", "stream"):
            times, lines = [], 0
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    url, cleanup = _url(name, pg, tmp)
                    try:
                        dt, lines = run_bulk(u, a, url) if mode == "bulk" else run_stream(u, a, url, args.containers)
                    finally:
                        cleanup()
                times.append(dt)
            med = statistics.median(times)
            rows.append({"store": name, "mode": mode, "samples": len(u), "lines": lines, "median_s": med,
                         "runs_s": times, "samples_per_s": len(u) / med, "ratio_to_numpy_groupby": med / base})
            print(f"{name:>10} {mode:>6}: {med:6.2f} s median of {args.repeat} ({len(u) / med:,.0f} samples/s, "
                  f"{lines:,} lines; {med / base:.1f}x the bare numpy group-by of {base:.2f} s) | goal <= 60 s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def _url(name: str, pg: str | None, tmp: str) -> tuple[str, Any]:
    if name == "sqlite":
        return f"sqlite:///{tmp}/ledger.db", lambda: None
    import secrets

    import psycopg

    schema = f"bench_{secrets.token_hex(4)}"
    with psycopg.connect(pg, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")

    def drop() -> None:
        with psycopg.connect(pg, autocommit=True) as c:
            c.execute(f"DROP SCHEMA {schema} CASCADE")

    return f"{str(pg).replace('postgresql://', 'postgresql+psycopg://')}?options=-csearch_path%3D{schema}", drop


if __name__ == "__main__":
    sys.exit(main())

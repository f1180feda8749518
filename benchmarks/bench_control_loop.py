"""Live scheduling loop throughput: decisions per second on a 2,000-node cluster, SQLite and PostgreSQL.

Setup (not timed): a fresh store with ``--nodes`` nodes of 8 A100s and ``--jobs`` pending jobs of a
mixed shape (shares of 0.25/0.5 GPU, 1, 2, 4 and 8 GPUs), bulk-inserted. Timed: ``run_once`` of the
scheduling loop, repeated until no job is left to decide. Each cycle reads the pending jobs,
decides with ``Scheduler(best-fit)`` (explanations on, as the service runs), commits binds,
decisions and events, and dispatches the bound jobs (noop backend: bound → running), i.e. every
write the service does per decision.

Baseline measured in the same run: the bare framework, ``Scheduler.decide`` + ``ClusterState.apply``
over the same nodes and requests with no store, so ``loop/framework`` is what persistence costs.

    .venv/bin/python benchmarks/bench_control_loop.py --db sqlite --db postgresql
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import insert

from seedance.control.db.models import Cluster, Job, Node, Tenant, utcnow
from seedance.control.service import ControlService
from seedance.control.settings import ControlSettings
from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import Scheduler, make_policy

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
SHAPES = [(1, 250), (1, 500), (1, 1000), (2, 1000), (4, 1000), (8, 1000)]
WEIGHTS = [0.25, 0.15, 0.3, 0.15, 0.1, 0.05]


def workload(n_jobs: int, seed: int = 1) -> list[tuple[int, int, int]]:
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(SHAPES), size=n_jobs, p=WEIGHTS)
    return [(SHAPES[i][0], SHAPES[i][1], 4000) for i in picks]


def framework_baseline(n_nodes: int, jobs: list[tuple[int, int, int]], policy: str) -> tuple[float, int]:
    spec = ClusterSpec(tuple(NodeSpec(f"node-{i}", 128_000, 1_000_000, 8, "A100-80GB") for i in range(n_nodes)))
    state = ClusterState(spec)
    sched = Scheduler(make_policy(policy), explain=True)
    t = time.perf_counter()
    bound = 0
    for pod, (k, milli, cpu) in enumerate(jobs):
        d = sched.decide(state, ResourceRequest(cpu_milli=cpu, memory_mib=4096, num_gpu=k, gpu_milli=milli), pod)
        if d.placement is not None:
            state.apply(d.placement)
            bound += 1
    return time.perf_counter() - t, bound


def setup_store(svc: ControlService, n_nodes: int, jobs: list[tuple[int, int, int]]) -> None:
    now = utcnow()
    with svc.db.write() as s:
        tid = s.execute(insert(Tenant).values(name="bench", display_name="", created_at=now).returning(Tenant.id)
                        ).scalar_one()
        cid = s.execute(insert(Cluster).values(name="default", description="", sched_version=0, capacity_version=0,
                                               created_at=now).returning(Cluster.id)).scalar_one()
        s.execute(insert(Node), [
            {"cluster_id": cid, "name": f"node-{i}", "cpu_milli": 128_000, "memory_mib": 1_000_000, "gpu_count": 8,
             "gpu_model": "A100-80GB", "labels": {}, "status": "ready", "version": 0, "created_at": now}
            for i in range(n_nodes)
        ])
        rows = []
        for i, (k, milli, cpu) in enumerate(jobs):
            rows.append({
                "tenant_id": tid, "cluster_id": cid, "name": f"j-{i}", "kind": "TrainingJob", "tier": "bronze",
                "priority": 0, "cpu_milli": cpu, "memory_mib": 4096, "num_gpu": k, "gpu_milli": milli,
                "gpu_types": [], "flexibility_hours": 0.0, "labels": {}, "request_hash": "x", "status": "pending",
                "status_reason": "", "gpu_indices": [], "cost_score": 1.0, "cost_basis": "", "version": 0,
                "attempt_capacity_version": -1, "created_at": now, "updated_at": now,
            })
        for a in range(0, len(rows), 5000):
            s.execute(insert(Job), rows[a:a + 5000])


def run_db(db: str, args: argparse.Namespace, jobs: list[tuple[int, int, int]]) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="seedance-loop-"))
    schema = None
    if db == "sqlite":
        url = f"sqlite:///{tmp / 'loop.db'}"
    else:
        import psycopg

        schema = f"bench_loop_{os.getpid()}_{secrets.token_hex(3)}"
        with psycopg.connect(args.pg_url.replace("+psycopg", ""), autocommit=True) as c:
            c.execute(f"CREATE SCHEMA {schema}")
        url = f"{args.pg_url}?options=-csearch_path%3D{schema}"
    try:
        svc = ControlService(ControlSettings(database_url=url, scheduler_enabled=False, default_placement=args.policy,
                                             scheduler_batch=args.batch, explain=not args.no_explain,
                                             bootstrap_token="bench-" + "Hq3Zt8Vw2Lk5Nm9Rp4Xs7Cf"))
        setup_store(svc, args.nodes, jobs)
        decided = bound = cycles = 0
        decide_s = 0.0
        t = time.perf_counter()
        while True:
            stats = svc.loop.run_once()
            cycles += 1
            n = sum(x.considered for x in stats)
            decided += n
            bound += sum(x.bound for x in stats)
            decide_s += sum(x.decide_s for x in stats)
            if n == 0:
                break
        total = time.perf_counter() - t
        svc.close()
    finally:
        if schema is not None:
            import psycopg

            with psycopg.connect(args.pg_url.replace("+psycopg", ""), autocommit=True) as c:
                c.execute(f"DROP SCHEMA {schema} CASCADE")
    return {"db": db, "nodes": args.nodes, "jobs": len(jobs), "decided": decided, "bound": bound, "cycles": cycles,
            "seconds": total, "decisions_per_s": decided / total, "decide_only_per_s": decided / decide_s,
            "store_share": 1 - decide_s / total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", action="append", choices=["sqlite", "postgresql"], help="repeatable (default: both)")
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=1024, help="jobs decided per cycle")
    ap.add_argument("--policy", default="best-fit")
    ap.add_argument("--no-explain", action="store_true", help="decisions without filter counts and runner-ups")
    ap.add_argument("--pg-url", default=PG_DEFAULT)
    args = ap.parse_args()
    jobs = workload(args.jobs)
    base_s, base_bound = framework_baseline(args.nodes, jobs, args.policy)
    base_rate = len(jobs) / base_s
    rows = [run_db(db, args, jobs) for db in (args.db or ["sqlite", "postgresql"])]
    print(json.dumps({"framework_decisions_per_s": round(base_rate), "framework_bound": base_bound,
                      "loadavg_1m": os.getloadavg()[0]}))
    for r in rows:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}))
    print(f"{'db':<11}{'decisions/s':>12}{'decide-only/s':>15}{'framework/s':>13}{'loop/framework':>16}"
          f"{'bound':>8}{'cycles':>8}")
    for r in rows:
        print(f"{r['db']:<11}{r['decisions_per_s']:>12.0f}{r['decide_only_per_s']:>15.0f}{base_rate:>13.0f}"
              f"{r['decisions_per_s'] / base_rate:>16.2f}{r['bound']:>8}{r['cycles']:>8}")


if __name__ == "__main__":
    main()

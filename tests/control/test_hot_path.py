"""The submission hot path: the pipelined PostgreSQL batch writer, the fast path in front of FastAPI,
and the cluster directory's refresh under load."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy import func, select

from seedance.control.db.models import EventRecord, Job
from seedance.control.schemas import JobCreate
from seedance.control.service import ControlService
from seedance.control.services import jobs
from seedance.control.services.groupcommit import GroupCommitter
from tests.control.conftest import LiveServer
from tests.control.helpers import ADMIN_TOKEN, add_nodes, job_row, submit


def _rows(svc: ControlService, names: list[str | None], keys: list[str | None]) -> list[tuple[dict, dict]]:
    me = svc.authenticate(ADMIN_TOKEN)
    out = []
    for name, key in zip(names, keys, strict=True):
        body = {"gpus": 1, "tier": "gold", "duration_hours": 2}
        if name is not None:
            body["name"] = name
        if key is not None:
            body["idempotency_key"] = key
        data = JobCreate(**body)
        with svc.db.read() as s:
            out.append(jobs.prepare_submission(session=s, principal=me, data=data, scorer=svc.scorer,
                                               directory=svc.directory))
    return out


def test_pipelined_batch_stores_each_row_with_its_event_and_skips_taken_keys(
        make_service: Callable[..., ControlService], pg_schema_url: str) -> None:
    svc = make_service(pg_schema_url)
    add_nodes(svc, count=1)
    (first, _), = _rows(svc, ["taken"], [None])
    committer = GroupCommitter(svc.db, max_batch=64, threads=1)
    try:
        assert committer.submit(first, _rows(svc, ["x"], [None])[0][1]) is not None
        batch = _rows(svc, ["a", "taken", None, None, "b"], ["k1", None, "k1", "k2", None])
        ids = committer.writer.write(batch)  # one transaction, in order: a, taken (name), k1 again, k2, b
    finally:
        committer.close()
    assert [i is None for i in ids] == [False, True, True, False, False]
    with svc.db.read() as s:
        stored = {j.name: j for j in s.scalars(select(Job))}
        ev = dict(s.execute(select(EventRecord.job_id, func.count()).where(EventRecord.kind == "job.submitted")
                            .group_by(EventRecord.job_id)).all())
    assert set(stored) == {"taken", "a", batch[3][0]["name"], "b"}
    assert [stored[v["name"]].id for v, _ in (batch[0], batch[3], batch[4])] == [ids[0], ids[3], ids[4]]
    assert ev == {j.id: 1 for j in stored.values()}  # one event per stored job, none for the refused rows
    a = stored["a"]
    assert (a.gpu_types, a.labels, a.gpu_indices, a.attempt, a.status, a.idempotency_key) == ([], {}, [], 0,
                                                                                               "pending", "k1")
    assert a.created_at.tzinfo is not None and a.cost_score == batch[0][0]["cost_score"]


def test_fast_path_answers_like_the_route(live_server_factory: Callable[..., LiveServer], pg_schema_url: str) -> None:
    server = live_server_factory(pg_schema_url)
    add_nodes(server.service, count=1)
    with server.client() as c:
        fresh = c.post("/api/v1/jobs", json={"gpus": 1, "name": "one", "idempotency_key": "i-1"})  # token not cached
        fast = c.post("/api/v1/jobs", json={"gpus": 1, "name": "two"})  # cached now: the fast path
        replay = c.post("/api/v1/jobs", json={"gpus": 1, "name": "one", "idempotency_key": "i-1"})
        taken = c.post("/api/v1/jobs", json={"gpus": 1, "name": "two"})
        bad = c.post("/api/v1/jobs", json={"gpus": -1})
        broken = c.post("/api/v1/jobs", content=b"{", headers={"Content-Type": "application/json"})
        metrics = c.get("/metrics").text
    assert (fresh.status_code, fast.status_code, replay.status_code, taken.status_code) == (201, 201, 200, 409)
    assert replay.headers["idempotent-replayed"] == "true" and replay.json()["id"] == fresh.json()["id"]
    assert set(fast.json()) == set(fresh.json()) and fast.json()["status"] == "pending"
    assert fast.headers["x-frame-options"] == "DENY"  # the outer middlewares still apply
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"].startswith("body.")
    assert broken.status_code == 400 and "not valid JSON" in broken.json()["detail"]
    assert 'seedance_http_requests_total{method="POST",route="/api/v1/jobs",status="201"} 2.0' in metrics


def test_fast_path_leaves_unknown_tokens_to_the_route(
        live_server_factory: Callable[..., LiveServer], sqlite_url: str) -> None:
    server = live_server_factory(sqlite_url)
    r = httpx.post(f"{server.url}/api/v1/jobs", json={"gpus": 1}, headers={"Authorization": "Bearer sdt_nope_x"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"


def test_stale_cluster_models_are_refreshed_by_one_caller() -> None:
    d = jobs.ClusterDirectory(ttl_s=0.0)
    d._by_name["c"] = (7, ("A100-80GB",), 0.0)  # cached, already stale
    seen: list[object] = []
    barrier = threading.Barrier(4)

    def ask() -> None:
        barrier.wait()
        seen.append(d.cached("c"))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen.count(None) == 1 and seen.count((7, ("A100-80GB",))) == 3  # one refresher, three stale answers
    assert d.fresh("c") is None and d.cached("c") == (7, ("A100-80GB",))  # refresh still under way


def test_pending_reasons_group_the_newest_waiting_jobs(make_service: Callable[..., ControlService], db_url: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import update

    from seedance.control.services import dashboard

    svc = make_service(db_url)
    add_nodes(svc, count=1)
    plan = [("pending", "a", "gold"), ("unschedulable", "b", "gold"), ("pending", "a", "silver"),
            ("running", "x", "gold"), ("unschedulable", "b", "gold"), ("pending", "a", "gold")]
    ids = [submit(svc, gpus=1, tier=tier, name=f"j{i}") for i, (_, _, tier) in enumerate(plan)]
    with svc.db.write() as s:
        for job_id, (status, reason, _) in zip(ids, plan, strict=True):
            s.execute(update(Job).where(Job.id == job_id).values(status=status, status_reason=reason))
    monkeypatch.setattr(dashboard, "REASON_SAMPLE", 4)  # the newest 4 waiting: j5, j4, j2, j1 (j3 runs)
    with svc.db.read() as s:
        got = dashboard._pending_reasons(s, job_row(svc, ids[0]).cluster_id, None)
        other_tenant = dashboard._pending_reasons(s, job_row(svc, ids[0]).cluster_id, 10_000)
    assert got == [{"reason": "b", "tier": "gold", "jobs": 2, "example": "j1"},
                   {"reason": "a", "tier": "gold", "jobs": 1, "example": "j5"},
                   {"reason": "a", "tier": "silver", "jobs": 1, "example": "j2"}]
    assert other_tenant == []


def test_event_loop_lane_groups_concurrent_submissions_and_answers_after_commit(
        make_service: Callable[..., ControlService], pg_schema_url: str) -> None:
    import asyncio

    svc = make_service(pg_schema_url)
    add_nodes(svc, count=1)
    (taken, taken_ev), = _rows(svc, ["taken"], [None])
    rows = _rows(svc, ["taken", None, None, None, *[None] * 16], [None, "k1", "k1", "k2", *[None] * 16])
    committer = GroupCommitter(svc.db, max_batch=64, threads=1)

    async def run() -> tuple[int | None, list[int | None]]:
        first = await committer.submit_async(taken, taken_ev)
        return first, list(await asyncio.gather(*(committer.submit_async(v, e) for v, e in rows)))

    try:
        first, ids = asyncio.run(run())
        lane = committer._all_lanes[0]
        assert (lane.busy, lane.pending, len(lane.idle)) == (0, [], 1)  # one connection, back and idle
    finally:
        committer.close()
    # the 20 concurrent ones shared one transaction: a taken name and a reused key store nothing
    assert (committer.batches, committer.items) == (2, 21)
    assert first is not None and [i is None for i in ids[:4]] == [True, False, True, False]
    assert all(i is not None for i in ids[4:])
    with svc.db.read() as s:
        stored = dict(s.execute(select(Job.name, Job.id)).all())
        ev = dict(s.execute(select(EventRecord.job_id, func.count()).where(EventRecord.kind == "job.submitted")
                            .group_by(EventRecord.job_id)).all())
    assert sorted(stored.values()) == sorted([first, *(i for i in ids if i is not None)])
    assert ev == dict.fromkeys(stored.values(), 1)


def test_event_loop_lane_drops_a_lost_connection_and_answers_503_material(
        make_service: Callable[..., ControlService], pg_schema_url: str) -> None:
    import asyncio
    import os
    import time

    import psycopg
    from sqlalchemy.exc import DBAPIError

    from tests.control.conftest import PG_BASE

    app_name = f"sd_lane_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    svc = make_service(f"{pg_schema_url}&application_name={app_name}")
    add_nodes(svc, count=1)
    rows = _rows(svc, [None, None, None], [None, None, None])
    committer = GroupCommitter(svc.db, max_batch=64, threads=2)

    async def run() -> tuple[int | None, BaseException | None, int | None]:
        a = await committer.submit_async(*rows[0])
        with psycopg.connect(PG_BASE, autocommit=True) as admin:  # the lane's connection (and the pool's) die
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                          (app_name,))
        err: BaseException | None = None
        try:
            await committer.submit_async(*rows[1])
        except DBAPIError as exc:
            err = exc
        return a, err, await committer.submit_async(*rows[2])  # a fresh connection

    try:
        a, err, c = asyncio.run(run())
    finally:
        committer.close()
    assert isinstance(err, DBAPIError) and err.connection_invalidated  # the API's 503 with Retry-After
    assert a is not None and c is not None
    svc.db.dispose()  # the pool's connections were terminated too
    with svc.db.read() as s:
        assert sorted(s.scalars(select(Job.id))) == [a, c]  # the failed one stored nothing

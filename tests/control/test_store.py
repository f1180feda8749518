"""The store: migrations on SQLite and PostgreSQL, models equal migrations, append-only logs, timestamps."""

from __future__ import annotations

import datetime as dt

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import insert, inspect, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from seedance.control.db import migrate
from seedance.control.db.models import APPEND_ONLY_TABLES, Base, Cluster, DecisionRecord, EventRecord, Job, Tenant
from seedance.control.db.session import Database
from seedance.core.errors import InputError


def test_upgrade_creates_every_table_and_is_idempotent(db_url: str) -> None:
    db = Database(db_url)
    assert migrate.current_revision(db) is None
    migrate.upgrade(db)
    migrate.upgrade(db)  # a second start changes nothing
    assert migrate.current_revision(db) == migrate.head_revision() == migrate.HEAD_REVISION == "0005_i20"
    tables = set(inspect(db.engine).get_table_names())
    assert tables >= {"tenants", "api_tokens", "clusters", "nodes", "jobs", "scheduling_policies", "decisions",
                      "events", "alembic_version"}
    db.dispose()


def test_models_and_migrations_agree(db_url: str) -> None:
    db = Database(db_url)
    migrate.upgrade(db)
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []
    db.dispose()


def test_decision_and_event_logs_are_append_only(db_url: str) -> None:
    db = Database(db_url)
    migrate.upgrade(db)
    now = dt.datetime.now(dt.UTC)
    with db.write() as s:
        tenant = Tenant(name="t", display_name="", created_at=now)
        cluster = Cluster(name="c", description="", sched_version=0, capacity_version=0, created_at=now)
        s.add_all([tenant, cluster])
        s.flush()
        job = Job(tenant_id=tenant.id, cluster_id=cluster.id, name="j", kind="TrainingJob", tier="gold", priority=0,
                  cpu_milli=1, memory_mib=1, num_gpu=0, gpu_milli=0, gpu_types=[], flexibility_hours=0, labels={},
                  request_hash="h", status="pending", status_reason="", gpu_indices=[], cost_score=0, cost_basis="",
                  version=0, attempt_capacity_version=-1, created_at=now, updated_at=now)
        s.add(job)
        s.flush()
        s.execute(insert(EventRecord).values(kind="x", message="m", data={}, created_at=now))
        s.execute(insert(DecisionRecord).values(
            job_id=job.id, tenant_id=tenant.id, cluster_id=cluster.id, outcome="pending", gpu_indices=[],
            policy="best-fit", reason="r", explanation={}, latency_us=1, created_at=now))
    assert APPEND_ONLY_TABLES == ("decisions", "events")
    for table in (EventRecord, DecisionRecord):
        for stmt in (update(table).values(created_at=now), table.__table__.delete()):
            with pytest.raises((DBAPIError, IntegrityError)) as info, db.write() as s:
                s.execute(stmt)
            assert "append-only" in str(info.value)
    with db.read() as s:
        assert s.scalars(select(EventRecord.message)).all() == ["m"]
        assert s.scalars(select(DecisionRecord.reason)).all() == ["r"]
    db.dispose()


def test_timestamps_come_back_as_utc(db_url: str) -> None:
    db = Database(db_url)
    migrate.upgrade(db)
    cest = dt.timezone(dt.timedelta(hours=2))
    when = dt.datetime(2026, 7, 1, 14, 30, 5, 123000, tzinfo=cest)
    with db.write() as s:
        s.add(Tenant(name="tz", display_name="", created_at=when))
    with db.read() as s:
        got = s.scalars(select(Tenant.created_at)).one()
    assert got == when and got.tzinfo == dt.UTC and got.hour == 12
    db.dispose()


def test_sqlite_runs_in_wal_mode_with_foreign_keys(sqlite_url: str) -> None:
    db = Database(sqlite_url)
    with db.read() as s:
        assert s.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert s.execute(text("PRAGMA foreign_keys")).scalar() == 1
    db.dispose()


def test_unsupported_or_memory_stores_are_refused() -> None:
    with pytest.raises(InputError, match="in-memory"):
        Database("sqlite:///:memory:")
    with pytest.raises(InputError, match="unsupported database"):
        Database("mysql://x@localhost/db")


def test_migration_0002_keeps_existing_jobs(db_url: str) -> None:
    db = Database(db_url)
    migrate.upgrade(db, "0001")
    now = dt.datetime.now(dt.UTC)
    with db.engine.begin() as conn:
        conn.execute(text("INSERT INTO tenants (name, display_name, created_at) VALUES ('t', '', :n)"), {"n": now})
        conn.execute(text("INSERT INTO clusters (name, description, sched_version, capacity_version, created_at) "
                          "VALUES ('c', '', 0, 0, :n)"), {"n": now})
        conn.execute(text(
            "INSERT INTO jobs (tenant_id, cluster_id, name, kind, tier, priority, cpu_milli, memory_mib, num_gpu, "
            "gpu_milli, gpu_types, flexibility_hours, labels, request_hash, status, status_reason, gpu_indices, "
            "cost_score, cost_basis, version, attempt_capacity_version, created_at, updated_at) VALUES "
            "(1, 1, 'old', 'TrainingJob', 'gold', 0, 1, 1, 1, 250, '[]', 0, '{}', 'h', 'pending', '', '[]', 0, '', "
            "0, -1, :n, :n)"), {"n": now})
    assert migrate.current_revision(db) == "0001"
    migrate.upgrade(db, "0002")
    assert migrate.current_revision(db) == "0002"
    with db.read() as s:  # columns of revision 0002 only (later revisions add more)
        job = s.execute(select(Job.name, Job.gpu_milli, Job.placed_gpu_milli)).one()
    assert tuple(job) == ("old", 250, None)
    migrate.upgrade(db)  # 0004: the job's run count starts at 0
    with db.read() as s:
        assert s.scalars(select(Job)).one().attempt == 0
    db.dispose()

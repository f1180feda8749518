"""Reusable names of cancelled jobs, and trigger-maintained job counters.

Revision ID: 0004_i20
Revises: 0004_i12live
Create Date: 2026-12-01

The table-wide unique constraint ``uq_jobs_tenant_name`` becomes the partial unique index
``uq_jobs_tenant_live_name`` (``WHERE status <> 'cancelled'``, on SQLite and PostgreSQL alike): a
cancelled job's name can be used again.

``job_counts`` (see ``seedance.control.db.aggregates``) is filled from the stored jobs and kept
current by triggers on ``jobs`` (insert, update, delete), in the writing transaction.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_i20"
down_revision = "0004_i12live"
branch_labels = None
depends_on = None

_LIVE = sa.text("status <> 'cancelled'")
_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10000.0)  # frozen with this revision
_SHARDS = 8
# PostgreSQL: each connection adds to its own shard rows (backend pid), so a submission never waits for
# the scheduling cycle's transaction, which updates the counters of every job it binds; SQLite writes one
# transaction at a time anyway
_PG_SHARD = "pg_backend_pid() % 64"
_KEY = "cluster_id, tenant_id, tier, status, cost_bucket, shard"


def _bucket(row: str) -> str:
    whens = " ".join(f"WHEN {row}.cost_score <= {b!r} THEN {i}" for i, b in enumerate(_BUCKETS))
    return f"(CASE {whens} ELSE {len(_BUCKETS)} END)"


def _bump(row: str, sign: str, shard: str) -> str:
    return (f"INSERT INTO job_counts ({_KEY}, n, cost_sum) VALUES ({row}.cluster_id, {row}.tenant_id, {row}.tier, "
            f"{row}.status, {_bucket(row)}, {shard}, {sign}1, {sign}{row}.cost_score) "
            f"ON CONFLICT ({_KEY}) DO UPDATE SET n = job_counts.n + excluded.n, "
            "cost_sum = job_counts.cost_sum + excluded.cost_sum")


_WATCHED = "cluster_id, tenant_id, tier, status, cost_score"
_CHANGED = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in _WATCHED.split(", "))
_CHANGED_SQLITE = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in _WATCHED.split(", "))


def _create_counts() -> None:
    op.create_table(
        "job_counts",
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("tier", sa.String(32), nullable=False), sa.Column("status", sa.String(16), nullable=False),
        sa.Column("cost_bucket", sa.Integer(), nullable=False), sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False), sa.Column("cost_sum", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("cluster_id", "tenant_id", "tier", "status", "cost_bucket", "shard"),
    )
    op.execute(f"INSERT INTO job_counts ({_KEY}, n, cost_sum) SELECT cluster_id, tenant_id, tier, status, "
               f"{_bucket('jobs')}, id % {_SHARDS}, count(*), coalesce(sum(cost_score), 0) FROM jobs "
               f"GROUP BY cluster_id, tenant_id, tier, status, {_bucket('jobs')}, id % {_SHARDS}")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"""CREATE FUNCTION seedance_job_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN {_bump('NEW', '', _PG_SHARD)}; RETURN NEW; END IF;
  IF TG_OP = 'DELETE' THEN {_bump('OLD', '-', _PG_SHARD)}; RETURN OLD; END IF;
  IF {_CHANGED} THEN {_bump('OLD', '-', _PG_SHARD)}; {_bump('NEW', '', _PG_SHARD)}; END IF;
  RETURN NEW;
END $$""")
        op.execute("CREATE TRIGGER jobs_counts AFTER INSERT OR UPDATE OR DELETE ON jobs "
                   "FOR EACH ROW EXECUTE FUNCTION seedance_job_counts()")
    else:
        new, old = f"NEW.id % {_SHARDS}", f"OLD.id % {_SHARDS}"
        op.execute(f"CREATE TRIGGER jobs_counts_ins AFTER INSERT ON jobs BEGIN {_bump('NEW', '', new)}; END")
        op.execute(f"CREATE TRIGGER jobs_counts_del AFTER DELETE ON jobs BEGIN {_bump('OLD', '-', old)}; END")
        op.execute(f"CREATE TRIGGER jobs_counts_upd AFTER UPDATE ON jobs WHEN {_CHANGED_SQLITE} "
                   f"BEGIN {_bump('OLD', '-', new)}; {_bump('NEW', '', new)}; END")


def _drop_counts() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS jobs_counts ON jobs")
        op.execute("DROP FUNCTION IF EXISTS seedance_job_counts()")
    else:
        for name in ("jobs_counts_ins", "jobs_counts_del", "jobs_counts_upd"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_table("job_counts")


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint("uq_jobs_tenant_name", type_="unique")
    op.create_index("uq_jobs_tenant_live_name", "jobs", ["tenant_id", "name"], unique=True,
                    sqlite_where=_LIVE, postgresql_where=_LIVE)
    _create_counts()  # after the batch step: SQLite's table rebuild would drop triggers made before it


def downgrade() -> None:
    _drop_counts()
    op.drop_index("uq_jobs_tenant_live_name", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.create_unique_constraint("uq_jobs_tenant_name", ["tenant_id", "name"])

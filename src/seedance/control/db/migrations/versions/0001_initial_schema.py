"""Initial schema: tenants, tokens, clusters, nodes, jobs, policies, append-only decisions and events.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Frozen: this file never imports the live models. The ``decisions`` and ``events`` tables get
triggers that refuse UPDATE and DELETE (both SQLite and PostgreSQL), so the logs are append-only
in the store itself, not only by convention in the code.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_TS = sa.DateTime(timezone=True)
_APPEND_ONLY = ("decisions", "events")


def _id() -> sa.Column:  # type: ignore[type-arg]
    return sa.Column("id", _ID, primary_key=True, autoincrement=True)


def _fk(name: str, target: str, *, nullable: bool = False) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, _ID, sa.ForeignKey(target), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "tenants", _id(),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("display_name", sa.String(200), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
    )
    op.create_table(
        "clusters", _id(),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("description", sa.String(500), nullable=False),
        sa.Column("sched_version", sa.BigInteger(), nullable=False),
        sa.Column("capacity_version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
    )
    op.create_table(
        "api_tokens", _id(), _fk("tenant_id", "tenants.id"),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("revoked_at", _TS, nullable=True),
    )
    op.create_index("ix_api_tokens_tenant_id", "api_tokens", ["tenant_id"])
    op.create_table(
        "nodes", _id(), _fk("cluster_id", "clusters.id"),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("cpu_milli", sa.BigInteger(), nullable=False),
        sa.Column("memory_mib", sa.BigInteger(), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("gpu_model", sa.String(32), nullable=True),
        sa.Column("labels", _JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.UniqueConstraint("cluster_id", "name", name="uq_nodes_cluster_name"),
    )
    op.create_index("ix_nodes_cluster_id", "nodes", ["cluster_id"])
    op.create_table(
        "jobs", _id(), _fk("tenant_id", "tenants.id"), _fk("cluster_id", "clusters.id"),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("tier", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("cpu_milli", sa.BigInteger(), nullable=False),
        sa.Column("memory_mib", sa.BigInteger(), nullable=False),
        sa.Column("num_gpu", sa.Integer(), nullable=False),
        sa.Column("gpu_milli", sa.Integer(), nullable=False),
        sa.Column("gpu_types", _JSON, nullable=False),
        sa.Column("deadline", _TS, nullable=True),
        sa.Column("flexibility_hours", sa.Float(), nullable=False),
        sa.Column("duration_hours", sa.Float(), nullable=True),
        sa.Column("labels", _JSON, nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=True),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("node_name", sa.String(253), nullable=True),
        sa.Column("gpu_indices", _JSON, nullable=False),
        sa.Column("cost_score", sa.Float(), nullable=False),
        sa.Column("cost_basis", sa.String(200), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("attempt_capacity_version", sa.BigInteger(), nullable=False),
        sa.Column("dispatch_handle", sa.String(200), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.Column("bound_at", _TS, nullable=True),
        sa.Column("started_at", _TS, nullable=True),
        sa.Column("finished_at", _TS, nullable=True),
        sa.UniqueConstraint("tenant_id", "name", name="uq_jobs_tenant_name"),
        sa.UniqueConstraint("tenant_id", "idempotency_key", name="uq_jobs_tenant_idem"),
    )
    op.create_index("ix_jobs_cluster_status", "jobs", ["cluster_id", "status"])
    op.create_table(
        "scheduling_policies", _id(), _fk("cluster_id", "clusters.id", nullable=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("placement", sa.String(63), nullable=False),
        sa.Column("queue_order", sa.String(63), nullable=False),
        sa.Column("plugin", sa.String(63), nullable=True),
        sa.Column("region", sa.String(63), nullable=True),
        sa.Column("config_yaml", sa.Text(), nullable=False),
        sa.Column("config", _JSON, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
    )
    op.create_table(
        "decisions", _id(), _fk("job_id", "jobs.id"), _fk("tenant_id", "tenants.id"),
        _fk("cluster_id", "clusters.id"),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("node_name", sa.String(253), nullable=True),
        sa.Column("gpu_indices", _JSON, nullable=False),
        sa.Column("score", sa.BigInteger(), nullable=True),
        sa.Column("policy", sa.String(63), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("explanation", _JSON, nullable=False),
        sa.Column("cost_score", sa.Float(), nullable=True),
        sa.Column("latency_us", sa.Integer(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
    )
    op.create_index("ix_decisions_job", "decisions", ["job_id", "id"])
    op.create_index("ix_decisions_tenant_id", "decisions", ["tenant_id"])
    op.create_table(
        "events", _id(), _fk("tenant_id", "tenants.id", nullable=True), _fk("job_id", "jobs.id", nullable=True),
        _fk("cluster_id", "clusters.id", nullable=True),
        sa.Column("kind", sa.String(63), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", _JSON, nullable=False),
        sa.Column("created_at", _TS, nullable=False),
    )
    op.create_index("ix_events_job", "events", ["job_id", "id"])
    op.create_index("ix_events_tenant", "events", ["tenant_id", "id"])
    _append_only_triggers()


def _append_only_triggers() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION seedance_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END $$"
        )
        for table in _APPEND_ONLY:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION seedance_append_only()"
            )
    elif dialect == "sqlite":
        for table in _APPEND_ONLY:
            for action in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
                )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for table in ("events", "decisions", "scheduling_policies", "jobs", "nodes", "api_tokens", "clusters", "tenants"):
        op.drop_table(table)
    if dialect == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS seedance_append_only()")

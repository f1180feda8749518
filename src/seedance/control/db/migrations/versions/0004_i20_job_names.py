"""A cancelled job's name can be used again: job names are unique per tenant among jobs not cancelled.

Revision ID: 0004_i20
Revises: 0003_i13
Create Date: 2026-12-01

The table-wide unique constraint ``uq_jobs_tenant_name`` becomes the partial unique index
``uq_jobs_tenant_live_name`` (``WHERE status <> 'cancelled'``, on SQLite and PostgreSQL alike).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_i20"
down_revision = "0003_i13"
branch_labels = None
depends_on = None

_LIVE = sa.text("status <> 'cancelled'")


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint("uq_jobs_tenant_name", type_="unique")
    op.create_index("uq_jobs_tenant_live_name", "jobs", ["tenant_id", "name"], unique=True,
                    sqlite_where=_LIVE, postgresql_where=_LIVE)


def downgrade() -> None:
    op.drop_index("uq_jobs_tenant_live_name", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.create_unique_constraint("uq_jobs_tenant_name", ["tenant_id", "name"])

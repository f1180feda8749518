"""Jobs indexed by (cluster, status, id): a status's newest or oldest jobs are an index range.

Revision ID: 0005_i20
Revises: 0004_i20
Create Date: 2026-12-01

``ix_jobs_cluster_status`` (cluster, status) becomes ``ix_jobs_cluster_status_id`` (cluster, status, id),
which serves the same lookups and also returns one status's jobs in id order: the dashboard's newest
waiting jobs and the scheduler's oldest pending ones are read as a bounded index range, with no sort
of the whole queue.
"""

from __future__ import annotations

from alembic import op

revision = "0005_i20"
down_revision = "0004_i20"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_cluster_status_id", "jobs", ["cluster_id", "status", "id"])
    op.drop_index("ix_jobs_cluster_status", table_name="jobs")


def downgrade() -> None:
    op.create_index("ix_jobs_cluster_status", "jobs", ["cluster_id", "status"])
    op.drop_index("ix_jobs_cluster_status_id", table_name="jobs")

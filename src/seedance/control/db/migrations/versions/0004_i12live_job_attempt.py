"""Count the runs of a job: ``jobs.attempt`` (live preemption re-queues a job with its attempt recorded).

Revision ID: 0004_i12live
Revises: 0003_i13
Create Date: 2026-12-01

Existing jobs start at 0 (the server default); the loop adds one at every dispatch.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_i12live"
down_revision = "0003_i13"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("attempt")

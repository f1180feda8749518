"""Record the milli-GPU a job actually holds per GPU when it differs from its request.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

A tier that never shares a GPU (Gold) gets a fractional request placed as one whole GPU; the
request stays as submitted and ``placed_gpu_milli`` says what is allocated (NULL: as requested).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("placed_gpu_milli", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("placed_gpu_milli")

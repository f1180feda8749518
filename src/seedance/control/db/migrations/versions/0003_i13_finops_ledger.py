"""FinOps ledger: ``finops_ledger`` (allocation, idle and shared lines per window) and ``finops_gpu_state``.

Revision ID: 0003_i13
Revises: 0003_i18
Create Date: 2026-12-01

Frozen: this file never imports the live models (``seedance.control.db.finops`` mirrors it; a test
compares them).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003_i13"
down_revision = "0003_i18"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_TS = sa.DateTime(timezone=True)
_HOURS = ("cpu_request_h", "cpu_usage_h", "cpu_h", "ram_request_h", "ram_usage_h", "ram_h", "gpu_request_h",
          "gpu_usage_h", "gpu_h", "cpu_rate", "ram_rate", "gpu_rate", "cpu_cost", "ram_cost", "gpu_cost",
          "other_cost", "total_cost")


def upgrade() -> None:
    op.create_table(
        "finops_ledger",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(63), nullable=False),
        sa.Column("source", sa.String(63), nullable=False),
        sa.Column("window_start", _TS, nullable=False),
        sa.Column("window_end", _TS, nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("pod", sa.String(253), nullable=False),
        sa.Column("container", sa.String(253), nullable=False),
        sa.Column("gpu_model", sa.String(64), nullable=False),
        sa.Column("controller", sa.String(253), nullable=False),
        sa.Column("controller_kind", sa.String(63), nullable=False),
        sa.Column("labels", _JSON, nullable=False),
        sa.Column("first_seen", sa.Float(), nullable=False),
        sa.Column("last_seen", sa.Float(), nullable=False),
        sa.Column("run_s", sa.Float(), nullable=False),
        *(sa.Column(c, sa.Float(), nullable=False) for c in _HOURS),
        sa.Column("updated_at", _TS, nullable=False),
        sa.UniqueConstraint("cluster", "source", "window_start", "kind", "node", "namespace", "pod", "container",
                            "gpu_model", name="uq_finops_ledger_row"),
    )
    op.create_index("ix_finops_ledger_window", "finops_ledger", ["cluster", "source", "window_start"])
    op.create_table(
        "finops_gpu_state",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(63), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("slice", sa.String(16), nullable=False),
        sa.Column("uuid", sa.String(253), nullable=False),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("profile", sa.String(32), nullable=False),
        sa.Column("fraction", sa.Float(), nullable=False),
        *(sa.Column(c, sa.Float(), nullable=True) for c in ("util_pct", "mem_used_mib", "mem_total_mib", "power_w",
                                                             "temp_c", "sm_clock_mhz")),
        sa.Column("lost", sa.Boolean(), nullable=False),
        sa.Column("holders", _JSON, nullable=False),
        sa.Column("cost_usd_h", sa.Float(), nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.UniqueConstraint("cluster", "node", "gpu", "slice", "uuid", name="uq_finops_gpu_state"),
    )


def downgrade() -> None:
    op.drop_table("finops_gpu_state")
    op.drop_index("ix_finops_ledger_window", table_name="finops_ledger")
    op.drop_table("finops_ledger")

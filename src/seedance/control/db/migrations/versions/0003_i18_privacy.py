"""Privacy domain: subjects, key vault, anonymised telemetry, fingerprints, consent, erasure ledger.

Revision ID: 0003_i18
Revises: 0002
Create Date: 2026-12-01

Frozen: this file never imports the live models. ``privacy_tombstones`` gets the same
append-only triggers as ``events`` (UPDATE and DELETE refused in the store itself).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003_i18"
down_revision = "0002"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_TS = sa.DateTime(timezone=True)
_SUBJECT = sa.String(36)
_TABLES = ("privacy_subjects", "privacy_subject_keys", "privacy_hmac_keys", "telemetry_events",
           "privacy_subject_activity", "fingerprint_clusters", "fingerprint_devices", "privacy_consents",
           "privacy_erasure_requests", "privacy_tombstones", "privacy_backups")


def _id() -> sa.Column:  # type: ignore[type-arg]
    return sa.Column("id", _ID, primary_key=True, autoincrement=True)


def _tenant() -> sa.Column:  # type: ignore[type-arg]
    return sa.Column("tenant_id", _ID, sa.ForeignKey("tenants.id"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "privacy_subjects",
        sa.Column("id", _SUBJECT, primary_key=True), _tenant(),
        sa.Column("profile_ct", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
    )
    op.create_index("ix_privacy_subjects_tenant_id", "privacy_subjects", ["tenant_id"])
    op.create_table(
        "privacy_subject_keys",
        sa.Column("subject_id", _SUBJECT, primary_key=True),
        sa.Column("lookup_hash", sa.String(64), nullable=True, unique=True),
        sa.Column("wrapped_key", sa.LargeBinary(), nullable=True),
        sa.Column("key_fingerprint", sa.String(64), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("shredded_at", _TS, nullable=True),
        sa.Column("shred_request_id", sa.BigInteger(), nullable=True),
    )
    op.create_table(
        "privacy_hmac_keys",
        sa.Column("id", sa.String(48), primary_key=True),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("wrapped_key", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("retire_at", _TS, nullable=False),
        sa.Column("destroy_at", _TS, nullable=False),
        sa.Column("destroyed_at", _TS, nullable=True),
    )
    op.create_index("ix_privacy_hmac_keys_purpose", "privacy_hmac_keys", ["purpose"])
    op.create_table(
        "telemetry_events", _id(), _tenant(),
        sa.Column("subject_id", _SUBJECT, nullable=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(48), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("entropy", sa.Float(), nullable=False),
        sa.Column("occurred_at", _TS, nullable=False),
        sa.Column("received_at", _TS, nullable=False),
        sa.Column("signature", sa.String(64), nullable=True),
    )
    op.create_index("ix_telemetry_events_subject", "telemetry_events", ["subject_id"])
    op.create_index("ix_telemetry_events_tenant_id", "telemetry_events", ["tenant_id"])
    op.create_table(
        "privacy_subject_activity",
        sa.Column("subject_id", _SUBJECT, primary_key=True),
        sa.Column("day", sa.String(10), primary_key=True),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("batches", sa.Integer(), nullable=False),
        sa.Column("entropy_sum", sa.Float(), nullable=False),
    )
    op.create_table(
        "fingerprint_clusters",
        sa.Column("signature", sa.String(64), primary_key=True),
        sa.Column("renderer", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("devices", sa.Integer(), nullable=False),
        sa.Column("paused_at", _TS, nullable=True),
        sa.Column("updated_at", _TS, nullable=False),
    )
    op.create_table(
        "fingerprint_devices",
        sa.Column("device_tag", sa.String(64), primary_key=True),
        sa.Column("signature", sa.String(64), nullable=False),
        sa.Column("subject_id", _SUBJECT, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("fmt", sa.String(32), nullable=True),
        sa.Column("aaguid", sa.String(36), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("decided_at", _TS, nullable=False),
        sa.Column("expires_at", _TS, nullable=True),
    )
    op.create_index("ix_fingerprint_devices_signature", "fingerprint_devices", ["signature"])
    op.create_index("ix_fingerprint_devices_subject_id", "fingerprint_devices", ["subject_id"])
    op.create_table(
        "privacy_consents", _id(), _tenant(),
        sa.Column("subject_id", _SUBJECT, nullable=True),
        sa.Column("device_tag", sa.String(64), nullable=True),
        sa.Column("flow_version", sa.String(32), nullable=False),
        sa.Column("choice", sa.String(16), nullable=False),
        sa.Column("purposes", _JSON, nullable=False),
        sa.Column("decided_at", _TS, nullable=False),
    )
    op.create_index("ix_privacy_consents_tenant_id", "privacy_consents", ["tenant_id"])
    op.create_index("ix_privacy_consents_subject_id", "privacy_consents", ["subject_id"])
    op.create_table(
        "privacy_erasure_requests", _id(), _tenant(),
        sa.Column("subject_id", _SUBJECT, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("requested_at", _TS, nullable=False),
        sa.Column("deadline", _TS, nullable=False),
        sa.Column("started_at", _TS, nullable=True),
        sa.Column("erased_at", _TS, nullable=True),
        sa.Column("verified_at", _TS, nullable=True),
        sa.Column("identity_ct", sa.LargeBinary(), nullable=True),
        sa.Column("report", _JSON, nullable=False),
        sa.Column("proof_hash", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("requested_by", sa.BigInteger(), nullable=True),
    )
    for col in ("tenant_id", "subject_id", "status"):
        op.create_index(f"ix_privacy_erasure_requests_{col}", "privacy_erasure_requests", [col])
    op.create_table(
        "privacy_tombstones", _id(),
        sa.Column("subject_id", _SUBJECT, nullable=False, unique=True),
        sa.Column("request_id", sa.BigInteger(), nullable=False),
        sa.Column("key_fingerprint", sa.String(64), nullable=False),
        sa.Column("destroyed_at", _TS, nullable=False),
    )
    op.create_table(
        "privacy_backups", _id(),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("fmt", sa.String(32), nullable=False),
        sa.Column("taken_at", _TS, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("excluded", _JSON, nullable=False),
    )
    _append_only("privacy_tombstones")


def _append_only(table: str) -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":  # seedance_append_only() comes with revision 0001
        op.execute(f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                   "FOR EACH ROW EXECUTE FUNCTION seedance_append_only()")
    elif dialect == "sqlite":
        for action in ("UPDATE", "DELETE"):
            op.execute(f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                       f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END")


def downgrade() -> None:
    for table in reversed(_TABLES):
        op.drop_table(table)

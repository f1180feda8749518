"""Facts of the running control plane that compliance rules check (evidence from the system itself).

The control plane gathers these from its store (``seedance.control.services.compliance.gather_facts``)
and serves them at ``GET /api/v1/compliance/facts``; rules read them through this model, so a CI job
without a store checks the YAML only and ``--system`` adds the live facts.

* Logs: whether the ``events`` and ``decisions`` tables are append-only (the migration's triggers are
  present), the retention the operator declared for them (``SEEDANCE_COMPLIANCE_LOG_RETENTION_HOURS``;
  unset: never pruned), when the oldest retained event was written and when the store began.
* Evidence records appended to the event log (``POST /api/v1/compliance/evidence``): encrypted
  backups, key rotations, node destructions with their memory-wipe proof hash; and the node
  removals the control plane itself logged, with the node's labels.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

EPHEMERAL_LABEL = "seedance.io/ephemeral"
"""Node label marking a temporary compute node (one the autoscaler creates and destroys)."""


class ComplianceSettings(BaseSettings):
    """What the operator declares about the deployment (environment ``SEEDANCE_COMPLIANCE_*``)."""

    model_config = SettingsConfigDict(env_prefix="SEEDANCE_COMPLIANCE_", extra="ignore", frozen=True)

    log_retention_hours: float | None = Field(
        default=None, gt=0, description="Hours after which event and decision logs are pruned outside the "
        "store (e.g. partitions dropped); unset: they are never pruned.")
    lookback_days: float = Field(default=30.0, gt=0, le=3650, description="Days of evidence records gathered.")


class _Fact(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BackupRecord(_Fact):
    """An ``evidence.backup`` event."""

    event_id: int
    at: dt.datetime
    encrypted: bool
    cipher: str = ""
    sha256: str = ""


class KeyRotation(_Fact):
    """An ``evidence.key_rotated`` event."""

    event_id: int
    at: dt.datetime
    key_id: str


class NodeRemoval(_Fact):
    """A ``node.removed`` event of the control plane."""

    event_id: int
    at: dt.datetime
    cluster_id: int | None
    node: str
    ephemeral: bool


class NodeDestruction(_Fact):
    """An ``evidence.node_destroyed`` event: when the node was destroyed and the hash of its wipe proof."""

    event_id: int
    at: dt.datetime
    cluster_id: int | None
    node: str
    destroyed_at: dt.datetime | None
    wipe_proof_sha256: str = ""


class SystemFacts(_Fact):
    """Facts of one control plane at ``collected_at`` (see the module docstring)."""

    collected_at: dt.datetime
    store: str = Field(description="Database dialect of the store.")
    append_only_logs: bool = Field(description="UPDATE/DELETE triggers present on events and decisions.")
    log_retention_hours: float | None = Field(description="Declared pruning age of the logs; null: never pruned.")
    oldest_event_at: dt.datetime | None = None
    store_started_at: dt.datetime | None = None
    lookback_days: float = 30.0
    backups: list[BackupRecord] = Field(default_factory=list)
    key_rotations: list[KeyRotation] = Field(default_factory=list)
    node_removals: list[NodeRemoval] = Field(default_factory=list)
    node_destructions: list[NodeDestruction] = Field(default_factory=list)

    def hours_since(self, t: dt.datetime | None) -> float | None:
        """Hours from ``t`` to ``collected_at`` (``None`` for ``None``)."""
        return None if t is None else (self.collected_at - t).total_seconds() / 3600.0

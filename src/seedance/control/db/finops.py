"""Tables of the FinOps ledger (:mod:`seedance.finops`): ``finops_ledger`` and ``finops_gpu_state``.

``finops_ledger`` holds one row per (cluster, source, ledger window, kind, node, namespace, pod,
container, GPU model): ``kind`` is ``alloc`` (a container's billed use), ``idle`` (what a node, or the
whole cluster for a replay, offered and nobody was billed for) or ``shared`` (overhead not tied to a
node). Resource-hours are stored with the rates that priced them, so a cost change can be split into
volume and price later. Within a window, Σ rows = the cluster's cost. A node-window (or, for a
replay, a whole window) is always rewritten in one transaction, so writing it again is idempotent.

``finops_gpu_state`` is the newest state of every GPU and MIG instance (what the heatmap draws),
replaced per node on each telemetry post. Created by migration ``0003_i13``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Boolean, Float, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from seedance.control.db.models import Base, BigId, JsonType, UtcDateTime, utcnow


class LedgerRow(Base):
    """One line of the ledger."""

    __tablename__ = "finops_ledger"
    __table_args__ = (
        UniqueConstraint("cluster", "source", "window_start", "kind", "node", "namespace", "pod", "container",
                         "gpu_model", name="uq_finops_ledger_row"),
        Index("ix_finops_ledger_window", "cluster", "source", "window_start"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(63))
    source: Mapped[str] = mapped_column(String(63))
    window_start: Mapped[dt.datetime] = mapped_column(UtcDateTime)
    window_end: Mapped[dt.datetime] = mapped_column(UtcDateTime)
    kind: Mapped[str] = mapped_column(String(8))
    node: Mapped[str] = mapped_column(String(253))
    namespace: Mapped[str] = mapped_column(String(253))
    pod: Mapped[str] = mapped_column(String(253))
    container: Mapped[str] = mapped_column(String(253))
    gpu_model: Mapped[str] = mapped_column(String(64))
    controller: Mapped[str] = mapped_column(String(253), default="")
    controller_kind: Mapped[str] = mapped_column(String(63), default="")
    labels: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    first_seen: Mapped[float] = mapped_column(Float)
    last_seen: Mapped[float] = mapped_column(Float)
    run_s: Mapped[float] = mapped_column(Float)
    cpu_request_h: Mapped[float] = mapped_column(Float)
    cpu_usage_h: Mapped[float] = mapped_column(Float)
    cpu_h: Mapped[float] = mapped_column(Float)
    ram_request_h: Mapped[float] = mapped_column(Float)
    ram_usage_h: Mapped[float] = mapped_column(Float)
    ram_h: Mapped[float] = mapped_column(Float)
    gpu_request_h: Mapped[float] = mapped_column(Float)
    gpu_usage_h: Mapped[float] = mapped_column(Float)
    gpu_h: Mapped[float] = mapped_column(Float)
    cpu_rate: Mapped[float] = mapped_column(Float)
    ram_rate: Mapped[float] = mapped_column(Float)
    gpu_rate: Mapped[float] = mapped_column(Float)
    cpu_cost: Mapped[float] = mapped_column(Float)
    ram_cost: Mapped[float] = mapped_column(Float)
    gpu_cost: Mapped[float] = mapped_column(Float)
    other_cost: Mapped[float] = mapped_column(Float)
    total_cost: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)


class GpuStateRow(Base):
    """The newest reading of one GPU or MIG instance, with its holders and $/h."""

    __tablename__ = "finops_gpu_state"
    __table_args__ = (UniqueConstraint("cluster", "node", "gpu", "slice", "uuid", name="uq_finops_gpu_state"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(63))
    node: Mapped[str] = mapped_column(String(253))
    gpu: Mapped[int] = mapped_column(Integer)
    slice: Mapped[str] = mapped_column(String(16))
    uuid: Mapped[str] = mapped_column(String(253))
    model: Mapped[str] = mapped_column(String(64))
    profile: Mapped[str] = mapped_column(String(32))
    fraction: Mapped[float] = mapped_column(Float)
    util_pct: Mapped[float | None] = mapped_column(Float, nullable=True)
    mem_used_mib: Mapped[float | None] = mapped_column(Float, nullable=True)
    mem_total_mib: Mapped[float | None] = mapped_column(Float, nullable=True)
    power_w: Mapped[float | None] = mapped_column(Float, nullable=True)
    temp_c: Mapped[float | None] = mapped_column(Float, nullable=True)
    sm_clock_mhz: Mapped[float | None] = mapped_column(Float, nullable=True)
    lost: Mapped[bool] = mapped_column(Boolean, default=False)
    holders: Mapped[list[dict[str, Any]]] = mapped_column(JsonType, default=list)
    cost_usd_h: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)

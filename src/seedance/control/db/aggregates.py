"""``job_counts``: live counters of jobs, maintained by database triggers (migration ``0004_i20``).

Every insert, update and delete of a job row adjusts the counter row of its (cluster, tenant,
tier, status, cost bucket) in the same transaction, so ``/metrics`` and the dashboard read a few
dozen rows instead of scanning the jobs (0.3–0.5 s per scrape at 32k live jobs before). Each key
is split over shard rows so that writers do not queue on one row lock: on PostgreSQL each connection
adds to its own shard (``pg_backend_pid() % 64``), so a submission never waits for a scheduling
cycle's transaction; on SQLite (one writer at a time) ``job id % SHARDS``. Readers add the shards up.
``cost_bucket`` is the index of the first ``COST_BUCKETS`` bound the job's ``cost_score`` does not
exceed (``len(COST_BUCKETS)``: above all).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from seedance.control.db.models import Base

SHARDS = 8
COST_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10000.0)


class JobCount(Base):
    """How many jobs (and their summed cost_score) share a cluster, tenant, tier, status and cost bucket."""

    __tablename__ = "job_counts"

    cluster_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    tenant_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    tier: Mapped[str] = mapped_column(String(32), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    cost_bucket: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    shard: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    n: Mapped[int] = mapped_column(BigInteger, default=0)
    cost_sum: Mapped[float] = mapped_column(Float, default=0.0)

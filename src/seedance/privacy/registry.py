"""Where a subject's data lives: the erasure map (in the spirit of Fides dataset annotations).

Each entry names a table, the column holding the subject's random id, the store class (primary
or derived) and the data categories (fideslang taxonomy names). Erasure deletes matching rows
from every entry; the ledger replay after a restore does the same. A new table holding subject
data must be added here (``tests/privacy/test_registry.py`` fails on a privacy table with a
``subject_id`` column missing from this map).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, delete
from sqlalchemy.orm import Session

from seedance.control.db.models import Base
from seedance.privacy.models import ConsentRecord, FingerprintDevice, Subject, SubjectActivity, TelemetryEvent


@dataclass(frozen=True, slots=True)
class SubjectData:
    """One table holding subjects' data."""

    model: type[Base]
    column: str
    store: str
    categories: tuple[str, ...]

    @property
    def table(self) -> str:
        """The table name."""
        return str(self.model.__tablename__)

    def delete(self, session: Session, subject_ids: Sequence[str]) -> int:
        """Delete the rows of ``subject_ids``; returns how many."""
        table: Table = self.model.__table__  # type: ignore[assignment]
        return rowcount(session.execute(delete(table).where(table.c[self.column].in_(list(subject_ids)))))


def rowcount(result: Any) -> int:
    """Rows a DML statement touched."""
    return int(getattr(result, "rowcount", 0) or 0)


SUBJECT_DATA: tuple[SubjectData, ...] = (
    SubjectData(TelemetryEvent, "subject_id", "primary", ("user.behavior.browsing_history",)),
    SubjectData(ConsentRecord, "subject_id", "primary", ("user.privacy_preferences",)),
    SubjectData(FingerprintDevice, "subject_id", "primary", ("user.device.device_id",)),
    SubjectData(SubjectActivity, "subject_id", "derived", ("user.behavior",)),
    SubjectData(Subject, "id", "primary", ("user.unique_id", "user.contact.email", "user.name")),
)
"""Delete order: dependent rows first, the subject row last."""

LEDGER_TABLES = frozenset({"privacy_erasure_requests", "privacy_tombstones", "privacy_subject_keys", "events"})
"""Tables that may keep an erased subject's random id as a tombstone (never an identifier)."""

"""Enabled cost policies, kept in an embedded SQLite file until the control plane takes over.

The file is ``cost_policies.sqlite`` in the user's data directory (``platformdirs``), or in
``$SEEDANCE_HOME`` when that is set (tests point it at a temporary folder). Every write is one
transaction: a failed ``enable`` (bad config, unknown region) never touches what is stored.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from seedance.core.errors import InputError
from seedance.costmodel.policy import CostPolicy, parse_policy

HOME_ENV = "SEEDANCE_HOME"
FILE_NAME = "cost_policies.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cost_policies (
    name        TEXT PRIMARY KEY,
    plugin      TEXT NOT NULL,
    region      TEXT NOT NULL,
    enabled     INTEGER NOT NULL,
    config_yaml TEXT NOT NULL,
    config_path TEXT NOT NULL,
    enabled_at  TEXT,
    disabled_at TEXT,
    updated_at  TEXT NOT NULL
)
"""


def data_home() -> Path:
    """Seedance's local data folder: ``$SEEDANCE_HOME`` or the platform's user data directory."""
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("seedance", appauthor=False))


@dataclass(frozen=True, slots=True)
class StoredPolicy:
    """One stored policy.

    Attributes:
        name: Policy name (``--name``).
        plugin: Cost-policy plug-in (``--plugin``).
        region: Region code (canonical spelling).
        enabled: Whether the policy is active.
        config_yaml: The validated policy document, as stored.
        config_path: Where it was read from.
        enabled_at, disabled_at, updated_at: ISO-8601 UTC times (``None`` when never).
    """

    name: str
    plugin: str
    region: str
    enabled: bool
    config_yaml: str
    config_path: str
    enabled_at: str | None
    disabled_at: str | None
    updated_at: str

    def policy(self) -> CostPolicy:
        """The stored document, parsed again."""
        return parse_policy(self.config_yaml, source=f"stored policy {self.name}")

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict (without the document text)."""
        return {"name": self.name, "plugin": self.plugin, "region": self.region, "enabled": self.enabled,
                "config_path": self.config_path, "enabled_at": self.enabled_at, "disabled_at": self.disabled_at,
                "updated_at": self.updated_at}


def _now() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PolicyStore:
    """Read and write enabled policies in one SQLite file.

    Args:
        path: The database file (default: ``data_home() / "cost_policies.sqlite"``).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else data_home() / FILE_NAME

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(self.path)
        except (OSError, sqlite3.Error) as exc:
            raise InputError(f"cannot open the policy store: {exc}", source=str(self.path)) from None
        try:
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise InputError(f"policy store has schema {version}, newer than this Seedance ({SCHEMA_VERSION})",
                                 source=str(self.path))
            con.execute(_SCHEMA)
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            with con:  # one transaction: committed on success, rolled back on any error
                yield con
        except sqlite3.DatabaseError as exc:
            raise InputError(f"policy store is not readable: {exc}", source=str(self.path)) from None
        finally:
            con.close()

    @staticmethod
    def _row(r: tuple[object, ...]) -> StoredPolicy:
        return StoredPolicy(name=str(r[0]), plugin=str(r[1]), region=str(r[2]), enabled=bool(r[3]),
                            config_yaml=str(r[4]), config_path=str(r[5]),
                            enabled_at=None if r[6] is None else str(r[6]),
                            disabled_at=None if r[7] is None else str(r[7]), updated_at=str(r[8]))

    def enable(self, *, name: str, plugin: str, region: str, policy: CostPolicy, config_path: str) -> StoredPolicy:
        """Store ``policy`` under ``name`` and mark it enabled (replacing an earlier version)."""
        now = _now()
        with self._db() as con:
            con.execute(
                "INSERT INTO cost_policies (name, plugin, region, enabled, config_yaml, config_path, enabled_at, "
                "disabled_at, updated_at) VALUES (?, ?, ?, 1, ?, ?, ?, NULL, ?) "
                "ON CONFLICT(name) DO UPDATE SET plugin=excluded.plugin, region=excluded.region, enabled=1, "
                "config_yaml=excluded.config_yaml, config_path=excluded.config_path, enabled_at=excluded.enabled_at, "
                "disabled_at=NULL, updated_at=excluded.updated_at",
                (name, plugin, region, policy.to_yaml(), config_path, now, now))
        stored = self.get(name)
        assert stored is not None
        return stored

    def disable(self, name: str) -> StoredPolicy:
        """Mark ``name`` disabled (kept, so that ``describe`` still shows it)."""
        with self._db() as con:
            cur = con.execute("UPDATE cost_policies SET enabled=0, disabled_at=?, updated_at=? WHERE name=?",
                              (_now(), _now(), name))
            if cur.rowcount == 0:
                known = [r[0] for r in con.execute("SELECT name FROM cost_policies ORDER BY name")]
                raise InputError(f"no stored policy {name!r}; stored: {', '.join(known) or '(none)'}", source="--name")
        stored = self.get(name)
        assert stored is not None
        return stored

    def get(self, name: str) -> StoredPolicy | None:
        """The stored policy called ``name``, if any."""
        with self._db() as con:
            r = con.execute("SELECT * FROM cost_policies WHERE name=?", (name,)).fetchone()
        return None if r is None else self._row(r)

    def all(self) -> list[StoredPolicy]:
        """Every stored policy, enabled first, then by name."""
        with self._db() as con:
            rows = con.execute("SELECT * FROM cost_policies ORDER BY enabled DESC, name").fetchall()
        return [self._row(r) for r in rows]

    def active(self) -> list[StoredPolicy]:
        """The enabled policies."""
        return [p for p in self.all() if p.enabled]

"""Ledger lines and the columnar frame queries read them into."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

UTC = dt.UTC
ALLOC, IDLE, SHARED = "alloc", "idle", "shared"
NUMERIC = ("first_seen", "last_seen", "run_s", "cpu_request_h", "cpu_usage_h", "cpu_h", "ram_request_h",
           "ram_usage_h", "ram_h", "gpu_request_h", "gpu_usage_h", "gpu_h", "cpu_rate", "ram_rate", "gpu_rate",
           "cpu_cost", "ram_cost", "gpu_cost", "other_cost", "total_cost")
TEXT = ("kind", "node", "namespace", "pod", "container", "gpu_model", "controller", "controller_kind")


@dataclass(slots=True)
class LedgerLine:
    """One ledger line (a row of ``finops_ledger`` without its id). Hours: core-h, byte-h, GPU-h."""

    cluster: str
    source: str
    window_start: dt.datetime
    window_end: dt.datetime
    kind: str
    node: str = ""
    namespace: str = ""
    pod: str = ""
    container: str = ""
    gpu_model: str = ""
    controller: str = ""
    controller_kind: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    first_seen: float = 0.0
    last_seen: float = 0.0
    run_s: float = 0.0
    cpu_request_h: float = 0.0
    cpu_usage_h: float = 0.0
    cpu_h: float = 0.0
    ram_request_h: float = 0.0
    ram_usage_h: float = 0.0
    ram_h: float = 0.0
    gpu_request_h: float = 0.0
    gpu_usage_h: float = 0.0
    gpu_h: float = 0.0
    cpu_rate: float = 0.0
    ram_rate: float = 0.0
    gpu_rate: float = 0.0
    cpu_cost: float = 0.0
    ram_cost: float = 0.0
    gpu_cost: float = 0.0
    other_cost: float = 0.0
    total_cost: float = 0.0

    def as_row(self) -> dict[str, Any]:
        """A dict for an INSERT."""
        d = {k: getattr(self, k) for k in _FIELDS}
        d["labels"] = dict(self.labels)
        return d


_FIELDS = tuple(f.name for f in fields(LedgerLine))


@dataclass(slots=True)
class LedgerFrame:
    """Ledger lines as columns: numeric arrays, text arrays, labels, window starts (epoch s)."""

    num: dict[str, NDArray[np.float64]]
    text: dict[str, NDArray[np.object_]]
    labels: list[Mapping[str, str]]
    window_start: NDArray[np.float64]
    window_end: NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.window_start.size)

    @classmethod
    def from_lines(cls, lines: Sequence[LedgerLine]) -> LedgerFrame:
        """Columns of ``lines``."""
        n = len(lines)
        num = {k: np.fromiter((getattr(ln, k) for ln in lines), dtype=np.float64, count=n) for k in NUMERIC}
        text = {k: np.array([getattr(ln, k) for ln in lines], dtype=object) for k in TEXT}
        starts: dict[dt.datetime, float] = {}
        ws = np.fromiter((starts.setdefault(ln.window_start, ln.window_start.timestamp()) for ln in lines),
                         dtype=np.float64, count=n)
        we = np.fromiter((starts.setdefault(ln.window_end, ln.window_end.timestamp()) for ln in lines),
                         dtype=np.float64, count=n)
        return cls(num=num, text=text, labels=[ln.labels for ln in lines], window_start=ws, window_end=we)

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> LedgerFrame:
        """Columns of row mappings (store rows or :meth:`LedgerLine.as_row`)."""
        num = {k: np.fromiter((float(r[k]) for r in rows), dtype=np.float64, count=len(rows)) for k in NUMERIC}
        text = {k: np.array([str(r[k] or "") for r in rows], dtype=object) for k in TEXT}
        ws = np.fromiter((_epoch(r["window_start"]) for r in rows), dtype=np.float64, count=len(rows))
        we = np.fromiter((_epoch(r["window_end"]) for r in rows), dtype=np.float64, count=len(rows))
        return cls(num=num, text=text, labels=[dict(r.get("labels") or {}) for r in rows], window_start=ws,
                   window_end=we)

    def take(self, mask: NDArray[np.bool_]) -> LedgerFrame:
        """The lines where ``mask`` holds."""
        idx = np.flatnonzero(mask)
        return LedgerFrame(num={k: v[idx] for k, v in self.num.items()}, text={k: v[idx] for k, v in self.text.items()},
                           labels=[self.labels[i] for i in idx.tolist()], window_start=self.window_start[idx],
                           window_end=self.window_end[idx])

    def total(self) -> float:
        """Σ total_cost."""
        return float(self.num["total_cost"].sum())


def _epoch(v: Any) -> float:
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        return float(v.timestamp())
    return float(v)


def at(epoch: float) -> dt.datetime:
    """A UTC datetime from epoch seconds."""
    return dt.datetime.fromtimestamp(epoch, UTC)

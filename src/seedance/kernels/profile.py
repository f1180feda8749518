"""The measured kernel profile: what ``seedancectl kernels bench`` writes and the optimiser reads.

A profile is one JSON document::

    {"schema": "seedance.kernels.profile/v1",
     "device": "cpu" | "cuda", "device_name": "...", "dtype": "float32", "torch": "2.13.0",
     "measured_at": "2026-12-01T10:00:00Z", "runs": 100, "warmup": 10, "command": "...",
     "rows": [{"model": "bert-base", "variant": "eager", "batch": 1, "p50_ms": 412.0, "p95_ms": 450.1,
               "mean_ms": 420.3, "peak_mib": 421.9, "activation_peak_mib": 3.8, "runs": 100}, ...]}

Every row is one (model, variant, batch) measured in the same run as the ``eager`` row of the
same model and batch, which every other variant's ratio is taken against. A malformed file raises
:class:`~seedance.core.errors.InputError` naming the file, the row and the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seedance.core.errors import InputError

SCHEMA = "seedance.kernels.profile/v1"
VARIANTS = ("eager", "compiled", "fused")
_ROW_NUMS = ("p50_ms", "p95_ms", "mean_ms", "peak_mib", "activation_peak_mib")


@dataclass(frozen=True, slots=True)
class ProfileRow:
    """One measured (model, variant, batch)."""

    model: str
    variant: str
    batch: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    peak_mib: float
    activation_peak_mib: float
    runs: int

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON."""
        return {"model": self.model, "variant": self.variant, "batch": self.batch, "p50_ms": self.p50_ms,
                "p95_ms": self.p95_ms, "mean_ms": self.mean_ms, "peak_mib": self.peak_mib,
                "activation_peak_mib": self.activation_peak_mib, "runs": self.runs}


@dataclass(frozen=True, slots=True)
class KernelProfile:
    """A validated profile."""

    device: str
    device_name: str
    dtype: str
    rows: tuple[ProfileRow, ...]
    meta: dict[str, Any]
    source: str = ""

    def row(self, model: str, variant: str, batch: int) -> ProfileRow | None:
        """The row of ``(model, variant, batch)``, if measured."""
        for r in self.rows:
            if r.model == model and r.variant == variant and r.batch == batch:
                return r
        return None

    def gain(self, model: str, variant: str) -> tuple[float, float] | None:
        """Median over measured batches of ``variant``'s p50 latency and peak memory as ratios of eager's.

        ``None`` when the model or the variant was not measured.
        """
        lat: list[float] = []
        mem: list[float] = []
        for r in self.rows:
            if r.model != model or r.variant != variant:
                continue
            base = self.row(model, "eager", r.batch)
            if base is None or base.p50_ms <= 0 or base.peak_mib <= 0:
                continue
            lat.append(r.p50_ms / base.p50_ms)
            mem.append(r.peak_mib / base.peak_mib)
        if not lat:
            return None
        lat.sort()
        mem.sort()
        return lat[len(lat) // 2], mem[len(mem) // 2]

    def as_dict(self) -> dict[str, Any]:
        """The JSON document."""
        return {"schema": SCHEMA, "device": self.device, "device_name": self.device_name, "dtype": self.dtype,
                **self.meta, "rows": [r.as_dict() for r in self.rows]}


def _fail(msg: str, source: str, line: int | None = None, field: str | None = None) -> InputError:
    return InputError(msg, source=source, line=line, field=field)


def parse_profile(doc: Any, *, source: str) -> KernelProfile:
    """Validate a decoded profile document."""
    if not isinstance(doc, dict):
        raise _fail("a profile must be a JSON object", source)
    if doc.get("schema") != SCHEMA:
        raise _fail(f"schema must be {SCHEMA!r}, got {doc.get('schema')!r}", source, field="schema")
    for key in ("device", "device_name", "dtype"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise _fail("missing or not a string", source, field=key)
    raw = doc.get("rows")
    if not isinstance(raw, list) or not raw:
        raise _fail("must be a non-empty list", source, field="rows")
    rows: list[ProfileRow] = []
    seen: set[tuple[str, str, int]] = set()
    for i, r in enumerate(raw, start=1):
        where = f"rows[{i - 1}]"
        if not isinstance(r, dict):
            raise _fail("a row must be an object", source, line=i, field=where)
        for key in ("model", "variant"):
            if not isinstance(r.get(key), str) or not r[key]:
                raise _fail("missing or not a string", source, line=i, field=f"{where}.{key}")
        if r["variant"] not in VARIANTS:
            raise _fail(f"unknown variant {r['variant']!r}; valid: {', '.join(VARIANTS)}", source, line=i,
                        field=f"{where}.variant")
        for key in ("batch", "runs"):
            v = r.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise _fail(f"must be an integer >= 1, got {v!r}", source, line=i, field=f"{where}.{key}")
        nums: dict[str, float] = {}
        for key in _ROW_NUMS:
            v = r.get(key)
            if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise _fail(f"must be a finite number >= 0, got {v!r}", source, line=i, field=f"{where}.{key}")
            nums[key] = float(v)
        if nums["p50_ms"] <= 0 or nums["p95_ms"] < nums["p50_ms"]:
            raise _fail(f"need 0 < p50_ms <= p95_ms, got {nums['p50_ms']} and {nums['p95_ms']}", source, line=i,
                        field=f"{where}.p95_ms")
        key3 = (r["model"], r["variant"], r["batch"])
        if key3 in seen:
            raise _fail(f"duplicate row for {key3}", source, line=i, field=where)
        seen.add(key3)
        rows.append(ProfileRow(r["model"], r["variant"], r["batch"], nums["p50_ms"], nums["p95_ms"],
                               nums["mean_ms"], nums["peak_mib"], nums["activation_peak_mib"], r["runs"]))
    for m, v, b in seen:
        if v != "eager" and (m, "eager", b) not in seen:
            raise _fail(f"{m} {v} batch {b} has no eager row to compare with", source, field="rows")
    meta = {k: v for k, v in doc.items() if k not in ("schema", "device", "device_name", "dtype", "rows")}
    return KernelProfile(doc["device"], doc["device_name"], doc["dtype"], tuple(rows), meta, source)


def load_profile(path: str | Path) -> KernelProfile:
    """Read and validate a profile file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("profile file not found", source=str(p)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=str(p)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", source=str(p), line=exc.lineno) from None
    return parse_profile(doc, source=str(p))

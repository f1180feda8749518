"""A job's speed on each GPU type: the Gavel throughput matrix, or a measured profile of the same shape.

Gavel (OSDI'20) publishes isolated training throughputs (steps/s) of 26 job types on K80, P100 and V100,
for 1, 2, 4 and 8 GPUs (``../shared/data/gavel-throughputs/simulation_throughputs.json``, MIT; the
folder's SOURCE.md describes it). :class:`ThroughputMatrix` holds them columnar:
``steps_per_s[job_type, scale, gpu_type]`` (``nan`` where a combination was not measured).

Only consolidated workers (``k80``, ``p100``, ``v100``) and isolated throughputs (the ``"null"`` key)
are read; co-location pairs are not used.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError

GAVEL_FILE = "gavel-throughputs/simulation_throughputs.json"
SCALES: tuple[int, ...] = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True, eq=False)
class ThroughputMatrix:
    """Isolated steps/s per (job type, GPU count, GPU type).

    Attributes:
        job_types: Job type names (``"ResNet-50 (batch size 64)"``...).
        gpu_types: GPU type names as in the source (``"k80"``, ``"p100"``, ``"v100"``).
        scales: GPU counts of the second axis.
        steps_per_s: ``(len(job_types), len(scales), len(gpu_types))`` float array, ``nan`` = not measured.
        source: Where the figures come from.
    """

    job_types: tuple[str, ...]
    gpu_types: tuple[str, ...]
    scales: tuple[int, ...]
    steps_per_s: NDArray[np.float64]
    source: str

    def job_index(self, job_type: str) -> int:
        """Index of ``job_type``; unknown names list the valid ones."""
        try:
            return self.job_types.index(job_type)
        except ValueError:
            raise InputError(f"unknown job type {job_type!r}; known: {', '.join(self.job_types)}",
                             source=self.source, field="job_type") from None

    def gpu_index(self, gpu_type: str) -> int:
        """Index of ``gpu_type`` (case-insensitive); unknown GPU types list the valid ones."""
        key = gpu_type.strip().lower()
        for i, g in enumerate(self.gpu_types):
            if g.lower() == key:
                return i
        raise InputError(f"unknown GPU type {gpu_type!r}; the throughput matrix has "
                         f"{', '.join(self.gpu_types)}", source=self.source, field="gpu_type")

    def scale_index(self, scale: int) -> int:
        """Index of GPU count ``scale``."""
        if scale not in self.scales:
            raise InputError(f"GPU count {scale} not in the matrix ({self.scales})", source=self.source,
                             field="scale")
        return self.scales.index(scale)

    def rate(self, job_type: str, scale: int, gpu_type: str) -> float:
        """Steps/s of ``job_type`` on ``scale`` GPUs of ``gpu_type`` (``nan`` if not measured)."""
        return float(self.steps_per_s[self.job_index(job_type), self.scale_index(scale), self.gpu_index(gpu_type)])

    def row(self, job: int, scale: int) -> NDArray[np.float64]:
        """Steps/s over GPU types for job-type index ``job`` at GPU count ``scale`` (indices)."""
        return np.asarray(self.steps_per_s[job, scale], dtype=np.float64)

    def restrict(self, gpu_types: Sequence[str]) -> ThroughputMatrix:
        """The matrix over ``gpu_types`` only (in that order)."""
        idx = [self.gpu_index(g) for g in gpu_types]
        return ThroughputMatrix(self.job_types, tuple(self.gpu_types[i] for i in idx), self.scales,
                                self.steps_per_s[:, :, idx].copy(), self.source)


def _key(text: str, source: str, line: int, field: str) -> tuple[str, int]:
    try:
        val = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise InputError(f"job key {text!r} is not a ('<type>', <gpus>) tuple", source=source, line=line,
                         field=field) from None
    if not (isinstance(val, tuple) and len(val) == 2 and isinstance(val[0], str) and isinstance(val[1], int)):
        raise InputError(f"job key {text!r} is not a ('<type>', <gpus>) tuple", source=source, line=line,
                         field=field)
    return val[0], val[1]


def _line_of(text: str, needle: str) -> int:
    pos = text.find(needle)
    return text.count("\n", 0, pos) + 1 if pos >= 0 else 0


def load_gavel(path: str | Path, *, gpu_types: Sequence[str] = ("k80", "p100", "v100")) -> ThroughputMatrix:
    """Load Gavel's ``simulation_throughputs.json`` (or any file of that shape)."""
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read throughputs: {exc.strerror}", source=src) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", source=src, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError("top level must be {gpu_type: {job_key: ...}}", source=src, line=1)
    missing = [g for g in gpu_types if g not in data]
    if missing:
        raise InputError(f"GPU type(s) {', '.join(missing)} missing; the file has {', '.join(data)}", source=src,
                         field="gpu_type")
    names: list[str] = []
    for g in gpu_types:
        for k in data[g]:
            name, _ = _key(k, src, _line_of(text, k), g)
            if name not in names:
                names.append(name)
    arr = np.full((len(names), len(SCALES), len(gpu_types)), np.nan)
    for gi, g in enumerate(gpu_types):
        for k, entry in data[g].items():
            name, scale = _key(k, src, _line_of(text, k), g)
            if scale not in SCALES:
                raise InputError(f"GPU count {scale} not in {SCALES}", source=src, line=_line_of(text, k), field=g)
            value = entry.get("null") if isinstance(entry, dict) else None
            if not isinstance(value, int | float) or not np.isfinite(value) or value < 0:
                raise InputError(f"isolated throughput of {k} must be a number >= 0, got {value!r}", source=src,
                                 line=_line_of(text, k), field=f"{g}.null")
            arr[names.index(name), SCALES.index(scale), gi] = float(value)
    return ThroughputMatrix(tuple(names), tuple(gpu_types), SCALES, arr, src)


def default_matrix() -> ThroughputMatrix:
    """Gavel's matrix from the shared data folder."""
    from seedance.traces.paths import data_file

    return load_gavel(data_file(GAVEL_FILE))

"""Loader for the Azure LLM inference trace format (Splitwise, ISCA'24).

Columns: ``TIMESTAMP`` (``YYYY-MM-DD HH:MM:SS[.fffffff]``, one request's arrival),
``ContextTokens`` (prompt tokens) and ``GeneratedTokens`` (output tokens). Any file with these
columns loads (the conversation and code traces of 2023, or a user's own export). Rows out of
time order are sorted (stable); arrival times are seconds after the first request.

Every problem raises :class:`~seedance.core.errors.InputError` naming the file, line and field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.inference.prefix import PrefixStructure
from seedance.traces.csvio import csv_records

CONV_TRACE = "azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv"
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@dataclass(frozen=True, slots=True)
class RequestTrace:
    """A columnar request trace, sorted by arrival.

    Attributes:
        arrival_s: Arrival times in seconds (first request at 0 unless sliced).
        prompt: Prompt tokens per request (>= 1).
        output: Output tokens per request (>= 1: a prefill always yields one token; a trace's 0
            is read as 1).
        source: Where the trace came from.
        prefix: Shared-prefix structure per request (system prompts, conversations), if known.
        slo_class: SLO class per request (index into the deployment's class targets), if any.
    """

    def take(self, idx: NDArray[np.int64] | slice, arrival_s: NDArray[np.float64] | None = None) -> RequestTrace:
        """Rows ``idx`` (with new arrival times if given), keeping the structure columns."""
        return RequestTrace(self.arrival_s[idx] if arrival_s is None else arrival_s, self.prompt[idx],
                            self.output[idx], self.source,
                            self.prefix.take(idx) if self.prefix is not None else None,
                            self.slo_class[idx] if self.slo_class is not None else None)

    arrival_s: NDArray[np.float64]
    prompt: NDArray[np.int64]
    output: NDArray[np.int64]
    source: str = ""
    prefix: PrefixStructure | None = None
    slo_class: NDArray[np.int64] | None = None

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last arrival."""
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) else 0.0

    @property
    def rate(self) -> float:
        """Mean arrival rate (requests/s) over the span."""
        return (len(self) - 1) / self.span_s if self.span_s > 0 else 0.0

    def scaled(self, rate_scale: float) -> RequestTrace:
        """The same requests arriving ``rate_scale`` times as fast (inter-arrivals divided)."""
        if not (rate_scale > 0 and math.isfinite(rate_scale)):
            raise InputError(f"must be a finite number > 0, got {rate_scale}", source="--rate-scale")
        t0 = self.arrival_s[0] if len(self) else 0.0
        return self.take(slice(None), t0 + (self.arrival_s - t0) / rate_scale)

    def head(self, *, seconds: float | None = None, count: int | None = None) -> RequestTrace:
        """The requests of the first ``seconds`` (after the first arrival) and/or the first ``count``."""
        n = len(self)
        if seconds is not None and n:
            n = int(np.searchsorted(self.arrival_s, self.arrival_s[0] + seconds, side="right"))
        if count is not None:
            n = min(n, count)
        return self.take(slice(0, n))


def from_arrays(arrival_s: object, prompt: object, output: object, source: str = "arrays") -> RequestTrace:
    """Build a trace from plain sequences (tests, synthetic workloads); validates like the loader."""
    a = np.asarray(arrival_s, dtype=np.float64)
    p = np.asarray(prompt, dtype=np.int64)
    o = np.asarray(output, dtype=np.int64)
    if not (a.shape == p.shape == o.shape and a.ndim == 1):
        raise InputError("arrival, prompt and output must be 1-D and of equal length", source=source)
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise InputError("arrival times must be finite and >= 0", source=source, field="arrival")
    if np.any(p < 1):
        raise InputError("prompt tokens must be >= 1", source=source, field="prompt")
    if np.any(o < 0):
        raise InputError("output tokens must be >= 0", source=source, field="output")
    order = np.argsort(a, kind="stable")
    return RequestTrace(a[order], p[order], np.maximum(o[order], 1), source)


def _seconds(raw: str, days: dict[str, int], src: str, line: int) -> float:
    text = raw.strip().replace("T", " ")
    d, _, t = text.partition(" ")
    try:
        if d not in days:
            days[d] = date.fromisoformat(d).toordinal()
        hh, mm, ss = t.split(":")
        h, m, s = int(hh), int(mm), float(ss)
    except ValueError:
        raise InputError(f"not a timestamp YYYY-MM-DD HH:MM:SS[.f]: {raw!r}", source=src, line=line,
                         field="TIMESTAMP") from None
    if not (0 <= h < 24 and 0 <= m < 60 and 0 <= s < 61) or not math.isfinite(s):
        raise InputError(f"time of day out of range: {raw!r}", source=src, line=line, field="TIMESTAMP")
    return days[d] * 86400.0 + h * 3600.0 + m * 60.0 + s


def _count(raw: str, col: str, src: str, line: int, minimum: int) -> int:
    try:
        v = int(raw.strip())
    except ValueError:
        raise InputError(f"not an integer: {raw!r}", source=src, line=line, field=col) from None
    if v < minimum:
        raise InputError(f"must be >= {minimum}, got {v}", source=src, line=line, field=col)
    return v


def load_azure_trace(path: str | Path) -> RequestTrace:
    """Load an Azure LLM inference trace CSV.

    Args:
        path: CSV with columns ``TIMESTAMP,ContextTokens,GeneratedTokens``.

    Raises:
        InputError: Missing file or column, malformed timestamp or count (file, line, field).
    """
    src = str(path)
    times: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    days: dict[str, int] = {}
    for line, row in csv_records(path, COLUMNS):
        times.append(_seconds(row["TIMESTAMP"], days, src, line))
        prompts.append(_count(row["ContextTokens"], "ContextTokens", src, line, 1))
        outputs.append(_count(row["GeneratedTokens"], "GeneratedTokens", src, line, 0))
    if not times:
        raise InputError("no requests in file", source=src, line=2)
    a = np.asarray(times, dtype=np.float64)
    a -= a.min()
    return from_arrays(a, prompts, outputs, source=src)

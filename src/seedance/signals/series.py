"""Hourly signal series on a UTC grid, and exact integration of a signal over a time window.

Contract: a :class:`HourlySeries` holds one value per UTC hour, hour ``i`` covering
``[start + 3600 i, start + 3600 (i + 1))`` seconds since the Unix epoch; ``start`` is a whole
hour. Values are piecewise constant inside an hour, so the integral of a signal over any window
``[a, b)`` is exact (fractions of hours at both ends included), which is what the cost model needs
for jobs that run minutes or months.

Units are canonical: prices in *currency per MWh* (the currency named by the file), carbon
intensity in *gCO2eq per kWh*.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
from numpy.typing import ArrayLike, NDArray

from seedance.core.errors import InputError

HOUR = 3600
FloatA = NDArray[np.float64]

PRICE = "price"
CARBON = "carbon"


def iso(t: float) -> str:
    """UTC ISO-8601 text of epoch seconds ``t``.

    >>> iso(1672531200)
    '2023-01-01T00:00:00Z'
    """
    return datetime.fromtimestamp(float(t), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(text: str, *, source: str = "time") -> float:
    """Epoch seconds of an ISO date or date-time; a naive value is read as UTC.

    >>> parse_utc("2023-01-01")
    1672531200.0
    >>> parse_utc("2023-01-01T01:00:00+01:00")
    1672531200.0
    """
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"not an ISO date or date-time: {text!r}", source=source) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


@dataclass(frozen=True, slots=True, eq=False)
class HourlySeries:
    """One signal of one region, hour by hour in UTC.

    Attributes:
        kind: ``"price"`` or ``"carbon"``.
        region: Region (zone) code, e.g. ``"US-CAL-CISO"``.
        start: Epoch seconds (UTC) of the first hour; a multiple of 3600.
        values: One value per hour (float64), in ``unit``.
        unit: ``"<CUR>/MWh"`` for prices, ``"gCO2eq/kWh"`` for carbon intensity.
        currency: ISO currency code of prices (``None`` for carbon).
        source: Where the values came from (a path or a URL), for messages.
        filled_hours: Hours missing from the source and filled by linear interpolation.
        dropped_rows: Source rows dropped (local times that do not exist, e.g. in a DST gap).
        notes: Facts about the conversion worth printing (timezone used, estimated rows, ...).
    """

    kind: str
    region: str
    start: int
    values: FloatA
    unit: str
    currency: str | None
    source: str
    filled_hours: int = 0
    dropped_rows: int = 0
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.start % HOUR:
            raise ValueError("series start must be a whole UTC hour")
        if self.values.ndim != 1 or not len(self.values):
            raise ValueError("series needs at least one hourly value")

    def __len__(self) -> int:
        return len(self.values)

    @property
    def end(self) -> int:
        """Epoch seconds just after the last hour."""
        return self.start + HOUR * len(self.values)

    def times(self) -> NDArray[np.int64]:
        """Epoch seconds of every hour start."""
        return self.start + HOUR * np.arange(len(self.values), dtype=np.int64)

    def covers(self, a: float, b: float) -> bool:
        """Whether ``[a, b)`` lies inside the series."""
        return self.start <= a and b <= self.end

    def index(self, t: float) -> int:
        """Index of the hour that contains ``t``."""
        return int((t - self.start) // HOUR)

    def value_at(self, t: float) -> float:
        """The value in force at time ``t``."""
        i = self.index(t)
        if not 0 <= i < len(self.values):
            raise InputError(f"{iso(t)} is outside the {self.kind} series ({iso(self.start)} .. {iso(self.end)})",
                             source=self.source)
        return float(self.values[i])

    def window(self, a: float, b: float) -> HourlySeries:
        """The hours that intersect ``[a, b)``, as a new series."""
        i = max(0, self.index(a))
        j = min(len(self.values), int(np.ceil((b - self.start) / HOUR)))
        if j <= i:
            raise InputError(f"no {self.kind} data between {iso(a)} and {iso(b)}", source=self.source)
        return HourlySeries(self.kind, self.region, self.start + HOUR * i, self.values[i:j].copy(), self.unit,
                            self.currency, self.source, self.filled_hours, self.dropped_rows, self.notes)

    def stats(self) -> dict[str, float]:
        """Mean, min and max of the values."""
        return {"mean": float(self.values.mean()), "min": float(self.values.min()), "max": float(self.values.max())}


class Integrator:
    """Exact integrals of piecewise-constant hourly signals over windows, vectorised.

    ``values`` is ``(hours,)`` or ``(hours, k)`` for ``k`` signals on the same grid (integrated
    together, sharing the index arithmetic). ``integral(a, b)`` is the signal integrated over
    ``[a, b)`` in *value-hours* (e.g. for a price in currency/MWh, the integral times a power in
    MW is money); times outside the grid are clipped to it.

    >>> ig = Integrator(0, np.array([1.0, 3.0]))
    >>> float(ig.integral(1800.0, 5400.0))  # half an hour at 1, half an hour at 3
    2.0
    """

    __slots__ = ("_cum", "_n", "_start", "_values")

    def __init__(self, start: int, values: ArrayLike) -> None:
        v = np.asarray(values, dtype=np.float64)
        self._start = int(start)
        self._values = v
        self._n = len(v)
        self._cum = np.concatenate((np.zeros((1, *v.shape[1:])), np.cumsum(v, axis=0)))

    @property
    def start(self) -> int:
        """Epoch seconds of the first hour."""
        return self._start

    @property
    def end(self) -> int:
        """Epoch seconds just after the last hour."""
        return self._start + HOUR * self._n

    def primitive(self, t: ArrayLike) -> FloatA:
        """Integral from the grid start to ``t`` (value-hours); ``t`` is clipped to the grid."""
        x = (np.asarray(t, dtype=np.float64) - self._start) * (1.0 / HOUR)
        x = np.minimum(np.maximum(x, 0.0), float(self._n))
        i = np.minimum(x.astype(np.int64), self._n - 1)
        frac = x - i
        if self._values.ndim > 1:
            frac = frac[..., None]
        return np.asarray(self._cum[i] + frac * self._values[i], dtype=np.float64)

    def integral(self, a: ArrayLike, b: ArrayLike) -> FloatA:
        """Integral over ``[a, b)`` for arrays (or scalars) of window bounds."""
        return self.primitive(b) - self.primitive(a)

    def mean(self, a: ArrayLike, b: ArrayLike) -> FloatA:
        """Time-weighted mean over ``[a, b)``."""
        a_ = np.asarray(a, dtype=np.float64)
        b_ = np.asarray(b, dtype=np.float64)
        span = np.maximum((b_ - a_) / HOUR, 1e-12)
        out = self.integral(a_, b_)
        return out / (span[..., None] if self._values.ndim > 1 else span)

"""OpenCost's ``window`` and ``step`` syntax.

``window``: ``today``, ``yesterday``, ``week`` (since Monday 00:00 UTC), ``lastweek``, ``month``,
``lastmonth``, a duration ending now (``30m``, ``12h``, ``7d``), an RFC3339 pair
(``2026-01-01T00:00:00Z,2026-01-02T00:00:00Z``), a Unix-seconds pair, or ``all`` (everything the
ledger holds; the caller supplies that range). ``step`` and durations: ``<n>m``, ``<n>h``, ``<n>d``,
``<n>w``. Times are UTC.
"""

from __future__ import annotations

import datetime as dt
import math
import re

from seedance.core.errors import InputError

UTC = dt.UTC
_DUR = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, *, source: str = "step") -> float:
    """Seconds of ``"1h"``, ``"30m"``, ``"7d"``, ``"2w"``.

    >>> parse_duration("90m"), parse_duration("7d")
    (5400.0, 604800.0)
    """
    m = _DUR.match(text.strip())
    if m is None or float(m.group(1)) <= 0:
        raise InputError(f"not a duration like 30m, 1h, 7d: {text!r}", source=source)
    return float(m.group(1)) * _UNIT_S[m.group(2)]


MAX_STEPS = 50_000
"""Most steps one query may split a window into (a month of minutes is 43,200; beyond the bound a tiny ``step``
over a long window would keep a worker busy for hours)."""


def step_count(start: dt.datetime, end: dt.datetime, step_s: float, *, source: str = "step") -> int:
    """Steps of ``step_s`` seconds covering ``[start, end)`` (at least one), refused above :data:`MAX_STEPS`.

    >>> step_count(dt.datetime(2026, 1, 1, tzinfo=UTC), dt.datetime(2026, 1, 2, tzinfo=UTC), 3600.0)
    24
    """
    n = max(1.0, math.ceil((end - start).total_seconds() / step_s - 1e-9))
    if n > MAX_STEPS:
        raise InputError(f"this window has {n:.0f} steps of {step_s:g} s; at most {MAX_STEPS} (use a longer step)",
                         source=source)
    return int(n)


def _time(text: str, source: str) -> dt.datetime:
    t = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", t):
        return dt.datetime.fromtimestamp(float(t), UTC)
    try:
        v = dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"not an RFC3339 time or Unix seconds: {text!r}", source=source) from None
    if v.tzinfo is None:
        raise InputError(f"time without a zone: {text!r} (add Z or an offset)", source=source)
    return v.astimezone(UTC)


def parse_window(text: str, *, now: dt.datetime | None = None, all_range: tuple[dt.datetime, dt.datetime] | None
                 = None, source: str = "window") -> tuple[dt.datetime, dt.datetime]:
    """``[start, end)`` of an OpenCost window expression.

    >>> now = dt.datetime(2026, 3, 12, 15, 30, tzinfo=UTC)
    >>> [x.isoformat() for x in parse_window("7d", now=now)]
    ['2026-03-05T15:30:00+00:00', '2026-03-12T15:30:00+00:00']
    >>> [x.isoformat() for x in parse_window("lastweek", now=now)]
    ['2026-03-02T00:00:00+00:00', '2026-03-09T00:00:00+00:00']
    """
    now = (now or dt.datetime.now(UTC)).astimezone(UTC)
    w = text.strip().lower()
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    monday = day - dt.timedelta(days=day.weekday())
    first = day.replace(day=1)
    if w == "all":
        if all_range is None:
            raise InputError("window 'all' needs a ledger to take the range from", source=source)
        return all_range
    if w == "today":
        return day, now
    if w == "yesterday":
        return day - dt.timedelta(days=1), day
    if w == "week":
        return monday, now
    if w == "lastweek":
        return monday - dt.timedelta(days=7), monday
    if w == "month":
        return first, now
    if w == "lastmonth":
        prev = (first - dt.timedelta(days=1)).replace(day=1)
        return prev, first
    if "," in w:
        a, b = text.split(",", 1)
        start, end = _time(a, source), _time(b, source)
        if end <= start:
            raise InputError(f"window ends before it starts: {text!r}", source=source)
        return start, end
    if _DUR.match(w):
        return now - dt.timedelta(seconds=parse_duration(w, source=source)), now
    raise InputError(f"unknown window {text!r}; use today, yesterday, week, lastweek, month, lastmonth, all, "
                     "a duration (30m, 12h, 7d) or a pair of RFC3339 times or Unix seconds", source=source)

"""Why did the bill change? Decompose a cost change between two windows into named effects.

Every resource-hour in a window is one of: *used* (usage), *waste* (billed beyond usage: requests
nobody used), *idle* (capacity nobody was billed for). Cost = Σ_k hours_k × price_k over cells k =
(resource, GPU model) × category, plus shared overhead. With effective prices p_k = cost_k / hours_k
of each (resource, model) in each window, the change from window 0 to window 1 splits exactly into

* **price**  = Σ_k H1_k · (p1_k − p0_k)                     (same hours, new prices)
* **volume** = Σ_r (U1_r − U0_r) · a0_r,used                (more or less useful work, at base prices)
* **efficiency** = Σ_r (W1_r − W0_r) · a0_r,waste           (more or less requested-but-unused)
* **idle**   = Σ_r (D1_r − D0_r) · a0_r,idle                (more or less unbilled capacity)
* **mix**    = Σ_r,c [Σ_k∈r h1_kc p0_k − h1_rc · a0_rc]      (a different GPU-model mix at base prices)
* **shared** = overhead1 − overhead0

where a0_rc is window 0's average base price of resource r in category c (window 1's composition
at base prices when window 0 has none) and p0_k := p1_k for a model absent from window 0. The
effects sum to the change exactly (a test checks it on random ledgers). A replay records usage =
request, so its efficiency effect is 0; a live collector that cannot see a process's GPU use
records 0, which shows as waste.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seedance.finops.lines import ALLOC, IDLE, SHARED, LedgerFrame, at
from seedance.finops.window import step_count

EFFECTS = ("volume", "price", "mix", "idle", "efficiency", "shared")
_RES = {"gpu": ("gpu_usage_h", "gpu_h", "gpu_cost"), "cpu": ("cpu_usage_h", "cpu_h", "cpu_cost"),
        "ram": ("ram_usage_h", "ram_h", "ram_cost")}


@dataclass(frozen=True, slots=True)
class Quantities:
    """Hours and costs of one window by (resource, model) × category, and overhead."""

    hours: Mapping[tuple[str, str, str], float]  # (resource, model, category) -> hours
    cost: Mapping[tuple[str, str], float]  # (resource, model) -> $
    other: float

    @property
    def total(self) -> float:
        return sum(self.cost.values()) + self.other

    def price(self, r: str, m: str) -> float | None:
        h = sum(v for (rr, mm, _), v in self.hours.items() if rr == r and mm == m)
        c = self.cost.get((r, m), 0.0)
        return c / h if h else None

    def scaled(self, k: float) -> Quantities:
        return Quantities({a: v * k for a, v in self.hours.items()}, {a: v * k for a, v in self.cost.items()},
                          self.other * k)


def quantities(frame: LedgerFrame, mask: np.ndarray | None = None, *, include_idle: bool = True) -> Quantities:
    """The :class:`Quantities` of the lines of ``frame`` (where ``mask``)."""
    if mask is not None:
        frame = frame.take(mask)
    kind = frame.text["kind"]
    model = frame.text["gpu_model"]
    num = frame.num
    hours: dict[tuple[str, str, str], float] = {}
    cost: dict[tuple[str, str], float] = {}
    for r, (use_c, bill_c, cost_c) in _RES.items():
        models = model if r == "gpu" else np.full(len(frame), "", dtype=object)
        for m in sorted(set(models.tolist())):
            sel_m = models == m
            a = sel_m & (kind == ALLOC)
            used = float(np.minimum(num[use_c][a], num[bill_c][a]).sum())
            billed = float(num[bill_c][a].sum())
            c = float(num[cost_c][a].sum())
            idle_h = 0.0
            if include_idle:
                i = sel_m & (kind == IDLE)
                idle_h = float(num[bill_c][i].sum())
                c += float(num[cost_c][i].sum())
            if not (used or billed or idle_h or c):
                continue
            hours[(r, m, "used")] = used
            hours[(r, m, "waste")] = billed - used
            hours[(r, m, "idle")] = idle_h
            cost[(r, m)] = c
    other = float(num["other_cost"][kind == SHARED].sum()) if include_idle else 0.0
    return Quantities(hours, cost, other)


def decompose(q0: Quantities, q1: Quantities) -> dict[str, float]:
    """The effects (they sum to ``q1.total - q0.total``)."""
    cells = sorted({(r, m) for r, m, _ in (*q0.hours, *q1.hours)})
    p0: dict[tuple[str, str], float] = {}
    p1: dict[tuple[str, str], float] = {}
    for r, m in cells:
        a, b = q0.price(r, m), q1.price(r, m)
        p1[(r, m)] = b if b is not None else (a or 0.0)
        p0[(r, m)] = a if a is not None else p1[(r, m)]
    out = dict.fromkeys(EFFECTS, 0.0)
    h1_total = {(r, m): sum(q1.hours.get((r, m, c), 0.0) for c in ("used", "waste", "idle")) for r, m in cells}
    out["price"] = sum(h1_total[k] * (p1[k] - p0[k]) for k in cells)
    effect_of = {"used": "volume", "waste": "efficiency", "idle": "idle"}
    for r in sorted({r for r, _ in cells}):
        ms = [m for rr, m in cells if rr == r]
        for c, name in effect_of.items():
            h0 = sum(q0.hours.get((r, m, c), 0.0) for m in ms)
            h1 = sum(q1.hours.get((r, m, c), 0.0) for m in ms)
            base1 = sum(q1.hours.get((r, m, c), 0.0) * p0[(r, m)] for m in ms)
            if h0:
                a0 = sum(q0.hours.get((r, m, c), 0.0) * p0[(r, m)] for m in ms) / h0
            else:
                a0 = base1 / h1 if h1 else 0.0
            out[name] += (h1 - h0) * a0
            out["mix"] += base1 - h1 * a0
    out["shared"] = q1.other - q0.other
    return out


def main_cause(effects: Mapping[str, float]) -> str:
    """The effect with the largest absolute value, e.g. ``"idle -12.30"``."""
    name = max(effects, key=lambda k: abs(effects[k]))
    return f"{name} {effects[name]:+.2f}"


def explain(frame0: LedgerFrame, frame1: LedgerFrame, *, w0: tuple[dt.datetime, dt.datetime],
            w1: tuple[dt.datetime, dt.datetime], step_s: float = 3600.0, mask0: np.ndarray | None = None,
            mask1: np.ndarray | None = None, include_idle: bool = True) -> dict[str, Any]:
    """The explanation document: totals, effects, and the hourly attribution table.

    The table pairs step ``i`` of the second window with step ``i`` of the first when both have the
    same number of steps; otherwise every step is compared with the first window's mean step.
    """
    q0 = quantities(frame0, mask0, include_idle=include_idle)
    q1 = quantities(frame1, mask1, include_idle=include_idle)
    eff = decompose(q0, q1)
    n0 = _steps(w0, step_s)
    n1 = _steps(w1, step_s)
    rows = []
    base_mean = q0.scaled(1.0 / n0) if n0 != n1 else None
    b0 = _buckets(frame0, w0, step_s, n0)
    b1 = _buckets(frame1, w1, step_s, n1)
    for i in range(n1):
        m1 = b1 == i if mask1 is None else (b1 == i) & mask1
        qa = base_mean if base_mean is not None else quantities(
            frame0, b0 == i if mask0 is None else (b0 == i) & mask0, include_idle=include_idle)
        qb = quantities(frame1, m1, include_idle=include_idle)
        e = decompose(qa, qb)
        rows.append({
            "period": at(w1[0].timestamp() + i * step_s).isoformat(), "baseline_cost": qa.total, "cost": qb.total,
            "savings": qa.total - qb.total, "main_cause": main_cause(e) if qa.total or qb.total else "none",
            "effects": e,
        })
    return {
        "from": {"start": w0[0].isoformat(), "end": w0[1].isoformat(), "cost": q0.total},
        "to": {"start": w1[0].isoformat(), "end": w1[1].isoformat(), "cost": q1.total},
        "change": q1.total - q0.total, "effects": eff, "main_cause": main_cause(eff),
        "residual": q1.total - q0.total - sum(eff.values()), "step": step_s, "hourly": rows,
    }


def _steps(w: tuple[dt.datetime, dt.datetime], step_s: float) -> int:
    return step_count(w[0], w[1], step_s)


def _buckets(frame: LedgerFrame, w: tuple[dt.datetime, dt.datetime], step_s: float, n: int) -> Any:
    b = np.floor((frame.window_start - w[0].timestamp()) / step_s).astype(np.int64)
    return np.where((b >= 0) & (b < n), b, -1)


def label_mask(frame: LedgerFrame, filters: Sequence[tuple[str, str]]) -> np.ndarray:
    """Allocation lines whose property or label ``k`` equals ``v`` for every ``(k, v)``."""
    ok: np.ndarray = np.asarray(frame.text["kind"] == ALLOC, dtype=bool)
    for k, v in filters:
        if k in frame.text:
            ok &= frame.text[k] == v
        else:
            ok &= np.array([lab.get(k) == v for lab in frame.labels], dtype=bool)
    return ok

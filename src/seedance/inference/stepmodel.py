"""An iteration-time model a batcher learns from the iterations it has run (no simulator ground truth).

NOTE(seedance): a serving engine can time every iteration it launches; a batcher that plans
against a latency target needs the time of an iteration it has *not* run yet. :class:`OnlineStepModel`
is a least-squares fit of measured iteration times on the iteration's shape,

    ms ≈ θ0 + θ1·[prefill>0] + θ2·prefill_tokens + θ3·decoders + θ4·kv_tokens + θ5·Σ len²/10⁶,

refitted every ``refit`` observations from running sums (``XᵀX``, ``Xᵀy``, with a small ridge so
early fits are defined). The engine reports each iteration's measured duration after it ends
(a span of ``n`` pure decode steps is one observation of its mean step). Before ``warmup``
observations the model answers ``None`` and the batcher falls back to a fixed small chunk.
The model's error is measured out of sample: every observation is first predicted with the
current fit, and the absolute relative error of that prediction is accumulated
(:meth:`error_summary`). The fit is linear, the true cost (where it comes from a profile) is
piecewise linear with a ``max`` for mixed iterations, so the error is a real figure, not zero.
"""

from __future__ import annotations

import math

import numpy as np

_NF = 6


class OnlineStepModel:
    """Recursive least squares on ``(iteration shape, measured ms)`` pairs (rows are buffered and
    folded into the sums at each refit; predictions are plain Python dot products)."""

    __slots__ = ("_abs_rel", "_buf", "_n", "_theta", "_xtx", "_xty", "refit", "warmup")

    def __init__(self, *, warmup: int = 32, refit: int = 32, ridge: float = 1e-6) -> None:
        self.warmup = warmup
        self.refit = refit
        self._xtx = np.eye(_NF) * ridge
        self._xty = np.zeros(_NF)
        self._theta: tuple[float, ...] | None = None
        self._n = 0
        self._abs_rel: list[float] = []
        self._buf: list[tuple[float, float, float, float, float, float, float]] = []

    @staticmethod
    def features(prefill_tokens: float, sq_tokens: float, decoders: float,
                 kv_tokens: float) -> tuple[float, float, float, float, float, float]:
        """The regression row of one iteration."""
        return (1.0, 1.0 if prefill_tokens > 0 else 0.0, float(prefill_tokens), float(decoders), float(kv_tokens),
                sq_tokens / 1e6)

    @property
    def observations(self) -> int:
        """Iterations observed so far."""
        return self._n

    def predict(self, prefill_tokens: float, sq_tokens: float, decoders: float, kv_tokens: float) -> float | None:
        """Predicted ms of an iteration of this shape (``None`` before the warm-up)."""
        th = self._theta
        if th is None:
            return None
        return (th[0] + (th[1] if prefill_tokens > 0 else 0.0) + th[2] * prefill_tokens + th[3] * decoders
                + th[4] * kv_tokens + th[5] * sq_tokens / 1e6)

    def observe(self, prefill_tokens: float, sq_tokens: float, decoders: float, kv_tokens: float, ms: float) -> None:
        """Record one measured iteration (its out-of-sample error first)."""
        if not (ms > 0 and math.isfinite(ms)):
            return
        th = self._theta
        if th is not None:  # predict(), inlined (hot: every iteration of every replica)
            guess = (th[0] + (th[1] if prefill_tokens > 0 else 0.0) + th[2] * prefill_tokens + th[3] * decoders
                     + th[4] * kv_tokens + th[5] * sq_tokens / 1e6)
            self._abs_rel.append(abs(guess - ms) / ms)
        self._buf.append((1.0, 1.0 if prefill_tokens > 0 else 0.0, float(prefill_tokens), float(decoders),
                          float(kv_tokens), sq_tokens / 1e6, ms))  # features(), inlined
        self._n += 1
        if self._n >= self.warmup and (self._theta is None or self._n % self.refit == 0):
            rows = np.asarray(self._buf)
            self._buf.clear()
            x, y = rows[:, :_NF], rows[:, _NF]
            self._xtx += x.T @ x
            self._xty += x.T @ y
            self._theta = tuple(float(v) for v in np.linalg.solve(self._xtx, self._xty))

    def max_prefill_tokens(self, budget_ms: float, decoders: int, kv_tokens: float, cap: int) -> int | None:
        """The most prefill tokens (<= ``cap``) whose predicted iteration stays within ``budget_ms``
        (prompts taken as one sequence for the Σ len² term); ``None`` before the warm-up. The
        prediction is ``a + b·t + c·t²`` in the tokens ``t``: solved in closed form, then checked."""
        th = self._theta
        if th is None:
            return None
        th0, th1, th2, th3, th4, th5 = th
        dec = th3 * decoders
        kv = th4 * kv_tokens

        def fits(t: int) -> bool:  # predict(t, t², decoders, kv_tokens) <= budget, the same sums in order
            return ((th0 + (th1 if t > 0 else 0.0)) + th2 * t + dec + kv + th5 * (float(t) * t) / 1e6) <= budget_ms

        if cap <= 0 or not fits(1):
            return 0
        if fits(cap):
            return cap
        a = th[0] + th[1] + th[3] * decoders + th[4] * kv_tokens - budget_ms
        b, c = th[2], th[5] / 1e6
        if c > 1e-18:
            disc = b * b - 4.0 * c * a
            t = int((-b + math.sqrt(max(disc, 0.0))) / (2.0 * c)) if disc >= 0 else 1
        elif b > 0:
            t = int(-a / b)
        else:  # not increasing in t: bisect
            t = 1
        t = min(max(t, 1), cap)
        if not fits(t) or (t < cap and fits(t + 1)):  # a non-monotone fit: bisect between 1 and cap
            lo, hi = 1, cap
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if fits(mid):
                    lo = mid
                else:
                    hi = mid
            return lo
        return t

    def error_summary(self) -> dict[str, float | int]:
        """Out-of-sample absolute relative error of the predictions (median, mean, p90, count)."""
        if not self._abs_rel:
            return {"predictions": 0, "observations": self._n}
        e = np.asarray(self._abs_rel)
        return {"predictions": int(e.size), "observations": self._n,
                "median_abs_rel_err": round(float(np.median(e)), 4), "mean_abs_rel_err": round(float(e.mean()), 4),
                "p90_abs_rel_err": round(float(np.percentile(e, 90)), 4)}

    def merge_errors(self, others: list[OnlineStepModel]) -> dict[str, float | int]:
        """The error summary over this model's and ``others``' predictions together."""
        pooled = OnlineStepModel()
        for m in [self, *others]:
            pooled._abs_rel.extend(m._abs_rel)
            pooled._n += m._n
        return pooled.error_summary()

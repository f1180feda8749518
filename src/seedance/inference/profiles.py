"""Request profiles: the vector a request is batched by, and the decode-length predictor behind it.

A profile has three features, each the base-2 logarithm of a size:

* ``log2(prompt tokens)``,
* ``log2(predicted decode steps)``,
* ``log2(KV-cache growth per decode step in KiB)``, from the model's shape (each step appends one
  token's keys and values: ``2 * layers * kv_heads * head_dim * dtype_bytes``).

Normalising by ``log2`` gives the L2 distance a unit: a distance of 1.0 is "one quantity twice the
other's" (one octave), 0.3 is a ratio of ``2**0.3 = 1.23``. The batching threshold δ is stated in
these octaves. The KV-growth feature is the same for every request of one model; it separates
requests only when pools serve several models.

The predictor sees only the past: it is asked at a request's arrival and told the true output
length at its completion. It keeps, per half-octave bin of prompt length, the count and sum of
observed output lengths and predicts the bin mean shrunk towards the global mean
(``(sum + k * global_mean) / (n + k)``), so sparse bins borrow strength. Its error (predictions
made online, against the truth) is part of every simulation result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

N_FEATURES = 3
_BINS = 64


class DecodeLengthPredictor:
    """Online predictor of output tokens from prompt tokens.

    Args:
        prior: Prediction before anything was observed.
        shrink: Pseudo-count ``k`` pulling a bin's mean towards the global mean.

    >>> p = DecodeLengthPredictor(prior=100.0)
    >>> p.predict(1000)
    100.0
    >>> p.observe(1000, 300); p.observe(1000, 500)
    >>> round(p.predict(1000), 1)
    400.0
    """

    __slots__ = ("_count", "_n", "_sum", "_total", "prior", "shrink")

    def __init__(self, *, prior: float = 128.0, shrink: float = 4.0) -> None:
        if prior <= 0 or shrink < 0:
            raise ValueError("prior must be > 0 and shrink >= 0")
        self.prior = float(prior)
        self.shrink = float(shrink)
        self._count = [0] * _BINS
        self._sum = [0.0] * _BINS
        self._n = 0
        self._total = 0.0

    @property
    def mean(self) -> float:
        """Mean observed output tokens (the prior before any observation)."""
        return self._total / self._n if self._n else self.prior

    @staticmethod
    def _bin(prompt: int) -> int:
        return min(_BINS - 1, int(2.0 * math.log2(max(prompt, 1))))

    def predict(self, prompt: int) -> float:
        """Predicted output tokens of a request with ``prompt`` prompt tokens (>= 1)."""
        if self._n == 0:
            return self.prior
        g = self._total / self._n
        b = self._bin(prompt)
        return max(1.0, (self._sum[b] + self.shrink * g) / (self._count[b] + self.shrink))

    def observe(self, prompt: int, output: int) -> None:
        """Learn from a completed request."""
        b = self._bin(prompt)
        self._count[b] += 1
        self._sum[b] += output
        self._n += 1
        self._total += output


@dataclass(frozen=True, slots=True)
class PredictorError:
    """Error of the online predictions against the true output lengths.

    Attributes:
        n: Requests scored.
        mae: Mean absolute error (tokens).
        mape_median: Median of ``|pred - true| / true``.
        baseline_mae: MAE of the running global mean (the predictor without prompt bins).
        corr: Pearson correlation of log prediction and log truth.
    """

    n: int
    mae: float
    mape_median: float
    baseline_mae: float
    corr: float

    def as_dict(self) -> dict[str, float]:
        """Plain values for JSON."""
        return {"n": self.n, "mae_tokens": round(self.mae, 2), "ape_median": round(self.mape_median, 4),
                "running_mean_mae_tokens": round(self.baseline_mae, 2), "log_corr": round(self.corr, 4)}


def predictor_error(pred: NDArray[np.float64], true: NDArray[np.int64],
                    baseline: NDArray[np.float64]) -> PredictorError:
    """Score online predictions ``pred`` (and a baseline's) against ``true`` output lengths."""
    if len(true) == 0:
        return PredictorError(0, math.nan, math.nan, math.nan, math.nan)
    t = true.astype(np.float64)
    err = np.abs(pred - t)
    lp, lt = np.log(np.maximum(pred, 1.0)), np.log(np.maximum(t, 1.0))
    corr = float(np.corrcoef(lp, lt)[0, 1]) if len(t) > 1 and lp.std() > 0 and lt.std() > 0 else math.nan
    return PredictorError(len(t), float(err.mean()), float(np.median(err / t)),
                          float(np.abs(baseline - t).mean()), corr)


def kv_growth_feature(kv_bytes_per_token: int) -> float:
    """The KV-growth feature: log2 of the KiB one decode step appends."""
    return math.log2(kv_bytes_per_token / 1024.0)


def profile_vector(prompt: int, predicted: float, kv_feature: float) -> tuple[float, float, float]:
    """The normalised profile ``(log2 prompt, log2 predicted decode steps, kv feature)``."""
    return (math.log2(max(prompt, 1)), math.log2(max(predicted, 1.0)), kv_feature)

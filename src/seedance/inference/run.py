"""What one serving simulation produced: per-request columns, the KV-memory series, and the
request states (:data:`DONE`, :data:`DROPPED`, :data:`REJECTED` are the final ones)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

FUTURE, WAITING, PREFILL, DECODE, DONE, DROPPED, REJECTED, SENDING = -1, 0, 1, 2, 3, 4, 5, 6

__all__ = ["DECODE", "DONE", "DROPPED", "FUTURE", "PREFILL", "REJECTED", "SENDING", "WAITING", "ServingRun"]


@dataclass(slots=True)
class ServingRun:
    """Everything one simulation produced (per-request columns and the KV-memory series).

    Attributes:
        policy: Batcher name.
        trace: Trace source.
        arrival, prompt, output: The replayed requests (``output`` >= 1).
        predicted: Output tokens predicted at arrival.
        baseline_pred: The running mean of past outputs at arrival (the predictor's baseline).
        first_token, finish: Times (s) of the first and last output token (NaN if none).
        state: Final state per request (``DONE``, ``DROPPED``, or ``REJECTED`` by admission control).
        preemptions: Preemptions per request.
        mem_t, mem_mib: KV memory held over time (all replicas).
        replica_peak_mib: Peak KV memory per replica.
        iterations: Iterations simulated (a span of n decode steps counts n).
        events: Events processed.
        wall_s: Wall-clock seconds of the run.
        pools: Replicas per pool.
        kv_pool_mib: KV pool size per replica (MiB).
        delta_seen: ``(min, max)`` of δ over the run (batchers that have one), else ``None``.
        step_model_error: Out-of-sample error of the batchers' learnt step-time models, if any.
        cached_tokens: Prefix-cache hit tokens per request at its first admission (-1: never
            admitted); ``None`` without prefix caching.
        reject_reason: Why each rejected request was rejected.
        slo_class: SLO class per request, if the trace has classes.
    """

    policy: str
    trace: str
    arrival: NDArray[np.float64]
    prompt: NDArray[np.int64]
    output: NDArray[np.int64]
    predicted: NDArray[np.float64]
    baseline_pred: NDArray[np.float64]
    first_token: NDArray[np.float64]
    finish: NDArray[np.float64]
    state: NDArray[np.int8]
    preemptions: NDArray[np.int32]
    mem_t: NDArray[np.float64]
    mem_mib: NDArray[np.float64]
    replica_peak_mib: list[float]
    iterations: int
    events: int
    wall_s: float
    pools: tuple[int, ...]
    kv_pool_mib: float
    delta_seen: tuple[float, float] | None = None
    step_model_error: dict[str, float | int] | None = None
    cached_tokens: NDArray[np.int64] | None = None
    reject_reason: dict[int, str] = field(default_factory=dict)
    slo_class: NDArray[np.int64] | None = None

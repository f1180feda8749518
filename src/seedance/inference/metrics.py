"""Serving metrics: latency percentiles, throughput and goodput at an SLO.

Definitions (every figure in ``seedancectl inference simulate`` output):

* **TTFT** of a request: time of its first output token minus its arrival.
* **TPOT** of a request: ``(last token time - first token time) / (output tokens - 1)``, the mean
  time per output token after the first; undefined (and counted as meeting any TPOT target) for
  one-token outputs.
* **makespan**: from the first arrival to the last completion.
* **completed_rps**: completed requests / makespan. **tokens_per_s**: their output tokens / makespan.
* **goodput_rps**: completed requests whose TTFT <= ``ttft_ms`` *and* TPOT <= ``tpot_ms`` (the
  SLO targets), per second of makespan; ``slo_attainment`` is their share of all requests.
* **meets_slo**: the p99 (``quantile``) TTFT and TPOT over completed requests are within the
  targets and nothing was dropped: the run as a whole keeps the SLO.
* Percentiles are numpy's linear-interpolation percentiles over completed requests.
* **peak_kv_mib**: the most KV-cache memory held at once over all replicas (paged batchers:
  allocated blocks; request-level batchers: their padded KV tensors).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.inference.profiles import predictor_error
from seedance.inference.run import DONE, DROPPED, REJECTED, ServingRun


@dataclass(frozen=True, slots=True)
class SLO:
    """Latency targets.

    Attributes:
        ttft_ms: Target time to first token.
        tpot_ms: Target time per output token.
        quantile: Percentile the run-level check uses (99 = p99).
    """

    ttft_ms: float = 10_000.0
    tpot_ms: float = 200.0
    quantile: float = 99.0

    def __post_init__(self) -> None:
        if not (self.ttft_ms > 0 and math.isfinite(self.ttft_ms)):
            raise InputError(f"must be > 0, got {self.ttft_ms}", source="--ttft-ms")
        if not (self.tpot_ms > 0 and math.isfinite(self.tpot_ms)):
            raise InputError(f"must be > 0, got {self.tpot_ms}", source="--tpot-ms")
        if not 0 < self.quantile <= 100:
            raise InputError(f"must be in (0, 100], got {self.quantile}", source="--slo-quantile")


def _pct(x: np.ndarray[Any, Any], q: float) -> float:
    return float(np.percentile(x, q)) if x.size else math.nan


def latencies(run: ServingRun) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``(done mask, TTFT ms, TPOT ms)`` per request (NaN where undefined)."""
    done = run.state == DONE
    ttft = (run.first_token - run.arrival) * 1000.0
    steps = (run.output - 1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(steps > 0, (run.finish - run.first_token) * 1000.0 / np.maximum(steps, 1.0), np.nan)
    return done, ttft, tpot


def summarize(run: ServingRun, slo: SLO, class_slos: tuple[SLO, ...] | None = None) -> dict[str, Any]:
    """The result row of one run (the keys of the CLI's JSON ``results``).

    With ``class_slos`` and a run whose trace has SLO classes, each request's goodput is judged by
    its class's targets (``goodput_rps`` and ``goodput_rps_class<k>``); ``meets_slo`` stays the
    run-level check against ``slo``. Rejected requests (admission control) count as not good.
    """
    done, ttft, tpot = latencies(run)
    n = len(run.arrival)
    n_done = int(done.sum())
    dropped = int((run.state == DROPPED).sum())
    rejected = int((run.state == REJECTED).sum())
    makespan = float(np.nanmax(run.finish[done]) - run.arrival.min()) if n_done else math.nan
    ttft_t: Any = slo.ttft_ms
    tpot_t: Any = slo.tpot_ms
    cls = run.slo_class
    if class_slos and cls is not None:
        k = np.minimum(cls, len(class_slos) - 1)
        ttft_t = np.asarray([c.ttft_ms for c in class_slos])[k]
        tpot_t = np.asarray([c.tpot_ms for c in class_slos])[k]
    t_ok = ttft <= ttft_t
    p_ok = np.isnan(tpot) | (tpot <= tpot_t)
    good = int((done & t_ok & p_ok).sum())
    td, pd_ = ttft[done], tpot[done]
    pd_ = pd_[~np.isnan(pd_)]
    q = slo.quantile
    ttft_q, tpot_q = _pct(td, q), _pct(pd_, q)
    meets = bool(n_done == n and dropped == 0 and rejected == 0 and ttft_q <= slo.ttft_ms
                 and (math.isnan(tpot_q) or tpot_q <= slo.tpot_ms))

    def rate(k: float) -> float:
        return k / makespan if makespan and makespan > 0 else 0.0

    err = predictor_error(run.predicted[done], run.output[done], run.baseline_pred[done])
    row: dict[str, Any] = {
        "policy": run.policy,
        "goodput_rps": round(rate(good), 4),
        "completed_rps": round(rate(n_done), 4),
        "tokens_per_s": round(rate(float(run.output[done].sum())), 2),
        "ttft_ms_p50": round(_pct(td, 50), 1),
        "ttft_ms_p99": round(_pct(td, 99), 1),
        "tpot_ms_p50": round(_pct(pd_, 50), 2),
        "tpot_ms_p99": round(_pct(pd_, 99), 2),
        "peak_kv_mib": round(float(run.mem_mib.max()) if run.mem_mib.size else 0.0, 1),
        "preemptions": int(run.preemptions.sum()),
        "requests": n,
        "completed": n_done,
        "dropped": dropped,
        "slo_attainment": round(good / n, 4) if n else math.nan,
        "meets_slo": meets,
        f"ttft_ms_p{q:g}": round(ttft_q, 1),
        f"tpot_ms_p{q:g}": round(tpot_q, 2),
        "makespan_s": round(makespan, 2),
        "arrival_rps": round((n - 1) / float(np.ptp(run.arrival)), 4) if n > 1 and np.ptp(run.arrival) > 0 else 0.0,
        "replicas": len(run.replica_peak_mib),
        "pools": list(run.pools),
        "kv_pool_mib_per_replica": round(run.kv_pool_mib, 1),
        "peak_kv_mib_replica_max": round(max(run.replica_peak_mib, default=0.0), 1),
        "iterations": run.iterations,
        "events": run.events,
        "wall_s": round(run.wall_s, 3),
        "predictor": err.as_dict(),
        "rejected": rejected,
    }
    if class_slos and cls is not None:
        g = done & t_ok & p_ok
        for c in range(len(class_slos)):
            m = np.minimum(cls, len(class_slos) - 1) == c
            row[f"goodput_rps_class{c}"] = round(rate(int((g & m).sum())), 4)
            row[f"slo_attainment_class{c}"] = round(float((g & m).sum()) / max(int(m.sum()), 1), 4)
    if rejected:
        kinds: dict[str, int] = {}
        for why in run.reject_reason.values():
            key = why.split(" ")[0] + " " + why.split(" ")[1] if " " in why else why
            kinds[key] = kinds.get(key, 0) + 1
        row["reject_reasons"] = kinds
    if run.cached_tokens is not None:
        seen = run.cached_tokens >= 0
        hit = int(run.cached_tokens[seen].sum())
        row["prefix_hit_tokens"] = hit
        row["prefix_hit_rate"] = round(hit / max(int(run.prompt[seen].sum()), 1), 4)
    return row

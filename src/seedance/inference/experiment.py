"""Serving experiments: one deployment, one trace, several batchers compared at the same load.

Fairness is structural here: every policy of an :class:`Experiment` replays the same requests on
the same replicas (GPU type, tensor-parallel degree, count), the same KV pool per replica, the same
step-time tables and the same SLO; only the batcher (and its default router) differs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.inference.batchers.base import RequestHistory
from seedance.inference.capacity import CapacityResult, slo_capacity
from seedance.inference.disagg import Disaggregation
from seedance.inference.memory import KVBudget
from seedance.inference.metrics import SLO, summarize
from seedance.inference.model import get_model
from seedance.inference.perf import load_step_times
from seedance.inference.routing import Admission
from seedance.inference.sim import ServingRun, ServingSimulator
from seedance.inference.trace import RequestTrace
from seedance.inference.tuning import BASELINE_GRIDS, TuningResult, slo_token_budget, tune

WHITEPAPER_SOURCE = "Seedance 2.0 whitepaper §2.1 (../shared/spec/seedance-2.0-whitepaper.zh.txt): a claim"
WHITEPAPER_CLAIM: dict[str, float] = {
    "static_qps": 42.1,
    "seedance_qps": 68.7,
    "static_peak_mib": 18240.0,
    "seedance_peak_mib": 12592.0,
}


@dataclass(frozen=True, slots=True)
class Deployment:
    """The serving hardware shared by every policy of an experiment.

    Attributes:
        model: Registered model name.
        gpu: Catalog GPU name.
        tp: Tensor-parallel degree (GPUs per replica).
        replicas: Replicas.
        block_tokens: Tokens per KV block.
        gpu_memory_utilization: Share of GPU memory for weights plus KV (vLLM's 0.9).
        kv_budget_gib: KV pool per replica, overriding the derived one.
        splitwise: SplitwiseSim profile path (default: the shared copy).
        vidur: Vidur profile folder (default: the shared copy).
    """

    model: str = "llama2-70b"
    gpu: str = "A100-80GB"
    tp: int = 8
    replicas: int = 4
    block_tokens: int = 16
    gpu_memory_utilization: float = 0.9
    kv_budget_gib: float | None = None
    splitwise: str | None = None
    vidur: str | None = None


class Experiment:
    """Runs batchers on one trace and deployment.

    Args:
        trace: The full trace.
        deployment: Hardware shared by all policies.
        slo: Latency targets.
        history_s: The first ``history_s`` seconds of the trace are history only (they warm the
            predictor and size pools) and are not replayed.
        duration_s: Replay only this many seconds after the history (``None``: all).
        class_slos: Targets per SLO class when the trace has classes (a request is judged by its
            class's targets in ``goodput_rps``; ``slo`` stays the run-level check).
    """

    def __init__(self, trace: RequestTrace, deployment: Deployment, slo: SLO, *, history_s: float = 0.0,
                 duration_s: float | None = None, class_slos: tuple[SLO, ...] | None = None) -> None:
        if history_s < 0 or not math.isfinite(history_s):
            raise InputError(f"must be >= 0, got {history_s}", source="--history-s")
        if duration_s is not None and not duration_s > 0:
            raise InputError(f"must be > 0, got {duration_s}", source="--duration-s")
        self.deployment = deployment
        self.slo = slo
        self.class_slos = class_slos
        self.shape = get_model(deployment.model)
        self.step = load_step_times(
            deployment.model, deployment.gpu, deployment.tp,
            splitwise=Path(deployment.splitwise) if deployment.splitwise else None,
            vidur=Path(deployment.vidur) if deployment.vidur else None,
        )
        self.budget = KVBudget.for_replica(
            self.shape, deployment.gpu, deployment.tp, block_tokens=deployment.block_tokens,
            gpu_memory_utilization=deployment.gpu_memory_utilization, kv_budget_gib=deployment.kv_budget_gib,
        )
        k = int(np.searchsorted(trace.arrival_s, trace.arrival_s[0] + history_s, side="left")) if history_s else 0
        self.history = RequestHistory(trace.prompt[:k].copy(), trace.output[:k].copy())
        rest = trace.take(slice(k, None), trace.arrival_s[k:] - (trace.arrival_s[k] if k < len(trace) else 0.0))
        self.trace = rest.head(seconds=duration_s) if duration_s is not None else rest
        if len(self.trace) == 0:
            raise InputError("no requests left to replay after the history window", source="--history-s")

    def simulate(self, policy: str, rate_scale: float = 1.0, *, options: dict[str, Any] | None = None,
                 router: str | None = None, audit: bool = False, prefix_cache: bool = False,
                 router_options: dict[str, Any] | None = None,
                 admission: Admission | None = None,
                 disaggregate: Disaggregation | None = None,
                 perfect_cache: bool = False) -> tuple[dict[str, Any], ServingRun]:
        """One run: the result row and the raw run (engine options as in :class:`ServingSimulator`)."""
        d = self.deployment
        sim = ServingSimulator(
            self.trace.scaled(rate_scale), step=self.step, shape=self.shape, budget=self.budget, batcher=policy,
            options=options, replicas=d.replicas, router=router, history=self.history,
            ttft_ms=self.slo.ttft_ms, tpot_ms=self.slo.tpot_ms, audit=audit, prefix_cache=prefix_cache,
            router_options=router_options, admission=admission, disaggregate=disaggregate,
            perfect_cache=perfect_cache,
        )
        run = sim.run()
        row = summarize(run, self.slo, self.class_slos)
        if prefix_cache:
            row["prefix_cache"] = "unbounded (ceiling)" if perfect_cache else True
        row["rate_scale"] = round(rate_scale, 6)
        row["router"] = sim.router.name
        if run.step_model_error is not None:
            row["step_model_error"] = run.step_model_error
        if run.delta_seen is not None:
            row["delta_min"], row["delta_max"] = (round(x, 4) for x in run.delta_seen)
        return row, run

    def capacity(self, policy: str, *, start: float = 1.0, tol: float = 0.02, options: dict[str, Any] | None = None,
                 router: str | None = None, **engine: Any) -> CapacityResult:
        """The highest rate scale at which ``policy`` keeps the SLO (see :mod:`capacity`)."""
        return slo_capacity(lambda s: self.simulate(policy, s, options=options, router=router, **engine)[0],
                            start=start, tol=tol)

    def tune(self, policy: str, *, options: dict[str, Any] | None = None, router: str | None = None,
             start: float = 1.0, tol: float = 0.02) -> TuningResult:
        """Sweep ``policy``'s knobs (:data:`BASELINE_GRIDS`) for the highest SLO capacity."""
        import seedance.inference.batchers  # noqa: F401  (registers the built-in batchers)
        from seedance.inference.batchers.base import BATCHERS, resolve_options

        cls = BATCHERS.get(policy)
        defaults = resolve_options(cls, options)
        extra: dict[str, tuple[float, ...]] | None = None
        if policy == "continuous-chunked":
            extra = {"max_num_batched_tokens": (float(slo_token_budget(self.step, self.slo.tpot_ms)),)}
        return tune(cls.name, defaults,
                    lambda o, s0: self.capacity(policy, start=s0, tol=tol, options=o, router=router),
                    extra=extra, start=start)

    def describe(self) -> dict[str, Any]:
        """The setup, for reports."""
        st = self.step
        return {
            "deployment": asdict(self.deployment),
            "slo": {"ttft_ms": self.slo.ttft_ms, "tpot_ms": self.slo.tpot_ms, "quantile": self.slo.quantile},
            "trace": self.trace.source,
            "requests": len(self.trace),
            "trace_rate_rps": round(self.trace.rate, 4),
            "history_requests": int(len(self.history.prompt)),
            "step_source": st.source,
            "kv_bytes_per_token": self.shape.kv_bytes_per_token,
            "kv_pool_mib_per_replica": round(self.budget.total_mib, 1),
            "kv_blocks_per_replica": self.budget.total_blocks,
        }


def compare(
    exp: Experiment, policies: Sequence[str], *, rate_scale: float | None = None, capacity: bool = False,
    options: dict[str, dict[str, Any]] | None = None, router: str | None = None, tune_baselines: bool = False,
    engine: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[ServingRun]]:
    """Run ``policies`` at one load (and optionally search each one's SLO capacity).

    Args:
        rate_scale: The load (arrival-rate scale). ``None``: the highest scale at which ``static``
            still keeps the SLO, found by :meth:`Experiment.capacity`.
        capacity: Also search every policy's SLO capacity (``capacity_rps``, ``capacity_rate_scale``).
        options: Batcher options per policy name.
        tune_baselines: With ``capacity``: sweep every baseline's knobs (:mod:`tuning`) and report
            the tuned setting (``tuned_options``, ``capacity_rps``) beside the default
            (``default_capacity_rps``); the row at the load uses the tuned setting. Baselines are
            tuned as plain baselines (without ``engine``'s mechanisms).
        engine: Engine mechanisms for every run (``prefix_cache``, ``router_options``,
            ``admission``, ``disaggregate``: see :meth:`Experiment.simulate`).

    Returns:
        ``(payload, runs)``: ``payload["results"]`` holds one row per policy, ``payload["setup"]``
        the experiment, ``payload["claim"]`` the whitepaper comparison when ``static`` and
        ``seedance`` both ran.
    """
    opts = options or {}
    eng = engine or {}
    static_cap: CapacityResult | None = None
    if rate_scale is None:
        static_cap = exp.capacity("static", options=opts.get("static"), router=router)
        if static_cap.rate_scale <= 0:
            raise InputError("static batching keeps the SLO at no load tried; pass --rate-scale or relax the SLO",
                             source="--rate-scale")
        rate_scale = static_cap.rate_scale
    rows: list[dict[str, Any]] = []
    runs: list[ServingRun] = []
    for p in policies:
        tuned = None
        if capacity and tune_baselines and p in BASELINE_GRIDS:
            tuned = exp.tune(p, options=opts.get(p), router=router, start=rate_scale)
        p_opts = tuned.tuned_options if tuned is not None else opts.get(p)
        row, run = exp.simulate(p, rate_scale, options=p_opts, router=router, **eng)
        if capacity:
            if tuned is not None:
                cap = tuned.tuned
            elif p == "static" and static_cap is not None:
                cap = static_cap
            else:
                cap = exp.capacity(p, start=rate_scale, options=opts.get(p), router=router, **eng)
            c_row = cap.row or {}
            row["capacity_rate_scale"] = round(cap.rate_scale, 6)
            row["capacity_rps"] = c_row.get("goodput_rps", 0.0)
            row["capacity_ttft_ms_p99"] = c_row.get("ttft_ms_p99")
            row["capacity_tpot_ms_p99"] = c_row.get("tpot_ms_p99")
            row["capacity_peak_kv_mib"] = c_row.get("peak_kv_mib")
            row["capacity_runs"] = len(cap.tried)
            if tuned is not None:
                row.update(tuned.as_row(lambda c: (c.row or {}).get("goodput_rps", 0.0)))
        rows.append(row)
        runs.append(run)
    setup = exp.describe()
    setup["rate_scale"] = round(rate_scale, 6)
    setup["load_rps"] = round(exp.trace.rate * rate_scale, 4)
    setup["load_chosen_as"] = "static's SLO capacity" if static_cap is not None else "--rate-scale"
    payload: dict[str, Any] = {"results": rows, "setup": setup}
    claim = claim_comparison(rows)
    if claim:
        payload["claim"] = claim
    return payload, runs


def claim_comparison(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Measured ratios of ``seedance`` to ``static`` beside the whitepaper's (None without both)."""
    by = {r["policy"]: r for r in rows}
    if "static" not in by or "seedance" not in by:
        return None
    s, d = by["static"], by["seedance"]
    w = WHITEPAPER_CLAIM
    out: dict[str, Any] = {
        "whitepaper": WHITEPAPER_SOURCE,
        "whitepaper_qps_static_to_seedance": f"{w['static_qps']} -> {w['seedance_qps']}",
        "whitepaper_qps_ratio": round(w["seedance_qps"] / w["static_qps"], 3),
        "whitepaper_peak_mib_static_to_seedance": f"{w['static_peak_mib']:.0f} -> {w['seedance_peak_mib']:.0f}",
        "whitepaper_peak_ratio": round(w["seedance_peak_mib"] / w["static_peak_mib"], 3),
        "measured_peak_kv_mib_static_to_seedance": f"{s['peak_kv_mib']} -> {d['peak_kv_mib']}",
        "measured_peak_ratio": round(d["peak_kv_mib"] / s["peak_kv_mib"], 3) if s["peak_kv_mib"] else None,
        "measured_goodput_ratio_at_this_load": round(d["goodput_rps"] / s["goodput_rps"], 3)
        if s["goodput_rps"] else None,
    }
    if "capacity_rps" in s and "capacity_rps" in d:
        out["measured_capacity_rps_static_to_seedance"] = f"{s['capacity_rps']} -> {d['capacity_rps']}"
        out["measured_capacity_ratio"] = round(d["capacity_rps"] / s["capacity_rps"], 3) if s["capacity_rps"] else None
        for base in ("continuous", "continuous-chunked", "dynamic"):
            if base in by and by[base].get("capacity_rps"):
                out[f"measured_capacity_ratio_vs_{base}"] = round(d["capacity_rps"] / by[base]["capacity_rps"], 3)
    return out

"""Cluster-scale comparison: each serving mechanism against the *tuned* chunked-prefill baseline.

NOTE(seedance): one :class:`~seedance.inference.experiment.Experiment` (same trace, replicas,
GPUs, KV pool and step times for every row). The baseline is ``continuous-chunked`` with its knobs
swept for this workload and SLO (:meth:`Experiment.tune`); every mechanism runs with the baseline's
tuned options and adds one thing at a time:

========================  =====================================================================
``tuned-chunked``         the baseline: least-loaded routing, no prefix cache
``+prefix-cache``         block-level prefix caching on every replica (least-loaded routing)
``+prefix-router``        and SGLang-style prefix-aware routing (sgl-router's default thresholds)
``+prefix-router-0.1``    the same router following the cache once it holds >= 10 % of the prompt
                          (``cache_threshold=0.1``: a follow-up turn's history is often less than
                          half its prompt, so the default 0.5 sends many hits to a cold replica)
``+admission``            and early admission control (reject when the predicted TTFT misses)
``seedance+all``          the ``seedance`` batcher (online step model) with all three
``ceiling:perfect-cache`` not a mechanism: tuned chunked where every reusable prefix token arrives
                          computed on whichever replica the request lands (the most any prefix
                          cache and router could save on this workload)
========================  =====================================================================

Two capacities per row (rate scale found by :func:`~seedance.inference.capacity.slo_capacity`):

* ``capacity_rps``: goodput at the highest load where the run keeps the SLO strictly (p99 TTFT and
  TPOT within the targets, nothing dropped or rejected);
* ``attainment_capacity_rps``: goodput at the highest load where at least ``attainment`` (99%) of
  the *offered* requests meet both targets (a rejected request counts as a miss). This is the
  figure that lets admission control show what it does (it may turn away up to 1%).

Ratios to the baseline are given for both goodputs and for the rate scales (``*_scale_vs_tuned_chunked``).
With closed-loop sessions the scale is the one to compare: it scales the rate at which sessions
start, while a follow-up is sent only after its previous answer, so the run's makespan carries a
tail of late turns that dilutes goodput (requests per second of makespan) alike for every row.

Disaggregation: :func:`disaggregation_search` tries every prefill:decode split of the replicas
and compares the best with the co-located baseline on the same replicas.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from seedance.inference.capacity import CapacityResult, slo_capacity
from seedance.inference.disagg import Disaggregation, split_search
from seedance.inference.experiment import Experiment
from seedance.inference.routing import Admission

BASELINE = "continuous-chunked"


@dataclass(frozen=True, slots=True)
class Mechanism:
    """One row of the comparison: batcher and engine options on top of the tuned baseline's."""

    name: str
    batcher: str
    engine: dict[str, Any]


def mechanisms(exp: Experiment) -> list[Mechanism]:
    """The rows of the comparison (see the module note)."""
    adm = Admission(ttft_ms=(exp.slo.ttft_ms,))
    router = {"prefix_cache": True, "router": "prefix-aware", "router_options": {"cache_threshold": 0.1}}
    return [
        Mechanism("tuned-chunked", BASELINE, {}),
        Mechanism("+prefix-cache", BASELINE, {"prefix_cache": True}),
        Mechanism("+prefix-router", BASELINE, {"prefix_cache": True, "router": "prefix-aware"}),
        Mechanism("+prefix-router-0.1", BASELINE, router),
        Mechanism("+admission", BASELINE, {**router, "admission": adm}),
        Mechanism("seedance+all", "seedance", {**router, "admission": adm}),
    ] + ([Mechanism("ceiling:perfect-cache", BASELINE, {"perfect_cache": True})] if exp.trace.prefix is not None
         else [])


def _capacity(exp: Experiment, batcher: str, options: dict[str, Any] | None, engine: dict[str, Any], *,
              attainment: float | None, start: float, tol: float) -> CapacityResult:
    def run_at(s: float) -> dict[str, Any]:
        row = exp.simulate(batcher, s, options=options, **engine)[0]
        if attainment is not None:
            row = {**row, "meets_slo": row["slo_attainment"] >= attainment}
        return row

    return slo_capacity(run_at, start=start, tol=tol)


def _rps(c: CapacityResult) -> float:
    return float((c.row or {}).get("goodput_rps", 0.0))


def compare_mechanisms(exp: Experiment, *, attainment: float = 0.99, tol: float = 0.03, start: float = 1.0,
                       progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Tune the baseline, then measure every mechanism's two capacities (see the module note);
    ``progress`` is called with the tuning result and with each row as it is measured."""
    tuned = exp.tune(BASELINE, start=start, tol=tol)
    if progress is not None:
        progress({"tuned_options": tuned.tuned_options, "tuned_rate_scale": tuned.tuned.rate_scale,
                  "default_rate_scale": tuned.default.rate_scale, "tried": tuned.tried})
    opts = tuned.tuned_options
    rows: list[dict[str, Any]] = []
    base_strict = base_att = base_ss = base_as = 0.0
    for m in mechanisms(exp):
        o = opts if m.batcher == BASELINE else None
        s0 = tuned.tuned.rate_scale or start
        strict = _capacity(exp, m.batcher, o, m.engine, attainment=None, start=s0, tol=tol)
        att = _capacity(exp, m.batcher, o, m.engine, attainment=attainment, start=s0, tol=tol)
        row = {
            "mechanism": m.name, "batcher": m.batcher, "options": o or "defaults",
            "capacity_rps": _rps(strict), "capacity_rate_scale": round(strict.rate_scale, 4),
            "attainment_capacity_rps": _rps(att), "attainment_capacity_rate_scale": round(att.rate_scale, 4),
            "prefix_hit_rate": (att.row or {}).get("prefix_hit_rate"),
            "rejected_at_attainment_capacity": (att.row or {}).get("rejected", 0),
            "ttft_ms_p99_at_capacity": (strict.row or {}).get("ttft_ms_p99"),
            "tpot_ms_p99_at_capacity": (strict.row or {}).get("tpot_ms_p99"),
            "step_model_error": (att.row or {}).get("step_model_error"),
            "runs": len(strict.tried) + len(att.tried),
        }
        if m.name == "tuned-chunked":
            base_strict, base_att = row["capacity_rps"], row["attainment_capacity_rps"]
            base_ss, base_as = strict.rate_scale, att.rate_scale
        row["capacity_vs_tuned_chunked"] = round(row["capacity_rps"] / base_strict, 3) if base_strict else None
        row["attainment_capacity_vs_tuned_chunked"] = round(row["attainment_capacity_rps"] / base_att, 3) \
            if base_att else None
        row["capacity_scale_vs_tuned_chunked"] = round(strict.rate_scale / base_ss, 3) if base_ss else None
        row["attainment_capacity_scale_vs_tuned_chunked"] = round(att.rate_scale / base_as, 3) if base_as else None
        rows.append(row)
        if progress is not None:
            progress(row)
    return {
        "setup": exp.describe(),
        "baseline": {"policy": BASELINE, "tuned_options": opts, "default_options": tuned.default_options,
                     "tuned_capacity_rate_scale": round(tuned.tuned.rate_scale, 4),
                     "default_capacity_rate_scale": round(tuned.default.rate_scale, 4),
                     "settings_tried": len(tuned.tried)},
        "attainment": attainment,
        "rows": rows,
    }


def disaggregation_search(exp: Experiment, options: dict[str, Any], *, link_gbs: float,
                          prefill_options: dict[str, Any] | None = None, attainment: float | None = None,
                          tol: float = 0.03, start: float = 1.0) -> dict[str, Any]:
    """Every prefill:decode split of the deployment's replicas vs the co-located baseline."""
    colo = _capacity(exp, BASELINE, options, {}, attainment=attainment, start=start, tol=tol)
    caps: dict[int, CapacityResult] = {}

    def score(p: int) -> float:
        d = Disaggregation(prefill=p, link_gbs=link_gbs, prefill_options=dict(prefill_options or {}))
        caps[p] = _capacity(exp, BASELINE, options, {"disaggregate": d}, attainment=attainment,
                            start=colo.rate_scale or start, tol=tol)
        return _rps(caps[p])

    best, tried = split_search(exp.deployment.replicas, score)
    n = exp.deployment.replicas
    return {
        "co_located_capacity_rps": _rps(colo),
        "splits": [{"prefill": p, "decode": n - p, "capacity_rps": rps,
                    "ttft_ms_p99": (caps[p].row or {}).get("ttft_ms_p99"),
                    "tpot_ms_p99": (caps[p].row or {}).get("tpot_ms_p99")} for p, rps in tried],
        "best_split": f"{best}:{n - best}",
        "best_vs_co_located": round(_rps(caps[best]) / _rps(colo), 3) if _rps(colo) else None,
        "link_gbs": link_gbs,
        "prefill_options": prefill_options or {},
    }

"""Sandbox replay: the same jobs under the current and a proposed policy, and what would change.

NOTE(seedance): what is compared, once.
  * Both sides replay the very same cluster and trace through the replay simulator's public entry
    points: a variant of :data:`seedance.sim.ab.AB_VARIANTS` (``shared``: the plain replay with the
    policy's placement and queue order, as the live loop without tier pools; ``tiered``: tier
    pools, borrowing, preemption by cost, as the live loop with ``tier_pools``) run with
    :class:`~seedance.sim.ab.ABOptions`, and :func:`seedance.sim.ab.summarize` for the figures.
    Nothing here reads simulator internals; a variant's run segments are the only output used.
  * Cost: $ of the GPU-hours each side holds (catalog price of the node's GPU model × GPU held ×
    time), and the catalog $ of the whole cluster over the replayed span (the same for both sides).
  * SLA attainment per tier: share of a tier's jobs whose availability reaches the tier's target
    (``seedance.tiers.availability``). Queueing delay: first start − arrival of every job that ran.
  * Placed differently: jobs whose first placement (node and GPUs) differs, or that ran on one
    side only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import PriceBook
from seedance.core.cluster import ClusterSpec
from seedance.sim.ab import AB_VARIANTS, ABOptions, VariantRun, summarize
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.pools import pod_tiers
from seedance.traces.schema import PodTrace

SAMPLE_CHANGES = 20


@dataclass(frozen=True, slots=True)
class ReplayPolicy:
    """One side of the comparison: a policy name and the registry names it schedules with."""

    name: str
    placement: str
    queue_order: str


@dataclass(frozen=True, slots=True)
class SandboxOptions:
    """Options shared by both sides.

    Attributes:
        variant: ``AB_VARIANTS`` name (``shared`` or ``tiered``).
        tier_config: Tiers (targets, priorities, preemption rules) and the QoS → tier map.
        prices: GPU catalog prices.
        seed: Seed of random placement policies.
    """

    variant: str = "shared"
    tier_config: TierConfig = DEFAULT_TIER_CONFIG
    prices: PriceBook = field(default_factory=PriceBook)
    seed: int = 0


def _first_placements(run: VariantRun, n: int) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Per job: node and GPU mask of its first run (-1 when it never ran), and its first start (nan)."""
    seg = run.segments
    node = np.full(n, -1, dtype=np.int64)
    mask = np.full(n, -1, dtype=np.int64)
    start = np.full(n, np.nan)
    if len(seg):
        order = np.lexsort((seg.start, seg.pod))
        pods = seg.pod[order]
        first = np.ones(len(pods), dtype=np.bool_)
        first[1:] = pods[1:] != pods[:-1]
        idx = order[first]
        node[seg.pod[idx]] = seg.node[idx]
        mask[seg.pod[idx]] = seg.gpu_mask[idx]
        start[seg.pod[idx]] = seg.start[idx]
    return node, mask, start


def _delays(start: NDArray[np.float64], created: NDArray[np.float64], tiers: NDArray[np.int64],
            names: list[str]) -> dict[str, Any]:
    ran = ~np.isnan(start)
    d = (start - created)[ran]

    def stats(x: NDArray[np.float64]) -> dict[str, float]:
        if not x.size:
            return {"mean_s": 0.0, "p95_s": 0.0, "max_s": 0.0}
        return {"mean_s": round(float(x.mean()), 3), "p95_s": round(float(np.percentile(x, 95)), 3),
                "max_s": round(float(x.max()), 3)}

    out: dict[str, Any] = {"all": stats(d), "tiers": {}}
    for i, t in enumerate(names):
        sel = ran & (tiers == i)
        out["tiers"][t] = stats((start - created)[sel])
    return out


def _side(policy: ReplayPolicy, spec: ClusterSpec, trace: PodTrace, opts: SandboxOptions) -> dict[str, Any]:
    ab = ABOptions(policy=policy.placement, seed=opts.seed, queue_order=policy.queue_order,
                   tier_config=opts.tier_config, prices=opts.prices)
    run = AB_VARIANTS.get(opts.variant)().run(spec, trace, ab)
    summary = summarize(opts.variant, run, spec, trace, ab, capacity_scale=1.0, series=False)
    seg = run.segments
    held_usd = float((seg.alloc_milli * (seg.end - seg.start) * seg.usd_per_gpu_hour).sum()) / 1000.0 / 3600.0
    node, mask, start = _first_placements(run, len(trace))
    tiers = pod_tiers(trace, opts.tier_config)
    names = opts.tier_config.names()
    return {
        "policy": policy.name, "placement": policy.placement, "queue_order": policy.queue_order,
        "jobs_run": int(np.count_nonzero(node >= 0)), "never_run": int(np.count_nonzero(node < 0)),
        "gpu_cost_usd": round(held_usd, 6), "cluster_cost_usd": summary["cluster_cost_usd"],
        "gpu_hours_held": round(float((seg.alloc_milli * (seg.end - seg.start)).sum()) / 1000.0 / 3600.0, 4),
        "work_served_gpu_hours": summary["work_served_gpu_hours"],
        "unit_cost_usd_per_gpu_hour": summary["unit_cost_usd_per_gpu_hour"],
        "utilization_pct": summary["utilization_pct"],
        "sla_attainment_pct": summary["sla_attainment_pct"],
        "tiers": {t: {"jobs": int(v["pods"]), "attainment_pct": round(float(v["attainment_pct"]), 3),
                      "target_pct": float(v["target_pct"]), "jobs_missed": int(v["pods_missed"])}
                  for t, v in summary["tiers"].items()},
        "queue_delay": _delays(start, trace.creation, tiers, names),
        "preemptions": run.preemptions,
        "replay_wall_s": round(run.wall_s, 3),
        "_node": node, "_mask": mask, "_usd": held_usd,
    }


def _pct(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not math.isfinite(a) or a == 0:
        return None
    return round(100.0 * (b - a) / a, 3)


def sandbox_diff(
    spec: ClusterSpec, trace: PodTrace, current: ReplayPolicy, proposed: ReplayPolicy,
    opts: SandboxOptions | None = None, *, job_ids: list[str] | None = None, node_names: list[str] | None = None,
) -> dict[str, Any]:
    """Replay ``trace`` on ``spec`` under both policies; the two summaries and their differences."""
    opts = opts or SandboxOptions()
    AB_VARIANTS.get(opts.variant)  # unknown names list the valid ones
    a = _side(current, spec, trace, opts)
    b = _side(proposed, spec, trace, opts)
    na, ma, nb, mb = a.pop("_node"), a.pop("_mask"), b.pop("_node"), b.pop("_mask")
    usd_a, usd_b = a.pop("_usd"), b.pop("_usd")
    diff_mask = (na != nb) | (ma != mb)
    moved = np.flatnonzero(diff_mask)
    ids = job_ids or [str(x) for x in trace.name.tolist()]
    names = node_names or [n.name for n in spec.nodes]

    def where(node: int, mask: int) -> str | None:
        if node < 0:
            return None
        gpus = [g for g in range(64) if mask >> g & 1]
        return f"{names[node]}" + (f" gpu {','.join(map(str, gpus))}" if gpus else "")

    sample = [{"job": ids[i], "current": where(int(na[i]), int(ma[i])), "proposed": where(int(nb[i]), int(mb[i]))}
              for i in moved[:SAMPLE_CHANGES].tolist()]
    tiers = {t: {"current_pct": a["tiers"][t]["attainment_pct"], "proposed_pct": b["tiers"][t]["attainment_pct"],
                 "change_pp": round(b["tiers"][t]["attainment_pct"] - a["tiers"][t]["attainment_pct"], 3),
                 "jobs": a["tiers"][t]["jobs"]}
             for t in a["tiers"]}
    return {
        "variant": opts.variant, "jobs": len(trace), "nodes": len(spec.nodes), "gpus": spec.total_gpus,
        "span_s": round(float(trace.deletion.max() - trace.creation.min()), 3) if len(trace) else 0.0,
        "current": a, "proposed": b,
        "diff": {
            "gpu_cost_usd": round(usd_b - usd_a, 6),
            "gpu_cost_change_pct": _pct(usd_a, usd_b),
            "gpu_cost_share_of_cluster_cost_pct": round(100.0 * (usd_b - usd_a) / a["cluster_cost_usd"], 4)
            if a["cluster_cost_usd"] else None,
            "unit_cost_change_pct": _pct(a["unit_cost_usd_per_gpu_hour"], b["unit_cost_usd_per_gpu_hour"]),
            "sla_attainment_pp": round(b["sla_attainment_pct"] - a["sla_attainment_pct"], 3),
            "tiers": tiers,
            "queue_delay_mean_s": round(b["queue_delay"]["all"]["mean_s"] - a["queue_delay"]["all"]["mean_s"], 3),
            "queue_delay_p95_s": round(b["queue_delay"]["all"]["p95_s"] - a["queue_delay"]["all"]["p95_s"], 3),
            "preemptions": b["preemptions"] - a["preemptions"],
            "jobs_run": b["jobs_run"] - a["jobs_run"],
            "placed_differently": int(moved.size),
            "placed_differently_sample": sample,
        },
    }

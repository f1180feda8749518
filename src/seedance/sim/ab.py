"""A/B replay: the same trace and cluster under shared scheduling (A) and tiered binding (B).

NOTE(seedance): what is compared, stated once (docs/tiers.md has the long form).
  * Cluster: the trace's nodes scaled by ``capacity_scale`` (``scale_cluster``, seeded), then
    labelled into tier pools sized from the trace's peak demand per tier (``label_pools``).
    Both variants get the very same nodes; A ignores the labels.
  * A, ``shared``: the existing replay (``ReplaySimulation``): no tiers, FIFO, fractional
    sharing anywhere, no preemption. B, ``tiered``: ``TieredReplay``.
  * Availability per pod and per tier: ``seedance.tiers.availability`` (fixed windows: a pod
    leaves at its deletion time, so waiting costs availability).
  * Work served = requested GPU × (time ran − work lost to preemption). Utilisation = work served
    / (cluster GPUs × trace span); allocated % counts GPU held instead (a Gold share rounded up
    to a whole GPU counts in full there, not in utilisation).
  * Unit cost = catalog $ of every GPU of the cluster over the trace span (the cluster is paid
    for whether busy or not) / GPU-hours of work served. The allocated variant divides the $ of
    the GPU-hours actually held instead.
  Variants are plug-ins registered by name in :data:`AB_VARIANTS`.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import PriceBook
from seedance.core.cluster import ClusterSpec
from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.core.resources import SliceBackend
from seedance.sim.interference import (
    INTERFERENCE_MODELS,
    InterferenceModel,
    InterferenceOptions,
    effective_runtimes,
    make_interference,
)
from seedance.sim.replay import ReplaySimulation, scale_cluster
from seedance.sim.tiered import Segments, TieredReplay, gpu_mask, node_prices
from seedance.tiers.availability import attainment_overall, pod_availability, tier_availability
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.pools import PoolPlan, label_pools, pod_tiers, tier_demand
from seedance.traces.schema import PodTrace

#: Whitepaper §2.2 A/B table (monthly means, a financial-services deployment; unit cost in yuan
#: per inference, not comparable in unit with our $ per GPU-hour: only the direction is).
WHITEPAPER_CLAIM: dict[str, dict[str, float]] = {
    "shared": {"utilization_pct": 68.0, "sla_attainment_pct": 92.3, "unit_cost_cny_per_inference": 3.82},
    "tiered": {"utilization_pct": 81.0, "sla_attainment_pct": 99.7, "unit_cost_cny_per_inference": 2.95},
}


@dataclass(frozen=True, slots=True)
class ABOptions:
    """Options shared by every variant of one A/B run.

    Attributes:
        policy: Placement policy scoring nodes.
        seed: Seed (cluster sampling and random policies).
        queue_order: Queue order of the shared variant.
        tier_config: Tiers (B) and the QoS mapping used to report A per tier.
        prices: GPU prices.
        interference: Slowdown of pods sharing a GPU, applied by the accounting to both variants
            (``seedance.sim.interference``); ``None`` = shares run at isolated speed.
        interference_charge: Whose availability the slowdown is charged to: ``isolated-tiers`` (the
            tiers whose contract excludes MPS and time-slicing, Gold and Silver by default; Bronze
            accepts shared backends) or ``all``. Lost throughput counts in utilisation and cost either way.
    """

    policy: str = "best-fit"
    seed: int = 0
    queue_order: str = "fifo"
    tier_config: TierConfig = DEFAULT_TIER_CONFIG
    prices: PriceBook = field(default_factory=PriceBook)
    interference: InterferenceModel | None = None
    interference_charge: str = "isolated-tiers"


@dataclass(frozen=True, slots=True)
class VariantRun:
    """What a variant hands to the accounting: its run segments and a few counters."""

    segments: Segments
    wall_s: float
    preemptions: int = 0
    rejected: int = 0
    decisions: int = 0
    used_gpu_milli_s: float | None = None


class ABVariant(ABC):
    """One side of the A/B replay. Subclasses register with ``@AB_VARIANTS.register(name)``."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""

    @abstractmethod
    def run(self, spec: ClusterSpec, trace: PodTrace, opts: ABOptions) -> VariantRun:
        """Called once per (variant, seed) with the labelled cluster; replays the whole trace."""


AB_VARIANTS: Registry[type[ABVariant]] = Registry("A/B variant")


@AB_VARIANTS.register("shared", aliases=("a",))
class SharedVariant(ABVariant):
    """A: the plain replay: no tiers, FIFO (or the given queue order), no preemption."""

    name = "shared"
    summary = "shared scheduling without tiers (ReplaySimulation)"

    def run(self, spec: ClusterSpec, trace: PodTrace, opts: ABOptions) -> VariantRun:
        t0 = time.perf_counter()
        sim = ReplaySimulation(spec, trace, opts.policy, seed=opts.seed, queue_order=opts.queue_order, end="fixed")
        sim.run()
        wall = time.perf_counter() - t0
        price = node_prices(spec, opts.prices)
        rows = [
            (i, r.start, r.end, r.placement)
            for i, r in enumerate(sim.records)
            if r.placement is not None and not math.isnan(r.start)
        ]
        pods = np.array([x[0] for x in rows], dtype=np.int64)
        milli = np.array([len(x[3].gpus) * x[3].gpu_milli for x in rows], dtype=np.int64)
        nodes = np.array([x[3].node for x in rows], dtype=np.int64)
        segs = Segments(
            pod=pods,
            start=np.array([x[1] for x in rows], dtype=np.float64),
            end=np.array([x[2] for x in rows], dtype=np.float64),
            node=nodes,
            alloc_milli=milli,
            req_milli=milli.copy(),
            lost_s=np.zeros(len(rows)),
            usd_per_gpu_hour=np.array([price[n] for n in nodes.tolist()], dtype=np.float64),
            gpu_mask=np.array([gpu_mask(x[3].gpus) for x in rows], dtype=np.int64),
            evicted=np.zeros(len(rows), dtype=np.bool_),
            borrowed=np.zeros(len(rows), dtype=np.bool_),
        )
        return VariantRun(segs, wall, decisions=len(trace))


@AB_VARIANTS.register("tiered", aliases=("b",))
class TieredVariant(ABVariant):
    """B: tiered binding (own pool, borrow, explained preemption)."""

    name = "tiered"
    summary = "SLA-tier binding: Gold on gold/exclusive nodes, borrowing, preemption by cost"

    def run(self, spec: ClusterSpec, trace: PodTrace, opts: ABOptions) -> VariantRun:
        t0 = time.perf_counter()
        sim = TieredReplay(
            spec, trace, tier_config=opts.tier_config, policy=opts.policy, seed=opts.seed, prices=opts.prices
        )
        sim.run()
        return VariantRun(
            sim.segments(),
            time.perf_counter() - t0,
            preemptions=sim.preemptions,
            rejected=int((sim.status == 4).sum()),
            decisions=sim.decisions,
            used_gpu_milli_s=sim.used_gpu_milli_s,
        )


def prepare_cluster(
    spec: ClusterSpec,
    trace: PodTrace,
    *,
    capacity_scale: float,
    seed: int,
    tier_config: TierConfig = DEFAULT_TIER_CONFIG,
    pool_rule: str = "priority",
) -> tuple[ClusterSpec, PoolPlan]:
    """Scale the cluster (seeded) and label it into tier pools sized from the trace's demand."""
    cluster = spec if capacity_scale == 1.0 else scale_cluster(spec, capacity_scale, seed)
    return label_pools(cluster, tier_demand(trace, tier_config), tier_config, rule=pool_rule)


def summarize(
    variant: str,
    run: VariantRun,
    spec: ClusterSpec,
    trace: PodTrace,
    opts: ABOptions,
    *,
    capacity_scale: float,
    series: bool = True,
) -> dict[str, Any]:
    """The JSON record of one variant (see the module docstring for each figure)."""
    seg = run.segments
    t0, t1 = float(trace.creation.min()), float(trace.deletion.max())
    span = max(t1 - t0, 1e-9)
    gpus = spec.total_gpus
    dur = seg.end - seg.start
    seg_end, slowed = seg.end, None
    if opts.interference is not None:  # shares on one GPU progress slower: less effective run time
        slowed = effective_runtimes(
            spec, opts.interference, n_pods=len(trace), pod=seg.pod, start=seg.start, end=seg.end, node=seg.node,
            alloc_milli=seg.alloc_milli, gpu_mask=seg.gpu_mask,
        )
        charged = _charged_tiers(opts)[pod_tiers(trace, opts.tier_config)[seg.pod]]
        seg_end = np.where(charged, seg.start + slowed.effective_s, seg.end)
    eff = dur if slowed is None else slowed.effective_s
    useful = float((seg.req_milli * np.maximum(eff - seg.lost_s, 0.0)).sum()) / 1000.0
    held = float((seg.alloc_milli * dur).sum()) / 1000.0
    lost = float((seg.req_milli * seg.lost_s).sum()) / 1000.0
    held_usd = float((seg.alloc_milli * dur * seg.usd_per_gpu_hour).sum()) / 1000.0 / 3600.0
    prices = node_prices(spec, opts.prices)
    cluster_usd = sum(n.gpu_count * p for n, p in zip(spec.nodes, prices, strict=True)) * span / 3600.0
    tiers = tier_availability(
        trace.creation, trace.deletion, pod_tiers(trace, opts.tier_config), seg.pod, seg.start, seg_end,
        opts.tier_config,
    )
    ran, _ = pod_availability(trace.creation, trace.deletion, seg.pod, seg.start, seg.end)
    served_h = useful / 3600.0
    job_hours = float(ran.sum()) / 3600.0
    out: dict[str, Any] = {
        "variant": variant,
        "seed": opts.seed,
        "policy": opts.policy,
        "capacity_scale": capacity_scale,
        "nodes": len(spec.nodes),
        "gpus": gpus,
        "pods": len(trace),
        "utilization_pct": round(100.0 * useful / (gpus * span), 4) if gpus else 0.0,
        "allocated_pct": round(100.0 * held / (gpus * span), 4) if gpus else 0.0,
        "unit_cost_usd_per_gpu_hour": round(cluster_usd / served_h, 4) if served_h > 0 else None,
        "unit_cost_allocated_usd_per_gpu_hour": round(held_usd / served_h, 4) if served_h > 0 else None,
        "sla_attainment_pct": round(attainment_overall(tiers), 4),
        "tiers": {name: t.to_json(series=series) for name, t in tiers.items()},
        "never_scheduled": int(len(trace) - np.unique(seg.pod).size),
        "rejected": run.rejected,
        "preemptions": run.preemptions,
        "preemptions_per_job_hour": round(run.preemptions / job_hours, 6) if job_hours > 0 else 0.0,
        "max_preemptions_per_pod": int(np.bincount(seg.pod[seg.evicted]).max()) if seg.evicted.any() else 0,
        "lost_work_gpu_hours": round(lost / 3600.0, 4),
        "work_served_gpu_hours": round(served_h, 3),
        "cluster_cost_usd": round(cluster_usd, 2),
        "decisions": run.decisions,
        "wall_s": round(run.wall_s, 3),
    }
    if slowed is not None and opts.interference is not None:
        out["interference"] = {**slowed.summary(seg.req_milli, opts.interference.name),
                               "charged_to": opts.interference_charge}
    if run.used_gpu_milli_s is not None:
        out["gpu_seconds_check"] = {
            "segments_gpu_s": round(held, 3),
            "state_integral_gpu_s": round(run.used_gpu_milli_s / 1000.0, 3),
        }
    return out


INTERFERENCE_CHARGES = ("isolated-tiers", "all")
_SHARED_BACKENDS = (SliceBackend.MPS, SliceBackend.TIME_SLICING)


def _charged_tiers(opts: ABOptions) -> NDArray[np.bool_]:
    """Per tier index: is interference charged to its availability (see ``ABOptions``)?"""
    if opts.interference_charge not in INTERFERENCE_CHARGES:
        raise InputError(f"unknown interference charge {opts.interference_charge!r}; valid: "
                         + ", ".join(INTERFERENCE_CHARGES), source="--interference-charge")
    specs = [opts.tier_config.tiers[t] for t in opts.tier_config.names()]
    if opts.interference_charge == "all":
        return np.ones(len(specs), dtype=np.bool_)
    return np.array([not any(b in s.allowed_backends for b in _SHARED_BACKENDS) for s in specs], dtype=np.bool_)


def run_ab(
    spec: ClusterSpec,
    trace: PodTrace,
    variants: Sequence[str],
    *,
    capacity_scale: float,
    opts: ABOptions,
    pool_rule: str = "priority",
    series: bool = True,
) -> tuple[list[dict[str, Any]], PoolPlan]:
    """Run each variant on the same scaled, labelled cluster; returns their records and the pool plan."""
    if not trace.has_times:
        raise InputError("the A/B replay needs creation_time and deletion_time for every pod", source=trace.source)
    classes = [AB_VARIANTS.get(v) for v in variants]
    cluster, plan = prepare_cluster(
        spec, trace, capacity_scale=capacity_scale, seed=opts.seed, tier_config=opts.tier_config,
        pool_rule=pool_rule,
    )
    out = []
    for cls in classes:
        run = cls().run(cluster, trace, opts)
        out.append(summarize(cls.name, run, cluster, trace, opts, capacity_scale=capacity_scale, series=series))
    return out, plan


def parse_variants(text: str) -> list[str]:
    """``"shared,tiered"`` → canonical variant names (unknown names list the valid ones)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise InputError("no variant given; valid: " + ", ".join(AB_VARIANTS.names()), source="--ab")
    out = []
    for n in names:
        cls = AB_VARIANTS.get(n)
        if cls.name not in out:
            out.append(cls.name)
    return out


def ab_payload(
    nodes_path: str,
    pods_path: str,
    variants: Sequence[str],
    *,
    capacity_scale: float,
    seeds: Sequence[int],
    policy: str = "best-fit",
    queue_order: str = "fifo",
    tier_config: TierConfig = DEFAULT_TIER_CONFIG,
    pool_rule: str = "priority",
    series: bool = False,
    interference: str | None = None,
    interference_charge: str = "isolated-tiers",
) -> dict[str, Any]:
    """Everything ``seedancectl simulate --mode replay --ab ...`` prints (JSON-ready)."""
    from pathlib import Path

    from seedance.traces.alibaba import load_nodes, load_pods

    spec = load_nodes(Path(nodes_path))
    trace = load_pods(Path(pods_path))
    results: list[dict[str, Any]] = []
    pools: dict[str, Any] = {}
    for s in seeds:
        model = None if interference is None else make_interference(interference, InterferenceOptions(seed=s))
        opts = ABOptions(policy=policy, seed=s, queue_order=queue_order, tier_config=tier_config,
                         interference=model, interference_charge=interference_charge)
        recs, plan = run_ab(
            spec, trace, variants, capacity_scale=capacity_scale, opts=opts, pool_rule=pool_rule, series=series
        )
        results += recs
        pools[str(s)] = plan.to_json()
    return {
        "mode": "replay-ab",
        "trace": Path(pods_path).stem.removeprefix("openb_pod_list_"),
        "nodes_file": str(nodes_path),
        "capacity_scale": capacity_scale,
        "variants": list(variants),
        "qos_map": dict(tier_config.qos_map),
        "pools": pools,
        "whitepaper_claim": WHITEPAPER_CLAIM,
        "interference": None if interference is None else {
            "model": interference, "charged_to": interference_charge,
            "source": INTERFERENCE_MODELS.get(interference).source,
        },
        "results": results,
    }


def render_ab(payload: dict[str, Any], output: str) -> Any:
    """Table (a rich ``Table``), JSON or CSV text of an A/B payload."""
    import csv
    import io
    import json

    if output == "json":
        return json.dumps(payload, indent=2, allow_nan=False)
    first: dict[str, Any] = payload["results"][0] if payload["results"] else {}
    tiers = list(first.get("tiers", {}))
    cols = ["variant", "seed", "nodes", "gpus", "utilization_pct", "allocated_pct", "unit_cost_usd_per_gpu_hour",
            "sla_attainment_pct"]
    rows = []
    for r in payload["results"]:
        row = {c: r[c] for c in cols}
        for t in tiers:
            row[f"{t}_attainment_pct"] = r["tiers"][t]["attainment_pct"]
            row[f"{t}_availability_mean"] = r["tiers"][t]["availability_mean"]
        row["preemptions"] = r["preemptions"]
        row["wall_s"] = r["wall_s"]
        rows.append(row)
    if output == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else cols, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        return buf.getvalue().rstrip("\n")
    from rich.table import Table

    targets = ", ".join(f"{t} {payload['results'][0]['tiers'][t]['target_pct']:g}%" for t in tiers)
    claim = payload["whitepaper_claim"]
    inter = payload.get("interference")
    table = Table(
        title=f"A/B replay, trace {payload['trace']}, capacity scale {payload['capacity_scale']:g}"
        + (f", interference {inter['model']} (charged to {inter['charged_to']})" if inter else ""),
        caption=(
            f"tier att % = share of pods with availability >= target ({targets}); "
            f"whitepaper §2.2 claim: util {claim['shared']['utilization_pct']:g}% -> "
            f"{claim['tiered']['utilization_pct']:g}%, SLA {claim['shared']['sla_attainment_pct']:g}% -> "
            f"{claim['tiered']['sla_attainment_pct']:g}%, unit cost {claim['shared']['unit_cost_cny_per_inference']:g}"
            f" -> {claim['tiered']['unit_cost_cny_per_inference']:g} (yuan/inference)"
        ),
    )
    heads = ["variant", "seed", "GPUs", "util %", "alloc %", "$/GPU-h", "SLA %"]
    heads += [f"{t} %" for t in tiers] + ["preempt", "wall s"]
    for h in heads:
        table.add_column(h, justify="left" if h == "variant" else "right", no_wrap=True)
    for row in rows:
        vals = [row[c] for c in cols if c != "nodes"] + [row[f"{t}_attainment_pct"] for t in tiers]
        vals += [row["preemptions"], row["wall_s"]]
        table.add_row(*(f"{v:.2f}" if isinstance(v, float) else str(v) for v in vals))
    return table


def ab_from_cli(
    ab: str,
    mode: str,
    nodes_path: Any,
    pod_paths: Sequence[Any],
    policy: str,
    seeds: Sequence[int],
    capacity_scale: float,
    queue_order: str,
    end: str,
    *,
    interference: str | None = None,
    interference_charge: str = "isolated-tiers",
) -> dict[str, Any]:
    """Validate ``seedancectl simulate --ab ...`` options and build the payload.

    A comma list of policies (the command's default) means ``best-fit``; a single name is used
    by both variants. The A/B replay needs replay mode, one pod list and fixed ends (a pod's
    requested window is what availability is measured against).
    """
    variants = parse_variants(ab)
    if mode != "replay":
        raise InputError("the A/B replay runs in replay mode (add --mode replay)", source="--ab")
    if end != "fixed":
        raise InputError("the A/B replay needs --end fixed (availability is measured over the requested window)",
                         source="--end")
    if len(pod_paths) != 1:
        raise InputError(f"the A/B replay takes one pod list, got {len(pod_paths)}", source="--pods")
    names = [x.strip() for x in policy.split(",") if x.strip()]
    pol = names[0] if len(names) == 1 else "best-fit"
    from seedance.scheduling.queueing import QUEUE_ORDERS

    QUEUE_ORDERS.get(queue_order)
    if interference is not None:
        INTERFERENCE_MODELS.get(interference)
    if interference_charge not in INTERFERENCE_CHARGES:
        raise InputError(f"unknown interference charge {interference_charge!r}; valid: "
                         + ", ".join(INTERFERENCE_CHARGES), source="--interference-charge")
    return ab_payload(
        str(nodes_path), str(pod_paths[0]), variants, capacity_scale=capacity_scale, seeds=list(seeds),
        policy=pol, queue_order=queue_order, series=True, interference=interference,
        interference_charge=interference_charge,
    )

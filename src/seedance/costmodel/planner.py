"""Job cost planner: which GPU, how many, which market and when, for one training job.

SkyPilot's optimizer is the anchor (it picks cloud, region, GPU type and spot/on-demand by price
times estimated time). For a training job this planner enumerates every offer of the market book
(:mod:`seedance.markets.book`) x GPU count (whole instances) x market (on-demand, spot, an
existing commitment) and chooses the one with the lowest *expected* cost that finishes before the
deadline:

* Compute: ``FLOPs = flops_per_param_token * N * D`` (6 N D for a dense model's forward and
  backward pass), or a measured step time scaled by throughput. Run time
  ``T = FLOPs / (gpus * dense peak * MFU)`` with the GPU's MFU from :data:`MFU_TABLE` (published
  measurements; a GPU without one is not evaluated unless the user gives its MFU).
* Memory: full fine-tuning with mixed-precision Adam keeps 16 bytes per parameter (Rajbhandari
  et al., "ZeRO", SC'20: 2 + 2 + 12), sharded over the GPUs; an option needs
  ``16 N / gpus <= (1 - activation_headroom) * GPU memory``.
* On-demand: ``cost = T * instances * price``.
* Spot: a job on ``k`` instances is interrupted at rate ``k * lambda`` (``lambda`` per
  instance-hour from the monthly interruption share: ``-ln(1 - m) / 730``); each interruption loses
  on average half a checkpoint interval of work plus the restart time, so the expected wall time is
  ``W = T / (1 - k * lambda * (checkpoint / 2 + restart))`` and ``cost = W * k * spot price``. An
  offer without a known interruption rate is listed as not evaluated (or uses ``assume_interruption``).
* Commitment (only with ``use_commitments``): capacity already committed, costed at its hourly
  rate (amortised); not something one buys for a single job.
* Start window: cloud prices include energy, so the start only matters for offers whose energy is
  billed separately (``energy_billed``): those are costed on the region's hourly electricity prices
  and started at the exact best start before the deadline
  (:func:`~seedance.costmodel.score.best_windows`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from seedance.core.catalog import CATALOG
from seedance.core.errors import InputError
from seedance.markets.book import InstanceOffer, MarketBook

BYTES_PER_PARAM_ADAM = 16.0
HOUR = 3600.0

# Published MFU (bf16, model FLOPs utilisation) of a 7B dense transformer, sequence length 2048, 8 GPUs,
# FSDP full shard, no activation checkpointing: mosaicml/llm-foundry scripts/train/benchmarking/README.md
# (commit 061f2c7c), tables "H100 80GB BF16", "A100 80GB with 1600 Gbps node-node interconnect (RoCE)"
# and "A100 40GB ..." (7b rows, SeqLen 2048, 8 GPUs). The same tables show MFU flat from 8 to 128
# GPUs for 7B (A100 40GB: 50.9 / 50.4 / 51.6 / 50.7 / 50.1 % at 8 / 16 / 32 / 64 / 128 GPUs).
MFU_TABLE: dict[str, tuple[float, str]] = {
    "H100-80GB": (0.4644, "llm-foundry benchmarking README (061f2c7c): MPT-7B, seq 2048, 8x H100 80GB, BF16: 46.44%"),
    "A100-80GB": (0.6423, "llm-foundry benchmarking README (061f2c7c): MPT-7B, seq 2048, 8x A100 80GB: 64.23%"),
    "A100-40GB": (0.5092, "llm-foundry benchmarking README (061f2c7c): MPT-7B, seq 2048, 8x A100 40GB: 50.92%"),
}
MARKETS: tuple[str, ...] = ("on-demand", "spot", "commitment-1y", "commitment-3y")


@dataclass(frozen=True, slots=True)
class PlanJob:
    """A training job to plan.

    Attributes:
        params, tokens: ``N`` and ``D`` (FLOPs = ``flops_per_param_token * N * D``).
        step_time_s, steps, step_gpu, step_gpus: Alternatively a measured step time on ``step_gpus``
            GPUs of ``step_gpu`` and the number of steps (other GPUs scale by peak x MFU x count).
        deadline_hours: Finish within this many hours of ``now``.
        checkpoint_minutes, restart_minutes: Spot: interval between checkpoints, time to restart.
        activation_headroom: Share of GPU memory kept free for activations and buffers.
        bytes_per_param: Memory per parameter (16: mixed-precision Adam).
        name: Label.
    """

    params: float = 8.03e9
    tokens: float | None = 1.0e8
    flops_per_param_token: float = 6.0
    step_time_s: float | None = None
    steps: int | None = None
    step_gpu: str | None = None
    step_gpus: int | None = None
    deadline_hours: float = 24.0
    checkpoint_minutes: float = 30.0
    restart_minutes: float = 10.0
    activation_headroom: float = 0.2
    bytes_per_param: float = BYTES_PER_PARAM_ADAM
    name: str = "training job"

    def __post_init__(self) -> None:
        if not self.params > 0:
            raise InputError("must be > 0", source="--params")
        if self.step_time_s is None:
            if self.tokens is None or not self.tokens > 0:
                raise InputError("give --tokens (> 0) or a measured --step-time-s with --steps", source="--tokens")
        else:
            ok = self.step_time_s > 0 and (self.steps or 0) > 0 and bool(self.step_gpu) and (self.step_gpus or 0) > 0
            if not ok:
                raise InputError("a measured step time needs --steps, --step-gpu and --step-gpus (all > 0)",
                                 source="--step-time-s")
            if self.step_gpu not in CATALOG:
                raise InputError(f"unknown GPU model {self.step_gpu!r}", source="--step-gpu")
        for name in ("deadline_hours", "checkpoint_minutes", "bytes_per_param"):
            if not getattr(self, name) > 0:
                raise InputError("must be > 0", source=f"--{name.replace('_', '-')}")
        if self.restart_minutes < 0:
            raise InputError("must be >= 0", source="--restart-minutes")
        if not 0 <= self.activation_headroom < 1:
            raise InputError("must be within [0, 1)", source="--activation-headroom")

    def flops(self) -> float | None:
        """Training FLOPs (``None`` when the job is given by step time)."""
        return None if self.tokens is None or self.step_time_s is not None else \
            self.flops_per_param_token * self.params * self.tokens


@dataclass(frozen=True, slots=True)
class PlanOption:
    """One point of the option space, costed."""

    offer: InstanceOffer
    instances: int
    market: str
    start: float
    compute_hours: float
    wall_hours: float
    cost_usd: float
    feasible: bool
    reason: str
    mfu: float
    unit_price: float
    interruptions: float = 0.0
    energy_cost: float = 0.0

    @property
    def gpus(self) -> int:
        """GPUs used."""
        return self.instances * self.offer.gpu_count

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        from seedance.signals.series import iso

        o = self.offer
        return {"cloud": o.cloud, "instance_type": o.instance_type, "region": o.region, "gpu_model": o.gpu_model,
                "instances": self.instances, "gpus": self.gpus, "market": self.market, "start": iso(self.start),
                "mfu": self.mfu, "compute_hours": self.compute_hours, "wall_hours": self.wall_hours,
                "unit_price_usd_per_hour": self.unit_price, "expected_interruptions": self.interruptions,
                "energy_cost": self.energy_cost, "expected_cost_usd": self.cost_usd, "feasible": self.feasible,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class PlannerSettings:
    """What the planner may choose from.

    Attributes:
        max_gpus: Largest GPU count considered (whole instances).
        markets: Markets considered.
        use_commitments: Consider commitment markets (capacity already committed).
        mfu: MFU per catalog GPU model (defaults: :data:`MFU_TABLE`); extra entries add GPUs.
        assume_interruption_per_month: Interruption share used for spot offers without a known one
            (``None``: such spot options are not evaluated).
        energy: Hourly electricity signals for offers with separately billed energy (``None``: none).
        energy_offers: Keys of offers whose energy is billed separately.
    """

    max_gpus: int = 64
    markets: tuple[str, ...] = ("on-demand", "spot")
    use_commitments: bool = False
    mfu: Mapping[str, tuple[float, str]] = field(default_factory=lambda: dict(MFU_TABLE))
    assume_interruption_per_month: float | None = None
    energy: Any = None
    energy_offers: frozenset[tuple[str, str, str]] = frozenset()


def compute_hours(job: PlanJob, gpu_model: str, gpus: int, mfu: float,
                  table: Mapping[str, tuple[float, str]]) -> float:
    """Hours of compute on ``gpus`` GPUs of ``gpu_model`` at ``mfu``."""
    m = CATALOG.resolve(gpu_model)
    rate = gpus * m.dense_tflops * 1e12 * mfu
    flops = job.flops()
    if flops is not None:
        return flops / rate / HOUR
    assert job.step_time_s is not None and job.steps is not None and job.step_gpu and job.step_gpus
    ref = CATALOG.resolve(job.step_gpu)
    if ref.name not in table:
        raise InputError(f"no MFU known for the measured GPU {ref.name}; give --mfu {ref.name}=VALUE",
                         source="--step-gpu")
    ref_rate = job.step_gpus * ref.dense_tflops * 1e12 * table[ref.name][0]
    return job.steps * job.step_time_s * ref_rate / rate / HOUR


def memory_fits(job: PlanJob, offer: InstanceOffer, gpus: int) -> bool:
    """Whether the sharded training state fits the GPUs' memory with the activation headroom."""
    need_gib = job.bytes_per_param * job.params / gpus / 2**30
    mem = offer.gpu_memory_gib or (CATALOG.resolve(offer.gpu_model).memory_gib if offer.gpu_model else 0.0)
    return need_gib <= (1.0 - job.activation_headroom) * mem


def spot_wall_hours(t: float, instances: int, hazard: float, checkpoint_h: float,
                    restart_h: float) -> tuple[float, float]:
    """Expected wall hours and interruptions of ``t`` compute hours on spot (see the module docstring)."""
    loss = instances * hazard * (checkpoint_h / 2.0 + restart_h)
    if loss >= 1.0:
        return math.inf, math.inf
    w = t / (1.0 - loss)
    return w, instances * hazard * w


def _market_price(offer: InstanceOffer, market: str) -> float | None:
    if market == "on-demand":
        return offer.on_demand
    if market == "spot":
        return offer.spot
    return offer.commitments.get(market.removeprefix("commitment-"))


def cost_option(job: PlanJob, offer: InstanceOffer, instances: int, market: str, start: float, now: float,
                settings: PlannerSettings) -> PlanOption:
    """Cost one option (``start`` only matters for energy-billed offers)."""
    gpus = instances * offer.gpu_count
    gm = offer.gpu_model
    price = _market_price(offer, market)
    mfu = settings.mfu[gm][0] if gm is not None and gm in settings.mfu else float("nan")

    def bad(reason: str, t: float = math.nan) -> PlanOption:
        return PlanOption(offer, instances, market, start, t, t, math.inf, False, reason, mfu, price or math.nan)

    if gm is None:
        return bad(f"GPU {offer.gpu_name} is not in the catalog")
    if gm not in settings.mfu:
        return bad(f"no published MFU for {gm} (give --mfu {gm}=VALUE)")
    if price is None:
        return bad(f"no {market} price in the book")
    if not memory_fits(job, offer, gpus):
        return bad(f"{job.bytes_per_param * job.params / gpus / 2**30:.1f} GiB of training state per GPU does not fit "
                   f"{offer.gpu_memory_gib:g} GiB with {job.activation_headroom:.0%} headroom")
    t = compute_hours(job, gm, gpus, mfu, settings.mfu)
    wall, interruptions = t, 0.0
    if market == "spot":
        m = offer.spot_interruption_per_month
        if m is None:
            m = settings.assume_interruption_per_month
        if m is None:
            return bad("no interruption rate known for this spot market (give --assume-interruption)", t)
        hazard = -math.log(max(1e-12, 1.0 - m)) / 730.0
        wall, interruptions = spot_wall_hours(t, instances, hazard, job.checkpoint_minutes / 60,
                                              job.restart_minutes / 60)
    cost = wall * instances * price
    energy = 0.0
    if offer.key in settings.energy_offers and settings.energy is not None:
        energy = _energy_cost(settings, gm, gpus, start, wall * HOUR)
        cost += energy
    deadline = now + job.deadline_hours * HOUR
    feasible = math.isfinite(wall) and start + wall * HOUR <= deadline + 1e-6 and start >= now - 1e-6
    reason = "" if feasible else (f"expected finish {wall:.1f} h after start misses the {job.deadline_hours:g} h "
                                  "deadline")
    return PlanOption(offer, instances, market, start, t, wall, cost, feasible, reason, mfu, price,
                      interruptions, energy)


def _energy_cost(settings: PlannerSettings, gpu_model: str, gpus: int, start: float, duration_s: float) -> float:
    from seedance.costmodel.score import window_costs

    sig, weights = settings.energy
    power = weights.energy.job_power_kw(gpu_model, float(gpus))
    wc = window_costs(np.array([start]), duration_s, power, float(gpus), start, sig, weights)
    return float(wc.cost[0])


def _best_start(job: PlanJob, offer: InstanceOffer, instances: int, market: str, now: float,
                settings: PlannerSettings) -> float:
    """The exact cheapest start of an energy-billed option (others start now)."""
    if offer.key not in settings.energy_offers or settings.energy is None or offer.gpu_model is None:
        return now
    from seedance.costmodel.score import best_windows

    probe = cost_option(job, offer, instances, market, now, now, settings)
    if not math.isfinite(probe.wall_hours):
        return now
    sig, weights = settings.energy
    dur = probe.wall_hours * HOUR
    latest = now + job.deadline_hours * HOUR - dur
    if latest <= now:
        return now
    energy_only = replace(weights, price=1.0, carbon=0.0, delay=0.0, min_gain=0.0)
    power = weights.energy.job_power_kw(offer.gpu_model, float(probe.gpus))
    bw = best_windows(np.array([now]), np.array([latest]), np.array([dur]), np.array([power]),
                      np.array([float(probe.gpus)]), np.array([now]), sig, energy_only)
    return float(bw.best_start[0])


def instance_counts(offer: InstanceOffer, max_gpus: int) -> list[int]:
    """Whole-instance counts with at most ``max_gpus`` GPUs (powers of two and their sums are not special)."""
    return list(range(1, max(1, max_gpus // offer.gpu_count) + 1))


def options(job: PlanJob, book: MarketBook | Iterable[InstanceOffer], now: float,
            settings: PlannerSettings = PlannerSettings()) -> list[PlanOption]:
    """Every option of the space, costed (infeasible ones carry the reason)."""
    markets = list(settings.markets) + (["commitment-1y", "commitment-3y"] if settings.use_commitments else [])
    out = []
    for offer in book:
        for k in instance_counts(offer, settings.max_gpus):
            for market in markets:
                start = _best_start(job, offer, k, market, now, settings)
                out.append(cost_option(job, offer, k, market, start, now, settings))
    return out


def plan(job: PlanJob, book: MarketBook | Iterable[InstanceOffer], now: float,
         settings: PlannerSettings = PlannerSettings()) -> tuple[PlanOption | None, list[PlanOption]]:
    """The cheapest feasible option (``None`` when none is) and every option, cheapest first."""
    opts = options(job, book, now, settings)
    opts.sort(key=lambda o: (not o.feasible, o.cost_usd, o.wall_hours))
    best = opts[0] if opts and opts[0].feasible else None
    return best, opts


def shapley(levers: Sequence[str], cost: Any) -> dict[str, float]:
    """Shapley attribution of ``cost(frozenset of levers switched on)`` to each lever."""
    n = len(levers)
    out = dict.fromkeys(levers, 0.0)
    for order in itertools.permutations(levers):
        on: set[str] = set()
        for lv in order:
            before = cost(frozenset(on))
            on.add(lv)
            out[lv] += cost(frozenset(on)) - before
    return {k: v / math.factorial(n) for k, v in out.items()}

"""Checkpoint size, placement on storage tiers, and CheckFreq's frequency rule as the baseline.

Size: parameters x bytes per parameter of the training state (FP32 weights 4 B, plus the optimiser's
state: SGD with momentum +4 B, Adam +8 B for its two moments; mixed precision adds nothing here since
the FP32 master copy is the weights).

Timing (``CheckpointCost``): a checkpoint stalls training while the state leaves the GPU. With a staging
tier (CXL or DRAM) the stall is the GPU-to-tier copy (at the slower of the GPU's PCIe link and the
tier) and the copy to the persistent tier overlaps training (CheckFreq's two-phase snapshot/persist);
without one (``remote-only``) the write to the remote store is synchronous. A restore reads the state
back from the fastest tier that still holds it.

CheckFreq (Mohan et al., FAST'21) picks the checkpoint interval so that the stall stays within an
overhead bound (3.5% in the paper) and the persist phase of one checkpoint ends before the next
begins: ``k = max(ceil(snapshot / (p * iter)), ceil(persist / iter), 1)`` iterations (its code,
``cf_iterator._complete_profile``, starts from the persist bound and its adaptive tuning widens the
interval until the measured overhead is within the bound; 5% is the code's default).

The rule spends the overhead bound on frequency: on any storage the periodic stall comes out near
``p`` of the run time, and faster storage buys recovery points (less rework after an interruption),
not less stall. The second rule here, Young's (1974) first-order optimum of stall plus expected
rework, ``interval = sqrt(2 x stall x MTBF)``, trades the two at a stated interruption rate.

A job leaving its GPU (preemption, migration) stalls for the snapshot only: the GPU is free once
the state is off it, and the persist runs in the background while the job waits (two-phase). A job
interrupted without warning loses the work since its last *durable* checkpoint: half an interval
on average plus the time a checkpoint takes to become durable (snapshot + persist).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from seedance.core.errors import InputError
from seedance.storage.tiers import REMOTE, VOLATILE, TierSet

OPTIMIZER_BYTES: Mapping[str, int] = MappingProxyType({"sgd": 0, "sgd-momentum": 4, "adam": 8, "adamw": 8})
"""Optimiser state bytes per parameter on top of 4 B of FP32 weights."""


@dataclass(frozen=True, slots=True)
class ModelSize:
    """Parameter count of a model family and the optimiser it trains with."""

    params: int
    optimizer: str
    source: str


MODEL_SIZES: Mapping[str, ModelSize] = MappingProxyType({
    "ResNet-18": ModelSize(11_689_512, "sgd-momentum", "torchvision resnet18 (num_params 11,689,512)"),
    "ResNet-50": ModelSize(25_557_032, "sgd-momentum", "torchvision resnet50 (num_params 25,557,032)"),
    "Transformer": ModelSize(65_000_000, "adam", "Vaswani et al. 2017, Table 3, base model: 65M"),
    "LM": ModelSize(13_987_678, "sgd", "PyTorch word_language_model defaults (2-layer LSTM, emsize=nhid=200, "
                                      "WikiText-2 vocabulary 33,278), counted"),
    "Recommendation": ModelSize(28_980_000, "adam", "estimate: DeepRecommender-style autoencoder "
                                                    "26,744-512-512-1024 and mirror (ML-20M items), counted"),
    "A3C": ModelSize(1_000_000, "adam", "estimate: Atari A3C conv+LSTM-256 policy (order of 1M parameters)"),
    "CycleGAN": ModelSize(28_286_000, "adam", "pytorch-CycleGAN-and-pix2pix: 2 x G 11.378M + 2 x D 2.765M"),
})


def family(job_type: str) -> str:
    """``"ResNet-50 (batch size 64)"`` -> ``"ResNet-50"``."""
    return job_type.split(" (", 1)[0]


def checkpoint_gb(params: float, optimizer: str = "adam", *, weight_bytes: int = 4,
                  source: str | None = None) -> float:
    """Size (GB) of weights plus optimiser state; bad sizes raise ``InputError``."""
    if not (isinstance(params, int | float) and math.isfinite(params)) or params <= 0:
        raise InputError(f"parameter count must be a finite number > 0, got {params!r}", source=source,
                         field="params")
    if params > 1e14:
        raise InputError(f"{params:.3g} parameters is beyond any model this planner can hold", source=source,
                         field="params")
    if optimizer not in OPTIMIZER_BYTES:
        raise InputError(f"unknown optimiser {optimizer!r}; known: {', '.join(OPTIMIZER_BYTES)}", source=source,
                         field="optimizer")
    if weight_bytes not in (1, 2, 4):
        raise InputError(f"weight bytes must be 1, 2 or 4, got {weight_bytes}", source=source, field="weight_bytes")
    return params * (weight_bytes + OPTIMIZER_BYTES[optimizer]) / 1e9


def job_checkpoint_gb(job_type: str) -> float:
    """Checkpoint size of a Gavel job type from its family's parameter count."""
    size = MODEL_SIZES.get(family(job_type))
    if size is None:
        raise InputError(f"no parameter count for {job_type!r}; known families: {', '.join(MODEL_SIZES)}",
                         field="job_type")
    return checkpoint_gb(size.params, size.optimizer)


@dataclass(frozen=True, slots=True)
class CheckpointCost:
    """Seconds one checkpoint costs on a node layout, for a GPU with ``pcie_gbs`` of PCIe."""

    size_gb: float
    snapshot_s: float
    persist_s: float
    snapshot_tier: str
    persist_tier: str

    def restore_s(self, layout: TierSet, pcie_gbs: float, *, same_node: bool, network_gbs: float) -> float:
        """Seconds to load the state back: local staging copy on the same node, else over the network
        from the persistent copy (a peer's NVMe or the remote store)."""
        if same_node:
            tier = layout.get(self.snapshot_tier)
            return self.size_gb / min(pcie_gbs, tier.read_gbs)
        src = layout.get(self.persist_tier)
        return self.size_gb / min(pcie_gbs, src.read_gbs, network_gbs)


def checkpoint_cost(size_gb: float, layout: TierSet, pcie_gbs: float) -> CheckpointCost:
    """Where a checkpoint of ``size_gb`` goes on ``layout`` and what it costs."""
    if not (math.isfinite(size_gb) and size_gb > 0):
        raise InputError(f"checkpoint size must be > 0 GB, got {size_gb!r}", field="checkpoint_gb")
    snap = layout.snapshot_tier(size_gb)
    persist = layout.persist_tier(size_gb)
    snapshot_s = size_gb / min(pcie_gbs, snap.write_gbs)
    if snap.name in VOLATILE:
        persist_s = size_gb / min(snap.read_gbs, persist.write_gbs)
        return CheckpointCost(size_gb, snapshot_s, persist_s, snap.name, persist.name)
    return CheckpointCost(size_gb, snapshot_s, 0.0, snap.name, snap.name)


def checkfreq_interval(iter_s: float, snapshot_s: float, persist_s: float, overhead: float = 0.035) -> int:
    """CheckFreq's rule: iterations between checkpoints for a stall within ``overhead`` of run time."""
    if not (iter_s > 0 and snapshot_s >= 0 and persist_s >= 0 and 0 < overhead < 1):
        raise InputError(f"bad CheckFreq inputs iter_s={iter_s}, snapshot_s={snapshot_s}, persist_s={persist_s}, "
                         f"overhead={overhead}", field="checkfreq")
    return max(1, math.ceil(snapshot_s / (overhead * iter_s)), math.ceil(persist_s / iter_s))


LLAMA3_INTERRUPTIONS_PER_GPU_HOUR = 419 / (54 * 24 * 16_384)
"""Unexpected interruptions per GPU-hour: 419 in a 54-day snapshot of Llama 3 405B pre-training on 16,384
H100 GPUs (Llama Team, "The Llama 3 Herd of Models", 2024, section 3.3.4): 1.97e-5."""


def young_daly_interval(iter_s: float, stall_s: float, persist_s: float, mtbf_s: float) -> int:
    """Iterations between checkpoints minimising stall + expected rework: ``sqrt(2 stall MTBF)`` (Young 1974),
    never shorter than one iteration nor than the persist (one checkpoint in flight, as CheckFreq)."""
    if not (iter_s > 0 and stall_s >= 0 and persist_s >= 0 and mtbf_s > 0):
        raise InputError(f"bad Young/Daly inputs iter_s={iter_s}, stall_s={stall_s}, persist_s={persist_s}, "
                         f"mtbf_s={mtbf_s}", field="young-daly")
    return max(1, math.ceil(persist_s / iter_s), round(math.sqrt(2.0 * stall_s * mtbf_s) / iter_s))


def periodic_stall_s(cost: CheckpointCost, iter_s: float, overlap: float = 0.0) -> float:
    """Stall of one periodic checkpoint. A snapshot into a staging tier (two-phase) may run beside the next
    iteration's forward and backward passes, training waiting only before the weight update (CheckFreq's
    pipelining: ``cf_manager.save_cpu`` returns at once, ``weight_update`` waits for the snapshot), so it stalls
    ``max(0, snapshot - overlap x iteration)``; ``overlap`` is the share of an iteration before the update. The
    default 0 is CheckFreq's own profiler's assumption (``overhead = t_c``: "due to Python imperfections we might
    see as much as t_c overhead in one iter"). A synchronous write (no staging tier) overlaps nothing."""
    if not (0.0 <= overlap <= 1.0 and iter_s > 0):
        raise InputError(f"snapshot overlap must be in [0, 1] of an iteration > 0 s, got overlap={overlap!r}, "
                         f"iter_s={iter_s!r}", field="snapshot_overlap")
    if cost.persist_tier == cost.snapshot_tier:  # synchronous write to the persistent tier
        return cost.snapshot_s
    return max(0.0, cost.snapshot_s - overlap * iter_s)


def leave_stall_s(cost: CheckpointCost) -> float:
    """Stall of a job leaving its GPU: the snapshot (the persist overlaps the time it is off the GPU)."""
    return cost.snapshot_s


def durable_lag_s(cost: CheckpointCost) -> float:
    """Seconds from a checkpoint's start until it survives the node (snapshot + persist)."""
    return cost.snapshot_s + cost.persist_s


def is_remote_only(layout: TierSet) -> bool:
    """Whether the layout writes checkpoints straight to the remote store."""
    return all(t.name == REMOTE for t in layout.tiers)

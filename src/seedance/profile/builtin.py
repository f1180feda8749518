"""The built-in stages, registered by name (imported lazily by the stage registries).

Factories import the tier and MIG modules only when a profile uses them, so a plain profile (the
FGD-paper simulator) loads neither.
"""

from __future__ import annotations

from seedance.profile.build import BuildContext
from seedance.profile.stages import (
    ADAPTERS,
    BIND_HOOKS,
    FALLBACKS,
    FILTERS,
    SCORERS,
    BindHook,
    Fallback,
    RequestAdapter,
)
from seedance.scheduling.framework import FilterPlugin, GpuFit, GpuModelMatch, ResourcesFit, Schedulable


def _gpu_fit(b: BuildContext) -> FilterPlugin:
    if b.ledger is None:
        return GpuFit()
    from seedance.slicing.placement import SliceFit

    return SliceFit(b.ledger)


def _gpu_mode_fit(b: BuildContext) -> FilterPlugin:
    from seedance.tiers.filters import GpuModeFit

    return GpuModeFit()


def _tier_request(b: BuildContext) -> RequestAdapter | None:
    if not b.config.tiers.enabled:
        return None
    from seedance.profile.tiers import TierRequest

    return TierRequest(b.tiers())


def _borrow(b: BuildContext) -> Fallback | None:
    if not b.config.tiers.enabled:
        return None
    from seedance.profile.tiers import Borrow

    return Borrow()


def _preempt(b: BuildContext) -> Fallback | None:
    if not b.config.tiers.enabled:
        return None
    from seedance.profile.tiers import Preempt

    return Preempt(b.tiers(), exclude=None if b.ledger is None else b.ledger.is_mig)


def _mig_ledger(b: BuildContext) -> BindHook | None:
    if b.ledger is None:
        return None
    from seedance.profile.slices import MigInstances

    return MigInstances(b.ledger)


FILTERS.add("NodeSchedulable", lambda b: Schedulable())
FILTERS.add("NodeResourcesFit", lambda b: ResourcesFit())
FILTERS.add("GpuModelMatch", lambda b: GpuModelMatch())
FILTERS.add("GpuFit", _gpu_fit)
FILTERS.add("GpuModeFit", _gpu_mode_fit)
ADAPTERS.add("tier-request", _tier_request)
FALLBACKS.add("borrow", _borrow)
FALLBACKS.add("preempt", _preempt)
BIND_HOOKS.add("mig-ledger", _mig_ledger)

# stages of other domains register themselves when their module is imported (trust, cost-aware
# deferral, CUDA pre-flight); it is imported the first time a profile names one of them, so a
# profile without them never loads those packages
ADAPTERS.defer("deferral", "seedance.costmodel.deferral_stage")
FILTERS.defer("CudaCompat", "seedance.hetero.profile_stages")
FILTERS.defer("AttestedTEE", "seedance.trust.profile_stages")
FILTERS.defer("IsolationGrade", "seedance.trust.profile_stages")
ADAPTERS.defer("isolation-grade", "seedance.trust.profile_stages")
ADAPTERS.defer("sensitive-guard", "seedance.trust.profile_stages")
SCORERS.defer("ThroughputPerDollar", "seedance.hetero.score_stage")
SCORERS.defer("Throughput", "seedance.hetero.score_stage")

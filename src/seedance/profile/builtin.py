"""The built-in stages, registered by name (imported lazily by the stage registries)."""

from __future__ import annotations

from seedance.profile.build import BuildContext
from seedance.profile.slices import MigInstances
from seedance.profile.stages import ADAPTERS, BIND_HOOKS, FALLBACKS, FILTERS, BindHook, Fallback, RequestAdapter
from seedance.profile.tiers import Borrow, Preempt, TierRequest
from seedance.scheduling.framework import FilterPlugin, GpuFit, GpuModelMatch, ResourcesFit, Schedulable
from seedance.slicing.placement import SliceFit
from seedance.tiers.filters import GpuModeFit


def _gpu_fit(b: BuildContext) -> FilterPlugin:
    return GpuFit() if b.ledger is None else SliceFit(b.ledger)


def _tier_request(b: BuildContext) -> RequestAdapter | None:
    return TierRequest(b.tier_config) if b.config.tiers.enabled else None


def _borrow(b: BuildContext) -> Fallback | None:
    return Borrow() if b.config.tiers.enabled else None


def _preempt(b: BuildContext) -> Fallback | None:
    if not b.config.tiers.enabled:
        return None
    return Preempt(b.tier_config, exclude=None if b.ledger is None else b.ledger.is_mig)


def _mig_ledger(b: BuildContext) -> BindHook | None:
    return None if b.ledger is None else MigInstances(b.ledger)


FILTERS.add("NodeSchedulable", lambda b: Schedulable())
FILTERS.add("NodeResourcesFit", lambda b: ResourcesFit())
FILTERS.add("GpuModelMatch", lambda b: GpuModelMatch())
FILTERS.add("GpuFit", _gpu_fit)
FILTERS.add("GpuModeFit", lambda b: GpuModeFit())
ADAPTERS.add("tier-request", _tier_request)
FALLBACKS.add("borrow", _borrow)
FALLBACKS.add("preempt", _preempt)
BIND_HOOKS.add("mig-ledger", _mig_ledger)

# stages of other domains register themselves on import (trust, cost-aware deferral)
import seedance.costmodel.deferral_stage  # noqa: E402, F401
import seedance.trust.profile_stages  # noqa: E402, F401

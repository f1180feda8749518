"""``build_profile``: the one way every driver turns a profile document into stages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seedance.core.cluster import ClusterState
from seedance.profile.config import ProfileConfig, SlicesConfig, TiersConfig
from seedance.profile.context import StageServices
from seedance.profile.profile import SchedulingProfile
from seedance.profile.stages import ADAPTERS, BIND_HOOKS, FALLBACKS, FILTERS, SCORERS
from seedance.scheduling.framework import FilterPlugin, PlacementPolicy, PolicyContext, make_policy
from seedance.scheduling.tasktypes import TaskTypes

if TYPE_CHECKING:  # the tier and MIG modules load only for profiles that use them
    from seedance.slicing.placement import MigLedger
    from seedance.tiers.config import TierConfig


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What a stage factory may read: the document, the cluster, the tiers and the MIG ledger."""

    config: ProfileConfig
    state: ClusterState | None
    tier_config: TierConfig | None
    ledger: MigLedger | None
    services: StageServices = field(default_factory=StageServices)

    def tiers(self) -> TierConfig:
        """The tiers: the given ones, else ``config.tiers.file``, else the built-in Gold/Silver/Bronze."""
        if self.tier_config is not None:
            return self.tier_config
        from seedance.tiers.config import DEFAULT_TIER_CONFIG, load_tier_config

        return load_tier_config(self.config.tiers.file) if self.config.tiers.file else DEFAULT_TIER_CONFIG


def build_profile(
    config: ProfileConfig,
    state: ClusterState,
    *,
    seed: int = 0,
    task_types: TaskTypes | None = None,
    policy: PlacementPolicy | None = None,
    tier_config: TierConfig | None = None,
    explain: bool | None = None,
    extra_filters: Sequence[FilterPlugin] = (),
    services: StageServices | None = None,
) -> SchedulingProfile:
    """The profile of ``config`` over ``state`` (a MIG ledger is built on ``state`` when slices are MIG).

    Args:
        config: The profile document.
        state: The cluster the profile decides on (idle on MIG pools, or re-applied through ``apply``).
        seed: Seed of random policies.
        task_types: Target workload for policies that are given one (FGD, as in the paper).
        policy: An already built placement policy to reuse (keeps what it learned); by default
            ``config.placement`` is built.
        tier_config: The tiers (default: ``config.tiers.file``, else the built-in tiers).
        explain: Override ``config.explain``.
        extra_filters: Filter plug-ins run after the named ones (a driver's own, e.g. tests).
        services: What the driver lends the stages (pod directory, attestation registry, deferral, clock).
    """
    ledger = None
    if config.slices.mode == "mig":
        from seedance.slicing.placement import MigLedger

        ledger = MigLedger(state, dict(config.slices.mig_map), native=config.slices.native)
    svc = services or StageServices()
    b = BuildContext(config, state, tier_config, ledger, svc)
    if config.tiers.enabled:
        b = BuildContext(config, state, b.tiers(), ledger, svc)
    base = policy or make_policy(
        config.placement.policy, PolicyContext(seed=seed, task_types=task_types, options=dict(config.placement.options))
    )
    scorer: PlacementPolicy = base
    if ledger is not None:
        from seedance.slicing.placement import MigAwarePolicy

        scorer = MigAwarePolicy(base, ledger)
    filters = [*(FILTERS.get(n)(b) for n in config.filters), *extra_filters]
    adapters = [a for a in (ADAPTERS.get(n)(b) for n in config.adapters) if a is not None]
    fallbacks = [f for f in (FALLBACKS.get(n)(b) for n in config.tiers.fallbacks) if f is not None]
    hooks = [h for h in (BIND_HOOKS.get(n)(b) for n in config.bind_hooks) if h is not None]
    scorers = [SCORERS.get(n)(b) for n in config.scorers]
    pools = None
    if config.tiers.enabled:
        from seedance.profile.tiers import TierPools

        pools = TierPools(b.tiers())
    return SchedulingProfile(
        scorer, filters, adapters=adapters, pools=pools, fallbacks=fallbacks, hooks=hooks, scorers=scorers,
        explain=config.explain if explain is None else explain, name=config.name,
    )


def slice_profile(policy: PlacementPolicy, ledger: MigLedger, *, explain: bool = False) -> SchedulingProfile:
    """A profile of ``policy`` over an existing MIG ledger (the slicing API's ``SliceScheduler``)."""
    from seedance.profile.slices import MigInstances
    from seedance.slicing.placement import MigAwarePolicy

    b = BuildContext(ProfileConfig(slices=SlicesConfig(mode="mig")), ledger.state, None, ledger)
    filters = [FILTERS.get(n)(b) for n in b.config.filters]
    return SchedulingProfile(
        MigAwarePolicy(policy, ledger), filters, hooks=[MigInstances(ledger)], explain=explain, name="mig"
    )


def tier_profile(
    policy: PlacementPolicy, tier_config: TierConfig | None = None, *, explain: bool = False,
    fallbacks: tuple[str, ...] = ("borrow", "preempt"),
) -> SchedulingProfile:
    """A profile of ``policy`` with the tier stages (the tiers API's ``TieredScheduler``)."""
    from seedance.profile.tiers import TierPools
    from seedance.tiers.config import DEFAULT_TIER_CONFIG

    tier_config = tier_config or DEFAULT_TIER_CONFIG

    cfg = ProfileConfig(tiers=TiersConfig(enabled=True, fallbacks=fallbacks))
    b = BuildContext(cfg, None, tier_config, None)
    filters = [FILTERS.get(n)(b) for n in cfg.filters]
    adapters = [a for a in (ADAPTERS.get(n)(b) for n in cfg.adapters) if a is not None]
    fbs = [f for f in (FALLBACKS.get(n)(b) for n in cfg.tiers.fallbacks) if f is not None]
    return SchedulingProfile(
        policy, filters, adapters=adapters, pools=TierPools(tier_config), fallbacks=fbs, explain=explain, name="tiers"
    )

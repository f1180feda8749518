"""The profile document: ``kind: SchedulingProfile`` (YAML), typed and validated with line numbers.

Example (``docs/profiles.md`` documents every field)::

    kind: SchedulingProfile
    name: tiers-and-mig
    placement:
      policy: seedance
      options: {balance: 1.5}
    queue: priority
    tiers: {enabled: true, fallbacks: [borrow, preempt]}
    slices: {mode: mig, mig_map: {G2: A100-80GB}}

Unknown keys, unknown stage names and options a policy does not declare are ``InputError``s
naming the file, the line and the valid choices.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from seedance.core.errors import InputError, UnknownNameError
from seedance.trust.config import IsolationConfig

if TYPE_CHECKING:
    import yaml

DEFAULT_FILTER_NAMES: tuple[str, ...] = ("NodeSchedulable", "NodeResourcesFit", "GpuModelMatch", "GpuFit")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlacementConfig(_Strict):
    """The score stage: a registered placement policy and its typed options."""

    policy: str = Field(default="best-fit", description="Registered placement policy (`seedancectl policies`).")
    options: dict[str, Any] = Field(default_factory=dict, description="The policy's options (its `Options` model).")


class TiersConfig(_Strict):
    """The tier stages: request rounding, own pools, and the fallbacks in order."""

    enabled: bool = Field(
        default=False, description="Place each pod in its tier's pool (labels gpu.sla.level, gpu.mode)."
    )
    file: str | None = Field(default=None, description="Tier config YAML (default: the built-in Gold/Silver/Bronze).")
    fallbacks: tuple[str, ...] = Field(default=("borrow", "preempt"), description="Fallback stages, in order.")


class SlicesConfig(_Strict):
    """The MIG stage: which nodes are MIG pools."""

    mode: Literal["free", "mig"] = Field(default="free", description="`free`: fractional sharing; `mig`: MIG pools.")
    mig_map: dict[str, str] = Field(
        default_factory=lambda: {"G2": "A100-80GB"},
        description="Node GPU model -> MIG GPU model (mode mig); `{}` for MIG-capable catalog models only.",
    )
    native: bool = Field(default=True, description="Nodes of MIG-capable catalog models are MIG pools too.")


class ProfileConfig(_Strict):
    """A scheduling profile: the ordered stages every driver runs."""

    kind: Literal["SchedulingProfile"] = "SchedulingProfile"
    name: str = Field(default="default", description="Name shown in explanations and logs.")
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    queue: str = Field(default="fifo", description="Queue order of pending pods (`QUEUE_ORDERS`).")
    adapters: tuple[str, ...] = Field(default=("tier-request",), description="Request adapters, in order.")
    filters: tuple[str, ...] = Field(default=DEFAULT_FILTER_NAMES, description="Filter stages, in order.")
    scorers: tuple[str, ...] = Field(
        default=(), description="Scorer stages, in order: the first with an opinion scores in place of the policy."
    )
    tiers: TiersConfig = Field(default_factory=TiersConfig)
    slices: SlicesConfig = Field(default_factory=SlicesConfig)
    bind_hooks: tuple[str, ...] = Field(default=("mig-ledger",), description="Bind hooks, in order.")
    isolation: IsolationConfig = Field(
        default_factory=IsolationConfig, description="Isolation grades tiers/tenants require (`IsolationGrade`)."
    )
    explain: bool = Field(default=False, description="Per-filter counts and runner-up nodes in every decision.")


def profile_of_policy(policy: str, *, options: dict[str, Any] | None = None, **fields: Any) -> ProfileConfig:
    """The default profile around one placement policy (the simulators' ``--policy``)."""
    return ProfileConfig(placement=PlacementConfig(policy=policy, options=dict(options or {})), **fields)


def parse_profile(data: Any, *, source: str = "profile", node: yaml.Node | None = None) -> ProfileConfig:
    """Validate a parsed document; every stage name and policy option is checked (``InputError``)."""
    from seedance.core.yamldoc import validate

    cfg: ProfileConfig = validate(ProfileConfig, data, node, source=source, schema="SchedulingProfile")
    check_names(cfg, source=source, node=node)
    return cfg


def load_profile(path: str | Path) -> ProfileConfig:
    """Read a ``kind: SchedulingProfile`` YAML file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(f"cannot read profile: {exc.strerror}", source=str(p)) from None
    return profile_from_text(text, source=str(p))


def profile_from_text(text: str, *, source: str) -> ProfileConfig:
    """Parse and validate a profile document given as text."""
    from seedance.core.yamldoc import compose

    node, data = compose(text, source=source, what="scheduling profile")
    if not isinstance(data, dict):
        raise InputError("a scheduling profile is a mapping (kind: SchedulingProfile, ...)", source=source, line=1)
    return parse_profile(data, source=source, node=node)


def check_names(cfg: ProfileConfig, *, source: str, node: yaml.Node | None = None) -> None:
    """Every named stage, queue order and policy option exists (``InputError`` with file and line)."""
    from seedance.core.yamldoc import line_of
    from seedance.profile.stages import ADAPTERS, BIND_HOOKS, FALLBACKS, FILTERS, SCORERS
    from seedance.scheduling.framework import PLACEMENT_POLICIES, validate_options
    from seedance.scheduling.queueing import QUEUE_ORDERS

    def need(reg: Any, name: str, loc: tuple[Any, ...]) -> None:
        try:
            reg.get(name)
        except UnknownNameError as exc:
            raise InputError(str(exc), source=source, line=line_of(node, loc), field=".".join(map(str, loc))) from None

    need(PLACEMENT_POLICIES, cfg.placement.policy, ("placement", "policy"))
    need(QUEUE_ORDERS, cfg.queue, ("queue",))
    for key, reg, names in (
        ("adapters", ADAPTERS, cfg.adapters),
        ("filters", FILTERS, cfg.filters),
        ("scorers", SCORERS, cfg.scorers),
        ("bind_hooks", BIND_HOOKS, cfg.bind_hooks),
    ):
        for i, n in enumerate(names):
            need(reg, n, (key, i))
    for i, n in enumerate(cfg.tiers.fallbacks):
        need(FALLBACKS, n, ("tiers", "fallbacks", i))
    cls = PLACEMENT_POLICIES.get(cfg.placement.policy)
    try:
        validate_options(cls, cfg.placement.options, source=source)
    except InputError as exc:
        key = (exc.field or "").removeprefix("options").lstrip(".").split(".")[0]
        loc: tuple[Any, ...] = ("placement", "options", key) if key else ("placement", "options")
        raise InputError(exc.message, source=source, line=line_of(node, loc), field=exc.field) from None

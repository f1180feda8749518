"""Typed tier configuration: what each SLA tier promises and what it may do.

Defaults follow the whitepaper (§2.2): Gold 99.95%, Silver 99.5%, Bronze 95%; Gold runs only on
nodes labelled ``gpu.sla.level=gold`` and ``gpu.mode=exclusive`` and never shares a GPU.
The trace's QoS classes map to tiers through ``qos_map`` (default LS → gold, Guaranteed → gold,
Burstable → silver, BE → bronze); both are configurable from YAML.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from seedance.core.errors import InputError
from seedance.core.resources import SliceBackend
from seedance.core.yamldoc import compose, validate


class TierSpec(BaseModel):
    """One tier's bundle of promises and rights."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target_availability: float = Field(gt=0, le=1, description="Promised availability (0.9995 = 99.95%).")
    allowed_backends: tuple[SliceBackend, ...] = Field(
        description="Slice backends a pod of this tier may use."
    )
    node_labels: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="Required node labels: the node's label must be one of the values (nodeAffinity In).",
    )
    borrow_labels: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="Extra node labels this tier may borrow idle capacity on, as a preemptible guest.",
    )
    exclusive: bool = Field(default=False, description="Never share a GPU with another pod.")
    may_preempt: tuple[str, ...] = Field(default=(), description="Tiers whose pods this tier may preempt.")
    preemptible: bool = Field(default=True, description="Whether higher tiers may preempt pods of this tier.")
    min_runtime_s: float = Field(default=0.0, ge=0, description="No preemption before a pod ran this long.")
    deferrable: bool = Field(default=False, description="Whether cost policies may defer jobs of this tier.")
    min_share: float = Field(
        default=0.0, ge=0, le=1, description="Share of scheduling slots guaranteed when queues are reordered."
    )
    priority: int = Field(
        default=0, description="Scheduling priority (higher first); the PriorityClass value."
    )
    priority_class: str = Field(default="", description="Kubernetes PriorityClass name.")
    penalty_usd: float = Field(
        default=0.0, ge=0, description="Cost added when a pod of this tier is preempted."
    )
    reclaim_min_runtime_s: float = Field(
        default=0.0,
        ge=0,
        description=(
            "No reclaim of capacity this tier borrowed before the pod ran this long there (KAI's "
            "reclaimMinRuntime); 0 means borrowed capacity is taken back at once."
        ),
    )
    checkpoint_interval_s: float = Field(
        default=0.0,
        ge=0,
        description=(
            "Checkpoint period of this tier's pods: a preempted pod loses the work since its last "
            "checkpoint (start + k x interval); 0 means it never checkpoints and loses its whole run."
        ),
    )


class TierConfig(BaseModel):
    """All tiers plus the mapping from trace QoS classes to tiers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tiers: dict[str, TierSpec] = Field(description="Tiers by name, highest first.")
    qos_map: dict[str, str] = Field(description="Trace QoS class → tier name.")
    default_tier: str = Field(default="bronze", description="Tier of pods whose QoS class is not mapped.")

    @model_validator(mode="after")
    def _check_names(self) -> TierConfig:
        names = set(self.tiers)
        for qos, tier in self.qos_map.items():
            if tier not in names:
                raise ValueError(f"qos_map[{qos!r}] names unknown tier {tier!r}")
        if self.default_tier not in names:
            raise ValueError(f"default_tier {self.default_tier!r} is not a tier")
        for name, spec in self.tiers.items():
            for other in spec.may_preempt:
                if other not in names:
                    raise ValueError(f"tier {name!r} may_preempt unknown tier {other!r}")
                if not self.tiers[other].preemptible:
                    raise ValueError(f"tier {name!r} may_preempt {other!r}, which is not preemptible")
        return self

    def tier_of(self, qos: str) -> str:
        """Tier name for a trace QoS class."""
        return self.qos_map.get(qos, self.default_tier)

    def names(self) -> list[str]:
        """Tier names, highest first (as listed)."""
        return list(self.tiers)


_LEVEL = "gpu.sla.level"
_MODE = "gpu.mode"

DEFAULT_TIER_CONFIG = TierConfig(
    tiers={
        "gold": TierSpec(
            target_availability=0.9995,
            allowed_backends=(SliceBackend.WHOLE,),
            node_labels={_LEVEL: ("gold",), _MODE: ("exclusive",)},
            exclusive=True,
            may_preempt=("silver", "bronze"),
            preemptible=False,
            priority=1000,
            priority_class="seedance-gold",
            min_share=0.5,
        ),
        "silver": TierSpec(
            target_availability=0.995,
            allowed_backends=(SliceBackend.WHOLE, SliceBackend.MIG),
            node_labels={_LEVEL: ("silver",)},
            borrow_labels={_LEVEL: ("gold",)},
            may_preempt=("bronze",),
            min_runtime_s=600.0,
            checkpoint_interval_s=600.0,
            priority=500,
            priority_class="seedance-silver",
            penalty_usd=1.0,
            min_share=0.3,
        ),
        "bronze": TierSpec(
            target_availability=0.95,
            allowed_backends=(
                SliceBackend.WHOLE,
                SliceBackend.MIG,
                SliceBackend.MPS,
                SliceBackend.TIME_SLICING,
            ),
            node_labels={_LEVEL: ("bronze",)},
            borrow_labels={_LEVEL: ("gold", "silver")},
            min_runtime_s=300.0,
            checkpoint_interval_s=1800.0,
            deferrable=True,
            priority=100,
            priority_class="seedance-bronze",
            penalty_usd=0.1,
            min_share=0.1,
        ),
    },
    qos_map={"LS": "gold", "Guaranteed": "gold", "Burstable": "silver", "BE": "bronze"},
    default_tier="bronze",
)


def load_tier_config(path: str | Path) -> TierConfig:
    """Load a tier configuration from YAML; errors name the file, line (when known) and field."""
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        raise InputError("cannot read file", source=src) from None
    node, data = compose(text, source=src, what="tier configuration", allow_empty=True)
    return validate(TierConfig, data, node, source=src, schema="tier configuration")  # type: ignore[no-any-return]

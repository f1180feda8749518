"""The ``isolation`` section of a ``kind: SchedulingProfile`` document (pydantic only, imported by the schema)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

GRADE_NAMES: tuple[str, ...] = ("hardware", "driver", "runtime", "none")


class IsolationConfig(BaseModel):
    """Minimum isolation grades by SLA tier and by tenant (the ``IsolationGrade`` stages read it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tiers: dict[str, str] = Field(default_factory=dict, description="Tier -> grade (hardware/driver/runtime/none).")
    tenants: dict[str, str] = Field(default_factory=dict, description="Tenant -> grade (the stronger one applies).")
    mps_limited: bool = Field(
        default=False, description="MPS shares here carry thread and memory limits (MPS counts as `driver`)."
    )

    @field_validator("tiers", "tenants")
    @classmethod
    def _grades(cls, v: dict[str, str]) -> dict[str, str]:
        for key, grade in v.items():
            if grade.strip().lower() not in GRADE_NAMES:
                raise ValueError(f"{key}: unknown isolation grade {grade!r}; valid names: {', '.join(GRADE_NAMES)}")
        return {k: g.strip().lower() for k, g in v.items()}

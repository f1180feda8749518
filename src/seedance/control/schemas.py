"""API models (pydantic): what the REST API and the CLI's manifests accept and return.

Create/update models forbid unknown fields and bound every size (strings, lists, label maps), so
a malformed or oversized payload is a 4xx with the offending field named, never a stored row.
The same ``JobCreate`` is what ``seedancectl submit -f job.yaml`` sends (its ``spec``).
"""

from __future__ import annotations

import datetime as dt
import math
from enum import Enum, StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)

import seedance.scheduling.policies  # noqa: F401  (registers the placement policies named below)
from seedance.core.catalog import CATALOG
from seedance.core.errors import UnknownNameError
from seedance.core.lifecycle import JobStatus, NodeStatus
from seedance.core.numbers import Int
from seedance.core.resources import MILLI_PER_GPU
from seedance.scheduling import PLACEMENT_POLICIES, QUEUE_ORDERS
from seedance.tiers import DEFAULT_TIER_CONFIG

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
NODE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
LABEL_KEY_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_./]{0,61}[A-Za-z0-9])?$"
LABEL_VALUE_PATTERN = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
IDEMPOTENCY_PATTERN = r"^[\x21-\x7e]{1,128}$"
MAX_LABELS = 32
MAX_GPUS_PER_JOB = 64

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN, min_length=1, max_length=63)]
NodeName = Annotated[str, StringConstraints(pattern=NODE_NAME_PATTERN, min_length=1, max_length=253)]
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY_PATTERN, min_length=1, max_length=63)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE_PATTERN, max_length=63)]
Labels = Annotated[dict[LabelKey, LabelValue], Field(max_length=MAX_LABELS, json_schema_extra={
    "additionalProperties": False})]
NO_NUL_PATTERN = r"^[^\x00]*$"
_NO_NUL = Field(json_schema_extra={"pattern": NO_NUL_PATTERN})  # documents what _printable enforces


MAX_BODY_ID = 2**53
"""Largest id in a JSON body: JSON numbers above 2**53 lose precision in many clients (JavaScript, JSON Schema
validators comparing as floats), so a bound above it would be enforced differently than documented."""
TenantRef = Annotated[Int, Field(ge=1, le=MAX_BODY_ID),
                      WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_BODY_ID})]


def _one_of(names: list[str], what: str) -> Any:
    allowed = frozenset(names)

    def check(v: str) -> str:
        if v not in allowed:
            raise ValueError(f"unknown {what} {v!r}; valid names: {', '.join(names)}")
        return v

    return AfterValidator(check)


def _registry_names(registry: Any) -> list[str]:
    return sorted({*registry.names(), *registry._aliases})


_GPU_NAMES = CATALOG.known_names()
GpuName = Annotated[str, _one_of(_GPU_NAMES, "GPU model"),
                    WithJsonSchema({"type": "string", "enum": _GPU_NAMES})]
_PLACEMENTS = _registry_names(PLACEMENT_POLICIES)
_QUEUES = _registry_names(QUEUE_ORDERS)
PlacementName = Annotated[str, _one_of(_PLACEMENTS, "placement policy"),
                          WithJsonSchema({"type": "string", "enum": _PLACEMENTS})]
QueueOrderName = Annotated[str, _one_of(_QUEUES, "queue order"),
                           WithJsonSchema({"type": "string", "enum": _QUEUES})]
GPUS_SCHEMA = {"anyOf": [
    {"type": "integer", "minimum": 0, "maximum": 64},
    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.001},
], "default": 1.0, "description": "GPU count (a whole number up to 64), or a fraction of one GPU below 1 in steps "
   "of 0.001."}
def _printable(v: str) -> str:
    if "\x00" in v:
        raise ValueError("must not contain NUL characters")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return v


def _rfc3339(v: object) -> object:
    if not isinstance(v, str | dt.datetime):
        raise ValueError("must be an RFC 3339 date-time string")
    return v


#: A deadline's year as written (the parsed value keeps its offset, so ``year`` is that year): 2000–2199.
#: The schema's pattern says the same, so a schema-valid deadline is never refused; any UTC offset then
#: stays far from the datetime range's ends.
DEADLINE_PATTERN = r"^2[01][0-9]{2}-"
_DEADLINE_ERROR = "deadline must be between 2000 and 2199 (its year as written)"


ShortText = Annotated[str, StringConstraints(max_length=500), _NO_NUL, AfterValidator(_printable)]
RegistryName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][-A-Za-z0-9_]{0,62}$")]

Tier = Enum("Tier", {n: n for n in DEFAULT_TIER_CONFIG.names()}, type=str)  # type: ignore[misc]
"""SLA tiers of the default tier configuration (gold, silver, bronze)."""


class Role(StrEnum):
    """What a token may do (each role includes the rights of the ones below it).

    * ``admin``: everything, in every tenant (create tenants, tokens for any tenant).
    * ``cluster-admin``: an operator who may also change or remove nodes holding other tenants' jobs
      (which re-queues or evicts them).
    * ``operator``: manage shared infrastructure (clusters, nodes, scheduling policies) and tokens
      of its own tenant, plus everything a member may do.
    * ``member``: submit and cancel jobs of its tenant.
    * ``viewer``: read its tenant's objects and the shared infrastructure.
    """

    ADMIN = "admin"
    CLUSTER_ADMIN = "cluster-admin"
    OPERATOR = "operator"
    MEMBER = "member"
    VIEWER = "viewer"

    @property
    def rank(self) -> int:
        """Larger is more powerful."""
        return _ROLE_RANK[self]


_ROLE_RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.OPERATOR: 2, Role.CLUSTER_ADMIN: 3, Role.ADMIN: 4}


class JobKind(StrEnum):
    """Kinds of jobs."""

    TRAINING_JOB = "TrainingJob"
    INFERENCE_SERVICE = "InferenceService"


class _In(BaseModel):
    """Request bodies: unknown fields refused, no lax coercion (``0`` is not ``false``, ``"1"`` not ``1``);
    enum and date-time fields take their JSON strings (``strict=False`` on those fields)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# ---------------------------------------------------------------------------------------- errors
class ErrorItem(BaseModel):
    """One problem in a request."""

    loc: str = Field(description="Where: e.g. 'body.gpus' or 'query.limit'.")
    msg: str = Field(description="What is wrong.")


class ErrorBody(BaseModel):
    """Every 4xx answer: one readable line plus the individual problems."""

    detail: str = Field(description="One line a person can act on.")
    errors: list[ErrorItem] = Field(default_factory=list, description="Each problem, located.")


# --------------------------------------------------------------------------------------- tenants
class TenantCreate(_In):
    """A new tenant (admin only)."""

    name: Name = Field(description="Unique name (DNS label).")
    display_name: Annotated[str, StringConstraints(max_length=200), _NO_NUL,
                            AfterValidator(_printable)] = ""


class TenantRead(_Out):
    """A tenant."""

    id: int
    name: str
    display_name: str
    created_at: dt.datetime


# ---------------------------------------------------------------------------------------- tokens
class TokenCreate(_In):
    """A new API token; the answer shows its value once."""

    name: Name = Field(description="A label for the token (who or what uses it).")
    role: Role = Field(strict=False, description="admin, cluster-admin, operator, member or viewer.")
    tenant_id: TenantRef | None = Field(
        default=None, description="Tenant of the token (default: the caller's; others: admin only)."
    )


class TokenRead(_Out):
    """A token without its value."""

    id: int
    tenant_id: int
    name: str
    role: Role
    prefix: str = Field(description="First characters of the value, to recognise it.")
    created_at: dt.datetime
    revoked_at: dt.datetime | None


class TokenCreated(TokenRead):
    """A new token, with its value: shown this once, only its hash is stored."""

    token: str


class WhoAmI(BaseModel):
    """The caller."""

    token_id: int
    token_name: str
    tenant_id: int
    tenant: str
    role: Role


# -------------------------------------------------------------------------------------- clusters
class ClusterCreate(_In):
    """A new cluster."""

    name: Name
    description: ShortText = ""


class ClusterRead(BaseModel):
    """A cluster with totals."""

    id: int
    name: str
    description: str
    nodes: int
    gpus: int
    allocated_gpu_milli: int
    capacity_gpu_milli: int
    created_at: dt.datetime


class NodeCreate(_In):
    """A new node of a cluster."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={  # the cross-field rule of _gpus
        "if": {"properties": {"gpu_count": {"const": 0}}},
        "then": {"properties": {"gpu_model": {"type": "null"}}},
        "else": {"required": ["gpu_model"], "properties": {"gpu_model": {"type": "string"}}},
    })

    name: NodeName
    cpu_milli: Int = Field(ge=0, le=10_000_000, description="Allocatable CPU in milli-cores.")
    memory_mib: Int = Field(ge=0, le=1_000_000_000, description="Allocatable memory in MiB.")
    gpu_count: Int = Field(default=0, ge=0, le=MAX_GPUS_PER_JOB)
    gpu_model: GpuName | None = Field(
        default=None, description="GPU model (catalog name or alias, e.g. A100-80GB); required with GPUs."
    )
    labels: Labels = Field(default_factory=dict, description="e.g. gpu.sla.level: gold, gpu.mode: exclusive.")

    @field_validator("gpu_model")
    @classmethod
    def _model(cls, v: str | None) -> str | None:
        return None if v is None else _canonical_gpu(v)

    @model_validator(mode="after")
    def _gpus(self) -> NodeCreate:
        if self.gpu_count > 0 and self.gpu_model is None:
            raise ValueError("gpu_model is required when gpu_count > 0")
        if self.gpu_count == 0 and self.gpu_model is not None:
            raise ValueError("gpu_model must be empty when gpu_count is 0")
        return self


class NodeUpdate(_In):
    """Change a node's labels or status (cordon: status=cordoned)."""

    labels: Labels | None = None
    status: NodeStatus | None = Field(default=None, strict=False)


class NodeRead(BaseModel):
    """A node with its current allocation."""

    id: int
    cluster: str
    name: str
    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_model: str | None
    labels: dict[str, str]
    status: NodeStatus
    allocated_cpu_milli: int
    allocated_memory_mib: int
    allocated_gpu_milli: list[int] = Field(description="Milli-GPU allocated on each GPU (0..1000).")
    jobs: int


# ------------------------------------------------------------------------------------------ jobs
class JobCreate(_In):
    """A job to schedule: a TrainingJob or an InferenceService (one placement).

    ``gpus`` is a count (1, 2, 8) or a fraction of one GPU (0.25 = 250 milli-GPU); 0 means CPU only.
    """

    kind: JobKind = Field(default=JobKind.TRAINING_JOB, strict=False)
    name: Name | None = Field(default=None, description="Unique in the tenant (default: generated).")
    cluster: Name = Field(default="default", description="Cluster to run on.")
    tier: Tier = Field(default=Tier("bronze"), strict=False, description="SLA tier.")
    priority: Int = Field(default=0, ge=-1000, le=1000, description="Priority within the tier.")
    gpus: Annotated[float, WithJsonSchema(GPUS_SCHEMA)] = Field(default=1.0, ge=0, le=MAX_GPUS_PER_JOB)
    gpu_types: Annotated[list[GpuName], Field(max_length=16)] = Field(
        default_factory=list, description="Acceptable GPU models (empty: any).")
    cpu_milli: Int = Field(default=1000, ge=0, le=10_000_000)
    memory_mib: Int = Field(default=1024, ge=0, le=1_000_000_000)
    deadline: Annotated[
        dt.datetime, BeforeValidator(_rfc3339),
        WithJsonSchema({"type": "string", "format": "date-time", "pattern": DEADLINE_PATTERN}),
    ] | None = Field(
        default=None, strict=False, description="Latest acceptable completion time (RFC 3339; year 2000–2199)."
    )
    flexibility_hours: float = Field(
        default=0.0, ge=0, le=8760, description="How long the start may be deferred for a cheaper window."
    )
    duration_hours: float | None = Field(default=None, gt=0, le=8760, description="Expected run time.")
    idempotency_key: Annotated[str, StringConstraints(pattern=IDEMPOTENCY_PATTERN)] | None = Field(
        default=None, description="Resubmitting with the same key returns the first job instead of a new one."
    )
    labels: Labels = Field(default_factory=dict)
    tenant_id: TenantRef | None = Field(default=None, description="Admin only: submit for this tenant.")

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("gpus must be a finite number")
        milli = v * MILLI_PER_GPU
        if abs(milli - round(milli)) > 1e-6:
            raise ValueError("gpus must be a multiple of 0.001")
        if v > 0 and round(milli) == 0:
            raise ValueError("gpus must be 0 (CPU only) or at least 0.001")
        if v > 1 and abs(v - round(v)) > 1e-9:
            raise ValueError("more than one GPU must be a whole number (fractions only below 1)")
        return v

    @field_validator("gpu_types")
    @classmethod
    def _types(cls, v: list[str]) -> list[str]:
        return sorted({_canonical_gpu(t) for t in v})

    @field_validator("deadline")
    @classmethod
    def _deadline(cls, v: dt.datetime | None) -> dt.datetime | None:
        if v is None:
            return None
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        if not 2000 <= v.year <= 2199:
            raise ValueError(_DEADLINE_ERROR)
        return v

    @property
    def num_gpu(self) -> int:
        """GPU count of the placement (1 for a fraction)."""
        if self.gpus == 0:
            return 0
        return 1 if self.gpus < 1 else round(self.gpus)

    @property
    def gpu_milli(self) -> int:
        """Milli-GPU taken on each GPU."""
        if self.gpus == 0:
            return 0
        return round(self.gpus * MILLI_PER_GPU) if self.gpus < 1 else MILLI_PER_GPU


class IsolationRead(BaseModel):
    """Read-only: the isolation grade a bound or running job's placement gives (weakest over its GPUs)."""

    grade: Literal["hardware", "driver", "runtime", "none"] = Field(
        description="hardware (MIG, or a GPU no other tenant shares), driver (limited MPS, compute instances), "
                    "runtime (time slicing), none.")
    slice_grade: Literal["hardware", "driver", "runtime", "none"] = Field(
        description="What the slice itself gives, whoever shares the GPU.")
    backend: str = Field(description="How the GPU is given: whole, mig, mps or time-slicing.")
    gpu: int = Field(description="GPU index on the node that sets the grade.")
    weakest_with: str | None = Field(description="The other tenant's job that sets the grade (null: none).")
    reason: str = Field(description="Why, in words.")


class JobRead(BaseModel):
    """A job and where it stands."""

    id: int
    tenant_id: int
    name: str
    kind: JobKind
    cluster: str
    tier: str
    priority: int
    gpus: float
    num_gpu: int
    gpu_milli: int
    placed_gpu_milli: Int | None = Field(description="Milli-GPU held per GPU when it differs from the request "
                                         "(e.g. a Gold share placed as a whole GPU).")
    gpu_types: list[str]
    cpu_milli: int
    memory_mib: int
    deadline: dt.datetime | None
    flexibility_hours: float
    duration_hours: float | None
    labels: dict[str, str]
    idempotency_key: str | None
    status: JobStatus
    status_reason: str
    node: str | None
    gpu_indices: list[int]
    cost_score: float = Field(description="Expected cost of the job (see cost_basis).")
    cost_basis: str = Field(description="How cost_score was computed.")
    version: int
    attempt: int = Field(default=0, description="Runs dispatched so far (a preempted or lost run is re-queued "
                         "and its next dispatch is the next attempt).")
    created_at: dt.datetime
    updated_at: dt.datetime
    bound_at: dt.datetime | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    isolation: IsolationRead | None = Field(
        default=None, description="Read-only: isolation grade of a bound or running job (null otherwise).")


class JobList(BaseModel):
    """A page of jobs, newest first."""

    items: list[JobRead]
    next_before: Int | None = Field(description="Pass as before_id for the next page (null: last page).")


class DecisionRead(_Out):
    """One scheduling decision from the append-only log."""

    id: int
    job_id: int
    outcome: Literal["bind", "pending", "reject", "preempted"]
    node: str | None = Field(validation_alias="node_name")
    gpu_indices: list[int]
    score: int | None
    policy: str
    reason: str
    explanation: dict[str, Any]
    cost_score: float | None
    latency_us: int
    created_at: dt.datetime


class EventRead(_Out):
    """One event from the append-only log."""

    id: int
    tenant_id: int | None
    job_id: int | None
    cluster_id: int | None
    kind: str
    message: str
    data: dict[str, Any]
    created_at: dt.datetime


class DecisionList(BaseModel):
    """Decisions, oldest first."""

    items: list[DecisionRead]


class EventList(BaseModel):
    """Events, newest first."""

    items: list[EventRead]
    next_before: int | None


class Explanation(BaseModel):
    """Why a job is where it is: its status, the latest decision and the decision history size."""

    job: JobRead
    summary: str
    latest: DecisionRead | None
    decisions: int


# -------------------------------------------------------------------------------------- policies
class PolicyCreate(_In):
    """A scheduling policy: placement and queue order by registry name plus its YAML document."""

    name: Name
    cluster: Name | None = Field(default=None, description="Cluster it applies to (null: every cluster).")
    placement: PlacementName = Field(default="best-fit", description="Placement policy registry name.")
    queue_order: QueueOrderName = Field(default="priority", description="Queue order registry name.")
    plugin: RegistryName | None = Field(default=None, description="Cost plug-in, e.g. electricity-pricing.")
    region: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$")] | None = None
    config_yaml: Annotated[str, StringConstraints(max_length=32 * 1024), _NO_NUL,
                           AfterValidator(_printable)] = Field(
        default="", description="The policy YAML, as given to the CLI's --config-file."
    )
    enabled: bool = False


class PolicyRead(_Out):
    """A stored scheduling policy."""

    id: int
    name: str
    cluster: str | None
    placement: str
    queue_order: str
    plugin: str | None
    region: str | None
    config_yaml: str
    config: dict[str, Any]
    enabled: bool
    version: int
    created_at: dt.datetime
    updated_at: dt.datetime


# ------------------------------------------------------------------------------------- dashboard
class HeatmapRow(BaseModel):
    """One node of the heatmap: allocation per GPU in milli-GPU."""

    node: str
    model: str | None
    status: str
    tier: str | None
    gpu_milli: list[int]


class CostPoint(BaseModel):
    """Spend rate at one time: $/h of the GPUs allocated then."""

    t: dt.datetime
    usd_per_hour: float
    gpus: float


class DashboardData(BaseModel):
    """Everything the dashboard draws."""

    cluster: str | None
    clusters: list[str]
    heatmap: list[HeatmapRow]
    jobs_by_tier_status: dict[str, dict[str, int]]
    pending_reasons: list[dict[str, Any]]
    cost: list[CostPoint]
    generated_at: dt.datetime


class JobLogs(BaseModel):
    """A job's captured output, as its backend keeps it (every run of the job, one after the other)."""

    job_id: int
    name: str
    status: JobStatus
    backend: str = Field(description="The dispatcher that ran the job.")
    available: bool = Field(description="False when the backend keeps no logs or has none for this job yet.")
    text: str = Field(description="The log (its last tail_bytes when asked).")
    note: str = Field(default="", description="Why no log is available, when it is not.")


class Health(BaseModel):
    """Liveness and the store's state."""

    status: Literal["ok"]
    database: str
    revision: str | None


def _canonical_gpu(name: str) -> str:
    try:
        return CATALOG.resolve(name).name
    except UnknownNameError as exc:
        raise ValueError(str(exc)) from None

"""What a driver tells the stages about its pods and the time: the pod directory and stage services.

NOTE(seedance): the contract of attempt-aware stages.
  * A filter stage sees ``(view, req)`` only; the trust and deferral stages also need the pod's
    tenant, labels, tier, predicted duration and flexibility. Drivers give them through a
    :class:`PodDirectory` (pod id -> :class:`PodInfo`) in :class:`StageServices`, which
    ``build_profile(..., services=...)`` hands to every stage factory.
  * An :class:`AttemptFilter` is told the attempt (``begin``) before its masks are read, once
    per attempt, by :meth:`SchedulingProfile.adapt`; a :class:`Hold` adapter may keep the pod
    pending before any filter runs (deferral to a cheaper hour), with its own reason.
  * Stages read the time from ``services.clock`` when the driver gives one (the live loop's
    store clock, a test's clock), else from the attempt's ``now`` (the simulator's event time).
  A driver without a directory has no tenants or labels: every pod is then non-sensitive and
  non-flexible, so these stages pass every node (nothing is admitted that needs an attestation).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision
from seedance.core.resources import ResourceRequest
from seedance.profile.stages import Attempt, RequestAdapter
from seedance.scheduling.framework import FilterPlugin

if TYPE_CHECKING:
    from seedance.costmodel.live_deferral import LiveDeferral
    from seedance.trust.registry import AttestationRegistry


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the stages may know about one pod beyond its request.

    Attributes:
        name: Job or pod name (explanations, alerts).
        tenant: Owning tenant (or namespace).
        labels: Job labels (``seedance.io/sensitive``, ``seedance.io/tee-required``, ...).
        tier: SLA tier name.
        duration_hours: Predicted run time (``None``: unknown, never deferred).
        flexibility_hours: Hours the submitter lets the start move (0: not flexible).
        deadline: Epoch seconds by which the job must have finished.
        submitted: Epoch seconds of the submission.
        gpu_model: GPU model the cost model prices (the request's first type, when it names one).
    """

    name: str
    tenant: str
    labels: Mapping[str, str] = field(default_factory=dict)
    tier: str = "bronze"
    duration_hours: float | None = None
    flexibility_hours: float = 0.0
    deadline: float | None = None
    submitted: float | None = None
    gpu_model: str | None = None


class PodDirectory(Protocol):
    """Pod id -> :class:`PodInfo` (``None``: the driver knows nothing more than the request)."""

    def info(self, pod: int) -> PodInfo | None:
        """The pod's context, called once per attempt by attempt-aware stages."""


@dataclass(slots=True)
class MappingPods:
    """A :class:`PodDirectory` over a dict (simulators, tests, one live cycle)."""

    pods: dict[int, PodInfo] = field(default_factory=dict)

    def info(self, pod: int) -> PodInfo | None:
        return self.pods.get(pod)


@dataclass(frozen=True, slots=True)
class StageServices:
    """Runtime objects a driver lends to the stages (none is required; see the module docstring).

    Attributes:
        pods: The pod directory.
        attestation: The node-attestation registry (``AttestedTEE``; default: an empty one, so
            no node is eligible for a sensitive job).
        deferral: The live deferral stage (``deferral``; default: no pod is deferred).
        clock: Current time (default: the attempt's ``now``).
    """

    pods: PodDirectory | None = None
    attestation: AttestationRegistry | None = None
    deferral: LiveDeferral | None = None
    clock: Callable[[], float] | None = None

    def now(self, att: Attempt) -> float:
        """The stages' clock for ``att``."""
        return self.clock() if self.clock is not None else att.now

    def info(self, att: Attempt) -> PodInfo | None:
        """The pod of ``att`` from the directory."""
        return self.pods.info(att.pod) if self.pods is not None else None


class AttemptFilter(FilterPlugin):
    """A filter stage that reads the attempt (tenant, labels, tier, time) before its mask is asked for."""

    @abstractmethod
    def begin(self, att: Attempt, req: ResourceRequest) -> None:
        """Called once per attempt, after the adapters, before any ``mask``."""

    def node_reasons(self, view: ClusterState, req: ResourceRequest) -> list[str | None] | None:
        """Per node, why it is rejected (``None`` where it passes); ``None``: use :meth:`reason`."""
        return None


class Hold(RequestAdapter):
    """An adapter that may keep the pod pending before the filters run (its decision carries the reason)."""

    name: ClassVar[str]

    def adapt(self, att: Attempt, req: ResourceRequest) -> ResourceRequest:
        return req

    @abstractmethod
    def hold(self, att: Attempt, req: ResourceRequest) -> Decision | None:
        """A pending decision to return instead of placing, or ``None`` to go on."""


def node_reason_texts(
    filters: Sequence[FilterPlugin], view: ClusterState, req: ResourceRequest
) -> list[list[str | None] | None]:
    """Per filter, its per-node reasons when it gives them (attempt-aware stages), else ``None``."""
    return [f.node_reasons(view, req) if isinstance(f, AttemptFilter) else None for f in filters]


"""The stage kinds of a scheduling profile: small, typed, one job each.

NOTE(seedance): a profile runs, for one pod, in this order (kube-scheduler profiles and KAI
session plug-ins are the models):
  1. **Request adapters** (:class:`RequestAdapter`) turn the request as submitted into what the
     scheduler places (a tier's rounding of shares to whole GPUs, ...).
  2. **Filters** (:class:`~seedance.scheduling.framework.FilterPlugin`) mask the nodes that can
     host it now; each names itself, explains a rejection (``reason``) and says whether waiting
     can resolve it (``resolvable``). A pool stage (tiers) adds the pod's own-pool filter.
  3. **Score**: the placement policy scores the feasible nodes once; the best wins (ties by rank).
     A **scorer** (:class:`Scorer`) told the attempt first may score them instead, for the pods it
     has an opinion on (the throughput-per-$ scorer: pods that name their workload).
  4. **Fallbacks** (:class:`Fallback`), in order, when nothing fits: borrow another pool, then
     preempt; each returns an explained ``Decision`` or ``None`` and records why it failed.
  5. **Bind hooks** (:class:`BindHook`) annotate a bound decision (the MIG instance it takes) and
     keep their own books when the driver applies or releases it (the MIG ledger).
  Stages never mutate the cluster state; drivers apply decisions through the profile.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision
from seedance.core.registry import Registry
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import FilterPlugin, PlacementPolicy

if TYPE_CHECKING:
    from seedance.profile.build import BuildContext
    from seedance.profile.profile import SchedulingProfile
    from seedance.tiers.preemption import RunningPods

BoolA = NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One scheduling attempt: what every stage may read about the pod and the moment.

    Attributes:
        view: Cluster snapshot (read only).
        req: The request as submitted.
        pod: The driver's pod id.
        tier: The pod's SLA tier (``None``: no tier; the profile's tier stages do not apply).
        running: Pods running now (preemption candidates).
        now: Current time in seconds (min-runtime and checkpoints are measured against it).
        borrow: Whether the pod accepts borrowed capacity.
        only: Candidate nodes (the extender's node list); ``None`` means every node.
    """

    view: ClusterState
    req: ResourceRequest
    pod: int = -1
    tier: str | None = None
    running: RunningPods | None = None
    now: float = 0.0
    borrow: bool = True
    only: BoolA | None = None


class RequestAdapter(ABC):
    """Stage 1: rewrites the request before filtering (never the pod's stored request)."""

    name: ClassVar[str]

    @abstractmethod
    def adapt(self, att: Attempt, req: ResourceRequest) -> ResourceRequest:
        """Called once per attempt with the previous adapter's output."""


class Fallback(ABC):
    """Stage 4: a second chance when the pod's own pool has no room.

    ``attempt`` returns a bound, explained decision, or ``None`` after writing why it failed into
    ``trail[self.name]`` (a JSON-able mapping; the pending decision shows every stage's reason).
    """

    name: ClassVar[str]

    @abstractmethod
    def attempt(
        self, profile: SchedulingProfile, att: Attempt, req: ResourceRequest, head: dict[str, Any],
        trail: dict[str, Any],
    ) -> Decision | None:
        """Called once per attempt the earlier stages could not place."""


class BindHook(ABC):
    """Stage 5: sees every bound decision; may annotate it and keep books of what is bound."""

    name: ClassVar[str]

    def annotate(self, view: ClusterState, req: ResourceRequest, decision: Decision) -> Decision:
        """Called once per bound decision before it is returned (default: unchanged)."""
        return decision

    def apply(self, view: ClusterState, decision: Decision) -> None:  # noqa: B027 - optional hook
        """Called after the driver applied ``decision`` to ``view``."""

    def release(self, view: ClusterState, decision: Decision) -> None:  # noqa: B027 - optional hook
        """Called after the driver released ``decision`` from ``view``."""


class Scorer(ABC):
    """Stage 3, optional: scores the feasible nodes in place of the policy for the attempts it knows.

    ``begin`` is told every attempt (after the adapters) and returns whether the scorer has an
    opinion; only then is ``score`` called (with the policy's own scores, ``None`` when it has not
    been asked). ``note`` is added to the decision's explanation under the scorer's name (why it
    scored, or why it left the score to the policy).
    """

    name: ClassVar[str]

    @abstractmethod
    def begin(self, att: Attempt, req: ResourceRequest) -> bool:
        """Called once per attempt; ``True``: :meth:`score` decides this attempt's scores."""

    @abstractmethod
    def score(self, view: ClusterState, req: ResourceRequest, nodes: NDArray[np.intp],
              policy: Callable[[], NDArray[np.int64]]) -> NDArray[np.int64]:
        """Integer scores of ``nodes`` (higher wins; ties by rank); ``policy()`` gives the policy's."""

    def annotate(self, decision: Decision) -> Decision:
        """Called on every bound decision of an attempt (default: unchanged); adds the scorer's why."""
        return decision


class ScoredPolicy(PlacementPolicy):
    """The placement policy with the profile's scorers in front (built by :func:`scored_policy`).

    For an attempt no scorer has an opinion on, every call is the policy's own.
    """

    name: ClassVar[str] = "scored"

    def __init__(self, base: PlacementPolicy, scorers: tuple[Scorer, ...]) -> None:
        super().__init__(base.ctx)
        self.base = base
        self.scorers = scorers
        self.active: Scorer | None = None

    def begin(self, att: Attempt, req: ResourceRequest) -> bool:
        """Tell every scorer the attempt; the first with an opinion scores it. Whether one has."""
        self.active = None
        for s in self.scorers:
            if s.begin(att, req) and self.active is None:
                self.active = s
        return self.active is not None

    def observe(self, req: ResourceRequest) -> None:
        self.base.observe(req)

    def score(self, view: ClusterState, req: ResourceRequest, nodes: NDArray[np.intp]) -> NDArray[np.int64]:
        s = self.active
        if s is None:
            return self.base.score(view, req, nodes)
        return s.score(view, req, nodes, lambda: self.base.score(view, req, nodes))

    def select_gpus(self, view: ClusterState, req: ResourceRequest, node: int) -> tuple[int, ...]:
        return self.base.select_gpus(view, req, node)


def scored_policy(base: PlacementPolicy, scorers: tuple[Scorer, ...]) -> ScoredPolicy:
    """``base`` behind ``scorers``, reporting under ``base``'s name (decisions read as the policy's)."""
    cls = type(f"Scored_{base.name}", (ScoredPolicy,), {"name": base.name, "summary": base.summary})
    return cls(base, scorers)  # type: ignore[no-any-return]


FilterFactory = Callable[["BuildContext"], FilterPlugin]
AdapterFactory = Callable[["BuildContext"], RequestAdapter | None]
FallbackFactory = Callable[["BuildContext"], Fallback | None]
HookFactory = Callable[["BuildContext"], BindHook | None]
ScorerFactory = Callable[["BuildContext"], Scorer]

#: Filter stages by name (a factory per name; e.g. ``GpuFit`` becomes ``SliceFit`` with MIG pools).
FILTERS: Registry[FilterFactory] = Registry("filter stage", plugins="seedance.profile.builtin")
#: Request adapters by name.
ADAPTERS: Registry[AdapterFactory] = Registry("request adapter", plugins="seedance.profile.builtin")
#: Fallback stages by name.
FALLBACKS: Registry[FallbackFactory] = Registry("fallback stage", plugins="seedance.profile.builtin")
#: Bind hooks by name.
BIND_HOOKS: Registry[HookFactory] = Registry("bind hook", plugins="seedance.profile.builtin")
#: Scorers by name.
SCORERS: Registry[ScorerFactory] = Registry("scorer stage", plugins="seedance.profile.builtin")


class NodeSubset(FilterPlugin):
    """A fixed node mask: the candidates a driver restricts the attempt to."""

    name: ClassVar[str] = "ExtenderCandidates"
    resolvable: ClassVar[bool] = False

    def __init__(self, mask: BoolA) -> None:
        self._mask = mask

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        return self._mask

    def reason(self, req: ResourceRequest) -> str:
        return "not among the candidate nodes"

"""Frozen scheduling decisions: what a policy returns and what every driver applies.

A policy never mutates state. It returns a :class:`Decision`; the simulator, the control plane
and the Kubernetes extender apply it (``ClusterState.apply``), so the same decision means the
same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Outcome(StrEnum):
    """What a decision does with the pod it is about."""

    BIND = "bind"  # place now on the named node and GPUs
    PENDING = "pending"  # keep waiting (nothing fits, or deferred on purpose)
    REJECT = "reject"  # can never run on this cluster (no node could ever fit it)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one pod goes: node index, GPU indices on that node and the amounts taken."""

    node: int
    gpus: tuple[int, ...]
    gpu_milli: int
    cpu_milli: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class Preemption:
    """A pod to evict before the placement can bind, with the cost that chose it."""

    victim: int
    node: int
    cost: float
    reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    """A policy's answer for one pod.

    Attributes:
        pod: The pod's id (the driver's own integer id).
        outcome: Bind, stay pending or reject.
        placement: Where to bind (only with ``Outcome.BIND``).
        preemptions: Pods to evict first, in order.
        score: The winning node's integer score (``None`` if no scoring happened).
        reason: One line a person can read (why this node, why pending).
        explanation: Machine-readable details (policy, filter counts, alternatives, ...).
    """

    pod: int
    outcome: Outcome
    placement: Placement | None = None
    preemptions: tuple[Preemption, ...] = ()
    score: int | None = None
    reason: str = ""
    explanation: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def bound(self) -> bool:
        """True when the decision places the pod."""
        return self.outcome is Outcome.BIND

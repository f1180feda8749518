"""Job and node lifecycles as explicit transition tables.

Each edge carries the reason it exists. ``transition`` is the only way to move a status; an
edge that is not in the table raises :class:`~seedance.core.errors.InvalidTransition`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import TypeVar

from seedance.core.errors import InvalidTransition


class JobStatus(StrEnum):
    """Lifecycle of a job (a pod, a training job, an inference service replica)."""

    PENDING = "pending"
    DEFERRED = "deferred"
    BOUND = "bound"
    RUNNING = "running"
    PREEMPTED = "preempted"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNSCHEDULABLE = "unschedulable"


_J = JobStatus
JOB_TRANSITIONS: Mapping[JobStatus, frozenset[JobStatus]] = MappingProxyType(
    {
        # pending → bound: a decision placed it; → deferred: a cost policy holds it for a cheaper
        # window; → unschedulable: no node can ever host it (or its window closed unserved);
        # → cancelled: the user withdrew it.
        _J.PENDING: frozenset({_J.BOUND, _J.DEFERRED, _J.UNSCHEDULABLE, _J.CANCELLED}),
        # deferred → pending: its window opened; → cancelled: withdrawn while waiting.
        _J.DEFERRED: frozenset({_J.PENDING, _J.CANCELLED, _J.UNSCHEDULABLE}),
        # bound → running: the backend started it; → pending: the bind failed (node gone);
        # → preempted: evicted before it started; → cancelled: withdrawn.
        _J.BOUND: frozenset({_J.RUNNING, _J.PENDING, _J.PREEMPTED, _J.CANCELLED, _J.FAILED}),
        # running → succeeded/failed: it ended; → preempted: a higher tier took its GPUs or its node
        # was lost; → cancelled: withdrawn.
        _J.RUNNING: frozenset({_J.SUCCEEDED, _J.FAILED, _J.PREEMPTED, _J.CANCELLED}),
        # preempted → pending: it is re-queued (from its last checkpoint); → cancelled;
        # → succeeded/failed: its run ended on its own before the stop reached the backend.
        _J.PREEMPTED: frozenset({_J.PENDING, _J.CANCELLED, _J.SUCCEEDED, _J.FAILED}),
        # unschedulable → pending: the cluster changed (a node was added).
        _J.UNSCHEDULABLE: frozenset({_J.PENDING}),
        _J.SUCCEEDED: frozenset(),
        _J.FAILED: frozenset(),
        _J.CANCELLED: frozenset(),
    }
)

TERMINAL_JOB_STATUSES = frozenset({_J.SUCCEEDED, _J.FAILED, _J.CANCELLED})


class NodeStatus(StrEnum):
    """Lifecycle of a node."""

    READY = "ready"
    CORDONED = "cordoned"
    DRAINING = "draining"
    DOWN = "down"


_N = NodeStatus
NODE_TRANSITIONS: Mapping[NodeStatus, frozenset[NodeStatus]] = MappingProxyType(
    {
        # ready → cordoned: an operator stops new placements; → draining: pods are being moved off
        # (e.g. to repartition MIG); → down: it stopped reporting.
        _N.READY: frozenset({_N.CORDONED, _N.DRAINING, _N.DOWN}),
        _N.CORDONED: frozenset({_N.READY, _N.DRAINING, _N.DOWN}),
        # draining → ready: drained and reconfigured; → down.
        _N.DRAINING: frozenset({_N.READY, _N.CORDONED, _N.DOWN}),
        # down → ready: it came back (its pods were already re-queued).
        _N.DOWN: frozenset({_N.READY}),
    }
)

S = TypeVar("S", JobStatus, NodeStatus)


def transition(current: S, new: S, table: Mapping[S, frozenset[S]]) -> S:
    """Return ``new`` if ``current → new`` is an edge of ``table``; raise otherwise.

    >>> transition(JobStatus.PENDING, JobStatus.BOUND, JOB_TRANSITIONS).value
    'bound'
    >>> transition(JobStatus.SUCCEEDED, JobStatus.RUNNING, JOB_TRANSITIONS)
    Traceback (most recent call last):
    ...
    seedance.core.errors.InvalidTransition: succeeded -> running is not allowed
    """
    if new not in table[current]:
        raise InvalidTransition(f"{current.value} -> {new.value} is not allowed")
    return new

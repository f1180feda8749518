"""Scheduling framework: kube-scheduler-shaped stages over a cluster snapshot.

queue sort → filter → score → select node and GPUs → bind. Policies are registered by name in
:data:`PLACEMENT_POLICIES` (see :mod:`seedance.scheduling.policies`) and
:data:`QUEUE_ORDERS`; the simulator, the control plane and the Kubernetes extender all run the
same :class:`Scheduler` and apply the :class:`~seedance.core.decision.Decision` it returns.
"""

from seedance.scheduling.framework import (
    PLACEMENT_POLICIES,
    PlacementPolicy,
    PolicyContext,
    Scheduler,
    make_policy,
)
from seedance.scheduling.queueing import QUEUE_ORDERS, QueueItem, QueueOrder

__all__ = [
    "PLACEMENT_POLICIES",
    "QUEUE_ORDERS",
    "PlacementPolicy",
    "PolicyContext",
    "QueueItem",
    "QueueOrder",
    "Scheduler",
    "make_policy",
]

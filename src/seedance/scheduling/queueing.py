"""Queue-sort stage: the order in which pending pods are tried.

Queue orders are registered by name in :data:`QUEUE_ORDERS`; each maps a pending item to a sort
key (smaller first).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from seedance.core.registry import Registry


class QueueItem:
    """A pending pod as the queue sees it."""

    __slots__ = ("arrival", "gpu_milli", "pod", "priority", "seq")

    def __init__(self, pod: int, arrival: float, seq: int, priority: int = 0, gpu_milli: int = 0) -> None:
        self.pod = pod
        self.arrival = arrival
        self.seq = seq
        self.priority = priority
        self.gpu_milli = gpu_milli


class QueueOrder(ABC):
    """Orders pending pods; ``key`` is called once per pod when it joins the queue."""

    name: ClassVar[str]

    @abstractmethod
    def key(self, item: QueueItem) -> tuple[float, ...]:
        """Sort key of ``item`` (smaller is tried first)."""


QUEUE_ORDERS: Registry[type[QueueOrder]] = Registry("queue order")


@QUEUE_ORDERS.register("fifo")
class Fifo(QueueOrder):
    """First come, first tried."""

    name = "fifo"

    def key(self, item: QueueItem) -> tuple[float, ...]:
        return (item.arrival, item.seq)


@QUEUE_ORDERS.register("priority")
class Priority(QueueOrder):
    """Higher priority first, then first come."""

    name = "priority"

    def key(self, item: QueueItem) -> tuple[float, ...]:
        return (-item.priority, item.arrival, item.seq)


@QUEUE_ORDERS.register("smallest-first", aliases=("sjf",))
class SmallestFirst(QueueOrder):
    """Smallest GPU request first (packs small pods into gaps), then first come."""

    name = "smallest-first"

    def key(self, item: QueueItem) -> tuple[float, ...]:
        return (item.gpu_milli, item.arrival, item.seq)

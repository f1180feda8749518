"""Queue-sort stage: the order in which pending pods are tried.

Queue orders are registered by name in :data:`QUEUE_ORDERS`; each maps a pending item to a sort
key (smaller first). A queue that is ordered as a whole (the live control plane's pending jobs)
calls :meth:`QueueOrder.order`, which orders by key unless the queue order needs the whole queue
(``cost-score``: cheapest first, inside every tier's guaranteed share of the slots).

NOTE(seedance): the share guarantee (:func:`share_order`), once.
  Entries are taken in ascending ``key`` order, except that every tier ``t`` with share ``s_t``
  holds at least ``floor(s_t * n)`` of the first ``n`` slots, for every ``n``, as long as it has
  entries left. Before each slot the greedy choice is checked against that guarantee for all
  later prefixes; when it would break it, the slot goes to the tier whose next guaranteed slot
  comes first (earliest deadline first, which is optimal for unit-size slots with deadlines). The
  shares must sum to at most 1, which makes the guarantee always satisfiable.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np

from seedance.core.errors import InputError
from seedance.core.registry import Registry


class QueueItem:
    """A pending pod as the queue sees it.

    Attributes:
        pod: Pod or job id.
        arrival: Arrival time (s).
        seq: Tie-breaking sequence number.
        priority: Priority (higher first under ``priority``).
        gpu_milli: Total milli-GPU requested.
        tier: SLA tier name ("" when none).
        cost: The job's ``cost_score`` (0 when not known).
    """

    __slots__ = ("arrival", "cost", "gpu_milli", "pod", "priority", "seq", "tier")

    def __init__(self, pod: int, arrival: float, seq: int, priority: int = 0, gpu_milli: int = 0, tier: str = "",
                 cost: float = 0.0) -> None:
        self.pod = pod
        self.arrival = arrival
        self.seq = seq
        self.priority = priority
        self.gpu_milli = gpu_milli
        self.tier = tier
        self.cost = cost


class QueueOrder(ABC):
    """Orders pending pods; ``key`` is called once per pod when it joins the queue.

    Args:
        shares: Guaranteed share of the slots per tier (only queue orders that reorder the whole
            queue read it; tiers not listed are guaranteed nothing).
    """

    name: ClassVar[str]

    def __init__(self, shares: Mapping[str, float] | None = None) -> None:
        self.shares = dict(shares or {})

    @abstractmethod
    def key(self, item: QueueItem) -> tuple[float, ...]:
        """Sort key of ``item`` (smaller is tried first)."""

    def order(self, items: Sequence[QueueItem]) -> list[int]:
        """The order (indices into ``items``) in which to try a whole queue: by :meth:`key`."""
        return sorted(range(len(items)), key=lambda i: self.key(items[i]))


def share_order(entry_tiers: Sequence[str], keys: Sequence[float], shares: Mapping[str, float]) -> list[int]:
    """Ascending ``keys``, with every tier holding its guaranteed share of every prefix.

    Args:
        entry_tiers: Tier name of each entry.
        keys: Sort key of each entry (smaller first); ties keep the queue order.
        shares: Guaranteed share per tier (tiers not listed: 0); they must sum to at most 1.

    Returns:
        A permutation of ``range(len(keys))``.

    >>> share_order(["gold", "bronze", "bronze"], [5.0, 1.0, 2.0], {"gold": 0.5})  # 1 of the first 2 slots
    [1, 0, 2]
    """
    n = len(keys)
    if len(entry_tiers) != n:
        raise InputError("one tier per queue entry is needed", field="tiers")
    if sum(shares.values()) > 1.0 + 1e-9:
        raise InputError(f"tier shares sum to {sum(shares.values()):.3f} > 1; no order can honour them",
                         field="min_share")
    names = sorted(set(entry_tiers))
    queues: dict[str, list[int]] = {t: [] for t in names}
    for i in sorted(range(n), key=lambda i: (keys[i], i)):
        queues[entry_tiers[i]].append(i)
    s = np.array([float(shares.get(t, 0.0)) for t in names])
    total = np.array([len(queues[t]) for t in names])
    taken = np.zeros(len(names), dtype=np.int64)
    heads = [0] * len(names)
    m = np.arange(1, n + 1)
    quota = np.minimum(np.floor(s[:, None] * m[None, :] + 1e-9).astype(np.int64), total[:, None])  # (T, n)
    order: list[int] = []
    for pos in range(1, n + 1):  # choosing slot ``pos``
        live = [j for j in range(len(names)) if heads[j] < total[j]]
        greedy = min(live, key=lambda j: (keys[queues[names[j]][heads[j]]], queues[names[j]][heads[j]]))
        after = taken.copy()
        after[greedy] += 1
        # slots pos+1..M must cover what every tier is still owed by M, for every M >= pos
        owed = np.maximum(quota[:, pos - 1:] - after[:, None], 0).sum(axis=0)
        room = m[pos - 1:] - pos
        pick = greedy
        if np.any(owed > room):
            due = [(math.ceil((taken[j] + 1) / s[j] - 1e-9), j) for j in live if s[j] > 0 and taken[j] < total[j]]
            pick = min(due)[1] if due else greedy
        order.append(queues[names[pick]][heads[pick]])
        heads[pick] += 1
        taken[pick] += 1
    return order


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


@QUEUE_ORDERS.register("cost-score", aliases=("cost",))
class CostScoreOrder(QueueOrder):
    """Lowest ``cost_score`` first (then higher priority, then first come), with every tier holding
    its guaranteed share of the slots (the whitepaper's global reordering by ``cost_score``).
    """

    name = "cost-score"

    def key(self, item: QueueItem) -> tuple[float, ...]:
        return (item.cost, -item.priority, item.arrival, item.seq)

    def order(self, items: Sequence[QueueItem]) -> list[int]:
        by_key = sorted(range(len(items)), key=lambda i: self.key(items[i]))
        keys = [float(items[i].cost) for i in by_key]  # ties keep the (priority, arrival) order
        picked = share_order([items[i].tier for i in by_key], keys, self.shares)
        return [by_key[p] for p in picked]

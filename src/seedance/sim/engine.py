"""A small discrete-event engine: a tuple heap plus arrivals streamed from a sorted source.

NOTE(seedance): events are plain tuples ``(time, seq, kind, payload)``; ``seq`` comes from a
counter owned by the engine instance, so equal times pop in scheduling order and two engines
never share anything. Arrivals are not pushed on the heap up front: they are pulled from a
time-sorted iterator when the next arrival is due, so the heap holds only in-flight events
(departures, timers). Handlers are dispatched by ``kind`` through a list, not ``if`` chains.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence

Handler = Callable[[float, int], None]


class EventLoop:
    """Clock, heap and dispatch; one instance per simulation.

    Args:
        handlers: ``handlers[kind](time, payload)`` is called for each event of that kind.
        arrival_kind: The kind given to streamed arrivals.
    """

    __slots__ = ("_handlers", "_heap", "_seq", "arrival_kind", "now", "processed", "stopped")

    def __init__(self, handlers: Sequence[Handler], *, arrival_kind: int = 0) -> None:
        self._handlers = tuple(handlers)
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        self.arrival_kind = arrival_kind
        self.now = 0.0
        self.processed = 0
        self.stopped = False

    def schedule(self, time: float, kind: int, payload: int) -> None:
        """Add an event; ``time`` must not be in the past."""
        if time < self.now:
            raise ValueError(f"event at {time} is before the clock ({self.now})")
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, kind, payload))

    def pending(self) -> int:
        """Events waiting on the heap (arrivals not yet pulled are not counted)."""
        return len(self._heap)

    def stop(self) -> None:
        """Stop after the current event."""
        self.stopped = True

    def run(self, arrivals: Iterable[tuple[float, int]] = (), *, until: float = float("inf")) -> int:
        """Process events until none are left (or ``until``, or ``stop()``); returns the count.

        Args:
            arrivals: ``(time, payload)`` pairs sorted by time; each becomes an event of
                ``arrival_kind``. At equal times, heap events scheduled earlier go first.
        """
        heap = self._heap
        handlers = self._handlers
        akind = self.arrival_kind
        pop = heapq.heappop
        it = iter(arrivals)
        nxt = next(it, None)
        count = 0
        while not self.stopped:
            if heap and (nxt is None or heap[0][0] <= nxt[0]):
                t, _, kind, payload = heap[0]
                if t > until:
                    break
                pop(heap)
            elif nxt is not None:
                t, payload = nxt
                if t > until:
                    break
                if t < self.now:
                    raise ValueError(f"arrivals are not sorted: {t} after {self.now}")
                kind = akind
                nxt = next(it, None)
            else:
                break
            self.now = t
            handlers[kind](t, payload)
            count += 1
        self.processed += count
        return count

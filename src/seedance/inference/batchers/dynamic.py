"""Dynamic batching: a maximum batch size and a maximum queue delay (Triton's dynamic batcher).

NOTE(seedance): when its replica is idle, the batcher launches as soon as ``max_batch`` requests
wait, or when the oldest has waited ``max_queue_delay_ms``; until then it sets a timer. The
batch then runs like a static one (padded, to completion, output columns reserved up front).
"""

from __future__ import annotations

from seedance.inference.batchers.base import BATCHERS, IDLE, Batcher, Plan, ReplicaView
from seedance.inference.batchers.static import padded_batch


@BATCHERS.register("dynamic", aliases=("triton",))
class DynamicBatcher(Batcher):
    """Request-level batches formed by size or delay, whichever comes first."""

    name = "dynamic"
    summary = "request-level, Triton-style: launch at max_batch (32) or after max_queue_delay_ms (100)"
    request_level = True
    default_router = "shared"
    options = {"max_batch": 32, "max_queue_delay_ms": 100.0, "max_new_tokens": 2048}

    def plan(self, view: ReplicaView) -> Plan:
        if not view.waiting:
            return IDLE
        size = int(self.opts["max_batch"])
        due = float(view.book.arrival[view.waiting[0]]) + float(self.opts["max_queue_delay_ms"]) / 1000.0
        if len(view.waiting) < size and view.now < due:
            return Plan(wake_at=due)
        return padded_batch(view, view.waiting[: size * 4], size, int(self.opts["max_new_tokens"]))

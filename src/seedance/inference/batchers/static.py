"""Static batching: a fixed batch size, padded, run to completion (the whitepaper's baseline, 16).

NOTE(seedance): when its replica is idle, the batcher takes the oldest ``batch_size`` queued
requests (fewer when fewer wait: it never holds a free replica back). The batch is one rectangular KV tensor:
every row is padded to the longest prompt, grows one column per step, and lives until the last
member finishes, so finished rows keep costing memory and compute. The batch reserves
``max_new_tokens`` output columns up front (what a static-shape engine allocates), so it never
runs out of memory; a request that cannot fit even alone is rejected.
"""

from __future__ import annotations

from collections.abc import Sequence

from seedance.inference.batchers.base import BATCHERS, IDLE, Batcher, Plan, ReplicaView


def padded_batch(view: ReplicaView, candidates: Sequence[int], max_batch: int, max_new_tokens: int) -> Plan:
    """The longest FCFS prefix of ``candidates`` (at most ``max_batch``) whose padded reservation fits.

    A candidate whose own reservation exceeds the pool is rejected.
    """
    book = view.book
    take: list[int] = []
    reject: list[int] = []
    longest = 0
    for i in candidates:
        n = book.prefill_len(i)
        if view.blocks_for(n + max_new_tokens) > view.total_blocks:
            reject.append(i)
            continue
        width = max(longest, n)
        if (len(take) + 1) * view.blocks_for(width + max_new_tokens) > view.free_blocks:
            break
        take.append(i)
        longest = width
        if len(take) >= max_batch:
            break
    return Plan(prefill=tuple((i, book.prefill_len(i)) for i in take), decode=False, reject=tuple(reject))


@BATCHERS.register("static")
class StaticBatcher(Batcher):
    """Fixed-size request-level batches (FasterTransformer / Hugging Face ``generate`` style)."""

    name = "static"
    summary = "request-level, fixed batch (16): padded to the longest prompt, runs until its last member ends"
    request_level = True
    default_router = "shared"
    options = {"batch_size": 16, "max_new_tokens": 2048}

    def plan(self, view: ReplicaView) -> Plan:
        size = int(self.opts["batch_size"])
        if not view.waiting:
            return IDLE
        return padded_batch(view, view.waiting[: size * 4], size, int(self.opts["max_new_tokens"]))

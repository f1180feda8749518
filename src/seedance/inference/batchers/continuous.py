"""Continuous (iteration-level) batching with paged KV blocks, as vLLM does.

NOTE(seedance): ``continuous`` is vLLM v0's default scheduler. At every iteration boundary,
if waiting requests fit (FCFS prefix: blocks for the whole prefill above a 1% watermark, at most
``max_num_seqs`` running, at most ``max_num_batched_tokens`` prefill tokens), the iteration
prefills them and the decodes wait; otherwise every running request decodes one token. When a
decode step needs a block and none is free, the newest request is preempted and recomputed
later. ``continuous-chunked`` is vLLM v1's / Sarathi's: every iteration decodes all running
requests and fills the rest of a ``max_num_batched_tokens`` budget with prefill chunks (first the
prefills already under way, then new requests, FCFS).
"""

from __future__ import annotations

from seedance.inference.batchers.base import BATCHERS, IDLE, Batcher, ChunkFill, Plan, ReplicaView, fcfs_fit


@BATCHERS.register("continuous", aliases=("vllm", "orca"))
class ContinuousBatcher(Batcher):
    """vLLM v0: prefill-priority iteration-level batching with recompute preemption."""

    name = "continuous"
    summary = "iteration-level, paged KV (vLLM v0): admit whenever blocks fit, prefill stalls decodes"
    options = {"max_num_seqs": 256, "max_num_batched_tokens": 4096, "watermark": 0.01}

    def plan(self, view: ReplicaView) -> Plan:
        if view.waiting:
            admit = fcfs_fit(
                view, view.waiting, max_seqs=int(self.opts["max_num_seqs"]),
                max_tokens=int(self.opts["max_num_batched_tokens"]),
                watermark_blocks=int(float(self.opts["watermark"]) * view.total_blocks),
            )
            if admit:
                return Plan(prefill=tuple((i, view.book.prefill_len(i) - view.cached_tokens(i)) for i in admit),
                            decode=False)
        return Plan()


@BATCHERS.register("continuous-chunked", aliases=("sarathi", "vllm-v1"))
class ChunkedContinuousBatcher(Batcher):
    """vLLM v1 / Sarathi: decodes every iteration, prefill chunks fill a token budget."""

    name = "continuous-chunked"
    summary = "iteration-level, paged KV, chunked prefill (vLLM v1 / Sarathi): decodes never stall"
    options = {"max_num_seqs": 256, "max_num_batched_tokens": 2048, "watermark": 0.01}

    def plan(self, view: ReplicaView) -> Plan:
        if not view.waiting and not view.prefilling:
            return IDLE  # every running request decodes, nothing to fill (what the fill below would say)
        fill = ChunkFill(view, int(self.opts["max_num_batched_tokens"]) - len(view.decoding),
                         max_seqs=int(self.opts["max_num_seqs"]),
                         watermark_blocks=int(float(self.opts["watermark"]) * view.total_blocks))
        fill.continue_prefills()
        for i in view.waiting:
            if not fill.admit(i):
                break
        return fill.plan()

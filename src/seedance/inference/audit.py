"""The engine's block audit (``audit=True``; tests): every replica's block *counts* mirrored into an
id allocator after each event, and both checked.

The engine keeps KV memory as counts (a decoder's blocks follow from its KV length; prefilling
requests hold ``held`` blocks; the prefix cache pins shared blocks once). :class:`BlockAudit`
gives every running request, and the cache (sequence ``-1``), real block ids in a
:class:`~seedance.inference.memory.BlockAllocator` per replica and checks that the ids and the
counts agree, that no block is handed out twice, that the cache's evictable blocks fit in the free
pool, and that no request holds blocks on two replicas at once (e.g. both pools of a disaggregated
deployment).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seedance.inference.memory import BlockAllocator

if TYPE_CHECKING:
    from seedance.inference.engine_core import EngineCore, Replica


class BlockAudit:
    """One id allocator per replica, kept in step with the engine's counts."""

    __slots__ = ("alloc",)

    def __init__(self, replicas: int, total_blocks: int) -> None:
        self.alloc = [BlockAllocator(total_blocks) for _ in range(replicas)]

    def free(self, replica: int, request: int) -> None:
        """``request`` gave up its blocks on ``replica``."""
        self.alloc[replica].free(int(request))

    def sync(self, sim: EngineCore, rep: Replica) -> None:
        """Mirror ``rep``'s current block counts into its id allocator: every running request owns
        its private blocks, the prefix cache (-1) its pinned ones; raises ``MemoryError`` when they
        do not fit. Shrinks go first, so a request that gave blocks to the cache frees them before
        another grows."""
        alloc = self.alloc[rep.idx]
        bs = sim.budget.block_tokens
        want: dict[int, int] = {int(i): -(-(rep.counter + int(sim.kvbase[i])) // bs) - int(sim.hit[i])
                                for i in rep.decoding}
        want.update({int(i): int(sim.held[i]) for i in (*rep.prefilling, *rep.sending)})
        if rep.cache is not None:
            want[-1] = rep.cache.pinned
        for seq in list(alloc.tables):
            if want.get(seq, 0) < len(alloc.tables[seq]):
                alloc.free(seq)
        for seq, blocks in want.items():
            alloc.ensure(seq, blocks)

    def check(self, sim: EngineCore, rep: Replica) -> None:
        """Mirror ``rep``'s block counts into its id allocator and check both."""
        total = sim.budget.total_blocks
        if sim.blocks_after(rep, 0) > total:
            raise AssertionError(f"replica {rep.idx} holds more blocks than exist")
        left = sum(int(sim.book.prefill_len(i) - sim.book.computed[i]) for i in rep.prefilling)
        if rep.pf_left != left:
            raise AssertionError(f"replica {rep.idx}: {rep.pf_left} prefill tokens left by count, {left} by request")
        if sim.request_level:
            return  # one padded tensor per batch: no blocks to mirror
        alloc = self.alloc[rep.idx]
        self.sync(sim, rep)
        counted = sim.decoder_blocks(rep, 0) + rep.held
        if rep.cache is not None:
            counted += rep.cache.pinned - rep.dec_hit
            if rep.cache.unpinned > total - counted:
                raise AssertionError(f"replica {rep.idx}: evictable cache blocks exceed the free pool")
        for other in self.alloc:  # no request owns blocks on two replicas (e.g. both pools) at once
            if other is not alloc:
                both = [q for q in alloc.tables if q >= 0 and alloc.tables[q] and other.tables.get(q)]
                if both:
                    raise AssertionError(f"requests {both} hold KV blocks on two replicas")
        if alloc.used != counted:
            raise AssertionError(f"replica {rep.idx}: {alloc.used} blocks by id, {counted} by count")
        alloc.check()

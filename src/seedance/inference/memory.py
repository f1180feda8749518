"""KV-cache memory: the per-replica budget and a paged block allocator.

The budget follows vLLM's arithmetic: ``tp * GPU memory * gpu_memory_utilization`` minus the
weights, cut into blocks of ``block_tokens`` tokens. The simulator accounts blocks by count (its
hot path); :class:`BlockAllocator` hands out real block ids, is what the real executor indexes its
paged KV tensors with, and is what the simulator mirrors into when auditing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seedance.core.catalog import CATALOG
from seedance.core.errors import InputError
from seedance.inference.model import MIB, ModelShape

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class KVBudget:
    """How much KV cache one replica holds.

    Attributes:
        total_blocks: Blocks in the replica's KV pool.
        block_tokens: Tokens per block.
        bytes_per_token: KV bytes of one token (all layers, all tensor-parallel shards).
    """

    total_blocks: int
    block_tokens: int
    bytes_per_token: int

    def __post_init__(self) -> None:
        if self.total_blocks < 1 or self.block_tokens < 1 or self.bytes_per_token < 1:
            raise InputError("the KV budget must hold at least one block", source="KV budget")

    @property
    def block_bytes(self) -> int:
        """Bytes of one block."""
        return self.block_tokens * self.bytes_per_token

    @property
    def total_mib(self) -> float:
        """Size of the pool in MiB."""
        return self.total_blocks * self.block_bytes / MIB

    def blocks_for(self, tokens: int) -> int:
        """Blocks that ``tokens`` tokens occupy."""
        return -(-tokens // self.block_tokens)

    @classmethod
    def for_replica(
        cls, shape: ModelShape, gpu: str, tp: int, *, block_tokens: int = 16,
        gpu_memory_utilization: float = 0.9, kv_budget_gib: float | None = None,
    ) -> KVBudget:
        """The KV pool of a replica of ``shape`` on ``tp`` GPUs of type ``gpu``.

        Args:
            kv_budget_gib: Use this KV pool size instead of the one derived from GPU memory.

        Raises:
            InputError: The weights do not fit, or an option is out of range.
        """
        if block_tokens < 1:
            raise InputError(f"must be >= 1, got {block_tokens}", source="--block-tokens")
        if kv_budget_gib is not None:
            if not (kv_budget_gib > 0 and math.isfinite(kv_budget_gib)):
                raise InputError(f"must be > 0, got {kv_budget_gib}", source="--kv-budget-gib")
            kv_bytes = kv_budget_gib * GIB
        else:
            if not 0 < gpu_memory_utilization <= 1:
                raise InputError(f"must be in (0, 1], got {gpu_memory_utilization}",
                                 source="--gpu-memory-utilization")
            g = CATALOG.resolve(gpu)
            kv_bytes = tp * g.memory_gib * GIB * gpu_memory_utilization - shape.weight_bytes
            if kv_bytes <= 0:
                raise InputError(
                    f"{shape.name} weights ({shape.weight_bytes / GIB:.0f} GiB) do not fit in {tp} x {g.name} "
                    f"at {gpu_memory_utilization:.0%} memory use", source="--tp",
                )
        per_block = block_tokens * shape.kv_bytes_per_token
        return cls(int(kv_bytes // per_block), block_tokens, shape.kv_bytes_per_token)


class BlockAllocator:
    """Paged KV blocks with ids: a free stack and a block table per sequence.

    A block is owned by at most one sequence at a time; freeing returns a sequence's blocks to
    the stack, where the next allocation takes them at once (elastic reuse).

    >>> a = BlockAllocator(4)
    >>> a.allocate(7, 3)
    [3, 2, 1]
    >>> a.free(7)
    3
    >>> a.allocate(8, 1)
    [1]
    """

    __slots__ = ("_free", "_top", "tables", "total")

    def __init__(self, total: int) -> None:
        if total < 0:
            raise ValueError("total must be >= 0")
        self.total = total
        self._free = np.arange(total, dtype=np.int64)
        self._top = total
        self.tables: dict[int, list[int]] = {}

    @property
    def free_count(self) -> int:
        """Blocks not owned by any sequence."""
        return self._top

    @property
    def used(self) -> int:
        """Blocks owned by sequences."""
        return self.total - self._top

    def allocate(self, seq: int, n: int) -> list[int]:
        """Append ``n`` free blocks to ``seq``'s table; raises ``MemoryError`` if too few are free."""
        if n < 0:
            raise ValueError("n must be >= 0")
        if n > self._top:
            raise MemoryError(f"need {n} KV blocks, {self._top} free")
        ids: list[int] = self._free[self._top - n:self._top][::-1].tolist()
        self._top -= n
        self.tables.setdefault(seq, []).extend(ids)
        return ids

    def ensure(self, seq: int, blocks: int) -> list[int]:
        """Grow ``seq``'s table to ``blocks`` blocks; returns the new ids."""
        have = len(self.tables.get(seq, ()))
        return self.allocate(seq, blocks - have) if blocks > have else []

    def free(self, seq: int) -> int:
        """Return every block of ``seq``; returns how many."""
        ids = self.tables.pop(seq, [])
        n = len(ids)
        if n:
            self._free[self._top:self._top + n] = ids[::-1]
            self._top += n
        return n

    def check(self) -> None:
        """Raise ``AssertionError`` unless every block is either free or owned by exactly one sequence."""
        owned = [b for t in self.tables.values() for b in t]
        free = self._free[: self._top].tolist()
        seen = owned + free
        if len(seen) != self.total or len(set(seen)) != self.total:
            raise AssertionError(
                f"block accounting broken: {len(owned)} owned + {len(free)} free, {len(set(seen))} distinct, "
                f"{self.total} total"
            )

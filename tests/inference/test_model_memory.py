"""Model shapes, KV budgets and the block allocator."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError, UnknownNameError
from seedance.inference.memory import GIB, BlockAllocator, KVBudget
from seedance.inference.model import MODELS, get_model


def test_kv_bytes_per_token_from_shape() -> None:
    # llama2-70b: 2 (K,V) * 80 layers * 8 KV heads * 128 dims * 2 bytes
    assert get_model("llama2-70b").kv_bytes_per_token == 327_680
    # llama2-7b has no GQA: 2 * 32 * 32 * 128 * 2
    assert get_model("Llama-2-7B").kv_bytes_per_token == 524_288
    assert set(MODELS.names()) == {"llama2-70b", "llama2-7b", "bloom-176b"}
    with pytest.raises(UnknownNameError, match="valid names"):
        get_model("gpt-5")


def test_replica_budget_follows_vllm_arithmetic() -> None:
    shape = get_model("llama2-70b")
    b = KVBudget.for_replica(shape, "A100-80GB", 8)
    expected = (8 * 80 * GIB * 0.9 - shape.weight_bytes) // (16 * shape.kv_bytes_per_token)
    assert b.total_blocks == int(expected)
    assert b.blocks_for(16) == 1 and b.blocks_for(17) == 2
    assert KVBudget.for_replica(shape, "A100-80GB", 8, kv_budget_gib=1.0).total_blocks == GIB // (16 * 327_680)


def test_budget_rejects_a_model_that_does_not_fit() -> None:
    with pytest.raises(InputError, match="do not fit") as e:
        KVBudget.for_replica(get_model("llama2-70b"), "A100-80GB", 1)
    assert e.value.source == "--tp"
    with pytest.raises(InputError):
        KVBudget.for_replica(get_model("llama2-7b"), "A100-80GB", 1, kv_budget_gib=-1)


def test_allocator_reuses_freed_blocks_at_once() -> None:
    a = BlockAllocator(4)
    first = a.allocate(1, 2)
    a.allocate(2, 2)
    assert a.free_count == 0
    with pytest.raises(MemoryError):
        a.allocate(3, 1)
    assert a.free(1) == 2
    assert sorted(a.allocate(3, 2)) == sorted(first)
    a.check()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6), st.booleans()), max_size=60), st.integers(1, 24))
def test_allocator_never_hands_out_a_block_twice(ops: list[tuple[int, int, bool]], total: int) -> None:
    a = BlockAllocator(total)
    for seq, n, free in ops:
        if free:
            a.free(seq)
        elif n <= a.free_count:
            a.allocate(seq, n)
        else:
            with pytest.raises(MemoryError):
                a.allocate(seq, n)
        a.check()
        owned = [b for t in a.tables.values() for b in t]
        assert len(owned) == len(set(owned)) == a.used
        assert 0 <= a.free_count <= total

"""The Triton kernel under ``TRITON_INTERPRET=1``: exact masks, fp32 to 1e-5, bf16 to 1e-2, backward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from seedance.kernels.fused import (
    FusedLinear,
    Tiles,
    backward_dz,
    fused_linear_act_dropout,
    fused_linear_relu_dropout,
    interpreting,
    reference_linear_act_dropout,
    uses_triton,
)
from seedance.kernels.philox import keep_mask, philox_uint32, threshold

SMALL = Tiles(block_m=16, block_n=16, block_k=16, num_warps=1)


def test_the_tests_run_triton_interpreted() -> None:
    assert interpreting() and uses_triton(torch.zeros(1))


def test_philox_matches_triton_randint_bit_for_bit() -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def bits(o_ptr, seed, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        r = tl.arange(0, BLOCK)
        tl.store(o_ptr + r, tl.randint(seed, r).to(tl.int64), mask=r < n)

    for seed in (0, 12345, 2**31 - 1):
        out = torch.empty(64, dtype=torch.int64)
        bits[(1,)](out, seed, 64, BLOCK=64)
        assert out.tolist() == philox_uint32(seed, np.arange(64)).astype(np.int64).tolist()
    assert philox_uint32(12345, np.arange(3)).tolist() == [3522838145, 11954473, 1814877333]


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_the_kernels_mask_is_exactly_the_references(activation: str) -> None:
    # w = 0 and b = 1 make every pre-activation 1 > 0, so the output is non-zero exactly where kept
    m, k, n, p, seed = 37, 24, 45, 0.3, 99
    x = torch.randn(m, k)
    y = fused_linear_act_dropout(x, torch.zeros(k, n), torch.ones(n), p, seed=seed, activation=activation, tiles=SMALL)
    keep = keep_mask(seed, m, n, p)
    assert np.array_equal(y.numpy() != 0, keep)
    assert abs(keep.mean() - 0.7) < 0.05
    ref = reference_linear_act_dropout(x, torch.zeros(k, n), torch.ones(n), p, seed=seed, activation=activation)
    assert torch.equal(y != 0, ref != 0)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_fp32_values_within_1e5_on_ragged_shapes_and_a_transposed_weight(activation: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(45, 40)
    w = (torch.randn(33, 40) * 0.2).t()  # K x N view of an N x K weight: read through strides
    b = torch.randn(33)
    y = fused_linear_act_dropout(x, w, b, 0.2, seed=5, activation=activation, tiles=SMALL)
    ref = reference_linear_act_dropout(x, w, b, 0.2, seed=5, activation=activation)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


def test_bf16_values_within_1e2() -> None:
    torch.manual_seed(1)
    x = torch.randn(2, 20, 48, dtype=torch.bfloat16)  # leading dims are flattened and restored
    w = torch.randn(48, 40, dtype=torch.bfloat16) * 0.2
    b = torch.randn(40, dtype=torch.bfloat16)
    y = fused_linear_relu_dropout(x, w, b, 0.1, seed=3, tiles=SMALL)
    ref = reference_linear_act_dropout(x, w, b, 0.1, seed=3)
    assert y.shape == (2, 20, 40) and y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), ref.float(), rtol=1e-2, atol=1e-2)
    assert torch.equal(y != 0, ref != 0)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_backward_matches_autograd_of_the_reference(activation: str) -> None:
    torch.manual_seed(2)
    x = torch.randn(20, 32, requires_grad=True)
    w = torch.randn(32, 24, requires_grad=True)
    b = torch.randn(24, requires_grad=True)
    y = fused_linear_act_dropout(x, w, b, 0.25, seed=11, activation=activation, tiles=SMALL)
    g = torch.randn_like(y)
    got = torch.autograd.grad((y * g).sum(), (x, w, b))
    r = reference_linear_act_dropout(x, w, b, 0.25, seed=11, activation=activation)
    want = torch.autograd.grad((r * g).sum(), (x, w, b))
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    # the backward kernel's dz is zero exactly where the forward dropped
    dz = backward_dz(x.detach(), w.detach(), b.detach(), torch.ones(20, 24), 0.25, 11, activation, SMALL)
    assert np.array_equal(dz.numpy() != 0, keep_mask(11, 20, 24, 0.25) & (dz.numpy() != 0))
    assert not (dz.numpy()[~keep_mask(11, 20, 24, 0.25)]).any()


def test_fused_linear_swapped_into_bert_changes_nothing() -> None:
    from seedance.kernels.models.bert import BertConfig, BertModel, fuse_bert_ffn, random_inputs

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden=32, layers=2, heads=2, intermediate=64, max_positions=16)
    model = BertModel(cfg).eval()
    ids = random_inputs(2, 8, cfg)
    with torch.no_grad():
        before, _ = model(ids)
        fuse_bert_ffn(model, tiles=SMALL)
        after, _ = model(ids)
    assert all(isinstance(layer.intermediate, FusedLinear) for layer in model.layers)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)


def test_fused_linear_draws_a_new_reproducible_mask_per_training_step() -> None:
    lin = FusedLinear(8, 16, activation="relu", p=0.5, seed=7, tiles=SMALL)
    torch.nn.init.zeros_(lin.weight)
    torch.nn.init.ones_(lin.bias)
    x = torch.randn(4, 8)
    first, second = lin(x), lin(x)
    assert not torch.equal(first != 0, second != 0)
    assert np.array_equal(first.detach().numpy() != 0, keep_mask(7, 4, 16, 0.5))
    assert np.array_equal(second.detach().numpy() != 0, keep_mask(8, 4, 16, 0.5))
    lin.eval()
    assert torch.equal(lin(x), torch.ones(4, 16))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: Tiles(block_m=24), "power of two"),
    (lambda: threshold(1.0), "dropout probability"),
    (lambda: fused_linear_act_dropout(torch.ones(2, 3), torch.ones(4, 2), torch.ones(2)), "do not chain"),
    (lambda: fused_linear_act_dropout(torch.ones(2, 3), torch.ones(3, 2), torch.ones(2), activation="tanh"),
     "unknown activation"),
    (lambda: fused_linear_act_dropout(torch.ones(2, 3), torch.ones(3, 2), torch.ones(2), 0.1, seed=-1), "seed"),
])
def test_bad_arguments_are_refused(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]

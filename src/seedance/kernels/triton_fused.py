# mypy: disable-error-code="untyped-decorator,no-untyped-def"
"""Triton kernels of the fused linear + activation + dropout (importing this module imports triton).

``_fused_fwd`` computes one ``BLOCK_M x BLOCK_N`` tile of ``dropout(act(x @ w + b))``: the product
accumulates in fp32 over ``BLOCK_K`` slices of ``K`` held in registers / shared memory, and the
bias, the activation and the dropout are applied to the accumulator before the one store, so the
pre-activation and the mask never reach global memory (one launch instead of GEMM + bias/act +
dropout). ``_fused_bwd`` recomputes the same tile's pre-activation ``z`` (activation
recomputation) and writes ``dz = grad_out * keep / (1 - p) * act'(z)``; the mask comes from the same
counter-based generator, so nothing but the inputs is kept between forward and backward.

Dropout bits are ``tl.randint(seed, i * N + j)`` (Philox-4x32-10), compared as integers with
``threshold(p)``; :mod:`seedance.kernels.philox` reproduces them bit for bit on the host.

``DOT_F32`` upcasts 16-bit tiles to fp32 before ``tl.dot``: Triton's CPU interpreter (used by the
tests) multiplies bf16 tiles wrongly, so the host sets it when running interpreted; on a GPU 16-bit
tiles go to the tensor cores with fp32 accumulation. ``IEEE`` asks for exact fp32 products (no
TF32) when the inputs are fp32.
"""

from __future__ import annotations

import triton
import triton.language as tl

ACT_RELU = 0
ACT_GELU = 1


@triton.jit
def _tile_z(x_ptr, w_ptr, b_ptr, rm, rn, M, N, K, stride_xm, stride_xk, stride_wk, stride_wn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
            DOT_F32: tl.constexpr, IEEE: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(w_ptr + rk[:, None] * stride_wk + rn[None, :] * stride_wn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if DOT_F32:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        if IEEE:
            acc += tl.dot(a, b, input_precision="ieee")
        else:
            acc += tl.dot(a, b)
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    return acc + bias[None, :]


@triton.jit
def _keep(seed, rm, rn, N, thr, HAS_DROPOUT: tl.constexpr):
    if HAS_DROPOUT:
        bits = tl.randint(seed, rm[:, None] * N + rn[None, :])
        keep = bits.to(tl.int64) >= thr
    else:
        keep = (rm[:, None] >= 0) & (rn[None, :] >= 0)
    return keep


@triton.jit
def _fused_fwd(x_ptr, w_ptr, b_ptr, o_ptr, stride_xm, stride_xk, stride_wk, stride_wn, stride_om, stride_on,
               M, N, K, seed, thr, scale,
               ACT: tl.constexpr, HAS_DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, DOT_F32: tl.constexpr, IEEE: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    z = _tile_z(x_ptr, w_ptr, b_ptr, rm, rn, M, N, K, stride_xm, stride_xk, stride_wk, stride_wn,
                BLOCK_M, BLOCK_N, BLOCK_K, DOT_F32, IEEE)
    if ACT == 0:
        y = tl.maximum(z, 0.0)
    else:
        y = 0.5 * z * (1.0 + tl.erf(z * 0.7071067811865476))
    if HAS_DROPOUT:
        keep = _keep(seed, rm, rn, N, thr, HAS_DROPOUT)
        y = tl.where(keep, y * scale, 0.0)
    tl.store(o_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, y.to(o_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _fused_bwd(x_ptr, w_ptr, b_ptr, g_ptr, dz_ptr, stride_xm, stride_xk, stride_wk, stride_wn, stride_gm, stride_gn,
               M, N, K, seed, thr, scale,
               ACT: tl.constexpr, HAS_DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, DOT_F32: tl.constexpr, IEEE: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = (rm[:, None] < M) & (rn[None, :] < N)
    z = _tile_z(x_ptr, w_ptr, b_ptr, rm, rn, M, N, K, stride_xm, stride_xk, stride_wk, stride_wn,
                BLOCK_M, BLOCK_N, BLOCK_K, DOT_F32, IEEE)
    g = tl.load(g_ptr + rm[:, None] * stride_gm + rn[None, :] * stride_gn, mask=inside, other=0.0).to(tl.float32)
    if ACT == 0:
        d = tl.where(z > 0.0, 1.0, 0.0)
    else:
        cdf = 0.5 * (1.0 + tl.erf(z * 0.7071067811865476))
        d = cdf + z * 0.3989422804014327 * tl.exp(-0.5 * z * z)
    dz = g * d
    if HAS_DROPOUT:
        keep = _keep(seed, rm, rn, N, thr, HAS_DROPOUT)
        dz = tl.where(keep, dz * scale, 0.0)
    tl.store(dz_ptr + rm[:, None] * N + rn[None, :], dz.to(dz_ptr.dtype.element_ty), mask=inside)

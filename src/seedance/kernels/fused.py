"""``fused_linear_relu_dropout``: linear + activation + dropout in one kernel, with its reference.

The whitepaper's fused operator (§2.4) computes ``dropout(relu(x @ w + b), p)`` in one launch:
the product tile stays in registers while the bias, the activation and the dropout are applied, so
neither the pre-activation nor the mask is written to memory. Here it is a Triton kernel
(:mod:`seedance.kernels.triton_fused`, tiled by ``BLOCK_M`` / ``BLOCK_N`` / ``BLOCK_K``) with a
backward, plus a PyTorch reference that produces the same mask bit for bit.

* ``activation`` is ``"relu"`` (the whitepaper's) or ``"gelu"`` (exact erf form, BERT's), so the
  kernel can replace BERT's feed-forward up-projection without changing the model.
* Dropout is counter-based (:mod:`seedance.kernels.philox`): the mask is a function of ``seed``
  and the element index, reproducible, and never stored. The backward recomputes the tile's
  pre-activation and its mask instead of saving them, keeping only ``x``, ``w`` and ``b`` (which a
  plain linear layer keeps anyway).
* Dispatch: CUDA tensors (or any tensor while ``TRITON_INTERPRET=1``, Triton's CPU interpreter,
  used by the tests) run the Triton kernels; other CPU tensors run the PyTorch path, which is the
  reference itself (Triton has no CPU code generator).

``w`` is ``K x N`` (the whitepaper's ``stride_wk, stride_wn``); an ``nn.Linear`` weight is
``N x K``, so pass ``linear.weight.t()``: the kernel reads through the strides, no copy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from seedance.kernels.philox import check_seed, keep_mask, threshold

ACTIVATIONS = ("relu", "gelu")


@dataclass(frozen=True, slots=True)
class Tiles:
    """Tile sizes of the Triton kernels (powers of two, ``>= 16`` as ``tl.dot`` needs).

    ``BLOCK_M`` / ``BLOCK_N`` set the output tile each program computes (and so the register and
    shared-memory footprint and the occupancy); ``BLOCK_K`` the slice of the reduction loaded per
    step.
    """

    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "block_k"):
            v = getattr(self, name)
            if v < 16 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two >= 16, got {v}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"num_warps must be 1, 2, 4, 8 or 16, got {self.num_warps}")


def interpreting() -> bool:
    """Whether Triton runs on its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


def uses_triton(x: Tensor) -> bool:
    """Whether :func:`fused_linear_act_dropout` runs the Triton kernels for ``x``."""
    return bool(x.is_cuda) or interpreting()


def _check(x: Tensor, w: Tensor, b: Tensor, p: float, activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
    if w.dim() != 2 or b.dim() != 1:
        raise ValueError(f"w must be K x N and b of length N, got {tuple(w.shape)} and {tuple(b.shape)}")
    if x.shape[-1] != w.shape[0] or b.shape[0] != w.shape[1]:
        raise ValueError(f"shapes do not chain: x {tuple(x.shape)}, w {tuple(w.shape)}, b {tuple(b.shape)}")
    threshold(p)


def _activate(z: Tensor, activation: str) -> Tensor:
    return torch.relu(z) if activation == "relu" else torch.nn.functional.gelu(z)


def reference_linear_act_dropout(x: Tensor, w: Tensor, b: Tensor, p: float = 0.0, *, seed: int = 0,
                                 activation: str = "relu") -> Tensor:
    """``dropout(act(x @ w + b))`` in PyTorch ops, accumulated in fp32, same mask as the kernel.

    The result has ``x``'s dtype (fp32 accumulation, one rounding at the end, as the kernel does).
    """
    _check(x, w, b, p, activation)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    z = torch.addmm(b.float(), x2.float(), w.float())
    y = _activate(z, activation)
    if p > 0.0:
        keep = torch.from_numpy(keep_mask(check_seed(seed), z.shape[0], z.shape[1], p)).to(z.device)
        y = torch.where(keep, y * (1.0 / (1.0 - p)), torch.zeros((), dtype=y.dtype, device=y.device))
    return y.to(x.dtype).reshape(*lead, w.shape[1])


def _launch(kernel: Any, x: Tensor, w: Tensor, b: Tensor, extra: Tensor | None, out: Tensor, p: float, seed: int,
            activation: str, tiles: Tiles) -> None:
    from seedance.kernels import triton_fused as tk

    m, k = x.shape
    n = w.shape[1]
    grid = (-(-m // tiles.block_m), -(-n // tiles.block_n))
    thr = threshold(p)
    fp32 = x.dtype == torch.float32
    ptrs: tuple[Tensor, ...] = (x, w, b, out) if extra is None else (x, w, b, extra, out)
    strides = (x.stride(0), x.stride(1), w.stride(0), w.stride(1),
               *(out.stride() if extra is None else extra.stride()))
    kernel[grid](*ptrs, *strides, m, n, k, check_seed(seed), thr, 1.0 / (1.0 - p),
                 ACT=tk.ACT_RELU if activation == "relu" else tk.ACT_GELU, HAS_DROPOUT=thr > 0,
                 BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_K=tiles.block_k,
                 DOT_F32=interpreting() and not fp32, IEEE=fp32, num_warps=tiles.num_warps)


def _forward_triton(x: Tensor, w: Tensor, b: Tensor, p: float, seed: int, activation: str, tiles: Tiles) -> Tensor:
    from seedance.kernels import triton_fused as tk

    out = torch.empty((x.shape[0], w.shape[1]), dtype=x.dtype, device=x.device)
    _launch(tk._fused_fwd, x, w, b, None, out, p, seed, activation, tiles)
    return out


def backward_dz(x: Tensor, w: Tensor, b: Tensor, grad_out: Tensor, p: float, seed: int, activation: str,
                tiles: Tiles = Tiles()) -> Tensor:
    """``d loss / d z`` of the fused op from the Triton backward kernel (``z = x @ w + b`` recomputed)."""
    from seedance.kernels import triton_fused as tk

    dz = torch.empty((x.shape[0], w.shape[1]), dtype=x.dtype, device=x.device)
    _launch(tk._fused_bwd, x, w, b, grad_out, dz, p, seed, activation, tiles)
    return dz


class _FusedFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, b: Tensor, p: float, seed: int, activation: str,
                tiles: Tiles) -> Tensor:
        ctx.save_for_backward(x, w, b)
        ctx.args = (p, seed, activation, tiles)
        return _forward_triton(x, w, b, p, seed, activation, tiles)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        x, w, b = ctx.saved_tensors
        p, seed, activation, tiles = ctx.args
        dz = backward_dz(x, w, b, grad_out.contiguous(), p, seed, activation, tiles)
        gx = dz @ w.t() if ctx.needs_input_grad[0] else None
        gw = x.t() @ dz if ctx.needs_input_grad[1] else None
        gb = dz.float().sum(0).to(b.dtype) if ctx.needs_input_grad[2] else None
        return gx, gw, gb, None, None, None, None


def fused_linear_act_dropout(x: Tensor, w: Tensor, b: Tensor, p: float = 0.0, *, seed: int = 0,
                             activation: str = "relu", tiles: Tiles = Tiles()) -> Tensor:
    """``dropout(act(x @ w + b), p)`` fused; ``x`` is ``(..., K)``, ``w`` ``K x N``, ``b`` ``N``.

    Differentiable (the Triton path through its own backward kernel). ``p = 0`` (inference) skips
    the generator entirely.
    """
    _check(x, w, b, p, activation)
    if not uses_triton(x):
        return reference_linear_act_dropout(x, w, b, p, seed=seed, activation=activation)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    out = _FusedFn.apply(x2, w, b, float(p), check_seed(seed), activation, tiles)  # type: ignore[no-untyped-call]
    return out.reshape(*lead, w.shape[1])  # type: ignore[no-any-return]


def fused_linear_relu_dropout(x: Tensor, w: Tensor, b: Tensor, p: float = 0.0, *, seed: int = 0,
                              tiles: Tiles = Tiles()) -> Tensor:
    """The whitepaper's operator: ``dropout(relu(x @ w + b), p)`` in one kernel."""
    return fused_linear_act_dropout(x, w, b, p, seed=seed, activation="relu", tiles=tiles)


class FusedLinear(torch.nn.Module):
    """An ``nn.Linear`` followed by an activation and dropout, run as the fused operator.

    Holds ``weight`` as ``out x in`` like ``nn.Linear`` (so a state dict loads unchanged). In
    training each call draws a fresh seed from the module's own counter (``seed + calls``), so
    masks differ between steps and are still reproducible from the initial seed.
    """

    def __init__(self, in_features: int, out_features: int, *, activation: str = "relu", p: float = 0.0,
                 seed: int = 0, tiles: Tiles = Tiles()) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
        threshold(p)
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.bias = torch.nn.Parameter(torch.zeros(out_features))
        torch.nn.init.kaiming_uniform_(self.weight, a=5**0.5)
        self.activation = activation
        self.p = float(p)
        self.seed = check_seed(seed)
        self.tiles = tiles
        self.calls = 0

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, *, activation: str, p: float = 0.0, seed: int = 0,
                    tiles: Tiles = Tiles()) -> FusedLinear:
        """Wrap an existing linear layer's parameters (shared, not copied)."""
        m = cls(linear.in_features, linear.out_features, activation=activation, p=p, seed=seed, tiles=tiles)
        m.weight = linear.weight  # type: ignore[assignment]  # shared, not copied
        if linear.bias is None:
            m.bias = torch.nn.Parameter(torch.zeros(linear.out_features, dtype=linear.weight.dtype,
                                                    device=linear.weight.device), requires_grad=False)
        else:
            m.bias = linear.bias
        return m

    def forward(self, x: Tensor) -> Tensor:
        p = self.p if self.training else 0.0
        seed = (self.seed + self.calls) % 2**31
        if self.training:
            self.calls += 1
        if p == 0.0 and not uses_triton(x):  # inference on the CPU: one GEMM, activation in place
            z = torch.nn.functional.linear(x, self.weight, self.bias)
            return torch.relu_(z) if self.activation == "relu" else torch.ops.aten.gelu_(z)
        return fused_linear_act_dropout(x, self.weight.t(), self.bias, p, seed=seed, activation=self.activation,
                                        tiles=self.tiles)

    def extra_repr(self) -> str:
        return (f"in_features={self.weight.shape[1]}, out_features={self.weight.shape[0]}, "
                f"activation={self.activation}, p={self.p}")

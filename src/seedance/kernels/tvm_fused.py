"""Optional TVM path: the fused linear + bias + activation compiled by TVM for the CPU (inference).

``apache-tvm`` (PyPI, 0.27) installs on this machine and its LLVM back end runs here, so unlike the
Triton kernel (which needs a GPU) this one really executes fused on the CPU. The operator is
written in TVM's tensor expressions (``Z = X @ W``, ``Y = act(Z + b)``) and scheduled by hand with
``tvm.s_tir``: ``BLOCK_M x BLOCK_N`` output tiles in parallel over the cores, the reduction split in
``k``-steps of 4, the inner ``n`` loop vectorised, and the bias + activation computed *inside* the
tile loop (``reverse_compute_at``), so the pre-activation tile never leaves the cache: the same
fusion as the Triton kernel, for another back end.

Scope: inference (no dropout; the counter-based mask lives in the Triton kernel); fp32. Kernels are
compiled per ``(M, K, N, activation)`` and kept by the :class:`TvmFusedLinear` instance that built
them. The LLVM CPU is picked from the host's instruction set (AVX-512 -> ``skylake-avx512``, AVX2 ->
``haswell``, else generic).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seedance.kernels.fused import ACTIVATIONS


def available() -> bool:
    """Whether ``import tvm`` works here."""
    try:
        import tvm  # noqa: F401
    except ImportError:
        return False
    return True


def host_mcpu(cpuinfo: str | None = None) -> str:
    """The LLVM ``mcpu`` for this host's vector extensions."""
    text = cpuinfo
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
            break
    if "avx512f" in flags:
        return "skylake-avx512"
    if "avx2" in flags:
        return "haswell"
    return "generic"


def build(m: int, k: int, n: int, activation: str = "relu", *, block_m: int = 32, block_n: int = 64,
          mcpu: str | None = None) -> Any:
    """Compile ``act(X[m,k] @ W[k,n] + b[n])`` for the CPU; returns the TVM module (``main(X, W, b, Y)``)."""
    import tvm
    from tvm import s_tir, te

    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
    x = te.placeholder((m, k), "float32", name="X")
    w = te.placeholder((k, n), "float32", name="W")
    b = te.placeholder((n,), "float32", name="B")
    r = te.reduce_axis((0, k), "k")
    z = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[r, j], axis=r), name="Z")
    if activation == "relu":
        y = te.compute((m, n), lambda i, j: te.max(z[i, j] + b[j], te.const(0.0, "float32")), name="Y")
    else:
        def gelu(i: Any, j: Any) -> Any:
            v = z[i, j] + b[j]
            return te.const(0.5, "float32") * v * (te.const(1.0, "float32")
                                                    + te.erf(v * te.const(0.7071067811865476, "float32")))
        y = te.compute((m, n), gelu, name="Y")
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([x, w, b, y])}))
    zb, yb = sch.get_sblock("Z"), sch.get_sblock("Y")
    i, j, kk = sch.get_loops(zb)
    i0, i1 = sch.split(i, [None, min(block_m, m)])
    j0, j1 = sch.split(j, [None, min(block_n, n)])
    k0, k1 = sch.split(kk, [None, 4 if k % 4 == 0 else 1])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    sch.reverse_compute_at(yb, j0)
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j1)
    sch.vectorize(sch.get_loops(yb)[-1])
    sch.decompose_reduction(zb, k0)
    return tvm.compile(sch.mod, target={"kind": "llvm", "mcpu": mcpu or host_mcpu()})


class TvmFusedLinear:
    """Runs the TVM kernel on torch (or numpy) fp32 arrays; compiles once per shape."""

    def __init__(self, activation: str = "relu", *, block_m: int = 32, block_n: int = 64) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
        self.activation = activation
        self.block_m = block_m
        self.block_n = block_n
        self._kernels: dict[tuple[int, int, int], Any] = {}

    def kernel(self, m: int, k: int, n: int) -> Any:
        """The compiled kernel of one shape (built on first use)."""
        lib = self._kernels.get((m, k, n))
        if lib is None:
            lib = build(m, k, n, self.activation, block_m=self.block_m, block_n=self.block_n)
            self._kernels[(m, k, n)] = lib
        return lib

    def __call__(self, x: Any, w: Any, b: Any) -> Any:
        """``act(x @ w + b)`` for torch fp32 CPU tensors ``x`` ``M x K``, ``w`` ``K x N``, ``b`` ``N``.

        Inputs and the output cross to TVM by DLPack (no copies); ``w`` may be a transposed view
        (it is made contiguous once per call: pass a contiguous ``K x N`` weight to avoid that).
        """
        import torch
        import tvm

        xc, wc, bc = (t.detach().float().contiguous() for t in (x, w, b))
        m, k = xc.shape
        n = wc.shape[1]
        out = torch.empty((m, n), dtype=torch.float32)
        self.kernel(m, k, n)["main"](*(tvm.runtime.from_dlpack(t) for t in (xc, wc, bc, out)))
        return out


def tvm_linear_module(linear: Any, activation: str) -> Any:
    """An ``nn.Module`` computing ``act(linear(x))`` with the TVM kernel (its weight moved to ``K x N``)."""
    import torch

    class TvmLinearAct(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight_kn = torch.nn.Parameter(linear.weight.detach().t().contiguous(), requires_grad=False)
            bias = linear.bias if linear.bias is not None else torch.zeros(linear.out_features)
            self.bias = torch.nn.Parameter(bias.detach().clone(), requires_grad=False)
            self.op = TvmFusedLinear(activation)

        def forward(self, x: Any) -> Any:
            lead = x.shape[:-1]
            y = self.op(x.reshape(-1, x.shape[-1]), self.weight_kn, self.bias)
            return y.reshape(*lead, y.shape[-1])

    return TvmLinearAct()

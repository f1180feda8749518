"""The optional TVM path (``apache-tvm`` installs here): the CPU fused kernel equals the reference."""

from __future__ import annotations

import pytest
import torch

from seedance.kernels.fused import reference_linear_act_dropout
from seedance.kernels.tvm_fused import TvmFusedLinear, available, host_mcpu, tvm_linear_module


def test_tvm_is_installed() -> None:
    assert available()


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_tvm_fused_kernel_matches_the_reference_on_ragged_shapes(activation: str) -> None:
    torch.manual_seed(0)
    x, w, b = torch.randn(70, 36), torch.randn(36, 90) * 0.2, torch.randn(90)
    op = TvmFusedLinear(activation)
    y = op(x, w, b)
    torch.testing.assert_close(y, reference_linear_act_dropout(x, w, b, activation=activation), rtol=1e-5,
                               atol=1e-5)
    op(x, w, b)
    assert list(op._kernels) == [(70, 36, 90)]  # compiled once per shape


def test_tvm_module_replaces_a_linear_and_gelu() -> None:
    torch.manual_seed(1)
    lin = torch.nn.Linear(16, 40)
    mod = tvm_linear_module(lin, "gelu")
    x = torch.randn(3, 5, 16)
    with torch.no_grad():
        torch.testing.assert_close(mod(x), torch.nn.functional.gelu(lin(x)), rtol=1e-5, atol=1e-5)


def test_llvm_cpu_follows_the_host_vector_extensions() -> None:
    assert host_mcpu("flags\t: fpu sse2 avx2 avx512f\n") == "skylake-avx512"
    assert host_mcpu("flags\t: fpu sse2 avx2\n") == "haswell"
    assert host_mcpu("flags\t: fpu sse2\n") == "generic"

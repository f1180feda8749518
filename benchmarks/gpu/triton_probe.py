"""A Triton kernel that reads a window of words at any offset from a tensor's start, unmasked by its size.

``read_window(t, offset, n)`` copies ``n`` int32 words starting ``offset`` words after ``t``'s
first element into a new tensor; nothing stops the window from running past ``t``'s end, which is
the point: on a GPU it shows whether a kernel can read a neighbouring allocation (see
``isolation_probe.py``). On the CPU, Triton's interpreter (``TRITON_INTERPRET=1``) runs the same
kernel, which is how the tests check it (inside one buffer: the interpreter reads host memory).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

CANARY = 0x5EEDA1CE  # cuda_probe.CANARY; below 2**31, so the same value as an int32


@triton.jit
def _copy_window(src, dst, offset, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    idx = pid * BLOCK + tl.arange(0, BLOCK)
    keep = idx < n  # bounds the *window*, not the source tensor
    tl.store(dst + idx, tl.load(src + offset + idx, mask=keep, other=0), mask=keep)


def read_window(t: Any, offset: int, n: int, *, block: int = 256) -> Any:
    """``n`` int32 words of memory starting ``offset`` words after ``t[0]`` (``t`` an int32 tensor)."""
    import torch

    out = torch.empty(n, dtype=torch.int32, device=t.device)
    _copy_window[(triton.cdiv(n, block),)](t, out, offset, n, BLOCK=block)
    return out


def canary_count(words: Any) -> int:
    """Words equal to the canary."""
    return int((words == CANARY).sum().item())

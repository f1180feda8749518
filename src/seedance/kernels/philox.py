"""Counter-based dropout masks: Philox-4x32-10, bit for bit the generator of Triton's ``tl.randint``.

A counter-based generator maps ``(seed, counter)`` to random bits with no state carried between
calls, so the dropout mask of an element is a pure function of the seed and the element's index:
the forward kernel, the backward kernel and this reference all derive the same mask without ever
storing it (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; Triton's
``triton.language.random``).

Element ``(i, j)`` of an ``M x N`` output uses counter ``i * N + j`` (as ``uint32``; outputs must
have fewer than 2**31 elements) and the seed's low and high 32 bits as the two key words. It is
kept when its 32 random bits are ``>= threshold(p)``, with ``threshold(p) = floor(p * 2**32)``: an
integer comparison, so the kernel and the reference agree exactly, and the keep probability is
``1 - p`` to within 2**-32.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

PHILOX_ROUND_A = 0xD2511F53
PHILOX_ROUND_B = 0xCD9E8D57
PHILOX_KEY_A = 0x9E3779B9
PHILOX_KEY_B = 0xBB67AE85
N_ROUNDS = 10
MAX_SEED = 2**31 - 1
MAX_ELEMENTS = 2**31 - 1
_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def check_seed(seed: int) -> int:
    """``seed`` as a kernel argument (``0 <= seed <= 2**31 - 1``)."""
    s = int(seed)
    if not 0 <= s <= MAX_SEED:
        raise ValueError(f"seed must be in [0, {MAX_SEED}], got {seed}")
    return s


def threshold(p: float) -> int:
    """The 32-bit threshold below which an element is dropped: ``floor(p * 2**32)``."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    return min(int(p * 2.0**32), 2**32 - 1)


def philox_uint32(seed: int, counters: NDArray[np.integer]) -> NDArray[np.uint32]:
    """First 32-bit output word of Philox-4x32-10 for each counter (``tl.randint(seed, counters)``).

    >>> philox_uint32(12345, np.arange(3)).tolist()
    [3522838145, 11954473, 1814877333]
    """
    s = check_seed(seed)
    c0 = np.asarray(counters).astype(np.uint64) & _M32
    c1 = np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0 = np.uint64(s & 0xFFFFFFFF)
    k1 = np.uint64((s >> 32) & 0xFFFFFFFF)
    a, b = np.uint64(PHILOX_ROUND_A), np.uint64(PHILOX_ROUND_B)
    for _ in range(N_ROUNDS):
        p0, p2 = a * c0, b * c2  # exact: both factors < 2**32, so the product fits in 64 bits
        c0, c1, c2, c3 = (p2 >> _S32) ^ c1 ^ k0, p2 & _M32, (p0 >> _S32) ^ c3 ^ k1, p0 & _M32
        k0 = (k0 + np.uint64(PHILOX_KEY_A)) & _M32
        k1 = (k1 + np.uint64(PHILOX_KEY_B)) & _M32
    return c0.astype(np.uint32)


def keep_mask(seed: int, rows: int, cols: int, p: float) -> NDArray[np.bool_]:
    """The ``rows x cols`` keep mask of dropout probability ``p`` under ``seed``."""
    if rows * cols > MAX_ELEMENTS:
        raise ValueError(f"dropout masks are defined for fewer than 2**31 elements, got {rows} x {cols}")
    thr = threshold(p)
    if thr == 0:
        return np.ones((rows, cols), dtype=np.bool_)
    bits = philox_uint32(seed, np.arange(rows * cols, dtype=np.uint64)).reshape(rows, cols)
    return bits >= np.uint32(thr)

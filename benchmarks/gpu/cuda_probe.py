"""Isolation probes on the CUDA driver API (``libcuda.so.1`` via ctypes; a PTX kernel JIT-compiled by the driver).

Needs only an NVIDIA driver: no CUDA toolkit, no PyTorch. One process = one CUDA context on the
device ``CUDA_VISIBLE_DEVICES`` selects (a GPU, or a MIG device by its ``MIG-…`` UUID). Commands,
each printing one JSON line:

* ``oob`` — allocate two buffers, fill the second with a canary, then a kernel reads from the
  start of the first one past its end up to the end of the second: can a kernel read outside its
  allocation into another allocation *of the same context*? (Expected yes: one address space; this
  is what compute-sanitizer reports, not what the hardware stops.)
* ``hold`` — allocate a buffer, fill it with the canary, print its device address, wait for a line
  on stdin, then exit (the peer process probes that address meanwhile).
* ``read-foreign ADDR BYTES`` — from this (other) context, copy and kernel-read ``ADDR``: is a second
  context's memory reachable by address? (Isolation holds if the copy is refused, the kernel faults,
  or no canary word comes back.)
* ``fill-exit BYTES`` — fill a buffer with the canary and exit without freeing it.
* ``residual BYTES`` — allocate without initialising and count canary words: did the driver scrub
  memory another context left behind?
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

CANARY = 0x5EEDA1CE
_WORD = 4

PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry copy_words(
    .param .u64 src,
    .param .u64 dst,
    .param .u64 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    ld.param.u64 %rd3, [n];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    cvt.u64.u32 %rd4, %r4;
    setp.ge.u64 %p1, %rd4, %rd3;
    @%p1 bra DONE;
    shl.b64 %rd5, %rd4, 2;
    add.s64 %rd6, %rd1, %rd5;
    add.s64 %rd7, %rd2, %rd5;
    ld.global.u32 %r5, [%rd6];
    st.global.u32 [%rd7], %r5;
DONE:
    ret;
}
"""


class CudaError(RuntimeError):
    """A CUDA driver call failed; ``name`` is the driver's error name (``CUDA_ERROR_ILLEGAL_ADDRESS``)."""

    def __init__(self, call: str, code: int, name: str) -> None:
        self.call, self.code, self.name = call, code, name
        super().__init__(f"{call}: {name} ({code})")


class Driver:
    """The few driver entry points the probes use, on the current process's primary context."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise RuntimeError(f"no NVIDIA driver library: {exc}") from exc
        self._check("cuInit", self.lib.cuInit(0))
        dev = ctypes.c_int()
        self._check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(dev), 0))
        self.ctx = ctypes.c_void_p()
        self._check("cuDevicePrimaryCtxRetain", self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev))
        self._check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(self.ctx))
        name = ctypes.create_string_buffer(256)
        self.lib.cuDeviceGetName(name, 256, dev)
        self.device = name.value.decode(errors="replace")
        self._module: ctypes.c_void_p | None = None

    def _name(self, code: int) -> str:
        ptr = ctypes.c_char_p()
        self.lib.cuGetErrorName(code, ctypes.byref(ptr))
        return ptr.value.decode() if ptr.value else f"error {code}"

    def _check(self, call: str, code: int) -> None:
        if code != 0:
            raise CudaError(call, code, self._name(code))

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self._check("cuMemAlloc", self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)))
        return ptr.value

    def fill(self, ptr: int, value: int, nbytes: int) -> None:
        self._check(
            "cuMemsetD32",
            self.lib.cuMemsetD32_v2(ctypes.c_uint64(ptr), ctypes.c_uint(value), ctypes.c_size_t(nbytes // _WORD)),
        )

    def read(self, ptr: int, nbytes: int) -> bytes:
        buf = ctypes.create_string_buffer(nbytes)
        self._check("cuMemcpyDtoH", self.lib.cuMemcpyDtoH_v2(buf, ctypes.c_uint64(ptr), ctypes.c_size_t(nbytes)))
        return buf.raw

    def sync(self) -> None:
        self._check("cuCtxSynchronize", self.lib.cuCtxSynchronize())

    def copy_words(self, src: int, dst: int, n: int) -> None:
        """Kernel: ``dst[i] = src[i]`` for ``i < n`` (32-bit words), raw addresses."""
        if self._module is None:
            mod = ctypes.c_void_p()
            self._check("cuModuleLoadData", self.lib.cuModuleLoadData(ctypes.byref(mod), PTX.encode() + b"\0"))
            self._module = mod
        fn = ctypes.c_void_p()
        self._check("cuModuleGetFunction", self.lib.cuModuleGetFunction(ctypes.byref(fn), self._module, b"copy_words"))
        args = [ctypes.c_uint64(src), ctypes.c_uint64(dst), ctypes.c_uint64(n)]
        params = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        block = 256
        grid = max(1, (n + block - 1) // block)
        self._check("cuLaunchKernel", self.lib.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, None, params, None))
        self.sync()


def canary_words(raw: bytes) -> int:
    """How many 32-bit words of ``raw`` hold the canary."""
    target = CANARY.to_bytes(_WORD, "little")
    return sum(1 for i in range(0, len(raw) - _WORD + 1, _WORD) if raw[i : i + _WORD] == target)


def probe_oob(d: Driver, nbytes: int = 1 << 16) -> dict[str, Any]:
    x, y = d.alloc(nbytes), d.alloc(nbytes)
    lower, upper = min(x, y), max(x, y)
    d.fill(lower, 0, nbytes)
    d.fill(upper, CANARY, nbytes)
    span = upper + nbytes - lower
    if span > 64 << 20:
        return {"probe": "oob", "status": "skipped", "detail": f"allocations {span} bytes apart"}
    out = d.alloc(span)
    words = span // _WORD
    try:
        d.copy_words(lower, out, words)  # from the lower buffer's start, past its end, to the upper one's end
    except CudaError as exc:
        return {"probe": "oob", "status": "ok", "read_past_end": "faulted", "error": exc.name, "device": d.device}
    seen = canary_words(d.read(out, words * _WORD))
    return {
        "probe": "oob",
        "status": "ok",
        "device": d.device,
        "gap_bytes": upper - lower - nbytes,
        "read_past_end": "succeeded",
        "neighbour_canary_words_seen": seen,
        "neighbour_words": nbytes // _WORD,
        "isolated_within_context": seen == 0,
    }


def probe_read_foreign(d: Driver, addr: int, nbytes: int) -> dict[str, Any]:
    result: dict[str, Any] = {"probe": "read-foreign", "status": "ok", "device": d.device, "address": addr}
    try:
        raw = d.read(addr, nbytes)
        result["copy"] = "succeeded"
        result["copy_canary_words"] = canary_words(raw)
    except CudaError as exc:
        result["copy"] = f"refused: {exc.name}"
        result["copy_canary_words"] = 0
    try:
        out = d.alloc(nbytes)
        d.copy_words(addr, out, nbytes // _WORD)
        result["kernel"] = "read"
        result["kernel_canary_words"] = canary_words(d.read(out, nbytes))
    except CudaError as exc:
        result["kernel"] = f"faulted: {exc.name}"
        result["kernel_canary_words"] = 0
    result["isolated"] = result["copy_canary_words"] == 0 and result["kernel_canary_words"] == 0
    return result


def probe_residual(d: Driver, nbytes: int) -> dict[str, Any]:
    ptr = d.alloc(nbytes)
    seen = canary_words(d.read(ptr, nbytes))
    return {
        "probe": "residual",
        "status": "ok",
        "device": d.device,
        "bytes": nbytes,
        "canary_words_seen": seen,
        "scrubbed": seen == 0,
    }


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else ""
    try:
        d = Driver()
    except (RuntimeError, CudaError) as exc:
        print(json.dumps({"probe": cmd, "status": "not run", "detail": str(exc)}))
        return 0
    if cmd == "oob":
        print(json.dumps(probe_oob(d)))
    elif cmd == "hold":
        nbytes = int(argv[1])
        ptr = d.alloc(nbytes)
        d.fill(ptr, CANARY, nbytes)
        d.sync()
        print(
            json.dumps({"probe": "hold", "status": "ok", "address": ptr, "bytes": nbytes, "device": d.device}),
            flush=True,
        )
        sys.stdin.readline()
    elif cmd == "read-foreign":
        print(json.dumps(probe_read_foreign(d, int(argv[1]), int(argv[2]))))
    elif cmd == "fill-exit":
        nbytes = int(argv[1])
        ptr = d.alloc(nbytes)
        d.fill(ptr, CANARY, nbytes)
        d.sync()
        print(json.dumps({"probe": "fill-exit", "status": "ok", "bytes": nbytes, "device": d.device}))
    elif cmd == "residual":
        print(json.dumps(probe_residual(d, int(argv[1]))))
    else:
        print(json.dumps({"probe": cmd, "status": "error", "detail": "unknown command"}))
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

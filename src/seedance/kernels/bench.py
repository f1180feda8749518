"""Eager vs ``torch.compile`` (Inductor) vs fused: latency and peak memory per batch size.

For each model and batch size the variants are built from the same seeded weights and timed
*interleaved* (run ``i`` of every variant before run ``i + 1`` of any), so load from other jobs on
a shared machine hits all variants alike and the ratios against eager stay fair. Each variant
first runs ``warmup`` times (``torch.compile`` compiles on its first call; that time is reported
as ``compile_s``), then ``runs`` timed forwards in ``torch.inference_mode()``.

* Latency: wall time of one forward (``time.perf_counter``) on the CPU; CUDA events around the
  forward, synchronised, on a GPU. p50 / p95 / mean over the timed runs.
* Peak memory: the model's weights plus the peak of its forward's allocations above what was already
  allocated: on a GPU from ``torch.cuda.max_memory_allocated()`` (reset before the forward; all
  variants' weights stay resident, so they are subtracted and this model's added back); on the CPU
  from the profiler's allocation events (``torch.profiler``, ``profile_memory=True``): the CPU analogue
  of ``max_memory_allocated``; allocator scratch outside PyTorch's allocator (oneDNN's) is not seen.

Variants: ``eager`` (the model as written), ``compiled`` (``torch.compile``, Inductor, default
mode), ``fused`` (BERT: the feed-forward up-projection + GELU as one fused kernel: the Triton kernel
on a GPU, the TVM kernel of :mod:`seedance.kernels.tvm_fused` on the CPU when ``apache-tvm`` is
installed (else one GEMM + in-place GELU); ResNet-50: every BatchNorm folded into its convolution).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.kernels.profile import SCHEMA, VARIANTS, KernelProfile, ProfileRow

MIB = 2**20


@dataclass(frozen=True, slots=True)
class BenchModel:
    """A benchmark model: how to build it and its input for a batch size."""

    name: str
    build: Callable[[], Any]
    inputs: Callable[[int, Any], Any]
    fuse: Callable[[Any], Any]
    describe: str


def _bert_build() -> Any:
    from seedance.kernels.models.bert import BertModel

    return BertModel()


def _bert_inputs(batch: int, opts: Any) -> Any:
    from seedance.kernels.models.bert import random_inputs

    return random_inputs(batch, int(opts.get("seq_len", 128)))


def _bert_fuse(m: Any) -> Any:
    from seedance.kernels.models.bert import fuse_bert_ffn
    from seedance.kernels.tvm_fused import available

    on_cpu = next(m.parameters()).device.type == "cpu"
    fp32 = next(m.parameters()).dtype.is_floating_point and next(m.parameters()).element_size() == 4
    return fuse_bert_ffn(m, backend="tvm" if on_cpu and fp32 and available() else "triton")


def _resnet_build() -> Any:
    from seedance.kernels.models.resnet import resnet50

    return resnet50()


def _resnet_inputs(batch: int, opts: Any) -> Any:
    import torch

    size = int(opts.get("image_size", 224))
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(0))


def _resnet_fuse(m: Any) -> Any:
    from seedance.kernels.models.resnet import fold_resnet_bn

    return fold_resnet_bn(m)


BENCH_MODELS: Registry[BenchModel] = Registry("benchmark model")
BENCH_MODELS.add("bert-base", BenchModel("bert-base", _bert_build, _bert_inputs, _bert_fuse,
                                         "BERT-base (hidden 768, 12 layers, 12 heads, FFN 3072), sequence 128"),
                 aliases=("bert",))
BENCH_MODELS.add("resnet-50", BenchModel("resnet-50", _resnet_build, _resnet_inputs, _resnet_fuse,
                                         "ResNet-50 v1.5, 224 x 224 images"), aliases=("resnet", "resnet50"))


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """What to measure."""

    models: tuple[str, ...] = ("bert-base", "resnet-50")
    variants: tuple[str, ...] = VARIANTS
    batches: tuple[int, ...] = (1, 2)
    runs: int = 100
    warmup: int = 5
    device: str = "cpu"
    dtype: str = "float32"
    seq_len: int = 128
    image_size: int = 224
    threads: int | None = None

    def __post_init__(self) -> None:
        for m in self.models:
            BENCH_MODELS.get(m)
        for v in self.variants:
            if v not in VARIANTS:
                raise InputError(f"unknown variant {v!r}; valid: {', '.join(VARIANTS)}", source="--variants")
        if "eager" not in self.variants:
            raise InputError("the eager variant is the baseline and must be measured", source="--variants")
        if not self.batches or any(b < 1 for b in self.batches):
            raise InputError("batch sizes must be >= 1", source="--batches")
        if self.runs < 1 or self.warmup < 1:
            raise InputError("runs and warmup must be >= 1", source="--runs")
        if self.device not in ("cpu", "cuda"):
            raise InputError(f"device must be cpu or cuda, got {self.device!r}", source="--device")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise InputError(f"dtype must be float32, bfloat16 or float16, got {self.dtype!r}", source="--dtype")


def _quantile(xs: list[float], q: float) -> float:
    return float(np.quantile(np.asarray(xs), q))


def _cpu_activation_peak(fn: Callable[[], Any]) -> float:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    cur = peak = 0
    for _, n in events:
        cur += n
        peak = max(peak, cur)
    return peak / MIB


def _build_variant(spec: BenchModel, variant: str, opts: BenchOptions) -> Any:
    import torch

    torch.manual_seed(0)
    model = spec.build().eval()
    dtype = getattr(torch, opts.dtype)
    model = model.to(device=opts.device, dtype=dtype)
    if variant == "fused":
        model = spec.fuse(model)
    if variant == "compiled":
        return torch.compile(model)
    return model


def _weights_mib(model: Any) -> float:
    mod = getattr(model, "_orig_mod", model)
    return float(sum(p.numel() * p.element_size() for p in mod.parameters())
                 + sum(b.numel() * b.element_size() for b in mod.buffers())) / MIB


def run_bench(opts: BenchOptions, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure every (model, batch, variant); returns the profile document (see :mod:`~.profile`)."""
    import torch

    if opts.threads:
        torch.set_num_threads(opts.threads)
    cuda = opts.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise InputError("no CUDA device visible", source="--device")
    dtype = getattr(torch, opts.dtype)
    rows: list[dict[str, Any]] = []
    for name in opts.models:
        spec = BENCH_MODELS.get(name)
        for batch in opts.batches:
            x = spec.inputs(batch, {"seq_len": opts.seq_len, "image_size": opts.image_size}).to(opts.device)
            if x.is_floating_point():
                x = x.to(dtype)
            built = {v: _build_variant(spec, v, opts) for v in opts.variants}
            times: dict[str, list[float]] = {v: [] for v in opts.variants}
            compile_s: dict[str, float] = {}
            with torch.inference_mode():
                for v, m in built.items():
                    t0 = time.perf_counter()
                    for _ in range(opts.warmup):
                        m(x)
                    if cuda:
                        torch.cuda.synchronize()
                    compile_s[v] = time.perf_counter() - t0
                for i in range(opts.runs):
                    for v, m in built.items():
                        if cuda:
                            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                            start.record()
                            m(x)
                            end.record()
                            end.synchronize()
                            times[v].append(float(start.elapsed_time(end)))
                        else:
                            t0 = time.perf_counter()
                            m(x)
                            times[v].append((time.perf_counter() - t0) * 1e3)
                    if progress and (i + 1) % 25 == 0:
                        progress(f"{name} batch {batch}: {i + 1}/{opts.runs} runs")
                for v, m in built.items():
                    w = _weights_mib(m)
                    if cuda:
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                        base = torch.cuda.memory_allocated() / MIB
                        m(x)
                        torch.cuda.synchronize()
                        act = max(torch.cuda.max_memory_allocated() / MIB - base, 0.0)
                        peak = w + act  # this model's weights + its forward's peak above what was allocated
                    else:
                        def once(m: Any = m, x: Any = x) -> Any:
                            return m(x)

                        act = _cpu_activation_peak(once)
                        peak = w + act
                    ts = times[v]
                    rows.append({"model": spec.name, "variant": v, "batch": batch, "runs": len(ts),
                                 "p50_ms": round(_quantile(ts, 0.5), 4), "p95_ms": round(_quantile(ts, 0.95), 4),
                                 "mean_ms": round(float(np.mean(ts)), 4), "peak_mib": round(peak, 3),
                                 "activation_peak_mib": round(act, 3), "weights_mib": round(w, 3),
                                 "warmup_s": round(compile_s[v], 3)})
            del built
    device_name = torch.cuda.get_device_name(0) if cuda else (platform.processor() or platform.machine())
    return {
        "schema": SCHEMA, "device": opts.device, "device_name": device_name, "dtype": opts.dtype,
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "runs": opts.runs, "warmup": opts.warmup, "seq_len": opts.seq_len, "image_size": opts.image_size,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "fused_paths": {m: _fused_path(m, opts) for m in opts.models if "fused" in opts.variants},
        "rows": rows,
    }


def _fused_path(model: str, opts: BenchOptions) -> str:
    from seedance.kernels.tvm_fused import available

    if BENCH_MODELS.get(model).name == "resnet-50":
        return "BatchNorm folded into the convolutions"
    if opts.device == "cuda":
        return "Triton fused linear + GELU kernel"
    if opts.dtype == "float32" and available():
        return "TVM fused linear + GELU kernel (CPU)"
    return "PyTorch fallback: one GEMM + in-place GELU"


def ratios(profile: KernelProfile) -> list[dict[str, Any]]:
    """Each row with its p50 latency and peak memory as ratios of the eager row of the same batch."""
    out = []
    for r in profile.rows:
        base: ProfileRow | None = profile.row(r.model, "eager", r.batch)
        d = r.as_dict()
        if base is not None:
            d["latency_x_eager"] = round(r.p50_ms / base.p50_ms, 4)
            d["memory_x_eager"] = round(r.peak_mib / base.peak_mib, 4) if base.peak_mib > 0 else None
        out.append(d)
    return out

"""The deployment space of a family: every (variant, precision, GPU, count, batch, mode), evaluated.

The space is a full grid over six integer-coded dimensions. :class:`DeploymentSpace` evaluates it
once into columnar arrays (cost, p95 latency, accuracy, throughput, memory, a reason code), so the
exact enumeration and NSGA-II read the same numbers: NSGA-II's evaluation of an individual is the
grid point its genes decode to. Grid points that are not deployments (no published accuracy for
that precision, weights + KV cache do not fit, a compile mode never measured) carry a reason and
are infeasible for every SLO.

Cost is ``$ per 1,000 requests`` (GPU-hours at the chosen price, at the deployment's saturation
throughput) or ``GFLOPs per request``.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import CATALOG, GpuModel
from seedance.core.errors import InputError
from seedance.kernels.profile import KernelProfile
from seedance.optimize.families import PRECISIONS, DecoderShape, EncoderShape, Family, Variant
from seedance.optimize.latency import (
    GIB,
    MEMORY_UTILISATION,
    P95_BATCH_FACTOR,
    GemmEngine,
    VisionEngine,
    fit_gemm_engine,
    fit_vision_engine,
)

DIMS = ("variant", "precision", "gpu", "count", "batch", "mode")
OK, NO_ACCURACY, NO_FIT, NOT_MEASURED, BAD_TP = 0, 1, 2, 3, 4
REASONS = {OK: "ok", NO_ACCURACY: "no published accuracy for this precision", NO_FIT: "does not fit in GPU memory",
           NOT_MEASURED: "mode not measured for this model", BAD_TP: "heads not divisible by the GPU count"}
PRICE_SOURCES = ("catalog", "on-demand", "spot")
COSTS = ("usd", "flops")
INSTANCES_FILE = "cloud-gpu-prices/instances.csv"


@dataclass(frozen=True, slots=True)
class RequestSample:
    """Prompt and output tokens of the requests an LLM deployment is judged on."""

    prompt: NDArray[np.float64]
    output: NDArray[np.float64]
    source: str

    @property
    def mean_prompt(self) -> float:
        """Mean prompt tokens."""
        return float(self.prompt.mean())

    @property
    def mean_output(self) -> float:
        """Mean output tokens."""
        return float(self.output.mean())


def request_sample(path: Path | None = None, n: int = 1000) -> RequestSample:
    """Every k-th request of an Azure-format trace (default: the 2023 conversation trace), ``n`` in all."""
    from seedance.inference.trace import CONV_TRACE, load_azure_trace
    from seedance.traces.paths import data_file

    tr = load_azure_trace(path if path is not None else data_file(CONV_TRACE))
    if len(tr) == 0:
        raise InputError("the trace has no requests", source=str(path))
    step = max(1, len(tr) // n)
    idx = np.arange(0, len(tr), step)[:n]
    return RequestSample(tr.prompt[idx].astype(np.float64), tr.output[idx].astype(np.float64), tr.source)


def gpu_prices(gpus: tuple[str, ...], source: str, path: Path | None = None) -> dict[str, tuple[float, str]]:
    """$ per GPU-hour and where it comes from, per catalog GPU.

    ``catalog``: the catalog's list price. ``on-demand`` / ``spot``: the cheapest per-GPU price of the
    instance types in ``../shared/data/cloud-gpu-prices/instances.csv`` carrying that GPU (the catalog
    price where no instance does).
    """
    if source not in PRICE_SOURCES:
        raise InputError(f"unknown price source {source!r}; valid: {', '.join(PRICE_SOURCES)}", source="--prices")
    out = {g: (CATALOG.resolve(g).price_usd_per_hour, "catalog list price") for g in gpus}
    if source == "catalog":
        return out
    from seedance.traces.paths import data_file

    p = path if path is not None else data_file(INSTANCES_FILE)
    col = "on_demand_usd_per_hour" if source == "on-demand" else "spot_usd_per_hour"
    best: dict[str, tuple[float, str]] = {}
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            for line, row in enumerate(csv.DictReader(fh), start=2):
                model = (row.get("gpu_model") or "").strip()
                if model not in CATALOG:
                    continue
                name = CATALOG.resolve(model).name
                try:
                    price, count = float(row[col]), int(row["gpu_count"])
                except (KeyError, TypeError, ValueError):
                    raise InputError(f"missing or not a number: {row.get(col)!r}", source=str(p), line=line,
                                     field=col) from None
                if count < 1 or not math.isfinite(price) or price <= 0:
                    continue
                per = price / count
                if name not in best or per < best[name][0]:
                    best[name] = (per, f"{row.get('cloud')} {row.get('instance_type')} {row.get('region')} {source}")
    except FileNotFoundError:
        raise InputError("price file not found", source=str(p)) from None
    for g in gpus:
        if g in best:
            out[g] = best[g]
    return out


@dataclass(slots=True)
class SpaceOptions:
    """How the space is priced and judged."""

    prices: str = "catalog"
    cost: str = "usd"
    trace: Path | None = None
    sample: int = 1000
    profile: KernelProfile | None = None

    def __post_init__(self) -> None:
        if self.prices not in PRICE_SOURCES:
            raise InputError(f"unknown price source {self.prices!r}; valid: {', '.join(PRICE_SOURCES)}",
                             source="--prices")
        if self.cost not in COSTS:
            raise InputError(f"unknown cost objective {self.cost!r}; valid: {', '.join(COSTS)}", source="--cost")
        if self.sample < 10:
            raise InputError("the request sample needs at least 10 requests", source="--sample")


@dataclass(slots=True)
class DeploymentSpace:
    """The evaluated grid of one family (columnar; flat index = ``np.ravel_multi_index``)."""

    family: Family
    options: SpaceOptions
    levels: tuple[tuple[Any, ...], ...]
    cost: NDArray[np.float64]
    p95_ms: NDArray[np.float64]
    accuracy: NDArray[np.float64]
    throughput_rps: NDArray[np.float64]
    gflops: NDArray[np.float64]
    memory_gib: NDArray[np.float64]
    reason: NDArray[np.int8]
    prices: dict[str, tuple[float, str]]
    calibration: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, ...]:
        """Levels per dimension."""
        return tuple(len(lv) for lv in self.levels)

    @property
    def size(self) -> int:
        """Grid points."""
        return int(np.prod(self.shape))

    def flat(self, genes: NDArray[np.int64]) -> NDArray[np.int64]:
        """Flat indices of integer gene vectors (``n x 6``), clipped into the grid."""
        g = np.clip(np.asarray(genes, dtype=np.int64), 0, np.array(self.shape) - 1)
        return np.ravel_multi_index(tuple(g.T), self.shape).astype(np.int64)  # type: ignore[no-any-return]

    def objectives(self, idx: NDArray[np.int64]) -> NDArray[np.float64]:
        """``[cost, p95 ms, -accuracy]`` of grid points (all minimised)."""
        return np.column_stack([self.cost[idx], self.p95_ms[idx], -self.accuracy[idx]])

    def feasible(self, slo_ms: float | None = None, min_accuracy: float | None = None) -> NDArray[np.bool_]:
        """Deployable points meeting the latency bound and the accuracy floor."""
        ok = self.reason == OK
        if slo_ms is not None:
            ok &= self.p95_ms <= slo_ms
        if min_accuracy is not None:
            ok &= self.accuracy >= min_accuracy
        return ok  # type: ignore[no-any-return]

    def config(self, i: int) -> dict[str, Any]:
        """The deployment at flat index ``i`` with its figures."""
        pos = np.unravel_index(int(i), self.shape)
        d: dict[str, Any] = {dim: self.levels[k][int(pos[k])] for k, dim in enumerate(DIMS)}
        v = self.family.variant(d["variant"])
        acc = v.accuracy.get(d["precision"])
        d.update({
            "cost": _r(self.cost[i]), "cost_unit": "usd_per_1k_requests" if self.options.cost == "usd"
            else "gflops_per_request", "p95_ms": _r(self.p95_ms[i]), "accuracy": _r(self.accuracy[i]),
            "metric": self.family.metric, "throughput_rps": _r(self.throughput_rps[i]),
            "gflops_per_request": _r(self.gflops[i]), "memory_gib": _r(self.memory_gib[i]),
            "usd_per_gpu_hour": self.prices[d["gpu"]][0], "price_source": self.prices[d["gpu"]][1],
            "accuracy_sources": list(acc.sources) if acc else [], "accuracy_basis": acc.basis if acc else None,
            "status": REASONS[int(self.reason[i])],
        })
        return d


def _r(x: float) -> float | None:
    x = float(x)
    return None if not math.isfinite(x) else round(x, 6)


def _llm_point(eng: GemmEngine, shape: DecoderShape, wbytes: float, int8: bool, g: GpuModel, tp: int, b: int,
               req: RequestSample) -> tuple[float, float, float, bool]:
    """(p95 ms, requests/s, memory GiB, fits) of ``b`` concurrent sequences on one replica."""
    p_mean, o_mean = req.mean_prompt, req.mean_output
    weights = shape.params * wbytes
    kv_total = b * (p_mean + o_mean) * shape.kv_bytes_per_token
    mem = (weights + kv_total) / tp
    fits = mem <= g.memory_gib * GIB * MEMORY_UTILISATION
    w_read = shape.matmul_params * wbytes
    dec = eng.decode_ms(matmul_params=shape.matmul_params, weight_bytes=w_read,
                        kv_bytes_per_token=shape.kv_bytes_per_token, batch=b, kv_tokens=b * (p_mean + o_mean / 2),
                        layers=shape.layers, tp=tp, gpu=g, int8=int8)
    # newcomers' prefill mixed into the iterations: b / o_mean requests of p_mean tokens per iteration
    share = float(eng.prefill_ms(matmul_params=shape.matmul_params, weight_bytes=0.0, tokens=b * p_mean / o_mean,
                                 attn_flops=b / o_mean * 2.0 * shape.layers * shape.hidden * p_mean**2,
                                 layers=shape.layers, tp=tp, gpu=g, int8=int8)) - eng.c_pre * shape.layers
    share -= eng.comm_ms(shape.layers, tp)
    tau = dec + max(share, 0.0)
    ttft = eng.prefill_ms(matmul_params=shape.matmul_params, weight_bytes=w_read, tokens=req.prompt,
                          attn_flops=2.0 * shape.layers * shape.hidden * req.prompt**2, layers=shape.layers, tp=tp,
                          gpu=g, int8=int8)
    e2e = ttft + (req.output - 1.0) * tau
    return float(np.percentile(e2e, 95)), b / (o_mean * tau) * 1e3, mem / GIB, fits


def _encoder_batch_ms(eng: GemmEngine, shape: EncoderShape, wbytes: float, int8: bool, g: GpuModel, b: int) -> float:
    t = float(b * shape.seq_len)
    attn = b * 4.0 * shape.layers * shape.hidden * shape.seq_len**2
    return float(eng.prefill_ms(matmul_params=shape.matmul_params, weight_bytes=shape.matmul_params * wbytes,
                                tokens=t, attn_flops=attn, layers=shape.layers, tp=1, gpu=g, int8=int8))


def _mode_ratio(profile: KernelProfile | None, v: Variant, mode: str) -> float | None:
    if mode == "eager":
        return 1.0
    if profile is None or v.profile_model is None:
        return None
    g = profile.gain(v.profile_model, mode)
    return None if g is None else g[0]


def vision_anchors(family: Family) -> tuple[list[tuple[float, float]], str]:
    """The published batch-1 latencies the vision engine is fitted on (YOLOv8's A100 TensorRT table)."""
    from seedance.optimize.families import FAMILIES

    yolo = FAMILIES.get("yolo")
    return [(v.gflops, v.published_ms["A100-80GB"]) for v in yolo.variants], "A100-80GB"


def build_space(family: Family, options: SpaceOptions | None = None) -> DeploymentSpace:
    """Evaluate every grid point of ``family``."""
    opts = options or SpaceOptions()
    modes = tuple(m for m in family.modes)
    levels: tuple[tuple[Any, ...], ...] = (tuple(v.name for v in family.variants), family.precisions, family.gpus,
                                           family.counts, family.batches, modes)
    shape = tuple(len(lv) for lv in levels)
    n = int(np.prod(shape))
    cost = np.full(n, np.inf)
    p95 = np.full(n, np.inf)
    acc = np.full(n, np.nan)
    thr = np.zeros(n)
    gfl = np.zeros(n)
    mem = np.zeros(n)
    reason = np.zeros(n, dtype=np.int8)
    prices = gpu_prices(family.gpus, opts.prices)
    calib: dict[str, Any] = {}
    gemm: GemmEngine | None = None
    vision: VisionEngine | None = None
    req: RequestSample | None = None
    if family.kind in ("llm", "encoder"):
        gemm = fit_gemm_engine()
        calib["gemm_engine"] = {"eta_compute": round(gemm.eta_c, 4), "eta_bandwidth": round(gemm.eta_bw, 4),
                                "decode_ms_per_layer": round(gemm.c_dec, 5),
                                "prefill_ms_per_layer": round(gemm.c_pre, 5),
                                "allreduce_ms_per_layer_per_log2_tp": round(gemm.c_comm, 5),
                                "fit_points": gemm.points, "median_abs_error": round(gemm.median_abs_err, 4),
                                "max_abs_error": round(gemm.max_abs_err, 4), "source": "splitwise-vidur"}
    else:
        anchors, anchor_gpu = vision_anchors(family)
        vision = fit_vision_engine(anchors, anchor_gpu)
        calib["vision_engine"] = {"eta": round(vision.eta, 4), "t0_ms": round(vision.t0_ms, 4),
                                  "anchor_gpu": vision.anchor_gpu, "fit_points": vision.points,
                                  "max_abs_error": round(vision.max_abs_err, 4), "source": "ultralytics-yolov8"}
    if family.kind == "llm":
        req = request_sample(opts.trace, opts.sample)
        calib["requests"] = {"n": len(req.prompt), "mean_prompt": round(req.mean_prompt, 1),
                             "mean_output": round(req.mean_output, 1), "source": req.source}
    if opts.profile is not None:
        calib["kernel_profile"] = {"device": opts.profile.device, "device_name": opts.profile.device_name,
                                   "source": opts.profile.source}
    for iv, v in enumerate(family.variants):
        for ip, pname in enumerate(levels[1]):
            prec = PRECISIONS[pname]
            a = v.accuracy.get(pname)
            for ig, gname in enumerate(family.gpus):
                g = CATALOG.resolve(gname)
                for ic, count in enumerate(family.counts):
                    for ib, b in enumerate(family.batches):
                        base: tuple[float, float, float, bool] | None = None
                        for im, mode in enumerate(modes):
                            i = int(np.ravel_multi_index((iv, ip, ig, ic, ib, im), shape))
                            if a is None:
                                reason[i] = NO_ACCURACY
                                continue
                            ratio = _mode_ratio(opts.profile, v, mode)
                            if ratio is None:
                                reason[i] = NOT_MEASURED
                                continue
                            if base is None:
                                base = _point(family, v, prec.weight_bytes, prec.int8_compute, g, count, b, gemm,
                                              vision, req)
                            lat, rps, gib, fits = base
                            if isinstance(v.shape, DecoderShape) and (v.shape.kv_heads % count
                                                                      or v.shape.heads % count):
                                reason[i] = BAD_TP
                                continue
                            acc[i] = a.value
                            mem[i] = gib
                            if not fits:
                                reason[i] = NO_FIT
                                continue
                            p95[i] = lat * ratio
                            thr[i] = rps / ratio
                            tokens = (req.mean_prompt + req.mean_output) if req is not None else 1.0
                            gfl[i] = v.gflops * tokens
                            if opts.cost == "usd":
                                cost[i] = prices[gname][0] * count / 3600.0 / thr[i] * 1000.0
                            else:
                                cost[i] = gfl[i]
    return DeploymentSpace(family, opts, levels, cost, p95, acc, thr, gfl, mem, reason, prices, calib)


def _point(family: Family, v: Variant, wbytes: float, int8: bool, g: GpuModel, count: int, b: int,
           gemm: GemmEngine | None, vision: VisionEngine | None, req: RequestSample | None
           ) -> tuple[float, float, float, bool]:
    """(p95 ms, requests/s, memory GiB, fits) of one deployment in eager mode."""
    if family.kind == "llm":
        assert gemm is not None and req is not None and isinstance(v.shape, DecoderShape)
        return _llm_point(gemm, v.shape, wbytes, int8, g, count, b, req)
    weights = v.params * wbytes
    if family.kind == "encoder":
        assert gemm is not None and isinstance(v.shape, EncoderShape)
        t = _encoder_batch_ms(gemm, v.shape, wbytes, int8, g, b)
    else:
        assert vision is not None
        t = vision.batch_ms(v.gflops, b, g, int8)
    fits = weights <= g.memory_gib * GIB * MEMORY_UTILISATION
    return P95_BATCH_FACTOR * t, b / t * 1e3 * count, weights / GIB, fits

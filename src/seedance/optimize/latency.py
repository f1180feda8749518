"""Latency and throughput of a deployment: a roofline calibrated on measured profiles.

Two calibrations, each fitted once per run and reported with its error:

* **GEMM engine** (LLM and encoder families), fitted by least squares on the serving model's measured
  step times (:func:`seedance.inference.perf.load_step_times`: SplitwiseSim's llama2-70b on DGX-A100 /
  DGX-H100 at TP 2/4/8, Vidur's Llama-2-7B operators on A100 / H100 at TP 1..8)::

      decode(b, kv) = c_dec * L + comm + max(W / (tp * eta_bw * BW), 2 * P * b / (tp * eta_c * peak))
                      + kv * kv_bytes / (tp * eta_bw * BW)
      prefill(T)    = c_pre * L + comm + max(W / (tp * eta_bw * BW), (2 * P * T + attn(T)) / (tp * eta_c * peak))

  with ``L`` layers, ``comm = c_comm * L * log2(tp)`` (two all-reduces per layer), ``W`` the weight
  bytes, ``P`` the parameters in matrix products, ``BW`` / ``peak`` the
  catalog's memory bandwidth and dense fp16 throughput (doubled for INT8 tensor cores). The same
  four constants serve every GPU of the catalog (scaled by its datasheet figures), every
  precision (by its bytes per weight) and every model shape.
* **Vision engine**, fitted on the published A100 TensorRT batch-1 latencies of YOLOv8 n..x
  (:mod:`~seedance.optimize.sources`): ``t(b) = t0 + b * FLOPs / (eta_v * peak)``.

A request's latency: for LLMs, each of a sample of real requests (Azure conversation trace) waits
``prefill(prompt)`` for its first token, then ``output - 1`` iterations of a continuous batch of
``b`` sequences, each iteration decoding ``b`` tokens plus its share of the newcomers' prefill;
the p95 is over the sample. For encoder and vision families a batch of ``b`` is served in
``t(b)``; at saturation a request waits for the running batch (uniform phase) and then its own, so
``p95 = 1.95 * t(b)``. Throughput is ``b`` per batch (or per iteration cycle) and memory is checked
against the GPU (weights + KV cache of the batch for LLMs, at 90% of device memory).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import CATALOG, GpuModel
from seedance.core.errors import InputError

GIB = 1024**3
MEMORY_UTILISATION = 0.9
P95_BATCH_FACTOR = 1.95

# Dense INT8 tensor throughput over dense fp16 (NVIDIA datasheets; see sources["nvidia-datasheets"]).
# V100 has no INT8 tensor cores: INT8 runs no faster than fp16 there.
INT8_SPEEDUP = {"T4": 130 / 65, "A10": 250 / 125, "L40S": 733 / 362.05, "A100-40GB": 2.0, "A100-80GB": 2.0,
                "H100-80GB": 1979 / 989.4, "H200": 1979 / 989.4, "V100-32GB": 1.0, "V100-16GB": 1.0}


def peak_flops(g: GpuModel, int8: bool) -> float:
    """FLOP/s of the GPU's dense tensor cores (INT8 ops where ``int8``)."""
    f = g.dense_tflops * 1e12
    return f * INT8_SPEEDUP.get(g.name, 1.0) if int8 else f


@dataclass(frozen=True, slots=True)
class GemmEngine:
    """Fitted constants of the GEMM-engine roofline (times in ms; ``c_dec`` / ``c_pre`` per layer)."""

    eta_c: float
    eta_bw: float
    c_dec: float
    c_pre: float
    c_comm: float
    points: int
    median_abs_err: float
    max_abs_err: float

    def comm_ms(self, layers: int, tp: int) -> float:
        """Per-iteration tensor-parallel cost: two all-reduces per layer, growing with log2(tp)."""
        return self.c_comm * layers * float(np.log2(tp)) if tp > 1 else 0.0

    def _w_ms(self, weight_bytes: float, tp: int, g: GpuModel) -> float:
        return weight_bytes / (tp * self.eta_bw * g.memory_bw_gbs * 1e9) * 1e3

    def _c_ms(self, flops: float | NDArray[np.float64], tp: int, g: GpuModel, int8: bool) -> NDArray[np.float64]:
        return np.asarray(flops, dtype=np.float64) / (tp * self.eta_c * peak_flops(g, int8)) * 1e3

    def decode_ms(self, *, matmul_params: float, weight_bytes: float, kv_bytes_per_token: float, batch: int,
                  kv_tokens: float, layers: int, tp: int, gpu: GpuModel, int8: bool = False) -> float:
        """One decode iteration of ``batch`` sequences attending ``kv_tokens`` cached tokens."""
        w = self._w_ms(weight_bytes, tp, gpu)
        c = float(self._c_ms(2.0 * matmul_params * batch, tp, gpu, int8))
        kv = kv_tokens * kv_bytes_per_token / (tp * self.eta_bw * gpu.memory_bw_gbs * 1e9) * 1e3
        return self.c_dec * layers + self.comm_ms(layers, tp) + max(w, c) + kv

    def prefill_ms(self, *, matmul_params: float, weight_bytes: float, tokens: NDArray[np.float64] | float,
                   attn_flops: NDArray[np.float64] | float, layers: int, tp: int, gpu: GpuModel, int8: bool = False
                   ) -> NDArray[np.float64]:
        """Prefill of ``tokens`` tokens (vectorised), ``attn_flops`` the attention's FLOPs."""
        w = self._w_ms(weight_bytes, tp, gpu)
        c = self._c_ms(2.0 * matmul_params * np.asarray(tokens, dtype=np.float64) + attn_flops, tp, gpu, int8)
        return self.c_pre * layers + self.comm_ms(layers, tp) + np.maximum(w, c)


def _attn_flops(layers: int, hidden: int, tokens: NDArray[np.float64] | float) -> NDArray[np.float64]:
    # causal self-attention of one sequence: scores and weighted sum, 2 FLOPs each, half the square
    t = np.asarray(tokens, dtype=np.float64)
    return 2.0 * layers * hidden * t * t


def fit_gemm_engine() -> GemmEngine:
    """Fit the GEMM roofline on every profiled configuration of the serving model."""
    from scipy.optimize import least_squares

    from seedance.inference.model import get_model
    from seedance.inference.perf import load_step_times

    configs = [("llama2-70b", g, tp) for g in ("A100-80GB", "H100-80GB") for tp in (2, 4, 8)]
    rows: list[tuple[str, float, float, float, float, float, GpuModel, float, int]] = []
    # (kind, P, W, kv_bytes, x, kv_or_attn, gpu, tp) with measured y appended separately
    ys: list[float] = []
    for model, gname, tp in configs:
        try:
            st = load_step_times(model, gname, tp)
        except InputError:
            continue
        shape = get_model(model)
        p = float(shape.layers * (2 * shape.hidden**2 + 2 * shape.hidden * shape.kv_heads * shape.head_dim
                                  + 3 * shape.hidden * shape.ffn) + shape.hidden * shape.vocab)
        w = p * 2.0
        g = CATALOG.resolve(gname)
        for b in (1, 2, 4, 8, 16, 32, 64):
            kv = b * 576.0
            rows.append(("d", p, w, float(shape.kv_bytes_per_token), float(b), kv, g, float(tp), shape.layers))
            ys.append(st.decode_ms(b, kv))
        for t in (128.0, 512.0, 2048.0, 8192.0):
            rows.append(("p", p, w, 0.0, t, float(_attn_flops(shape.layers, shape.hidden, t)), g, float(tp),
                         shape.layers))
            ys.append(st.prefill_ms(t, t * t))
    if len(rows) < 8:
        raise InputError("the serving model's profiles are missing: cannot calibrate the latency model",
                         source="splitwise-perf-model / vidur-profiling")
    y = np.asarray(ys)

    def predict(theta: NDArray[np.float64]) -> NDArray[np.float64]:
        eng = GemmEngine(float(theta[0]), float(theta[1]), float(theta[2]), float(theta[3]), float(theta[4]), 0,
                         0.0, 0.0)
        out = np.empty(len(rows))
        for i, (kind, p, w, kvb, x, extra, g, tp, layers) in enumerate(rows):
            if kind == "d":
                out[i] = eng.decode_ms(matmul_params=p, weight_bytes=w, kv_bytes_per_token=kvb, batch=int(x),
                                       kv_tokens=extra, layers=layers, tp=int(tp), gpu=g)
            else:
                out[i] = float(eng.prefill_ms(matmul_params=p, weight_bytes=w, tokens=x, attn_flops=extra,
                                              layers=layers, tp=int(tp), gpu=g))
        return out

    res = least_squares(lambda th: np.log(predict(th)) - np.log(y), x0=np.array([0.5, 0.6, 0.01, 0.1, 0.05]),
                        bounds=([0.02, 0.05, 0.0, 0.0, 0.0], [1.0, 1.0, 2.0, 5.0, 5.0]))
    err = np.abs(predict(res.x) / y - 1.0)
    th = res.x
    return GemmEngine(float(th[0]), float(th[1]), float(th[2]), float(th[3]), float(th[4]), len(rows),
                      float(np.median(err)), float(err.max()))


@dataclass(frozen=True, slots=True)
class VisionEngine:
    """Fitted ``t(b) = t0 + b * FLOPs / (eta * peak)`` on an anchor GPU's published latencies."""

    eta: float
    t0_ms: float
    anchor_gpu: str
    points: int
    max_abs_err: float

    def batch_ms(self, gflops: float, batch: int, gpu: GpuModel, int8: bool = False) -> float:
        """Time to serve one batch."""
        return self.t0_ms + batch * gflops * 1e9 / (self.eta * peak_flops(gpu, int8)) * 1e3


def fit_vision_engine(anchors: list[tuple[float, float]], gpu: str) -> VisionEngine:
    """Least-squares line through published ``(GFLOPs, batch-1 ms)`` points on ``gpu``."""
    if len(anchors) < 2:
        raise InputError("need at least two published latencies to calibrate the vision model", source="families")
    g = CATALOG.resolve(gpu)
    x = np.array([a for a, _ in anchors]) * 1e9
    y = np.array([b for _, b in anchors])
    slope, t0 = np.polyfit(x, y, 1)
    eta = 1e3 / (float(slope) * g.dense_tflops * 1e12)
    eng = VisionEngine(eta, float(t0), g.name, len(anchors), 0.0)
    pred = np.array([eng.batch_ms(a, 1, g) for a, _ in anchors])
    return VisionEngine(eta, float(t0), g.name, len(anchors), float(np.max(np.abs(pred / y - 1.0))))

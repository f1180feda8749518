"""Iteration times of an LLM replica, interpolated from measured profiles.

NOTE(seedance): one iteration either prefills a group of prompts or decodes one token for every
running sequence (vLLM v0's iteration structure; a prefill stalls the decodes). The model has two
parts and both are tables built once, so the simulator's hot loop does list look-ups only:

* ``prefill_ms(tokens, sq)``: piecewise-linear in the batch's total prompt tokens (SplitwiseSim
  interpolates on ``batch_size * prompt_size`` the same way), plus ``prefill_sq_ms * sq`` where
  ``sq`` is the sum of squared prompt lengths (the attention term; zero for profiles that measured
  whole prefills, which already contain it).
* ``decode_ms(batch, kv_tokens) = decode_base(batch) + kv_ms_per_token * kv_tokens``: linear in the
  KV tokens the step attends to, so ``n`` steps of a fixed batch whose KV grows by ``batch`` a step
  sum in closed form (:meth:`StepTimes.decode_span_ms`), which lets the simulator skip from event
  to event instead of stepping token by token.

Sources (each a measured profile; nothing here is a whitepaper number):

* ``splitwise``: ``../shared/data/splitwise-perf-model/perf_model.csv`` (DGX-A100 / DGX-H100,
  llama2-70b TP2/4/8, bloom-176b TP8). Medians over repeats. Prefill on total tokens; decode on
  batch size at the profile's reference context (prompt 512, 128 output tokens: mean context 576
  per sequence) with the KV slope fitted by least squares on the batch-1 rows (prompt 128..8192).
  Each curve is made non-decreasing (running maximum), which removes the profile's TP2 batch-64
  outliers. Beyond the grid the last segment is extended linearly.
* ``vidur``: ``../shared/data/vidur-profiling/compute/<gpu>/meta-llama/Llama-2-7b-hf/mlp.csv``
  (Llama-2-7B linear/MLP operators on A100 and H100, TP1..8). Per layer the operators' medians are
  summed (two residual adds) and multiplied by the layer count. The snapshot lacks attention and
  communication profiles, so attention is a roofline from the GPU catalog (prefill: causal
  ``2 * hidden * s^2`` FLOP per layer at ``ATTN_FLOP_EFFICIENCY`` of dense peak; decode: the KV
  bytes read at ``ATTN_BW_EFFICIENCY`` of peak bandwidth) and tensor-parallel all-reduce is not
  modelled: these step times are GPU-kernel lower bounds.
"""

from __future__ import annotations

import bisect
import csv
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from seedance.core.catalog import CATALOG
from seedance.core.errors import InputError
from seedance.inference.model import ModelShape, get_model

SPLITWISE_FILE = "splitwise-perf-model/perf_model.csv"
VIDUR_DIR = "vidur-profiling/compute"
VIDUR_MODEL = "meta-llama/Llama-2-7b-hf"
SPLITWISE_REF_PROMPT = 512
SPLITWISE_REF_TOKENS = 128
ATTN_FLOP_EFFICIENCY = 0.5
ATTN_BW_EFFICIENCY = 0.8
_VIDUR_LAYER_OPS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                    "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add", "add")

# Catalog GPU name -> the hardware key of each profile.
SPLITWISE_HW = {"A100-80GB": "a100-80gb", "H100-80GB": "h100-80gb"}
VIDUR_HW = {"A100-80GB": "a100", "H100-80GB": "h100"}


def _monotone(y: Sequence[float]) -> list[float]:
    return list(np.maximum.accumulate(np.asarray(y, dtype=np.float64)).tolist())


@dataclass(frozen=True, slots=True)
class StepTimes:
    """Iteration-time tables of one (model, GPU, tensor-parallel degree).

    Attributes:
        model: Model name.
        gpu: Catalog GPU name.
        tp: Tensor-parallel degree (GPUs per replica).
        source: Which profile the tables come from.
        prefill_x: Total prompt tokens of the profiled points (increasing).
        prefill_y: Prefill time (ms) at ``prefill_x``.
        prefill_sq_ms: ms per squared prompt token (attention), 0 when ``prefill_y`` includes it.
        decode_x: Batch sizes of the profiled points (increasing).
        decode_y: Decode-step time (ms) at ``decode_x`` with ``decode_ref_ctx`` context per sequence.
        decode_ref_ctx: Context tokens per sequence in ``decode_y``.
        kv_ms_per_token: Extra ms per KV token attended in a decode step.
    """

    model: str
    gpu: str
    tp: int
    source: str
    prefill_x: tuple[float, ...]
    prefill_y: tuple[float, ...]
    prefill_sq_ms: float
    decode_x: tuple[float, ...]
    decode_y: tuple[float, ...]
    decode_ref_ctx: float
    kv_ms_per_token: float
    _base: list[float] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.prefill_x) < 2 or len(self.decode_x) < 2:
            raise ValueError("need at least two profiled points per curve")
        # decode_base(b) for b = 0..cap-1, filled once; larger batches are computed on demand.
        cap = 4097
        self._base.extend(self._decode_base(b) for b in range(cap))

    @staticmethod
    def _interp(xs: tuple[float, ...], ys: tuple[float, ...], x: float) -> float:
        if x <= xs[0]:
            return ys[0]
        i = bisect.bisect_left(xs, x)
        if i >= len(xs):
            i = len(xs) - 1
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0)

    def _decode_base(self, batch: int) -> float:
        if batch <= 0:
            return 0.0
        at_ref = self._interp(self.decode_x, self.decode_y, float(batch))
        base = at_ref - self.kv_ms_per_token * self.decode_ref_ctx * batch
        return max(base, 0.5 * self.decode_y[0])

    def prefill_ms(self, tokens: float, sq_tokens: float = 0.0) -> float:
        """Time of one prefill iteration over ``tokens`` prompt tokens (``sq_tokens`` = Σ len²)."""
        if tokens <= 0:
            return 0.0
        return self._interp(self.prefill_x, self.prefill_y, tokens) + self.prefill_sq_ms * sq_tokens

    def decode_base(self, batch: int) -> float:
        """The part of a decode step that does not depend on the context length (ms)."""
        return self._base[batch] if batch < len(self._base) else self._decode_base(batch)

    def decode_ms(self, batch: int, kv_tokens: float) -> float:
        """One decode step of ``batch`` sequences attending to ``kv_tokens`` cached tokens (ms)."""
        if batch <= 0:
            return 0.0
        return self.decode_base(batch) + self.kv_ms_per_token * kv_tokens

    def iteration_ms(self, prefill_tokens: int, sq_tokens: float, decoders: int, kv_tokens: float) -> float:
        """One iteration: ``prefill_tokens`` of prefill work plus one decode step for ``decoders``
        sequences attending to ``kv_tokens``. Mixed iterations cost
        ``max(prefill(prefill_tokens + decoders), decode_base(decoders)) + attention``: the decode
        tokens join the prefill's matrix multiplies (Sarathi's observation)."""
        if not decoders:
            return self.prefill_ms(prefill_tokens, sq_tokens)
        if not prefill_tokens:
            return self.decode_ms(decoders, kv_tokens)
        return (max(self.prefill_ms(prefill_tokens + decoders, sq_tokens), self.decode_base(decoders))
                + self.kv_ms_per_token * kv_tokens)

    def decode_span_ms(self, batch: int, kv_tokens: float, steps: int) -> float:
        """``steps`` decode steps of a fixed batch starting at ``kv_tokens``, growing ``batch`` a step."""
        if steps <= 0 or batch <= 0:
            return 0.0
        return steps * self.decode_base(batch) + self.kv_ms_per_token * (
            steps * kv_tokens + batch * steps * (steps - 1) / 2.0
        )

    def max_prefill_tokens(self, budget_ms: float, cap: int) -> int:
        """The most tokens (<= ``cap``) one prefill iteration processes within ``budget_ms``
        (0 if not even one token fits). Prompts are taken as one sequence for the attention term."""
        if cap <= 0 or self.prefill_ms(1, 1.0) > budget_ms:
            return 0
        if self.prefill_ms(cap, float(cap) * cap) <= budget_ms:
            return cap
        xs, ys = self.prefill_x, self.prefill_y
        if self.prefill_sq_ms == 0.0:  # invert the non-decreasing table directly
            k = bisect.bisect_right(ys, budget_ms)  # ys[k-1] <= budget < ys[k]; k >= 1 here
            if k >= len(ys):
                x0, x1, y0, y1 = xs[-2], xs[-1], ys[-2], ys[-1]
            else:
                x0, x1, y0, y1 = xs[k - 1], xs[k], ys[k - 1], ys[k]
            x = x1 if y1 <= y0 else x0 + (budget_ms - y0) * (x1 - x0) / (y1 - y0)
            n = min(int(x), cap)
            while n > 1 and self.prefill_ms(n) > budget_ms:  # guard against rounding
                n -= 1
            return n
        lo, hi = 1, cap  # prefill_ms(lo) <= budget < prefill_ms(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.prefill_ms(mid, float(mid) * mid) <= budget_ms:
                lo = mid
            else:
                hi = mid
        return lo

    def steps_within(self, batch: int, kv_tokens: float, budget_ms: float) -> int:
        """The smallest ``n`` with ``decode_span_ms(batch, kv_tokens, n) >= budget_ms`` (>= 1)."""
        if budget_ms <= 0:
            return 1
        a = self.decode_base(batch) + self.kv_ms_per_token * kv_tokens
        h = self.kv_ms_per_token * batch / 2.0
        # n*a + h*n*(n-1) >= budget  <=>  h n^2 + (a - h) n - budget >= 0
        if h <= 0:
            n = math.ceil(budget_ms / a)
        else:
            b = a - h
            n = math.ceil((-b + math.sqrt(b * b + 4 * h * budget_ms)) / (2 * h))
        n = max(n, 1)
        while n > 1 and self.decode_span_ms(batch, kv_tokens, n - 1) >= budget_ms:
            n -= 1
        while self.decode_span_ms(batch, kv_tokens, n) < budget_ms:
            n += 1
        return n


def _read_csv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except FileNotFoundError:
        raise InputError("profile file not found", source=str(path)) from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise InputError(f"malformed CSV: {exc}", source=str(path)) from None


def _num(row: dict[str, str], col: str, src: str, line: int) -> float:
    try:
        return float(row[col])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"missing or not a number: {row.get(col)!r}", source=src, line=line, field=col) from None


def splitwise_step_times(path: Path, model: str, gpu: str, tp: int) -> StepTimes | None:
    """Tables for ``(model, gpu, tp)`` from a SplitwiseSim ``perf_model.csv``; ``None`` if absent."""
    hw = SPLITWISE_HW.get(gpu)
    if hw is None:
        return None
    src = str(path)
    pre: dict[float, list[float]] = defaultdict(list)
    dec: dict[float, list[float]] = defaultdict(list)
    b1: list[tuple[float, float]] = []
    for i, r in enumerate(_read_csv(path), start=2):
        if r.get("model") != model or r.get("hardware") != hw or r.get("tensor_parallel") != str(tp):
            continue
        p, b, t = (_num(r, c, src, i) for c in ("prompt_size", "batch_size", "token_size"))
        pt, tt = _num(r, "prompt_time", src, i), _num(r, "token_time", src, i)
        pre[p * b].append(pt)
        if p == SPLITWISE_REF_PROMPT and t == SPLITWISE_REF_TOKENS:
            dec[b].append(tt)
        if b == 1:
            b1.append((p + t / 2.0, tt))
    if not pre or len(dec) < 2 or len(b1) < 2:
        return None
    px = sorted(pre)
    dx = sorted(dec)
    ctx = np.array([c for c, _ in b1])
    tt_ = np.array([y for _, y in b1])
    slope = float(np.linalg.lstsq(np.vstack([np.ones_like(ctx), ctx]).T, tt_, rcond=None)[0][1])
    return StepTimes(
        model=model, gpu=gpu, tp=tp, source=f"splitwise:{path.name}",
        prefill_x=tuple(px), prefill_y=tuple(_monotone([statistics.median(pre[x]) for x in px])),
        prefill_sq_ms=0.0,
        decode_x=tuple(dx), decode_y=tuple(_monotone([statistics.median(dec[x]) for x in dx])),
        decode_ref_ctx=SPLITWISE_REF_PROMPT + SPLITWISE_REF_TOKENS / 2.0,
        kv_ms_per_token=max(slope, 0.0),
    )


def vidur_step_times(folder: Path, shape: ModelShape, gpu: str, tp: int) -> StepTimes | None:
    """Tables for Llama-2-7B from Vidur's operator profile plus a catalog roofline for attention."""
    hw = VIDUR_HW.get(gpu)
    if hw is None or shape.name != "llama2-7b":
        return None
    path = folder / hw / VIDUR_MODEL / "mlp.csv"
    if not path.exists():
        return None
    src = str(path)
    per_tokens: dict[float, list[float]] = defaultdict(list)
    for i, r in enumerate(_read_csv(path), start=2):
        if r.get("num_tensor_parallel_workers") != str(tp):
            continue
        layer = sum(_num(r, f"time_stats.{op}.median", src, i) for op in _VIDUR_LAYER_OPS)
        emb = _num(r, "time_stats.emb.median", src, i)
        per_tokens[_num(r, "num_tokens", src, i)].append(shape.layers * layer + emb)
    if len(per_tokens) < 2:
        return None
    xs = sorted(per_tokens)
    ys = _monotone([statistics.median(per_tokens[x]) for x in xs])
    g = CATALOG.resolve(gpu)
    flops = g.dense_tflops * 1e12 * tp * ATTN_FLOP_EFFICIENCY
    sq_ms = shape.layers * 2.0 * shape.hidden / flops * 1e3
    kv_ms = shape.kv_bytes_per_token / (g.memory_bw_gbs * 1e9 * tp * ATTN_BW_EFFICIENCY) * 1e3
    return StepTimes(
        model=shape.name, gpu=gpu, tp=tp, source=f"vidur:{hw}/mlp.csv+roofline",
        prefill_x=tuple(xs), prefill_y=tuple(ys), prefill_sq_ms=sq_ms,
        decode_x=tuple(xs), decode_y=tuple(ys), decode_ref_ctx=0.0, kv_ms_per_token=kv_ms,
    )


def load_step_times(
    model: str, gpu: str, tp: int, *, splitwise: Path | None = None, vidur: Path | None = None
) -> StepTimes:
    """Step-time tables for ``model`` on ``tp`` GPUs of type ``gpu``.

    Args:
        model: Registered model name.
        gpu: GPU name or alias from the catalog.
        tp: Tensor-parallel degree.
        splitwise: ``perf_model.csv`` path (default: the shared copy).
        vidur: Vidur ``compute`` folder (default: the shared copy).

    Raises:
        InputError: No profile covers the combination (the message lists those that do).
    """
    from seedance.traces.paths import data_file

    shape = get_model(model)
    g = CATALOG.resolve(gpu).name
    if tp < 1:
        raise InputError(f"must be >= 1, got {tp}", source="--tp")
    sw = splitwise if splitwise is not None else data_file(SPLITWISE_FILE)
    vd = vidur if vidur is not None else data_file(VIDUR_DIR)
    st = splitwise_step_times(sw, shape.name, g, tp) if sw.exists() else None
    if st is None:
        st = vidur_step_times(vd, shape, g, tp)
    if st is None:
        raise InputError(
            f"no measured profile for {shape.name} on {g} x{tp}; profiled: llama2-70b on A100-80GB/H100-80GB "
            "with tp 2/4/8, bloom-176b on A100-80GB/H100-80GB with tp 8 (splitwise), llama2-7b on "
            "A100-80GB/H100-80GB with tp 1/2/4/8 (vidur)",
            source="--model/--gpu/--tp",
        )
    return st

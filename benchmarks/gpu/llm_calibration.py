"""Measure a Llama-7B-shaped decoder's iteration times on the GPU and fit the simulator's iteration model.

Not run yet: no GPU machine was available to this project's sessions. On a GPU machine:

    python3 benchmarks/gpu/run_all.py --only llm-calibration --out gpu-results

What it does (``--budget-s`` bounds it; every loop stops when the budget is nearly spent):

1. builds a decoder with Llama-2-7B's shape (32 layers, hidden 4096, 32 heads, SwiGLU FFN 11008,
   RMSNorm, rotary embeddings) from random bf16 weights in plain PyTorch (no download), with a
   preallocated KV cache;
2. times (CUDA events, median of repeats after a warm-up) three kinds of iterations:
   *prefill* (``batch × prompt`` tokens, causal attention), *decode* (one token for each of
   ``batch`` sequences at context ``ctx``, batch 1..256) and *mixed* (a prefill chunk of ``chunk``
   tokens plus ``batch`` decode tokens in one forward: the linear layers run on all tokens at once,
   attention separately per part, as chunked-prefill engines do);
3. fits the simulator's iteration model (:class:`seedance.inference.perf.StepTimes`: prefill
   piecewise linear in tokens, decode ``base(batch) + kv_ms_per_token * kv_tokens``, mixed
   ``max(prefill(tokens + batch), base(batch)) + kv``) to the prefill and decode points and reports
   its error on every point, the mixed ones included (they are not used by the fit: the error
   there checks the model's mixed-iteration assumption);
4. reports the error of the model the simulator uses for Llama-2-7B without this calibration
   (Vidur's H100 operator profile plus a roofline for attention, ``perf.vidur_step_times``) on the
   same points.

Writes ``points.json`` (every measurement) and ``fit.json`` under ``--out``; the last stdout line is
the JSON summary. ``--cpu-test`` runs the same code on a tiny model on the CPU (logic check only;
its times mean nothing).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Shape:
    layers: int = 32
    hidden: int = 4096
    heads: int = 32
    ffn: int = 11008
    vocab: int = 32000


LLAMA7B = Shape()
TINY = Shape(layers=2, hidden=64, heads=4, ffn=128, vocab=100)

# (batch, prompt) for prefill, (batch, ctx) for decode, (chunk, batch, ctx) for mixed
GRID = {
    "prefill": [(1, 128), (1, 512), (1, 1024), (1, 2048), (1, 4096), (2, 2048), (4, 1024), (8, 512), (16, 256),
                (32, 128), (64, 64)],
    "decode": [(b, c) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256) for c in (128, 512, 2048) if b * c <= 131072],
    "mixed": [(k, b, 512) for k in (128, 512, 1024, 2048) for b in (1, 16, 64, 128, 256)],
}
TINY_GRID = {
    "prefill": [(1, 8), (1, 32), (2, 16), (4, 8)],
    "decode": [(b, c) for b in (1, 2, 4, 8) for c in (8, 32)],
    "mixed": [(k, b, 16) for k in (8, 16) for b in (1, 4)],
}


def build(shape: Shape, device: str, dtype: Any, max_tokens: int) -> Any:
    """The decoder: one function per iteration kind over random weights and a KV cache."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator(device="cpu").manual_seed(0)
    h, nh, f = shape.hidden, shape.heads, shape.ffn
    hd = h // nh

    def w(*size: int) -> Any:
        return (torch.randn(*size, generator=g) / math.sqrt(size[-1])).to(device=device, dtype=dtype)

    layers = [{"qkv": w(3 * h, h), "o": w(h, h), "up": w(2 * f, h), "down": w(h, f),
               "n1": torch.ones(h, device=device, dtype=dtype), "n2": torch.ones(h, device=device, dtype=dtype)}
              for _ in range(shape.layers)]
    emb = w(shape.vocab, h)
    # one KV cache big enough for the largest batch x context of the grid
    kv = [torch.zeros(2, max_tokens, nh, hd, device=device, dtype=dtype) for _ in range(shape.layers)]
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))

    def rope(x: Any, pos: Any) -> Any:  # x: [n, heads, hd]
        ang = pos[:, None].float() * inv[None, :]
        cos, sin = ang.cos()[:, None, :].to(dtype), ang.sin()[:, None, :].to(dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    def rms(x: Any, wgt: Any) -> Any:
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(dtype) * wgt

    def forward(tokens: Any, segs: list[tuple[str, int, int, int, int]]) -> Any:
        """``tokens``: [n] ids; ``segs``: ``(kind, start, count, length_or_ctx, cache offset)``:
        ``("pre", s, b, p, off)``: ``b`` prompts of ``p`` tokens (causal, no context);
        ``("chunk", s, 1, ctx, off)``: one prefill chunk (its length from the next segment's start)
        attending to ``ctx`` cached tokens; ``("dec", s, b, ctx, off)``: ``b`` decode tokens, each
        attending to its own ``ctx`` cached tokens. One attention call per segment."""
        x = emb[tokens]
        n = x.shape[0]
        ends = [sg[1] for sg in segs[1:]] + [n]
        pos_parts = []
        for (kind, s0, b, c, _), e in zip(segs, ends, strict=True):
            if kind == "pre":
                pos_parts.append(torch.arange(c, device=device).repeat(b))
            elif kind == "chunk":
                pos_parts.append(torch.arange(c, c + e - s0, device=device))
            else:
                pos_parts.append(torch.full((b,), c, device=device))
        pos = torch.cat(pos_parts)
        for lyr, cache in zip(layers, kv, strict=True):
            a = rms(x, lyr["n1"]) @ lyr["qkv"].T
            q, k, v = a.view(n, 3, nh, hd).unbind(1)
            q, k = rope(q, pos), rope(k, pos)
            outs = []
            for (kind, s0, b, c, off), e in zip(segs, ends, strict=True):
                if kind == "pre":
                    reg = cache[:, off:off + b * c].view(2, b, c, nh, hd)
                    reg[0] = k[s0:e].view(b, c, nh, hd)
                    reg[1] = v[s0:e].view(b, c, nh, hd)
                    o = F.scaled_dot_product_attention(q[s0:e].view(b, c, nh, hd).transpose(1, 2),
                                                       reg[0].transpose(1, 2), reg[1].transpose(1, 2), is_causal=True)
                    outs.append(o.transpose(1, 2).reshape(e - s0, h))
                elif kind == "chunk":
                    ln = e - s0
                    cache[0, off + c:off + c + ln] = k[s0:e]
                    cache[1, off + c:off + c + ln] = v[s0:e]
                    mask = torch.ones(ln, c + ln, device=device, dtype=torch.bool).tril(c)
                    o = F.scaled_dot_product_attention(q[s0:e].transpose(0, 1)[None],
                                                       cache[0, off:off + c + ln].transpose(0, 1)[None],
                                                       cache[1, off:off + c + ln].transpose(0, 1)[None],
                                                       attn_mask=mask)
                    outs.append(o[0].transpose(0, 1).reshape(ln, h))
                else:
                    reg = cache[:, off:off + b * (c + 1)].view(2, b, c + 1, nh, hd)
                    reg[0, :, c] = k[s0:e]
                    reg[1, :, c] = v[s0:e]
                    o = F.scaled_dot_product_attention(q[s0:e][:, :, None], reg[0].transpose(1, 2),
                                                       reg[1].transpose(1, 2))
                    outs.append(o.reshape(b, h))
            x = x + torch.cat(outs) @ lyr["o"].T
            u = rms(x, lyr["n2"]) @ lyr["up"].T
            gate, up = u.chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ lyr["down"].T
        return x[-1] @ emb.T  # the last position's logits (what sampling needs)

    return forward


def measure(fwd: Any, kind: str, point: tuple[int, ...], device: str, repeats: int) -> float:
    """Median ms of one iteration of ``kind`` at ``point``."""
    import torch

    if kind == "prefill":
        b, p = point
        segs = [("pre", 0, b, p, 0)]
        n = b * p
    elif kind == "decode":
        b, c = point
        segs = [("dec", 0, b, c, 0)]
        n = b
    else:
        k, b, c = point
        segs = [("chunk", 0, 1, c, b * (c + 1)), ("dec", k, b, c, 0)]
        n = k + b
    tokens = torch.zeros(n, dtype=torch.long, device=device)
    times = []
    with torch.inference_mode():
        for r in range(repeats + 1):
            if device == "cuda":
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fwd(tokens, segs)
                e1.record()
                torch.cuda.synchronize()
                ms = e0.elapsed_time(e1)
            else:
                t0 = time.perf_counter()
                fwd(tokens, segs)
                ms = (time.perf_counter() - t0) * 1000.0
            if r:  # the first is a warm-up
                times.append(ms)
    return statistics.median(times)


def fit(points: list[dict[str, Any]]) -> Any:
    """The simulator's iteration model fitted to the prefill and decode points."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "src"))
    from seedance.inference.perf import StepTimes

    pre: dict[float, list[float]] = {}
    for p in points:
        if p["kind"] == "prefill":
            pre.setdefault(float(p["batch"] * p["tokens"]), []).append(p["ms"])
    px = sorted(pre)
    py = list(np.maximum.accumulate([statistics.median(pre[x]) for x in px]))
    dec = [p for p in points if p["kind"] == "decode"]
    # decode: ms = base(b) + kv * b * ctx; the slope from least squares with one intercept per batch
    batches = sorted({p["batch"] for p in dec})
    a = np.zeros((len(dec), len(batches) + 1))
    y = np.zeros(len(dec))
    for r, p in enumerate(dec):
        a[r, batches.index(p["batch"])] = 1.0
        a[r, -1] = p["batch"] * p["ctx"]
        y[r] = p["ms"]
    sol = np.linalg.lstsq(a, y, rcond=None)[0]
    kv = max(float(sol[-1]), 0.0)
    base = list(np.maximum.accumulate(np.maximum(sol[:-1], 1e-6)))
    if len(px) < 2:
        px, py = [0.0, *px], [py[0] if py else 0.0, *py]
    if len(batches) < 2:
        batches, base = [0, *batches], [base[0], *base]
    return StepTimes(model="llama-7b-shape", gpu="measured", tp=1, source="gpu-calibration",
                     prefill_x=tuple(px), prefill_y=tuple(float(v) for v in py), prefill_sq_ms=0.0,
                     decode_x=tuple(float(b) for b in batches), decode_y=tuple(float(v) for v in base),
                     decode_ref_ctx=0.0, kv_ms_per_token=kv)


def predict(st: Any, p: dict[str, Any]) -> float:
    """A model's time for measured point ``p``."""
    if p["kind"] == "prefill":
        t = p["batch"] * p["tokens"]
        return float(st.prefill_ms(t, float(p["batch"] * p["tokens"] ** 2)))
    if p["kind"] == "decode":
        return float(st.decode_ms(p["batch"], p["batch"] * p["ctx"]))
    k, b, c = p["tokens"], p["batch"], p["ctx"]
    return float(st.iteration_ms(k, float(k * k + 2 * k * c), b, b * c))


def errors(st: Any, points: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and max absolute relative error per iteration kind."""
    out: dict[str, Any] = {}
    for kind in ("prefill", "decode", "mixed"):
        e = [abs(predict(st, p) - p["ms"]) / p["ms"] for p in points if p["kind"] == kind and p["ms"] > 0]
        if e:
            out[kind] = {"points": len(e), "median_abs_rel_err": round(statistics.median(e), 4),
                         "max_abs_rel_err": round(max(e), 4)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=120.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cpu-test", action="store_true", help="tiny model on the CPU (logic check only)")
    args = ap.parse_args(argv)
    t_start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        import torch
    except ImportError:
        print(json.dumps({"status": "not run", "detail": "torch is not installed"}))
        return 0
    if args.cpu_test:
        shape, grid, device, dtype = TINY, TINY_GRID, "cpu", torch.float32
    elif torch.cuda.is_available():
        shape, grid, device, dtype = LLAMA7B, GRID, "cuda", torch.bfloat16
    else:
        print(json.dumps({"status": "not run", "detail": "no CUDA device"}))
        return 0
    max_tokens = max([b * (c + 1) for b, c in grid["decode"]]
                     + [b * (c + 1) + k + c for k, b, c in grid["mixed"]] + [b * p for b, p in grid["prefill"]])
    fwd = build(shape, device, dtype, max_tokens)
    points: list[dict[str, Any]] = []
    skipped = 0
    reserve = 10.0  # seconds kept for the fit and the files
    for kind in ("prefill", "decode", "mixed"):
        for pt in grid[kind]:
            if time.monotonic() - t_start > args.budget_s - reserve:
                skipped += 1
                continue
            ms = measure(fwd, kind, pt, device, args.repeats)
            if kind == "prefill":
                points.append({"kind": kind, "batch": pt[0], "tokens": pt[1], "ctx": 0, "ms": ms})
            elif kind == "decode":
                points.append({"kind": kind, "batch": pt[0], "tokens": 1, "ctx": pt[1], "ms": ms})
            else:
                points.append({"kind": kind, "batch": pt[1], "tokens": pt[0], "ctx": pt[2], "ms": ms})
    (args.out / "points.json").write_text(json.dumps(points, indent=1))
    model = fit(points)
    summary: dict[str, Any] = {
        "status": "ok", "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (test)",
        "shape": shape.__dict__, "dtype": str(dtype), "points": len(points), "skipped_for_budget": skipped,
        "fitted": {"prefill_x": model.prefill_x, "prefill_ms": model.prefill_y, "decode_batches": model.decode_x,
                   "decode_base_ms": model.decode_y, "kv_ms_per_token": model.kv_ms_per_token},
        "fitted_model_error": errors(model, points),
    }
    if not args.cpu_test:
        from seedance.inference.model import get_model
        from seedance.inference.perf import vidur_step_times
        from seedance.traces.paths import data_file

        old = vidur_step_times(data_file("vidur-profiling/compute"), get_model("llama2-7b"), "H100-80GB", 1)
        summary["old_model"] = "vidur H100 llama2-7b tp1 + roofline attention (no H200 profile exists)"
        summary["old_model_error"] = errors(old, points) if old is not None else "profile not found"
    (args.out / "fit.json").write_text(json.dumps(summary, indent=1, default=str))
    summary["wall_s"] = round(time.monotonic() - t_start, 1)
    print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

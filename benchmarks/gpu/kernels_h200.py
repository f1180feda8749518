"""GPU part ``kernels``: the fused Triton kernel and eager / compiled / fused models on one GPU, bf16.

Run by ``benchmarks/gpu/run_all.py`` (or alone: ``python benchmarks/gpu/kernels_h200.py --out DIR``).
Budget: about 8 minutes on one H200. Its JSON summary is the last line of stdout (``status``: ``ok``,
``failed``, or ``not run`` without a CUDA GPU). Writes into ``DIR``:

* ``correctness.json``: the Triton kernel on the GPU against the PyTorch reference (same seed):
  dropout masks equal bit for bit, fp32 (IEEE products) values to 1e-5, bf16 to 1e-2, backward.
* ``ffn.json``: BERT's feed-forward up-projection (``M = batch x 128`` tokens, ``K = 768``,
  ``N = 3072``, bf16) with dropout 0.1 as in training and without (inference): unfused PyTorch
  (``addmm`` + GELU + ``dropout``) against the fused kernel, CUDA-event medians over 100 launches
  and ``torch.cuda.max_memory_allocated`` above the inputs; a ``BLOCK_M x BLOCK_N`` sweep.
* ``profile.json``: ``seedancectl kernels bench`` on the GPU (BERT-base and ResNet-50, eager /
  ``torch.compile`` / fused, bf16, batches 1, 8, 32, 100 timed runs, CUDA events,
  ``max_memory_allocated``) in the profile format ``seedancectl optimize deploy --profile`` reads.

Every figure is measured here; nothing is estimated.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def _median_ms(fn: Any, n: int = 100) -> float:
    import torch

    for _ in range(10):
        fn()
    times = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return float(times[len(times) // 2])


def _peak_mib(fn: Any) -> float:
    import torch

    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def correctness(out: Path) -> dict[str, Any]:
    import numpy as np
    import torch

    from seedance.kernels.fused import Tiles, fused_linear_act_dropout, reference_linear_act_dropout
    from seedance.kernels.philox import keep_mask

    res: dict[str, Any] = {}
    torch.manual_seed(0)
    m, k, n, p, seed = 1000, 768, 3072, 0.1, 1234
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1e-2)):
        x = torch.randn(m, k, device="cuda", dtype=dtype)
        w = (torch.randn(n, k, device="cuda", dtype=dtype) * 0.03).t()
        b = torch.randn(n, device="cuda", dtype=dtype)
        for act in ("relu", "gelu"):
            y = fused_linear_act_dropout(x, w, b, p, seed=seed, activation=act)
            r = reference_linear_act_dropout(x, w, b, p, seed=seed, activation=act)
            ones = fused_linear_act_dropout(x, torch.zeros_like(w), torch.ones_like(b), p, seed=seed, activation=act)
            mask_equal = bool(np.array_equal((ones != 0).cpu().numpy(), keep_mask(seed, m, n, p)))
            err = float(((y.float() - r.float()).abs() - tol * r.float().abs()).max())
            res[f"{dtype}-{act}"] = {"mask_equal": mask_equal, "max_excess_over_rtol": err, "tol": tol,
                                     "ok": mask_equal and err <= tol}
    xg = torch.randn(300, 256, device="cuda", requires_grad=True)
    wg = torch.randn(256, 512, device="cuda", requires_grad=True)
    bg = torch.randn(512, device="cuda", requires_grad=True)
    y = fused_linear_act_dropout(xg, wg, bg, p, seed=seed, activation="gelu", tiles=Tiles())
    gy = torch.randn_like(y)
    got = torch.autograd.grad((y * gy).sum(), (xg, wg, bg))
    r = reference_linear_act_dropout(xg, wg, bg, p, seed=seed, activation="gelu")
    want = torch.autograd.grad((r * gy).sum(), (xg, wg, bg))
    res["backward_max_rel_err"] = max(float((a - e).abs().max() / e.abs().max())
                                      for a, e in zip(got, want, strict=True))
    (out / "correctness.json").write_text(json.dumps(res, indent=2))
    return res


def _ffn_row(batch: int, p: float) -> dict[str, Any]:
    import torch

    from seedance.kernels.fused import Tiles, fused_linear_act_dropout

    k, n = 768, 3072
    m = batch * 128
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    lin = torch.nn.Linear(k, n, device="cuda", dtype=torch.bfloat16)
    w, b = lin.weight.t(), lin.bias

    def eager() -> Any:
        return torch.nn.functional.dropout(torch.nn.functional.gelu(torch.addmm(b, x, w)), p, training=p > 0)

    def fused(tiles: Tiles = Tiles()) -> Any:
        return fused_linear_act_dropout(x, w, b, p, seed=7, activation="gelu", tiles=tiles)

    with torch.no_grad():
        row: dict[str, Any] = {"batch": batch, "tokens": m, "p": p, "eager_ms": _median_ms(eager),
                               "fused_ms": _median_ms(fused), "eager_peak_mib": _peak_mib(eager),
                               "fused_peak_mib": _peak_mib(fused)}
        sweep = {}
        for bm, bn in ((64, 64), (64, 128), (128, 64), (128, 128)):
            t = Tiles(block_m=bm, block_n=bn, block_k=32, num_warps=4 if bm * bn <= 8192 else 8)
            sweep[f"{bm}x{bn}"] = _median_ms(lambda t=t: fused(t))
        row["tiles_ms"] = sweep
    row["fused_x_eager"] = row["fused_ms"] / row["eager_ms"]
    return row


def ffn(out: Path) -> dict[str, Any]:
    rows = []
    for batch in (1, 8, 32):
        for p in (0.0, 0.1):
            rows.append(_ffn_row(batch, p))
            print(json.dumps(rows[-1]), flush=True)
    (out / "ffn.json").write_text(json.dumps(rows, indent=2))
    return {"rows": rows}


def models(out: Path, budget_s: float) -> dict[str, Any]:
    from seedance.kernels.bench import BenchOptions, run_bench

    doc = run_bench(BenchOptions(device="cuda", dtype="bfloat16", batches=(1, 8, 32), runs=30, warmup=5),
                    progress=lambda s: print(s, flush=True))
    doc["command"] = "benchmarks/gpu/kernels_h200.py (seedance.kernels.bench, device cuda, bfloat16)"
    (out / "profile.json").write_text(json.dumps(doc, indent=2))
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=210)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"status": "not run", "detail": "no CUDA GPU visible"}))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    info = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    print(json.dumps(info), flush=True)
    c = correctness(out)
    print(json.dumps(c), flush=True)
    ok = all(v.get("ok", True) for v in c.values() if isinstance(v, dict))
    ffn(out)
    print(f"elapsed {time.time() - t0:.0f} s", flush=True)
    models(out, args.budget_s - (time.time() - t0))
    summary = {"status": "ok" if ok else "failed", "device": info["device"], "correctness_ok": ok,
               "seconds": round(time.time() - t0, 1), "files": ["correctness.json", "ffn.json", "profile.json"]}
    print(json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

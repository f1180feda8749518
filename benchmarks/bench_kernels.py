"""The fused linear + GELU operator on the CPU: unfused PyTorch vs ``torch.compile`` vs the TVM kernel.

Run: ``.venv/bin/python benchmarks/bench_kernels.py [--tokens 128,512] [--runs 100]`` (wrap in
``flock /tmp/seedance-bench.lock`` on a shared machine).

Shape: BERT-base's feed-forward up-projection, ``M = tokens`` x ``K = 768`` -> ``N = 3072``, fp32,
inference (no dropout). Variants, timed interleaved in one process (p50 / p95 over ``--runs`` after
warm-up), ratios against unfused PyTorch measured in the same run:

* ``torch``: ``gelu(addmm(b, x, w))``: two kernels, the pre-activation written out;
* ``compiled``: the same function through ``torch.compile`` (Inductor fuses the epilogue);
* ``tvm``: :mod:`seedance.kernels.tvm_fused`, one fused kernel.

(The Triton kernel needs a GPU: on the CPU it runs only on Triton's interpreter, which checks
correctness and is not a speed path; its GPU timing is ``benchmarks/gpu/kernels_h200.py``.)
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="128,512")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch

    from seedance.kernels.fused import reference_linear_act_dropout
    from seedance.kernels.tvm_fused import TvmFusedLinear

    torch.manual_seed(0)
    k, n = 768, 3072
    w = torch.randn(k, n) * 0.03
    b = torch.randn(n)

    def unfused(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(torch.addmm(b, x, w))

    compiled = torch.compile(unfused)
    tvm_op = TvmFusedLinear("gelu")
    rows = []
    for m in (int(t) for t in args.tokens.split(",")):
        x = torch.randn(m, k)
        fns = {"torch": unfused, "compiled": compiled, "tvm": lambda x: tvm_op(x, w, b)}
        ref = reference_linear_act_dropout(x, w, b, activation="gelu")
        with torch.inference_mode():
            for name, fn in fns.items():
                for _ in range(5):
                    y = fn(x)
                err = float((y - ref).abs().max())
                assert err < 1e-4, (name, err)
            times: dict[str, list[float]] = {name: [] for name in fns}
            for _ in range(args.runs):
                for name, fn in fns.items():
                    t0 = time.perf_counter()
                    fn(x)
                    times[name].append((time.perf_counter() - t0) * 1e3)
        base = float(np.median(times["torch"]))
        for name, ts in times.items():
            p50, p95 = float(np.median(ts)), float(np.quantile(ts, 0.95))
            rows.append({"tokens": m, "variant": name, "p50_ms": round(p50, 3), "p95_ms": round(p95, 3),
                         "x_torch": round(p50 / base, 3), "gflops_per_s": round(2 * m * k * n / p50 / 1e6, 1)})
            print(f"M={m:5d} {name:9s} p50 {p50:8.2f} ms  p95 {p95:8.2f} ms  {p50 / base:5.2f}x torch  "
                  f"{rows[-1]['gflops_per_s']:7.1f} GFLOP/s", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()

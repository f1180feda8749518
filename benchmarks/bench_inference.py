"""Acceptance figures of the inference issue, measured in one run.

1. Serving comparison on the Azure conversation trace (1 hour, 19,366 requests): every policy on
   the same replicas, KV pool and SLO, first at the load where static batching (batch 16) still
   keeps the SLO, then each policy's SLO capacity (the highest load it keeps the SLO at, and its
   goodput there). Ratios are printed against static and against continuous batching measured in
   this run, beside the whitepaper's claim.
2. Saturation throughput (no SLO): completed requests/s and tokens/s of every policy when the
   trace is replayed ``--saturation`` times faster than recorded, so every policy is overloaded
   (the closest analogue of a closed-loop "QPS" benchmark).
3. ``--slo-sweep``: the capacity comparison again for other SLO targets (sensitivity).
4. The real executor: batched outputs against unbatched ones, KV accounting against tensors.

    .venv/bin/python benchmarks/bench_inference.py --out out/inference.json --report out/inference-report
    .venv/bin/python benchmarks/bench_inference.py --slo-sweep 2500:150,5000:200 --skip-main --skip-executor
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from seedance.inference.experiment import Deployment, Experiment, compare
from seedance.inference.metrics import SLO
from seedance.inference.trace import CONV_TRACE, load_azure_trace
from seedance.traces.paths import data_file

POLICIES = ["static", "dynamic", "continuous", "continuous-chunked", "seedance"]


def table(payload: dict[str, Any]) -> None:
    cols = ["policy", "goodput_rps", "ttft_ms_p99", "tpot_ms_p99", "peak_kv_mib", "preemptions", "meets_slo",
            "capacity_rps", "capacity_rate_scale", "capacity_ttft_ms_p99", "capacity_tpot_ms_p99"]
    s = payload["setup"]
    print(f"load {s['load_rps']} req/s (rate scale {s['rate_scale']}, {s['load_chosen_as']}); SLO {s['slo']}")
    print("".join(f"{c:>22}" for c in cols))
    for r in payload["results"]:
        print("".join(f"{r.get(c, '')!s:>22}" for c in cols))
    by = {r["policy"]: r for r in payload["results"]}
    base = by.get("static", {}).get("capacity_rps")
    cont = by.get("continuous", {}).get("capacity_rps")
    for r in payload["results"]:
        cap = r.get("capacity_rps")
        if cap is not None and base and cont:
            print(f"  {r['policy']:<20} capacity {cap:8.3f} req/s = {cap / base:6.2f}x static, {cap / cont:5.2f}x "
                  f"continuous")
    for k, v in payload.get("claim", {}).items():
        print(f"  {k}: {v}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--ttft-ms", type=float, default=10_000.0)
    ap.add_argument("--tpot-ms", type=float, default=200.0)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--slo-sweep", default="", help="TTFT_MS:TPOT_MS,... capacity comparisons at other SLOs")
    ap.add_argument("--saturation", type=float, default=3.0, help="rate scale of the saturation run (0: skip)")
    ap.add_argument("--skip-main", action="store_true")
    ap.add_argument("--skip-executor", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="write all results as JSON here")
    ap.add_argument("--report", type=Path, default=None, help="HTML report of the main comparison")
    args = ap.parse_args()
    trace = load_azure_trace(args.trace or data_file(CONV_TRACE))
    policies = args.policies.split(",")
    results: dict[str, Any] = {}
    if not args.skip_main:
        t0 = time.perf_counter()
        exp = Experiment(trace, Deployment(replicas=args.replicas), SLO(args.ttft_ms, args.tpot_ms))
        payload, runs = compare(exp, policies, capacity=True)
        print(f"== main comparison ({time.perf_counter() - t0:.0f} s)")
        table(payload)
        results["main"] = payload
        if args.report:
            from seedance.inference.report import write_report

            print("report:", write_report(args.report, payload, runs))
    if args.saturation > 0:
        exp = Experiment(trace, Deployment(replicas=args.replicas), SLO(args.ttft_ms, args.tpot_ms))
        print(f"== saturation: rate scale {args.saturation} ({exp.trace.rate * args.saturation:.1f} req/s offered)")
        sat = []
        for p in policies:
            row, _ = exp.simulate(p, args.saturation)
            sat.append(row)
        base = next((r for r in sat if r["policy"] == "static"), sat[0])
        for r in sat:
            ratio = r["completed_rps"] / base["completed_rps"]
            print(f"  {r['policy']:<20} completed {r['completed_rps']:7.3f} req/s ({ratio:5.2f}x {base['policy']}), "
                  f"{r['tokens_per_s']:9.1f} tokens/s, peak KV {r['peak_kv_mib']:10.1f} MiB, "
                  f"preemptions {r['preemptions']}")
        results["saturation"] = sat
    for item in filter(None, args.slo_sweep.split(",")):
        ttft, tpot = (float(x) for x in item.split(":"))
        t0 = time.perf_counter()
        exp = Experiment(trace, Deployment(replicas=args.replicas), SLO(ttft, tpot))
        try:
            payload, _ = compare(exp, policies, capacity=True)
        except Exception as exc:  # e.g. static keeps this SLO at no load
            print(f"== SLO TTFT {ttft:g} ms / TPOT {tpot:g} ms: {exc}")
            continue
        print(f"== SLO TTFT {ttft:g} ms / TPOT {tpot:g} ms ({time.perf_counter() - t0:.0f} s)")
        table(payload)
        results[f"slo_{ttft:g}_{tpot:g}"] = payload
    if not args.skip_executor:
        from seedance.inference.executor import ExecutorConfig, run_executor_comparison

        t0 = time.perf_counter()
        ex = run_executor_comparison(trace, policies, requests=48, token_scale=0.05, rate_scale=20.0,
                                     config=ExecutorConfig(kv_blocks=96))
        print(f"== real executor ({time.perf_counter() - t0:.0f} s): {ex['setup']}")
        for r in ex["results"]:
            print("  ", r)
        results["executor"] = ex
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()

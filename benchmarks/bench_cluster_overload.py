"""Goodput beyond capacity on the multi-turn workload: the share of offered requests that meet the SLO.

At offered loads of ``--factors`` × the tuned chunked baseline's SLO capacity (its tuned options
and capacity rate scale come from ``bench_cluster.py``'s output, passed here), the tuned baseline,
prefix-aware routing (with prefix caching), plus admission control, and ``seedance`` with all three.
Every row replays the same requests, so ``slo_attainment`` is goodput over the same arrival span.

    .venv/bin/python benchmarks/bench_cluster_overload.py --slo standard --scale 2.594 \\
        --tokens 1024 --seqs 128 --factors 1.5,2.0
    .venv/bin/python benchmarks/bench_cluster_overload.py --slo tight --scale 1.477 --tokens 482 --seqs 256
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from seedance.inference.experiment import Deployment, Experiment
from seedance.inference.metrics import SLO
from seedance.inference.routing import Admission
from seedance.inference.trace import CONV_TRACE, load_azure_trace
from seedance.inference.workloads import multi_turn
from seedance.traces.paths import data_file

SLOS = {"standard": SLO(ttft_ms=10_000.0, tpot_ms=200.0), "tight": SLO(ttft_ms=2_000.0, tpot_ms=100.0)}
KEYS = ("slo_attainment", "goodput_rps", "rejected", "ttft_ms_p99", "tpot_ms_p99", "prefix_hit_rate", "arrival_rps")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--slo", choices=sorted(SLOS), default="standard")
    ap.add_argument("--scale", type=float, required=True, help="the tuned baseline's capacity rate scale")
    ap.add_argument("--tokens", type=int, required=True, help="its tuned max_num_batched_tokens")
    ap.add_argument("--seqs", type=int, required=True, help="its tuned max_num_seqs")
    ap.add_argument("--factors", default="1.5,2.0")
    ap.add_argument("--duration-s", type=float, default=300.0)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--open-loop", action="store_true", help="open-loop sessions (the old workload)")
    ap.add_argument("--cache-threshold", type=float, default=0.1, help="the prefix-aware router's cache_threshold")
    args = ap.parse_args()
    slo = SLOS[args.slo]
    exp = Experiment(multi_turn(load_azure_trace(args.trace or data_file(CONV_TRACE)), closed_loop=not args.open_loop),
                     Deployment(replicas=args.replicas), slo, duration_s=args.duration_s)
    adm = Admission(ttft_ms=(slo.ttft_ms,))
    tuned = {"max_num_batched_tokens": args.tokens, "max_num_seqs": args.seqs}
    cache: dict[str, Any] = {"prefix_cache": True, "router": "prefix-aware",
                             "router_options": {"cache_threshold": args.cache_threshold}}
    cases: list[tuple[str, str, dict[str, Any] | None, dict[str, Any]]] = [
        ("tuned-chunked", "continuous-chunked", tuned, {}),
        ("+prefix-router", "continuous-chunked", tuned, cache),
        ("+admission", "continuous-chunked", tuned, {**cache, "admission": adm}),
        ("seedance+all", "seedance", None, {**cache, "admission": adm}),
    ]
    for f in (float(x) for x in args.factors.split(",")):
        base = None
        for name, policy, opts, eng in cases:
            row, _ = exp.simulate(policy, args.scale * f, options=opts, **eng)
            out = {k: row.get(k) for k in KEYS}
            base = base or out["slo_attainment"]
            out["attainment_vs_tuned_chunked"] = round(out["slo_attainment"] / base, 3) if base else None
            print(json.dumps({"slo": args.slo, "load_factor": f, "mechanism": name, **out}), flush=True)


if __name__ == "__main__":
    main()

"""Cluster-scale serving mechanisms against the tuned chunked-prefill baseline (the issue's acceptance).

For each workload (the Azure conversation trace as is, ``conversation``; the same requests with
multi-turn session structure, :func:`seedance.inference.workloads.multi_turn`: closed-loop sessions
``multi-turn``, the open-loop variant ``multi-turn-open``; shared system prompts,
:func:`seedance.inference.workloads.system_prompts`, ``system-prompt``) and each SLO (the standard p99 TTFT
<= 10 s, TPOT <= 200 ms; the tight p99 TTFT <= 2 s, TPOT <= 100 ms): tune ``continuous-chunked``,
then measure each mechanism's SLO capacity on the same replicas (:mod:`seedance.inference.cluster`);
at the tight SLO also search the prefill:decode split of disaggregated serving. Prints one JSON.

    .venv/bin/python benchmarks/bench_cluster.py --duration-s 1200 --out cluster.json
    .venv/bin/python benchmarks/bench_cluster.py --duration-s 0 --workloads multi-turn --slos tight --tol 0.08
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from seedance.inference.cluster import compare_mechanisms, disaggregation_search
from seedance.inference.disagg import LINKS
from seedance.inference.experiment import Deployment, Experiment
from seedance.inference.metrics import SLO
from seedance.inference.trace import CONV_TRACE, load_azure_trace
from seedance.inference.workloads import multi_turn, structure_stats, system_prompts
from seedance.traces.paths import data_file

SLOS = {"standard": SLO(ttft_ms=10_000.0, tpot_ms=200.0), "tight": SLO(ttft_ms=2_000.0, tpot_ms=100.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--duration-s", type=float, default=1200.0, help="Seconds of the trace replayed (0: all)")
    ap.add_argument("--think-s", type=float, default=10.0, help="Mean think time of closed-loop sessions")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--workloads", default="conversation,multi-turn")
    ap.add_argument("--slos", default="standard,tight")
    ap.add_argument("--link", default="ib-hdr", choices=sorted(LINKS))
    ap.add_argument("--no-disagg", action="store_true")
    ap.add_argument("--tol", type=float, default=0.03, help="Relative precision of each capacity search")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    base = load_azure_trace(args.trace or data_file(CONV_TRACE))
    traces = {"conversation": lambda: base, "multi-turn": lambda: multi_turn(base, think_s=args.think_s),
              "multi-turn-open": lambda: multi_turn(base, closed_loop=False),
              "system-prompt": lambda: system_prompts(base)}
    duration = args.duration_s or None
    out: dict[str, object] = {"duration_s": args.duration_s, "replicas": args.replicas}
    for w in args.workloads.split(","):
        tr = traces[w]()
        out[f"{w}/structure"] = structure_stats(tr)
        print(json.dumps({f"{w}/structure": out[f"{w}/structure"]}), flush=True)
        for sname in args.slos.split(","):
            t0 = time.perf_counter()
            exp = Experiment(tr, Deployment(replicas=args.replicas), SLOS[sname], duration_s=duration)
            res = compare_mechanisms(exp, tol=args.tol,
                                     progress=lambda r: print("progress", json.dumps(r, default=str), flush=True))
            if sname == "tight" and not args.no_disagg:
                res["disaggregation"] = disaggregation_search(
                    exp, res["baseline"]["tuned_options"], link_gbs=LINKS[args.link][0],
                    prefill_options={"max_num_batched_tokens": 8192}, tol=args.tol)
            res["wall_s"] = round(time.perf_counter() - t0, 1)
            out[f"{w}/{sname}"] = res
            print(json.dumps({f"{w}/{sname}": res}, default=str), flush=True)
    text = json.dumps(out, indent=2, default=str)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()

"""Replay speed of the serving simulator on the 1-hour Azure conversation trace.

For each policy: the median wall time of ``--repeat`` full replays, the events and iterations it
simulated, and two ratios measured in the same run: against the 5 s target of the issue, and
against a bare :class:`~seedance.sim.engine.EventLoop` skeleton that processes the same number of
events with no serving logic (the engine's floor on this machine, right now).

    .venv/bin/python benchmarks/bench_inference_speed.py            # all policies, 4 replicas, load 1.0
    .venv/bin/python benchmarks/bench_inference_speed.py --policies seedance --repeat 5
    .venv/bin/python benchmarks/bench_inference_speed.py --mechanisms --repeat 3   # cluster mechanisms too

``--mechanisms`` adds, on the multi-turn workload built from the same trace (closed-loop sessions),
the chunked baseline with prefix caching, with prefix-aware routing (SGLang's thresholds, then
``cache_threshold=0.1``), with admission control, ``seedance`` with all three, the perfect-cache
ceiling, and disaggregated serving (1 prefill : 3 decode replicas).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from seedance.inference.experiment import Deployment, Experiment
from seedance.inference.metrics import SLO
from seedance.inference.trace import CONV_TRACE, load_azure_trace
from seedance.sim.engine import EventLoop
from seedance.traces.paths import data_file

TARGET_S = 5.0


def skeleton_seconds(events: int) -> float:
    """Wall time of the bare event loop: ``events / 2`` arrivals, each scheduling one wake-up."""
    half = max(events // 2, 1)
    loop: EventLoop

    def on_arrival(t: float, i: int) -> None:
        loop.schedule(t + 0.5, 1, i)

    def on_wake(t: float, i: int) -> None:
        return None

    loop = EventLoop([on_arrival, on_wake])
    t0 = time.perf_counter()
    loop.run((float(i), i) for i in range(half))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=None, help="Azure-format trace (default: conversation trace)")
    ap.add_argument("--policies", default="static,dynamic,continuous,continuous-chunked,seedance")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--rate-scale", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mechanisms", action="store_true", help="also time the cluster mechanisms")
    args = ap.parse_args()
    trace = load_azure_trace(args.trace or data_file(CONV_TRACE))
    exp = Experiment(trace, Deployment(replicas=args.replicas), SLO())
    print(f"trace {exp.trace.source}: {len(exp.trace)} requests over {exp.trace.span_s / 60:.1f} min; "
          f"{args.replicas} replicas; rate scale {args.rate_scale}; median of {args.repeat}")
    print(f"{'policy':<20}{'median s':>10}{'min s':>8}{'events':>9}{'iterations':>12}{'events/s':>11}"
          f"{'vs 5 s':>8}{'vs skeleton':>13}")
    for policy in args.policies.split(","):
        walls = []
        row: dict[str, Any] = {}
        cpus = []
        for _ in range(args.repeat):
            c0 = time.process_time()
            row, _run = exp.simulate(policy, args.rate_scale)
            cpus.append(time.process_time() - c0)
            walls.append(float(row["wall_s"]))  # the run itself, without loading the trace
        med = statistics.median(walls)
        events = int(str(row["events"]))
        skel = statistics.median(skeleton_seconds(events) for _ in range(args.repeat))
        print(f"{policy:<20}{med:>10.2f}{min(walls):>8.2f}{events:>9}{int(str(row['iterations'])):>12}"
              f"{events / med:>11,.0f}{med / TARGET_S:>8.2f}{med / skel:>12.1f}x"
              f"   cpu {statistics.median(cpus):.2f} s")
    if args.mechanisms:
        from seedance.inference.disagg import Disaggregation
        from seedance.inference.routing import Admission
        from seedance.inference.workloads import multi_turn

        mt = Experiment(multi_turn(trace), Deployment(replicas=args.replicas), SLO())
        adm = Admission(ttft_ms=(10_000.0,))
        r01: dict[str, Any] = {"prefix_cache": True, "router": "prefix-aware",
                               "router_options": {"cache_threshold": 0.1}}
        cases: list[tuple[str, str, dict[str, Any]]] = [
            ("mt/chunked", "continuous-chunked", {}),
            ("mt/+prefix-cache", "continuous-chunked", {"prefix_cache": True}),
            ("mt/+prefix-router", "continuous-chunked", {"prefix_cache": True, "router": "prefix-aware"}),
            ("mt/+prefix-router-0.1", "continuous-chunked", {**r01}),
            ("mt/+admission", "continuous-chunked", {**r01, "admission": adm}),
            ("mt/seedance+all", "seedance", {**r01, "admission": adm}),
            ("mt/perfect-cache", "continuous-chunked", {"perfect_cache": True}),
            ("mt/disagg-1:3", "continuous-chunked", {"disaggregate": Disaggregation(prefill=1)}),
        ]
        for name, policy, eng in cases:
            walls, cpus = [], []
            for _ in range(args.repeat):
                c0 = time.process_time()
                row, _run = mt.simulate(policy, args.rate_scale, **eng)
                cpus.append(time.process_time() - c0)
                walls.append(float(row["wall_s"]))
            med = statistics.median(walls)
            events = int(str(row["events"]))
            print(f"{name:<20}{med:>10.2f}{min(walls):>8.2f}{events:>9}{int(str(row['iterations'])):>12}"
                  f"{events / med:>11,.0f}{med / TARGET_S:>8.2f}{'':>13}   cpu {statistics.median(cpus):.2f} s")


if __name__ == "__main__":
    main()

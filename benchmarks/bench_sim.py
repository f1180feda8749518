"""Simulator speed on the default Alibaba trace, and the engine's event rate.

Run: ``.venv/bin/python benchmarks/bench_sim.py [--repeat 5]``

Prints medians and ratios against baselines measured in the same run (machines are noisy):
  * one inflation run to 130% (seed 42) for ``fgd``, ``seedance``, ``best-fit`` and ``random`` (random is the
    cheapest policy: its ratio shows what scoring costs on top of filtering and bookkeeping);
  * the event engine on a synthetic stream of arrivals and departures, against a bare tuple-heap
    loop doing the same pushes and pops.
Targets: FGD ≤ 10 s, best-fit ≤ 2 s, seedance ≤ 20 s, engine ≥ 0.5 M events/s.
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import time

import numpy as np

from seedance.sim.engine import EventLoop
from seedance.sim.inflation import run_inflation
from seedance.traces import load_nodes, load_pods
from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file


def time_policy(policy: str, repeat: int) -> list[float]:
    spec, trace = load_nodes(data_file(DEFAULT_NODES)), load_pods(data_file(DEFAULT_PODS))
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run_inflation(spec, trace, policy, 42)
        out.append(time.perf_counter() - t0)
    return out


def synthetic(n_jobs: int, seed: int = 0) -> tuple[list[tuple[float, int]], np.ndarray]:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0, n_jobs))
    durations = rng.lognormal(3.0, 1.0, n_jobs)
    return [(float(t), i) for i, t in enumerate(arrivals)], durations


def engine_rate(n_jobs: int) -> float:
    arrivals, dur = synthetic(n_jobs)
    durations = dur.tolist()
    loop: EventLoop

    def on_arrival(t: float, i: int) -> None:
        loop.schedule(t + durations[i], 1, i)

    def on_end(t: float, i: int) -> None:
        pass

    loop = EventLoop([on_arrival, on_end])
    t0 = time.perf_counter()
    n = loop.run(arrivals)
    return n / (time.perf_counter() - t0)


def bare_rate(n_jobs: int) -> float:
    arrivals, dur = synthetic(n_jobs)
    durations = dur.tolist()
    heap: list[tuple[float, int, int, int]] = []
    t0 = time.perf_counter()
    n = 0
    for seq, (t, i) in enumerate(arrivals, start=1):
        while heap and heap[0][0] <= t:
            heapq.heappop(heap)
            n += 1
        heapq.heappush(heap, (t + durations[i], seq, 1, i))
        n += 1
    while heap:
        heapq.heappop(heap)
        n += 1
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--events", type=int, default=500_000, help="jobs in the synthetic stream (2 events each)")
    args = ap.parse_args()
    med = {}
    for pol in ("random", "best-fit", "fgd", "seedance"):
        ts = time_policy(pol, args.repeat)
        med[pol] = statistics.median(ts)
        print(f"{pol:9s} one run to 130%: median {med[pol]:.2f} s  (min {min(ts):.2f}, max {max(ts):.2f}, n={len(ts)})")
    print(f"ratio fgd/random {med['fgd'] / med['random']:.2f}, best-fit/random {med['best-fit'] / med['random']:.2f}")
    print(f"ratio seedance/fgd {med['seedance'] / med['fgd']:.2f}")
    print(
        f"targets: fgd {med['fgd']:.2f} s vs 10 s, best-fit {med['best-fit']:.2f} s vs 2 s, "
        f"seedance {med['seedance']:.2f} s vs 20 s"
    )
    eng = [engine_rate(args.events) for _ in range(3)]
    bare = [bare_rate(args.events) for _ in range(3)]
    e, b = statistics.median(eng), statistics.median(bare)
    print(f"engine: median {e / 1e6:.2f} M events/s; bare tuple-heap loop {b / 1e6:.2f} M events/s; ratio {e / b:.2f}")
    print(f"target: engine {e / 1e6:.2f} M events/s vs 0.5 M events/s")


if __name__ == "__main__":
    main()

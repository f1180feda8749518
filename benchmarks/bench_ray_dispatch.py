"""What the Ray backend adds to running a placed job: the supervisor, log capture, status polling.

Setup (not timed): a local Ray cluster of ``--nodes`` raylets with 2 logical GPUs each
(``seedance.backends.local_cluster.local_ray_cluster``, the tests' settings), ``--jobs`` placed jobs of a quarter GPU
each, spread round-robin over the nodes' GPUs (what Seedance would have decided), workload
``sleep`` of ``--seconds`` (0: the run is all overhead).

Timed, in the same run:
* **baseline**: the same Ray tasks (same options: hard node affinity, ``num_gpus``, per-GPU and
  label resources) submitted straight from the driver and awaited with ``ray.get``;
* **seedance**: ``RayDispatcher.dispatch`` of every job, then ``poll`` until every one succeeded
  (what the scheduling loop does), with the supervisor, start report and log shipping.
Rounds alternate baseline and seedance (``--rounds``). Printed per round: makespans and their ratio,
dispatch and poll latency per call, placements checked; the median ratio; the 1-minute load average.

    RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 .venv/bin/python benchmarks/bench_ray_dispatch.py
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

GPUS = 2
LABELS = {"gpu.sla.level": "silver"}


def baseline_task(seconds: float) -> str:
    """The workload without Seedance around it."""
    import ray

    time.sleep(seconds)
    return str(ray.get_runtime_context().get_node_id())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=48)
    ap.add_argument("--seconds", type=float, default=0.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-calls", type=int, default=None, help="Ray max_calls (default: Ray's, 1 for GPU tasks).")
    args = ap.parse_args()

    import ray

    from seedance.backends.local_cluster import local_ray_cluster
    from seedance.backends.ray_backend import ray_node_resources

    names = [f"gpu-{i}" for i in range(args.nodes)]
    nodes = [(n, ray_node_resources(n, GPUS, LABELS)) for n in names]
    with local_ray_cluster(nodes, gpus_per_node=GPUS) as local:
        ray.init(address=local.address, log_to_driver=False, namespace="bench", logging_level=logging.WARNING)
        try:
            print(json.dumps(_rounds(args, local.temp_dir, {n: str(h.node_id) for n, h in local.handles.items()})))
        finally:
            ray.shutdown()


def _rounds(args: argparse.Namespace, temp: Path, ids: dict[str, str]) -> dict[str, Any]:
    """Warm up, then the alternating baseline / seedance rounds; the result record."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from seedance.backends.dispatch import BackendStatus, DispatchRequest
    from seedance.backends.ray_backend import RayDispatcher, RaySettings, task_options

    names = list(ids)
    settings = RaySettings(namespace="bench", log_dir=str(temp / "logs"), max_calls=args.max_calls)
    fn = ray.remote(baseline_task)
    d = RayDispatcher(settings)
    ray.get(d.supervisor().ping.remote())
    # warm-up: one task per node, so the first round does not pay for the first workers alone
    ray.get([fn.options(num_gpus=0, num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
        ids[n], soft=False)).remote(0.0) for n in names])
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):  # alternate, so neither side always runs on a warmer worker pool
        jobs = [DispatchRequest(
            job_id=r * args.jobs + i + 1, tenant_id=1, name=f"b{i}", kind="TrainingJob", tier="silver",
            cluster="c", node=names[i % args.nodes], gpu_model="A100-80GB",
            gpu_indices=((i // args.nodes) % GPUS,), gpu_milli=250, cpu_milli=500, memory_mib=512,
            duration_hours=None, labels={"seedance.io/workload": "sleep", "seedance.io/seconds": str(args.seconds)},
            node_labels=LABELS,
        ) for i in range(args.jobs)]
        t = time.perf_counter()
        refs = [fn.options(**task_options(j, settings), scheduling_strategy=NodeAffinitySchedulingStrategy(
            ids[j.node], soft=False)).remote(args.seconds) for j in jobs]
        where = ray.get(refs)
        base_s = time.perf_counter() - t
        assert where == [ids[j.node] for j in jobs]

        t = time.perf_counter()
        lat: list[float] = []
        handles_: list[str] = []
        for j in jobs:
            t1 = time.perf_counter()
            handles_.append(d.dispatch(j))
            lat.append(time.perf_counter() - t1)
        polls: list[float] = []
        while True:
            t1 = time.perf_counter()
            st = d.poll(handles_)
            polls.append(time.perf_counter() - t1)
            if all(s is not BackendStatus.RUNNING for s in st.values()):
                break
            time.sleep(0.05)
        sd_s = time.perf_counter() - t
        assert all(s is BackendStatus.SUCCEEDED for s in st.values()), st
        runs = [a for a in d.attempts() if a["job_id"] > r * args.jobs]
        rounds.append({
            "baseline_makespan_s": round(base_s, 2), "seedance_makespan_s": round(sd_s, 2),
            "ratio": round(sd_s / base_s, 2), "dispatch_ms_p50": round(1000 * statistics.median(lat), 2),
            "dispatch_ms_max": round(1000 * max(lat), 2), "poll_ms_p50": round(1000 * statistics.median(polls), 2),
            "placement_matches": sum(a["ran_on"] == ids[a["node"]] for a in runs), "runs": len(runs),
        })
    out: dict[str, Any] = {
        "nodes": args.nodes, "jobs": args.jobs, "seconds": args.seconds, "max_calls": args.max_calls,
        "rounds": rounds, "median_ratio": statistics.median(x["ratio"] for x in rounds),
        "load_1min": round(os.getloadavg()[0], 2),
    }
    return out


if __name__ == "__main__":
    main()

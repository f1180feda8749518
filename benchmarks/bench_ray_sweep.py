"""The full FGD sweep on a 3-node local Ray cluster against the local executor: same JSON, and wall times.

The sweep: the FGD paper's 14 Alibaba pod lists × every registered placement policy × seeds 42-44
(14 × 7 × 3 = 294 runs), ``seedancectl simulate``'s default mode (inflation to 130% of capacity) on
the real GPU node list. It runs twice through the CLI itself, each time a fresh
``python -m seedance.cli.main simulate ... -o json --out FILE`` process:

* **local**: ``--executor local --workers W`` (W processes of this machine; default 3);
* **ray**: ``--executor ray=ADDRESS`` on a local Ray cluster started by this script (a head and two
  worker raylets of one CPU each: 3 CPUs, the cluster of ``tests/sim/test_ray_sweep.py``, from
  ``tests.sim.ray_sweeps.local_ray_cluster``), which the sweep joins by address.

Wall time of each sweep is that process's start to exit (imports, input checks, every run, the
summary and the file). The two results files are compared with the timing fields left out
(``tests.sim.ray_sweeps.TIMING_FIELDS``: every run's ``wall_s`` and the summary's ``wall_s_mean``,
measured seconds that depend on where a run happened); everything else must be equal. Printed as
JSON: runs, both wall times and their ratio, CPU count, the 1-minute load average before and after,
identical yes/no and, if not, the first differing record.

    .venv/bin/python benchmarks/bench_ray_sweep.py --ray-lock /tmp/seedance-ray.lock [--out sweep.json]
    .venv/bin/python benchmarks/bench_ray_sweep.py --traces default,cpu050 --policies fgd,random --seeds 42

``--ray-lock PATH`` holds ``flock`` on PATH while the Ray cluster is up (not during the local sweep).
``--per-trace`` runs one pair of sweeps per trace instead (21 runs each; the executor that goes first
alternates, the Ray cluster is started for each Ray sweep and the lock released between), writing
the figures after each trace: on a machine too busy to finish the whole sweep, what completed is
kept. Its wall times are sums over the traces, each with one CLI start (a few seconds).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sim.ray_sweeps import TIMING_FIELDS, first_difference, local_ray_cluster  # noqa: E402

from seedance.scheduling.framework import PLACEMENT_POLICIES  # noqa: E402
from seedance.traces.paths import DEFAULT_NODES, data_file  # noqa: E402

FGD_TRACES = ("default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare40", "gpushare60", "gpushare100",
              "gpuspec10", "gpuspec20", "gpuspec33", "multigpu20", "multigpu30", "multigpu50")


@contextmanager
def held(lock: Path | None) -> Iterator[float]:
    """``flock`` on ``lock`` (none: nothing); yields the seconds waited for it."""
    if lock is None:
        yield 0.0
        return
    t0 = time.perf_counter()
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - t0
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def simulate(pods: Sequence[Path], policies: str, seeds: str, out: Path, executor: str, workers: int) -> float:
    """One ``seedancectl simulate`` process; returns its wall seconds."""
    cmd = [sys.executable, "-m", "seedance.cli.main", "simulate", "--nodes", str(data_file(DEFAULT_NODES)),
           *(a for p in pods for a in ("--pods", str(p))), "--policy", policies, "--seeds", seeds,
           "-o", "json", "--out", str(out), "--executor", executor, "--workers", str(workers)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def pair(pods: Sequence[Path], policies: str, args: argparse.Namespace, tag: str, ray_first: bool) -> dict[str, Any]:
    """The sweep of ``pods`` with both executors (in that order); its figures."""
    local_out, ray_out = args.work / f"{tag}-local.json", args.work / f"{tag}-ray.json"
    walls: dict[str, float] = {}
    for name in ("ray", "local") if ray_first else ("local", "ray"):
        if name == "local":
            walls[name] = simulate(pods, policies, args.seeds, local_out, "local", args.workers)
            continue
        with held(args.ray_lock) as waited, local_ray_cluster(args.nodes) as address:
            walls[name] = simulate(pods, policies, args.seeds, ray_out, f"ray={address}", args.workers)
    local = json.loads(local_out.read_text())
    remote = json.loads(ray_out.read_text())
    diff = first_difference(local, remote)
    return {
        "traces": [p.stem.removeprefix("openb_pod_list_") for p in pods], "first": "ray" if ray_first else "local",
        "runs": len(local["results"]), "runs_ray": len(remote["results"]),
        "local_wall_s": round(walls["local"], 1), "ray_wall_s": round(walls["ray"], 1),
        "ray_lock_wait_s": round(waited, 1),
        "sum_run_wall_s_local": round(sum(r["wall_s"] for r in local["results"]), 1),
        "sum_run_wall_s_ray": round(sum(r["wall_s"] for r in remote["results"]), 1),
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        "identical": diff is None, "first_difference": diff,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=",".join(FGD_TRACES), help="pod lists openb_pod_list_NAME.csv")
    ap.add_argument("--policies", default=None, help="default: every registered placement policy")
    ap.add_argument("--seeds", default="42-44")
    ap.add_argument("--workers", type=int, default=3, help="local executor's processes (the Ray cluster: 3 CPUs)")
    ap.add_argument("--nodes", type=int, default=3, help="raylets of the local Ray cluster (1 CPU each)")
    ap.add_argument("--per-trace", action="store_true",
                    help="one pair of sweeps per trace (alternating which executor goes first), figures "
                         "written after each: partial figures survive a run stopped early")
    ap.add_argument("--ray-lock", type=Path, default=None, help="flock this file while the Ray cluster is up")
    ap.add_argument("--keep", type=Path, default=None, help="keep the results files in this folder")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures as JSON here")
    args = ap.parse_args()
    policies = args.policies or ",".join(PLACEMENT_POLICIES.names())
    folder = data_file(DEFAULT_NODES).parent
    pods = [folder / f"openb_pod_list_{t}.csv" for t in args.traces.split(",") if t]
    args.work = args.keep or Path(tempfile.mkdtemp(prefix="sdbench-"))
    args.work.mkdir(parents=True, exist_ok=True)
    chunks = [[p] for p in pods] if args.per_trace else [pods]
    figures: dict[str, Any] = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "traces": len(pods), "policies": policies.split(","), "seeds": args.seeds,
        "local_workers": args.workers, "ray_nodes": args.nodes, "ray_cpus": args.nodes,
        "cpu_count": os.cpu_count(), "per_trace": args.per_trace,
        "excluded_fields": [f"{k}[].{f}" for k, f in TIMING_FIELDS],
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
        "complete": False, "chunks": [],
    }
    for i, chunk in enumerate(chunks):
        figures["chunks"].append(pair(chunk, policies, args, f"{i:02d}", ray_first=i % 2 == 1))
        done = figures["chunks"]
        local_s, ray_s = sum(c["local_wall_s"] for c in done), sum(c["ray_wall_s"] for c in done)
        diffs = [c["first_difference"] for c in done if c["first_difference"] is not None]
        figures.update({
            "complete": len(done) == len(chunks), "traces_done": sum(len(c["traces"]) for c in done),
            "runs": sum(c["runs"] for c in done), "runs_ray": sum(c["runs_ray"] for c in done),
            "local_wall_s": round(local_s, 1), "ray_wall_s": round(ray_s, 1),
            "ray_over_local": round(ray_s / local_s, 3),
            "load_avg_end": [round(x, 2) for x in os.getloadavg()],
            "identical": not diffs, "first_difference": diffs[0] if diffs else None,
        })
        if args.out:
            args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in figures.items() if k != "chunks"} if args.per_trace else figures, indent=2))
    if not figures["identical"]:
        sys.exit(1)


if __name__ == "__main__":
    main()

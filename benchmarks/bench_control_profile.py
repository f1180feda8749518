"""Where a submission's server CPU goes: CPU per submission of each server thread under an open-loop load.

Starts ``seedancectl serve`` on a fresh PostgreSQL schema (as ``bench_control_throughput.py`` does), runs
one ``--rate`` phase with its ``/metrics`` scrapes and dashboard tabs, and reads each thread's CPU from
``/proc/<pid>/task/*/stat`` before and after; thread names come from ``py-spy dump`` (Python 3.11 does not
name native threads). Also prints the load generator's own CPU per submission.

    .venv/bin/python benchmarks/bench_control_profile.py --rate 500 --seconds 5
    .venv/bin/python benchmarks/bench_control_profile.py --rate 500 --scrapes 0 --tabs 0   # submissions only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_control_api import open_loop  # noqa: E402
from bench_control_throughput import PG_DEFAULT, ROOT, Server, phase  # noqa: E402


def thread_cpu(pid: int) -> dict[str, float]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            f = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[tid] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return out


def thread_names(pid: int) -> dict[str, str]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    dump = subprocess.run([spy, "dump", "-p", str(pid)], capture_output=True, text=True, check=False).stdout
    return {m.group(1): re.sub(r"[-_ ]?\d+$", "", m.group(2))
            for m in re.finditer(r'Thread (\d+) \(\w+\): "([^"]+)"', dump)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--scrapes", type=float, default=3.0)
    ap.add_argument("--tabs", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--pg-url", default=PG_DEFAULT)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(ROOT / "src", "postgresql", args.pg_url, Path(tmp))
        try:
            server.call("POST", "/api/v1/clusters", {"name": "default"})
            for i in range(args.nodes):
                server.call("POST", "/api/v1/clusters/default/nodes", {"name": f"n{i}", "cpu_milli": 10_000_000,
                            "memory_mib": 100_000_000, "gpu_count": 8, "gpu_model": "A100-80GB"})
            asyncio.run(open_loop(server.port, 16, 2.0, 50, "warm"))
            before = thread_cpu(server.proc.pid)
            row = asyncio.run(phase(server, args.rate, args.seconds, args.clients, args.scrapes, args.tabs, "p"))
            after = thread_cpu(server.proc.pid)
            names = thread_names(server.proc.pid)
        finally:
            server.stop()
    done = max(1.0, row["completed_per_s"] * row["wall_s"])
    per: Counter[str] = Counter()
    for tid, cpu in after.items():
        per[names.get(tid, "other")] += cpu - before.get(tid, 0.0)
    row["cpu_ms_per_submit_by_thread"] = {k: round(v / done * 1e3, 3) for k, v in per.most_common() if v > 0}
    row["load_average"] = os.getloadavg()
    row["at"] = time.strftime("%H:%M:%S")
    print(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()

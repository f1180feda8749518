"""Run the collectors for a minute against the real ``nvidia-smi`` and NVML under a bf16 load.

Not run yet: no GPU machine was available to this project's sessions. On a GPU machine:

    python3 benchmarks/gpu/run_all.py --only telemetry --out gpu-results

What it does (``budget_s`` bounds it; 60 s of sampling by default):

1. starts bf16 8192² matrix products on GPU 0 in a child process (PyTorch, CUDA);
2. every 5 s runs ``nvidia-smi`` with Seedance's exact query (``QUERY_FIELDS``, ``csv,noheader,nounits``),
   the whitepaper's three-field query and ``--query-compute-apps``, saves each raw output under
   ``<out>/raw/`` (these files are the new fixtures to commit into ``tests/telemetry/fixtures/``), and
   parses them with ``strict=True`` — a format drift fails loudly;
3. reads the same GPUs through ``NvmlCollector`` (real ``pynvml``) and compares utilisation, memory,
   power and the load process's presence with what nvidia-smi printed;
4. measures the agent's CPU per tick on this machine, including the ``nvidia-smi`` children
   (``RUSAGE_CHILDREN``), against the 0.5 %-of-a-core goal.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

LOAD = """
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + {secs}
while time.time() < end:
    (a @ b).sum().item()
"""


def run(out: Path, budget_s: float, *, seconds: float = 60.0, interval: float = 5.0) -> dict[str, Any]:
    from seedance.telemetry.nvml import NvmlCollector
    from seedance.telemetry.nvsmi import (
        APPS_FIELDS,
        QUERY_FIELDS,
        WHITEPAPER_FIELDS,
        parse_compute_apps,
        parse_query_gpu,
        run_command,
    )

    seconds = min(seconds, max(10.0, budget_s - 30.0))
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    load = subprocess.Popen([sys.executable, "-c", LOAD.format(secs=seconds + 15)])
    time.sleep(10.0)  # let the load reach steady state
    nvml = NvmlCollector()
    rows: list[dict[str, Any]] = []
    cpu: list[float] = []
    try:
        for k in range(int(seconds // interval)):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            outs = {}
            for name, argv in (
                ("query", ["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits"]),
                ("whitepaper", ["nvidia-smi", f"--query-gpu={','.join(WHITEPAPER_FIELDS)}",
                                "--format=csv,noheader,nounits"]),
                ("apps", ["nvidia-smi", f"--query-compute-apps={','.join(APPS_FIELDS)}",
                          "--format=csv,noheader,nounits"]),
            ):
                _, text = run_command(argv, 10.0)
                outs[name] = text
                (raw / f"{name}_{k:02d}.txt").write_text(text)
            gpus, lost, issues = parse_query_gpu(outs["query"], strict=True)
            wp, _, _ = parse_query_gpu(outs["whitepaper"], WHITEPAPER_FIELDS, strict=True)
            procs, _ = parse_compute_apps(outs["apps"], strict=True)
            snap = nvml.collect()
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
                       + (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime))
            g0, n0 = gpus[0], snap.gpus[0]
            rows.append({
                "t": time.time(), "smi_util": g0.util_pct, "wp_util": wp[0].util_pct, "nvml_util": n0.util_pct,
                "smi_mem": g0.mem_used_mib, "nvml_mem": n0.mem_used_mib, "smi_power": g0.power_w,
                "nvml_power": n0.power_w, "load_pid_seen": load.pid in {p.pid for p in procs},
                "nvml_load_pid_seen": load.pid in {p.pid for p in snap.processes}, "lost": len(lost),
                "skipped": issues.total,
            })
            time.sleep(max(0.0, interval - cpu[-1]))
    finally:
        load.kill()
        load.wait()
        nvml.close()
    med = statistics.median(cpu) if cpu else float("nan")
    result = {
        "gpu": rows[0] if rows else None, "samples": rows, "cpu_per_tick_s_median": med,
        "core_pct_at_5s": 100.0 * med / interval, "goal_core_pct": 0.5,
        "util_agree": all(abs((r["smi_util"] or 0) - (r["nvml_util"] or 0)) <= 10 for r in rows),
        "load_seen": all(r["load_pid_seen"] for r in rows), "raw_outputs": str(raw),
    }
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    return result


def main() -> int:
    """Script entry of the GPU suite: ``--out DIR --budget-s S``; the JSON summary is the last stdout line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=120.0)
    args = ap.parse_args()
    if shutil.which("nvidia-smi") is None:
        print(json.dumps({"status": "not run", "detail": "no NVIDIA GPU: nvidia-smi not found"}))
        return 0
    sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "src")]
    result = run(args.out, args.budget_s)
    result.setdefault("status", "ok")
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Checkpoint and restore a training state dict on the GPU: the planner's PCIe and restart figures, measured.

Not run yet: no GPU machine was available to this project's sessions. On a GPU machine:

    python3 benchmarks/gpu/run_all.py --only migration --out gpu-results

What it does (``budget_s`` bounds it):

1. builds an FP32 state of 1, 4 and 8 GB on GPU 0 (weights and two Adam moments as tensors);
2. times the snapshot GPU -> pinned host memory (the planner's ``checkpoint_s``: size over the PCIe rate)
   and the restore host -> GPU, five times each, medians;
3. times a restart: a fresh Python process importing torch, creating its CUDA context and loading a
   1 GB state from host memory (the planner's ``restart_s`` default is 10 s);
4. prints the measured GB/s beside the planner's PCIe figure for the GPU's generation
   (``seedance.topology.links.pcie_gbs``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESTART = """
import time, torch
t0 = time.perf_counter()
x = torch.empty(int(2.5e8), dtype=torch.float32, pin_memory=True)
y = x.to("cuda", non_blocking=False); torch.cuda.synchronize()
print(time.perf_counter() - t0)
"""


def run(out: Path, budget_s: float) -> dict[str, Any]:
    import torch

    from seedance.topology.links import pcie_gbs

    cc = torch.cuda.get_device_capability(0)
    rows = []
    deadline = time.monotonic() + budget_s - 40
    for gb in (1, 4, 8):
        if time.monotonic() > deadline:
            break
        n = int(gb * 1e9 / 4)
        dev = torch.randn(n, device="cuda")
        host = torch.empty(n, dtype=torch.float32, pin_memory=True)
        d2h, h2d = [], []
        for _ in range(5):
            torch.cuda.synchronize()
            t = time.perf_counter()
            host.copy_(dev)
            torch.cuda.synchronize()
            d2h.append(time.perf_counter() - t)
            t = time.perf_counter()
            dev.copy_(host)
            torch.cuda.synchronize()
            h2d.append(time.perf_counter() - t)
        rows.append({"state_gb": gb, "snapshot_gbs": gb / statistics.median(d2h),
                     "restore_gbs": gb / statistics.median(h2d)})
        del dev, host
        torch.cuda.empty_cache()
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", RESTART], capture_output=True, text=True, timeout=120)
    restart_wall = time.perf_counter() - t
    result = {"status": "ok", "gpu": torch.cuda.get_device_name(0), "compute_capability": list(cc),
              "planner_pcie_gbs": pcie_gbs((cc[0], cc[1])), "copies": rows, "restart_wall_s": restart_wall,
              "restart_inner_s": float(proc.stdout.strip() or "nan"), "planner_restart_s": 10.0}
    (out / "migration.json").write_text(json.dumps(result, indent=2))
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=60.0)
    args = ap.parse_args()
    if shutil.which("nvidia-smi") is None:
        print(json.dumps({"status": "not run", "detail": "no NVIDIA GPU: nvidia-smi not found"}))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    print(json.dumps(run(args.out, args.budget_s), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Board power of a real GPU against utilisation, to check the energy model's line.

The energy model (``seedance.costmodel.energy``) draws ``idle_w + (tdp_w - idle_w) * u`` per GPU at
utilisation ``u``, with ``idle_w`` and ``tdp_w`` from the catalog. This runs on a machine with a
CUDA GPU, PyTorch and ``nvidia-smi``: it samples ``power.draw`` every 100 ms while the GPU idles,
then while it runs bf16 matrix products for a share ``u`` of every 100 ms window (``u`` = 0.25,
0.5, 0.75, 1), then a memory-bound copy loop; it prints the mean power of each phase (first
3 s of each left out), the least-squares line through the duty-cycle phases, and the catalog's
line for the same model, and writes them as JSON.

    python3 benchmarks/bench_gpu_power.py --json power.json   (needs a GPU; not part of the tests)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

QUERY = "timestamp,power.draw,utilization.gpu,clocks.sm,temperature.gpu"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase-s", type=float, default=20.0, help="Seconds per phase.")
    ap.add_argument("--idle-s", type=float, default=15.0, help="Seconds of the idle phase.")
    ap.add_argument("--n", type=int, default=8192, help="Matrix size of the bf16 products.")
    ap.add_argument("--json", type=Path, default=None, help="Also write the results here.")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA GPU visible", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(0)
    limit = subprocess.run(["nvidia-smi", "--query-gpu=power.limit,power.max_limit", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True).stdout.strip()
    log = Path("/tmp/seedance_power.csv")
    sampler = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "100"],
                               stdout=log.open("w"), stderr=subprocess.DEVNULL)
    a = torch.randn(args.n, args.n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(args.n, args.n, device="cuda", dtype=torch.bfloat16)
    big = torch.empty(2**30, device="cuda", dtype=torch.uint8)
    big2 = torch.empty_like(big)
    torch.cuda.synchronize()
    phases: list[tuple[str, float, float, float]] = []  # (label, duty, start, end) in wall time
    time.sleep(2.0)
    t0 = time.time()
    time.sleep(args.idle_s)
    phases.append(("idle", 0.0, t0, time.time()))
    flops = 0.0
    for duty in (0.25, 0.5, 0.75, 1.0):
        t0 = time.time()
        while time.time() - t0 < args.phase_s:
            w0 = time.perf_counter()
            while time.perf_counter() - w0 < 0.1 * duty:
                for _ in range(4):
                    torch.matmul(a, b)
                torch.cuda.synchronize()
                flops += 4 * 2.0 * args.n**3
            rest = 0.1 - (time.perf_counter() - w0)
            if rest > 0:
                time.sleep(rest)
        phases.append((f"bf16 matmul, duty {duty:g}", duty, t0, time.time()))
        time.sleep(2.0)
    t0 = time.time()
    while time.time() - t0 < args.phase_s / 2:
        for _ in range(8):
            big2.copy_(big)
        torch.cuda.synchronize()
    phases.append(("memory copy, duty 1", float("nan"), t0, time.time()))
    time.sleep(1.0)
    sampler.terminate()
    sampler.wait()
    rows = []
    for line in log.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            stamp, _, frac = parts[0].partition(".")
            ts = time.mktime(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + float("0." + (frac or "0"))
            rows.append((ts, float(parts[1]), float(parts[2]), float(parts[3]), float(parts[4])))
        except (ValueError, IndexError):  # "[N/A]" or a torn line
            continue
    out: dict[str, Any] = {"gpu": name, "power_limit_w": limit, "samples": len(rows), "phases": []}
    for label, duty, s, e in phases:
        sel = [r for r in rows if s + 3.0 <= r[0] <= e]
        if not sel:
            continue
        avg = [sum(r[k] for r in sel) / len(sel) for k in range(5)]
        out["phases"].append({"phase": label, "duty": duty, "samples": len(sel), "power_w": round(avg[1], 1),
                              "util_pct": round(avg[2], 1), "sm_clock_mhz": round(avg[3]),
                              "temp_c": round(avg[4], 1)})
    pts = [(p["duty"], p["power_w"]) for p in out["phases"] if p["duty"] == p["duty"]]
    if len(pts) >= 2:
        mx = sum(x for x, _ in pts) / len(pts)
        my = sum(y for _, y in pts) / len(pts)
        slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
        out["fit"] = {"idle_w": round(my - slope * mx, 1), "full_w": round(my + slope * (1 - mx), 1)}
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
        from seedance.core.catalog import CATALOG

        tokens = name.replace("-", " ").split()
        model = next(CATALOG.resolve(m) for m in CATALOG if m.split("-")[0] in tokens)
        out["catalog"] = {"model": model.name, "idle_w": model.idle_w, "tdp_w": model.tdp_w}
    except Exception as exc:  # the catalog is optional here (the script runs without the package)
        out["catalog"] = {"error": str(exc)}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

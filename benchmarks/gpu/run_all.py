"""Every GPU check of the project in one call, each part with its own time budget.

    python benchmarks/gpu/run_all.py --out gpu-results [--only telemetry_bf16]

A part is a module of this folder with ``run(out: Path, budget_s: float) -> dict``; its result is
written to ``<out>/<part>.json``. Parts run in the order of :data:`PARTS`; a part that fails is
reported and the others still run. Nothing here runs in the tests (no GPU there).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

#: (module in benchmarks/gpu, time budget in seconds)
PARTS: list[tuple[str, float]] = [
    ("telemetry_bf16", 120.0),  # collectors vs real nvidia-smi / NVML under a bf16 load (issue 13)
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("gpu-results"))
    ap.add_argument("--only", default=None, help="Comma-separated part names.")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    failed = 0
    for name, budget in PARTS:
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            mod = importlib.import_module(f"benchmarks.gpu.{name}")
            result = mod.run(args.out / name, budget)
            status = "ok"
        except Exception:
            result = {"error": traceback.format_exc()}
            status = "failed"
            failed += 1
        result["wall_s"] = round(time.time() - t0, 1)
        (args.out / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
        print(f"{name}: {status} in {result['wall_s']} s (budget {budget:g} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

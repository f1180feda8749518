"""Every GPU check of the project, in one call on a machine with a CUDA GPU.

Run: ``python benchmarks/gpu/run_all.py [--out DIR] [--only NAME,...]`` (``DIR`` defaults to ``$OUT``,
else ``benchmarks/gpu/out``). Each part is a script run in its own process under its own time
budget, so one part that hangs or fails does not take the others with it; each writes its results
under ``DIR/<name>/`` and the summary goes to ``DIR/summary.json``. Add a part by adding one line to
:data:`PARTS`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (name, script beside this file, time budget in seconds)
PARTS: list[tuple[str, str, int]] = [
    ("kernels", "kernels_h200.py", 480),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or str(HERE / "out"))
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = {x for x in args.only.split(",") if x}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    summary = []
    for name, script, budget in PARTS:
        if only and name not in only:
            continue
        part_out = out / name
        part_out.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, str(HERE / script), "--out", str(part_out), "--budget-s", str(budget)],
                               env=env, timeout=budget + 30, capture_output=True, text=True)
            rc, tail = p.returncode, (p.stdout + p.stderr)[-4000:]
        except subprocess.TimeoutExpired as exc:
            rc, tail = 124, f"timed out after {budget + 30} s: {str(exc.stdout or '')[-2000:]}"
        (part_out / "log.txt").write_text(tail, encoding="utf-8")
        summary.append({"part": name, "rc": rc, "seconds": round(time.time() - t0, 1)})
        print(f"{name}: rc {rc} in {summary[-1]['seconds']} s", flush=True)
        print(tail[-1500:], flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 0 if all(s["rc"] == 0 for s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())

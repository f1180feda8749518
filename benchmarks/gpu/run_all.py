"""Every GPU check of the repository, in one call on a machine with an NVIDIA GPU.

    python3 benchmarks/gpu/run_all.py --out OUT_DIR [--only NAME ...]

Each part is a script in this folder run as its own process with its own time budget (seconds);
it writes its results under ``OUT_DIR/<name>/`` and its JSON summary on stdout's last line. A part
that cannot run on this machine (no driver, no GPU) says so in its summary instead of failing.
The run never changes GPU settings (no MIG mode change, no reset, no clocks): parts only list,
allocate memory and launch kernels. Summaries of all parts go to ``OUT_DIR/gpu_results.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: (name, script in this folder, time budget in seconds). Add a part with one line. The budgets sum to
#: at most 570 s so that one device call (600 s) runs the whole suite.
PARTS: list[tuple[str, str, float]] = [
    ("isolation", "isolation_probe.py", 90.0),
    ("kernels", "kernels_h200.py", 210.0),
    ("telemetry", "telemetry_bf16.py", 60.0),
    ("llm-calibration", "llm_calibration.py", 120.0),
    ("migration", "migration_state.py", 60.0),
]


def run_part(name: str, script: str, budget_s: float, out: Path) -> dict[str, object]:
    """Run one part as a subprocess within its budget; its last stdout line is its JSON summary."""
    part_out = out / name
    part_out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, str(HERE / script), "--out", str(part_out), "--budget-s", str(budget_s)],
            capture_output=True,
            text=True,
            timeout=budget_s + 30,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return {"part": name, "status": "timeout", "budget_s": budget_s, "stdout_tail": str(exc.stdout or "")[-2000:]}
    (part_out / "stdout.txt").write_text(proc.stdout)
    (part_out / "stderr.txt").write_text(proc.stderr)
    lines = [x for x in proc.stdout.strip().splitlines() if x.strip()]
    try:
        summary = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        summary = {"status": "error", "detail": "no JSON summary on the last stdout line"}
    summary.update({"part": name, "rc": proc.returncode, "wall_s": round(time.monotonic() - start, 2)})
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="Folder for the parts' results.")
    ap.add_argument("--only", action="append", default=None, help="Run only this part (repeatable).")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = [p for p in PARTS if not args.only or p[0] in args.only]
    results = [run_part(name, script, budget, args.out) for name, script, budget in wanted]
    (args.out / "gpu_results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0 if all(r.get("status") in ("ok", "not run") for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())

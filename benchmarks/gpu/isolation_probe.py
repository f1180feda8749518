"""GPU isolation penetration checks (whitepaper §4.1's table), honestly scoped, plus a live MIG audit.

    python3 benchmarks/gpu/isolation_probe.py --out DIR [--budget-s 240]

Never changes the GPU: no MIG mode change, no instance created or destroyed, no reset. It
  1. captures ``nvidia-smi -L``, ``mig -lgi``, ``mig -lci`` and ``-q`` into ``DIR/nvsmi/`` (new
     real fixtures) and runs ``seedancectl mig audit`` on them (``DIR/audit.json``);
  2. picks two targets: two MIG devices when the GPU is in MIG mode with at least two (the
     whitepaper's cross-instance case), else the same GPU twice (context isolation between two
     processes, the only case testable with MIG off);
  3. runs the probes of ``cuda_probe.py`` (driver API + PTX, no toolkit needed):
     * out-of-bounds read inside one context (a kernel reading past its allocation),
     * a second process reading the first one's device address (``hold`` / ``read-foreign``),
     * residual data: a process fills memory and exits, another allocates and scans;
  4. if PyTorch with CUDA and Triton are installed, the same out-of-bounds read as a Triton kernel.
The last stdout line is the JSON summary; every probe's record goes to ``DIR/probes.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROBE = HERE / "cuda_probe.py"
LISTINGS = (("L", ["-L"]), ("lgi", ["mig", "-lgi"]), ("lci", ["mig", "-lci"]), ("q", ["-q"]))


def capture(out: Path) -> dict[str, str]:
    """Run the four read-only listings; write them to ``out/nvsmi``; return ``{name: text}``."""
    (out / "nvsmi").mkdir(parents=True, exist_ok=True)
    got: dict[str, str] = {}
    env = {**os.environ, "LC_ALL": "C"}
    for name, args in LISTINGS:
        try:
            p = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60, env=env, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        text = p.stdout if p.stdout.strip() else p.stderr
        (out / "nvsmi" / f"{name}.txt").write_text(text)
        got[name] = text
    return got


def audit(out: Path) -> dict[str, Any]:
    """``seedancectl mig audit`` on the captured files (with this repository's sources)."""
    files = sorted((out / "nvsmi").glob("*.txt"))
    if not files:
        return {"status": "not run", "detail": "nvidia-smi not available"}
    cmd = [sys.executable, "-m", "seedance.cli.main", "mig", "audit", "-o", "json"]
    for f in files:
        cmd += ["--from", str(f)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)
    (out / "audit.json").write_text(p.stdout or p.stderr)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"status": "error", "rc": p.returncode, "detail": (p.stderr or p.stdout)[-500:]}
    return {
        "status": "ok",
        "rc": p.returncode,
        "summary": doc.get("summary"),
        "checks": sorted({f["check"] for f in doc.get("findings", [])}),
    }


def targets(listing: str) -> tuple[str | None, str | None, str]:
    """``(device A, device B, mode)``: two MIG devices if there are, else GPU 0 twice."""
    migs = re.findall(r"^\s+MIG \S+\s+Device\s+\d+: \(UUID: (MIG-[^)]+)\)", listing, re.M)
    if len(migs) >= 2:
        return migs[0], migs[1], "cross-MIG-instance"
    gpus = re.findall(r"^GPU (\d+): ", listing, re.M)
    if gpus:
        return gpus[0], gpus[0], "two processes on one GPU (MIG off or one MIG device)"
    return None, None, "no GPU"


def _probe(device: str, *args: str, stdin: str | None = None, timeout: float = 60) -> dict[str, Any]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": device}
    p = subprocess.run(
        [sys.executable, str(PROBE), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    lines = [x for x in p.stdout.splitlines() if x.strip()]
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"probe": args[0], "status": "error", "rc": p.returncode, "stderr": p.stderr[-800:]}


def cross_context(a: str, b: str, nbytes: int = 1 << 20) -> dict[str, Any]:
    """Process 1 on ``a`` holds a canary buffer; process 2 on ``b`` reads that device address."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": a}
    holder = subprocess.Popen(
        [sys.executable, str(PROBE), "hold", str(nbytes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        first = json.loads(holder.stdout.readline() or "{}")
        if first.get("status") != "ok":
            return {"probe": "read-foreign", "status": first.get("status", "error"), "holder": first}
        result = _probe(b, "read-foreign", str(first["address"]), str(nbytes))
        result["holder"] = first
        holder.stdin.write("done\n")
        holder.stdin.flush()
        return result
    finally:
        try:
            holder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            holder.kill()


def residual(a: str, b: str, nbytes: int = 256 << 20) -> dict[str, Any]:
    """Process 1 on ``a`` fills memory and exits; process 2 on ``b`` allocates and scans it."""
    filled = _probe(a, "fill-exit", str(nbytes))
    if filled.get("status") != "ok":
        return {"probe": "residual", "status": filled.get("status", "error"), "filler": filled}
    got = _probe(b, "residual", str(nbytes))
    got["filler"] = filled
    return got


def triton_oob(n: int = 4096) -> dict[str, Any]:
    """The out-of-bounds read as a Triton kernel (only with PyTorch+CUDA and Triton installed)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return {"probe": "triton-oob", "status": "not run", "detail": "PyTorch has no CUDA device"}
        from triton_probe import CANARY, read_window
    except ImportError as exc:
        return {"probe": "triton-oob", "status": "not run", "detail": str(exc)}
    a = torch.zeros(n, dtype=torch.int32, device="cuda")
    b = torch.full((n,), CANARY, dtype=torch.int32, device="cuda")
    lower, upper = (a, b) if a.data_ptr() < b.data_ptr() else (b, a)
    span = (upper.data_ptr() + 4 * n - lower.data_ptr()) // 4
    if span > 16 << 20:
        return {"probe": "triton-oob", "status": "skipped", "detail": f"tensors {span} words apart"}
    lower.fill_(0)
    upper.fill_(CANARY)
    try:
        window = read_window(lower, 0, span)
        torch.cuda.synchronize()
    except RuntimeError as exc:
        return {"probe": "triton-oob", "status": "ok", "read_past_end": "faulted", "error": str(exc)[:200]}
    seen = int((window == CANARY).sum().item())
    return {
        "probe": "triton-oob",
        "status": "ok",
        "read_past_end": "succeeded",
        "neighbour_canary_words_seen": seen,
        "isolated_within_context": seen == 0,
        "device": torch.cuda.get_device_name(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=240.0)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    listings = capture(args.out)
    if "L" not in listings or not re.search(r"^GPU \d+: ", listings["L"], re.M):
        summary = {"status": "not run", "detail": "no NVIDIA GPU on this machine (nvidia-smi -L lists none)"}
        print(json.dumps(summary))
        return 0
    report: dict[str, Any] = {"audit": audit(args.out)}
    a, b, mode = targets(listings["L"])
    report["targets"] = {"a": a, "b": b, "mode": mode}
    probes: list[dict[str, Any]] = []
    if a is not None and b is not None:
        probes.append(_probe(a, "oob"))
        if time.monotonic() - start < args.budget_s * 0.6:
            probes.append(cross_context(a, b))
        if time.monotonic() - start < args.budget_s * 0.8:
            probes.append(residual(a, b))
        probes.append(triton_oob())
    (args.out / "probes.json").write_text(json.dumps({"report": report, "probes": probes}, indent=2))
    summary = {
        "status": "ok",
        "mode": mode,
        "audit": report["audit"],
        "probes": {
            p.get("probe", "?"): {k: v for k, v in p.items() if k not in ("holder", "filler", "probe")} for p in probes
        },
        "wall_s": round(time.monotonic() - start, 1),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main())

"""The GPU isolation probes, checked on the CPU: the Triton kernel under Triton's interpreter, the probes'
parsing and scanning, and the GPU suite reporting "not run" honestly on a machine without a GPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "benchmarks" / "gpu"
FIX = Path(__file__).parent / "fixtures" / "nvsmi"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gpu_{name}", GPU / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_triton_window_kernel_reads_across_a_boundary_under_the_interpreter() -> None:
    code = (
        "import sys, torch; sys.path.insert(0, sys.argv[1]); import triton_probe as tp\n"
        "buf = torch.zeros(1024, dtype=torch.int32); buf[512:] = tp.CANARY\n"
        "w = tp.read_window(buf, 384, 256)\n"
        "print(tp.canary_count(w), int(w[127]), int(w[128]) == tp.CANARY, w.shape[0])\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    p = subprocess.run(
        [sys.executable, "-c", code, str(GPU)], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["128", "0", "True", "256"]  # words 384..511 zero, 512..639 the canary


def test_canary_scan_and_targets() -> None:
    probe = load("cuda_probe")
    word = probe.CANARY.to_bytes(4, "little")
    assert probe.canary_words(word * 3 + b"\0" * 8 + word) == 4
    assert probe.canary_words(b"\0" * 64) == 0
    iso = load("isolation_probe")
    a, b, mode = iso.targets((FIX / "h200_L_blog.txt").read_text())
    assert (a, b, mode) == (
        "MIG-b05c0034-4d0e-5d3c-a25c-e6795d1779df",
        "MIG-be041b89-b751-5c96-84aa-85315833c669",
        "cross-MIG-instance",
    )
    assert iso.targets((FIX / "a100-pcie-40gb_L_esxi.txt").read_text())[2].startswith("two processes on one GPU")
    assert iso.targets("")[2] == "no GPU"
    assert "copy_words" in probe.PTX and ".entry" in probe.PTX


def test_probe_without_a_driver_says_not_run() -> None:
    p = subprocess.run(
        [sys.executable, str(GPU / "cuda_probe.py"), "oob"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "LD_LIBRARY_PATH": ""},
    )
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    if doc["status"] == "not run":  # no NVIDIA driver on this machine
        assert "no NVIDIA driver library" in doc["detail"]
    else:
        assert doc["probe"] == "oob" and doc["status"] in ("ok", "skipped")


def test_gpu_suite_reports_not_run_without_a_gpu(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path / "no-nvidia-smi") + ":/usr/bin:/bin"}
    p = subprocess.run(
        [sys.executable, str(GPU / "run_all.py"), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "gpu_results.json").read_text())
    parts = [r["part"] for r in results]
    assert parts[0] == "isolation" and len(parts) == len(set(parts))
    assert results[0]["status"] == "not run" and "no NVIDIA GPU" in results[0]["detail"]
    assert all(r["status"] == "not run" for r in results), results


def test_gpu_suite_fits_one_device_call() -> None:
    """The parts' budgets (plus the runner's 30 s grace of the last part) fit one 600 s device call."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_run_all", GPU / "run_all.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    budgets = [budget for _, _, budget in mod.PARTS]
    assert sum(budgets) <= 570.0, budgets
    assert all(b > 0 for b in budgets)

"""The GPU calibration script's logic, on the CPU with a tiny model (its GPU run is a separate step)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from .helpers import toy_step

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "llm_calibration.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("llm_calibration", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["llm_calibration"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_mixed_iteration_computes_the_same_decode_logits_as_a_decode_only_one() -> None:
    cal = _module()
    fwd = cal.build(cal.TINY, "cpu", torch.float32, 4096)
    b, c, k = 4, 16, 8
    with torch.inference_mode():
        tok = torch.arange(k + b) % 100
        mixed = fwd(tok, [("chunk", 0, 1, c, b * (c + 1)), ("dec", k, b, c, 0)])
        alone = fwd(tok[k:], [("dec", 0, b, c, 0)])
    # linear layers are per token and attention is per segment: the last decode token is unaffected
    assert torch.allclose(mixed, alone, atol=1e-5)


def test_fit_recovers_a_known_iteration_model() -> None:
    cal = _module()
    truth = toy_step(kv_ms=0.01)  # prefill 10 + 0.1 * tokens, decode 5 + batch + 0.01 * kv tokens
    points = [{"kind": "prefill", "batch": b, "tokens": p, "ctx": 0, "ms": truth.prefill_ms(b * p)}
              for b, p in ((1, 100), (1, 400), (2, 300), (4, 200))]
    points += [{"kind": "decode", "batch": b, "tokens": 1, "ctx": c, "ms": truth.decode_ms(b, b * c)}
               for b in (1, 4, 16) for c in (100, 400)]
    model = cal.fit(points)
    assert model.kv_ms_per_token == pytest.approx(0.01)
    err = cal.errors(model, points)
    assert err["prefill"]["max_abs_rel_err"] < 1e-9 and err["decode"]["max_abs_rel_err"] < 1e-9


def test_cpu_run_writes_points_and_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cal = _module()
    grid = {"prefill": [(1, 8), (2, 8)], "decode": [(1, 8), (2, 8)], "mixed": [(8, 2, 8)]}
    cal.TINY_GRID = grid
    assert cal.main(["--cpu-test", "--out", str(tmp_path), "--repeats", "1", "--budget-s", "100"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "ok" and summary["points"] == 5
    assert set(summary["fitted_model_error"]) == {"prefill", "decode", "mixed"}
    assert len(json.loads((tmp_path / "points.json").read_text())) == 5

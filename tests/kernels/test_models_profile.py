"""Benchmark models match their public sizes; the measured-profile format refuses malformed files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from seedance.core.errors import InputError
from seedance.kernels.bench import ratios
from seedance.kernels.models.bert import BertConfig, BertModel
from seedance.kernels.models.resnet import ResNet, fold_resnet_bn, resnet50
from seedance.kernels.profile import SCHEMA, load_profile, parse_profile


def test_bert_base_and_resnet50_have_their_published_parameter_counts() -> None:
    assert sum(p.numel() for p in BertModel().parameters()) == 109_482_240  # bert-base-uncased
    assert sum(p.numel() for p in resnet50().parameters()) == 25_557_032  # torchvision resnet50
    c = BertConfig()
    s = 128
    assert BertModel.flops_per_sequence(BertModel(BertConfig(layers=1)), s) == pytest.approx(
        2 * s * (4 * 768 * 768 + 2 * 768 * 3072) + 4 * s * s * 768 + 2 * 768 * 768)
    assert (c.hidden, c.layers, c.heads, c.intermediate, c.vocab_size) == (768, 12, 12, 3072, 30522)


def test_folding_batchnorm_into_convolutions_keeps_the_function() -> None:
    torch.manual_seed(0)
    m = ResNet((1, 1, 1, 1), num_classes=10)
    for mod in m.modules():  # non-trivial running statistics, as after training
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2.0)
    m.eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        before = m(x)
        fold_resnet_bn(m)
        after = m(x)
    assert not any(isinstance(mod, torch.nn.BatchNorm2d) for mod in m.modules())
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="eval"):
        fold_resnet_bn(ResNet((1, 1, 1, 1)).train())


def _doc(**over: Any) -> dict[str, Any]:
    rows = [{"model": "m", "variant": v, "batch": b, "p50_ms": p50, "p95_ms": p50 * 1.1, "mean_ms": p50,
             "peak_mib": mem, "activation_peak_mib": 1.0, "runs": 100}
            for v, b, p50, mem in (("eager", 1, 10.0, 100.0), ("compiled", 1, 8.0, 90.0), ("eager", 4, 40.0, 120.0),
                                   ("compiled", 4, 20.0, 60.0), ("eager", 8, 80.0, 200.0),
                                   ("compiled", 8, 72.0, 200.0))]
    d: dict[str, Any] = {"schema": SCHEMA, "device": "cpu", "device_name": "x86_64", "dtype": "float32", "rows": rows}
    d.update(over)
    return d


def test_gain_is_the_median_ratio_over_batches() -> None:
    prof = parse_profile(_doc(), source="t")
    assert prof.gain("m", "compiled") == pytest.approx((0.8, 0.9))  # latency 0.8/0.5/0.9, memory 0.9/0.5/1.0
    assert prof.gain("m", "fused") is None and prof.gain("other", "compiled") is None
    rows = ratios(prof)
    assert [r["latency_x_eager"] for r in rows] == [1.0, 0.8, 1.0, 0.5, 1.0, 0.9]


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(schema="v0"), "field schema: schema must be"),
    (lambda d: d["rows"].clear(), "field rows: must be a non-empty list"),
    (lambda d: d["rows"][1].update(variant="turbo"), "t:2: field rows[1].variant: unknown variant 'turbo'"),
    (lambda d: d["rows"][1].update(p50_ms=-1.0), "t:2: field rows[1].p50_ms: must be a finite number >= 0"),
    (lambda d: d["rows"][1].update(p95_ms=1.0), "field rows[1].p95_ms: need 0 < p50_ms <= p95_ms"),
    (lambda d: d["rows"][1].update(runs=0), "field rows[1].runs: must be an integer >= 1"),
    (lambda d: d["rows"].append(dict(d["rows"][0])), "duplicate row"),
    (lambda d: d["rows"].pop(0), "m compiled batch 1 has no eager row"),
])
def test_malformed_profiles_raise_input_errors(mutate: Any, message: str) -> None:
    d = _doc()
    mutate(d)
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_profile(d, source="t")


def test_profile_files_that_are_not_json_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text('{"schema":\n  nope}\n')
    with pytest.raises(InputError, match=r"p.json:2: not valid JSON"):
        load_profile(bad)
    with pytest.raises(InputError, match="profile file not found"):
        load_profile(tmp_path / "missing.json")


def test_the_shipped_cpu_profile_measured_every_variant_with_at_least_100_runs() -> None:
    from seedance.optimize.deploy import default_profile

    prof = default_profile()
    assert prof.device == "cpu"
    have = {(r.model, r.variant) for r in prof.rows}
    assert have == {(m, v) for m in ("bert-base", "resnet-50") for v in ("eager", "compiled", "fused")}
    assert min(r.runs for r in prof.rows) >= 100
    assert all(r.p50_ms <= r.p95_ms for r in prof.rows)

"""The deployment grid's figures follow the calibrated model; the exact front bounds NSGA-II; bad SLOs say why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seedance.core.catalog import CATALOG
from seedance.core.errors import InputError
from seedance.optimize.families import FAMILIES
from seedance.optimize.latency import P95_BATCH_FACTOR, fit_gemm_engine, fit_vision_engine, peak_flops
from seedance.optimize.search import NsgaSettings, Slo, exact_front, hv_ratio, run_nsga2
from seedance.optimize.space import NO_ACCURACY, NO_FIT, OK, SpaceOptions, build_space, gpu_prices


@pytest.fixture(scope="module")
def detr():  # type: ignore[no-untyped-def]
    return build_space(FAMILIES.get("detr"))


def test_vision_engine_is_the_least_squares_line_through_published_latencies() -> None:
    eng = fit_vision_engine([(10.0, 1.0), (110.0, 2.0)], "A100-80GB")
    a100 = CATALOG.resolve("A100-80GB")
    assert eng.t0_ms == pytest.approx(0.9) and eng.max_abs_err == pytest.approx(0.0, abs=1e-9)
    assert eng.batch_ms(60.0, 1, a100) == pytest.approx(1.5)
    assert eng.batch_ms(60.0, 4, a100) == pytest.approx(0.9 + 4 * 0.6)
    # another GPU: the FLOP term scales with its dense throughput, INT8 doubles it on A100
    h100 = CATALOG.resolve("H100-80GB")
    assert eng.batch_ms(60.0, 1, h100) == pytest.approx(0.9 + 0.6 * 312 / 989.4)
    assert peak_flops(a100, True) == 2 * peak_flops(a100, False)


def test_gemm_engine_fits_the_serving_profiles() -> None:
    eng = fit_gemm_engine()
    assert eng.points == 66  # llama2-70b on A100/H100 at TP 2/4/8: 7 decode + 4 prefill points each
    assert 0.1 < eng.eta_c <= 1.0 and 0.1 < eng.eta_bw <= 1.0
    assert eng.median_abs_err < 0.2


def test_vision_grid_points_follow_the_model(detr) -> None:  # type: ignore[no-untyped-def]
    fam = detr.family
    eng = fit_vision_engine([(v.gflops, v.published_ms["A100-80GB"]) for v in FAMILIES.get("yolo").variants],
                            "A100-80GB")
    i = int(np.ravel_multi_index((0, 0, fam.gpus.index("L40S"), 0, fam.batches.index(8), 0), detr.shape))
    t = eng.batch_ms(172.0, 8, CATALOG.resolve("L40S"))
    assert detr.reason[i] == OK
    assert detr.p95_ms[i] == pytest.approx(P95_BATCH_FACTOR * t)
    assert detr.throughput_rps[i] == pytest.approx(8 / t * 1e3)
    assert detr.cost[i] == pytest.approx(1.861 / 3600 / detr.throughput_rps[i] * 1000)
    c = detr.config(i)
    assert (c["variant"], c["gpu"], c["batch"], c["accuracy"]) == ("detr-r50", "L40S", 8, 42.0)
    assert c["accuracy_sources"] == ["detr-paper"]


def test_reasons_mark_what_is_not_a_deployment() -> None:
    llama = build_space(FAMILIES.get("llama-3"), SpaceOptions(sample=50))
    fam = llama.family
    at = lambda v, p, g, c, b: int(np.ravel_multi_index(  # noqa: E731
        (v, fam.precisions.index(p), fam.gpus.index(g), fam.counts.index(c), fam.batches.index(b), 0), llama.shape))
    assert llama.reason[at(1, "fp16", "A100-80GB", 1, 1)] == NO_FIT  # 141 GB of weights on one 80 GB GPU
    assert llama.reason[at(1, "fp16", "A100-80GB", 4, 1)] == OK
    assert llama.reason[at(1, "w4a16", "H200", 1, 1)] == OK  # 35 GB of int4 weights fit
    res = build_space(FAMILIES.get("resnet"))
    j = int(np.ravel_multi_index((1, 1, 0, 0, 0, 0), res.shape))  # resnet-34 int8: nothing published
    assert res.reason[j] == NO_ACCURACY


def test_market_prices_take_the_cheapest_instance_per_gpu(tmp_path: Path) -> None:
    f = tmp_path / "instances.csv"
    f.write_text("cloud,instance_type,gpu_model,gpu_count,on_demand_usd_per_hour,spot_usd_per_hour\n"
                 "aws,big,A100-80GB,8,40.0,12.0\naws,small,A100-80GB,1,6.0,2.0\ngcp,x,L4,1,0.7,0.2\n")
    prices = gpu_prices(("A100-80GB", "T4"), "on-demand", f)
    assert prices["A100-80GB"][0] == 5.0 and "aws big" in prices["A100-80GB"][1]
    assert prices["T4"] == (0.35, "catalog list price")
    assert gpu_prices(("A100-80GB",), "spot", f)["A100-80GB"][0] == 1.5
    f.write_text("cloud,instance_type,gpu_model,gpu_count,on_demand_usd_per_hour,spot_usd_per_hour\n"
                 "aws,big,A100-80GB,8,lots,12.0\n")
    with pytest.raises(InputError, match=r"instances.csv:2: field on_demand_usd_per_hour"):
        gpu_prices(("A100-80GB",), "on-demand", f)
    with pytest.raises(InputError, match="valid: catalog, on-demand, spot"):
        gpu_prices(("T4",), "cheap")


def test_exact_front_is_non_dominated_and_bounds_nsga2(detr) -> None:  # type: ignore[no-untyped-def]
    ex = exact_front(detr, Slo(latency_ms=200.0))
    f = detr.objectives(ex.indices)
    assert ex.feasible == int(((detr.reason == OK) & (detr.p95_ms <= 200.0)).sum())
    assert (detr.p95_ms[ex.indices] <= 200.0).all()
    for a in f:
        assert not any((b <= a).all() and (b < a).any() for b in f)
    res = run_nsga2(detr, Slo(latency_ms=200.0), NsgaSettings(pop_size=24, generations=15), seed=3)
    hv, ex_hv, ratio = hv_ratio(detr, ex, res.indices)
    assert 0 < ratio <= 1.0 + 1e-9 and hv <= ex_hv + 1e-12
    assert set(res.indices.tolist()) <= set(np.flatnonzero(detr.feasible(200.0)).tolist())
    full = run_nsga2(detr, Slo(latency_ms=200.0), NsgaSettings(pop_size=24, generations=15, archive=True), seed=3)
    assert hv_ratio(detr, ex, full.indices)[2] >= ratio - 1e-12  # the archive never loses a front point


def test_infeasible_slos_name_the_binding_constraint(detr) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=r"latency bound binds: the fastest configuration has p95 .* > 1 ms"):
        exact_front(detr, Slo(latency_ms=1.0))
    with pytest.raises(InputError, match=r"accuracy floor binds: the best published COCO val AP .* is 44.9 < 50"):
        exact_front(detr, Slo(latency_ms=100.0, min_accuracy=50.0))
    with pytest.raises(InputError, match=r"with COCO val AP >= 44.5 has p95 .* without the accuracy floor detr-r50"):
        exact_front(detr, Slo(latency_ms=4.5, min_accuracy=44.5))


def test_flops_cost_is_gflops_per_request() -> None:
    s = build_space(FAMILIES.get("yolo"), SpaceOptions(cost="flops"))
    ok = s.reason == OK
    assert np.array_equal(s.cost[ok], s.gflops[ok])
    assert set(np.unique(s.cost[ok]).tolist()) == {v.gflops for v in s.family.variants}
    with pytest.raises(InputError, match="valid: usd, flops"):
        SpaceOptions(cost="watts")

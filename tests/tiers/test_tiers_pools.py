"""Tier demand and node-pool labelling."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import make_trace

from seedance.core.cluster import ClusterSpec, NodeSpec
from seedance.core.errors import InputError
from seedance.sim.replay import scale_cluster
from seedance.tiers import DEFAULT_TIER_CONFIG
from seedance.tiers.pools import label_pools, node_labels_for, pod_tiers, tier_demand
from seedance.traces import load_nodes, load_pods
from seedance.traces.schema import PodTrace


def trace_with_qos(qos: list[str], rows: list[tuple[int, int, int, int]], times: list[tuple[float, float]]) -> PodTrace:
    return dataclasses.replace(make_trace(rows, times=times), qos=np.array(qos, dtype=object))


def test_demand_is_the_peak_per_tier_with_gold_shares_as_whole_gpus() -> None:
    tr = trace_with_qos(
        ["LS", "LS", "BE", "BE", "Burstable"],
        [(4000, 1024, 1, 300), (4000, 1024, 1, 1000), (1000, 512, 1, 300), (1000, 512, 1, 300), (8000, 2048, 8, 1000)],
        [(0, 100), (50, 150), (0, 10), (5, 20), (0, 1)],
    )
    assert pod_tiers(tr).tolist() == [0, 0, 2, 2, 1]
    d = tier_demand(tr)
    assert (d["gold"].gpus, d["gold"].cpu_milli, d["gold"].max_gpus_per_pod) == (2.0, 8000.0, 1)
    assert d["bronze"].gpus == pytest.approx(0.6)  # bronze keeps its shares
    assert (d["silver"].gpus, d["silver"].shapes) == (8.0, ((8, 8000, 2048),))
    # whole-GPU classes: (GPUs, p90 CPU, p90 memory, peak concurrent pods); gold's shares count as 1 GPU
    assert d["silver"].classes == ((8, 8000, 2048, 1.0),)
    assert d["gold"].classes == ((1, 4000, 1024, 2.0),)
    assert d["bronze"].classes == ()  # bronze pods keep their shares: no whole-GPU class


def test_labels_follow_the_whitepaper_and_the_tier_backends() -> None:
    tiers = DEFAULT_TIER_CONFIG.tiers
    assert node_labels_for("gold", tiers["gold"], "G2") == {"gpu.sla.level": "gold", "gpu.mode": "exclusive"}
    assert node_labels_for("silver", tiers["silver"], "A100-80GB") == {"gpu.sla.level": "silver", "gpu.mode": "mig"}
    assert node_labels_for("silver", tiers["silver"], "T4") == {"gpu.sla.level": "silver", "gpu.mode": "exclusive"}
    assert node_labels_for("bronze", tiers["bronze"], "T4") == {"gpu.sla.level": "bronze", "gpu.mode": "shared"}


def test_every_tier_shape_gets_a_home_and_gold_is_covered_first() -> None:
    spec = ClusterSpec(nodes=tuple(
        NodeSpec(name=f"n{i}", cpu_milli=c, memory_mib=65536, gpu_count=g, gpu_model="T4")
        for i, (g, c) in enumerate([(8, 64000), (2, 16000), (2, 16000), (2, 16000), (1, 8000)])
    ))
    tr = trace_with_qos(
        ["LS", "LS", "Burstable", "BE"],
        [(4000, 1024, 2, 1000), (4000, 1024, 2, 1000), (8000, 2048, 8, 1000), (1000, 512, 1, 500)],
        [(0, 100), (0, 100), (0, 100), (0, 100)],
    )
    labelled, plan = label_pools(spec, tier_demand(tr))
    assert plan.node_tier[0] == "silver"  # the only home of silver's 8-GPU pod
    assert plan.gpus["gold"] >= 4 and plan.coverage("gold") >= 1.0
    assert plan.nodes("bronze") >= 1
    for node, tier in zip(labelled.nodes, plan.node_tier, strict=True):
        assert node.labels["gpu.sla.level"] == tier
    assert label_pools(spec, tier_demand(tr))[1] == plan  # deterministic
    with pytest.raises(InputError, match="pool rule"):
        label_pools(spec, tier_demand(tr), rule="fair")


def test_real_trace_pools_at_scale_001(alibaba: Path) -> None:
    spec = scale_cluster(load_nodes(alibaba / "openb_node_list_gpu_node.csv"), 0.01, seed=0)
    trace = load_pods(alibaba / "openb_pod_list_default.csv")
    demand = tier_demand(trace)
    assert demand["gold"].pods == 4654 and demand["silver"].pods == 100 and demand["bronze"].pods == 3398
    assert demand["gold"].gpus == 52.0 and demand["silver"].gpus == 28.0
    labelled, plan = label_pools(spec, demand)
    assert sum(plan.gpus.values()) == spec.total_gpus == 89
    assert plan.gpus["gold"] >= 52 and plan.coverage("gold") >= 1.0
    js = plan.to_json()
    assert set(js["tiers"]) == {"gold", "silver", "bronze"} and js["rule"] == "priority"


def test_pool_sizing_needs_times() -> None:
    with pytest.raises(InputError, match="creation_time"):
        tier_demand(make_trace([(1, 1, 0, 0)]))

"""The inflation experiment over slice pools, on a small real slice of the default trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seedance.core.cluster import ClusterSpec
from seedance.core.errors import InputError
from seedance.sim.inflation import run_inflation
from seedance.slicing.sim import SlicedRun, isolation_costs, run_sliced_inflation
from seedance.traces.alibaba import load_nodes, load_pods
from seedance.traces.schema import PodTrace


@pytest.fixture(scope="module")
def tenth(alibaba: Path) -> tuple[ClusterSpec, PodTrace]:
    """Every 10th node (122 nodes, 626 GPUs; 60 G2 nodes) and every 10th pod (816) of the default trace."""
    spec = load_nodes(alibaba / "openb_node_list_gpu_node.csv")
    trace = load_pods(alibaba / "openb_pod_list_default.csv")
    return ClusterSpec(nodes=spec.nodes[::10], name="tenth"), trace.take(np.arange(0, len(trace), 10))


@pytest.mark.parametrize("policy", ["best-fit", "fgd"])
def test_free_slices_reproduce_run_inflation_exactly(tenth: tuple[ClusterSpec, PodTrace], policy: str) -> None:
    spec, pods = tenth
    base = run_inflation(spec, pods, policy, 42)
    free = run_sliced_inflation(spec, pods, policy, 42, slices="free")
    assert free.run.alloc_pct == base.alloc_pct and free.run.frag_pct == base.frag_pct
    assert (free.run.placed, free.run.failed, free.run.unallocated_pct_at_100) == (
        base.placed,
        base.failed,
        base.unallocated_pct_at_100,
    )
    assert free.booked_alloc_pct == free.run.alloc_pct and free.booked_waste_milli == 0
    assert not free.mig_instances and free.shares_on_mig == 0


# golden values (seed 42, G2 -> A100-80GB): unallocated % at 100% arrived, requested and booked basis
GOLDEN = {
    "best-fit": (8.0, 10.55, 5.7, {"1g.10gb": 3, "2g.20gb": 16, "3g.40gb": 36, "4g.40gb": 66, "7g.80gb": 82}),
    "fgd": (6.04, 9.53, 3.2, {"1g.10gb": 8, "2g.20gb": 27, "3g.40gb": 54, "4g.40gb": 86, "7g.80gb": 109}),
}


@pytest.mark.parametrize("policy", ["best-fit", "fgd"])
def test_mig_pools_golden(tenth: tuple[ClusterSpec, PodTrace], policy: str) -> None:
    spec, pods = tenth
    free_un, mig_un, booked_un, instances = GOLDEN[policy]
    mig = run_sliced_inflation(spec, pods, policy, 42, slices="mig")
    assert mig.mig_map == {"G2": "A100-80GB"}
    assert mig.run.unallocated_pct_at_100 == mig_un
    assert mig.booked_unallocated_pct_at_100 == booked_un
    assert dict(mig.mig_instances) == instances
    assert mig.shares_on_mig == sum(instances.values()) <= mig.shares_placed
    assert mig.booked_waste_milli > 0
    # isolation costs allocation: the MIG run leaves more of the GPUs unallocated than free sharing
    assert mig_un > free_un == run_inflation(spec, pods, policy, 42).unallocated_pct_at_100


def test_sliced_runs_are_deterministic_and_independent(tenth: tuple[ClusterSpec, PodTrace]) -> None:
    spec, pods = tenth
    a = run_sliced_inflation(spec, pods, "best-fit", 7, slices="mig")
    b = run_sliced_inflation(spec, pods, "best-fit", 7, slices="mig")
    assert a.run.alloc_pct == b.run.alloc_pct and a.mig_instances == b.mig_instances
    # a MIG map naming no node model of the cluster (and native pools off) is free sharing
    none = run_sliced_inflation(spec, pods, "best-fit", 7, slices="mig", mig_map={"A10": "A100-40GB"}, native=False)
    free = run_sliced_inflation(spec, pods, "best-fit", 7, slices="free")
    assert "A10" not in {n.gpu_model for n in spec.nodes}
    assert none.run.alloc_pct == free.run.alloc_pct and not none.mig_instances
    with pytest.raises(InputError, match="unknown slice mode"):
        run_sliced_inflation(spec, pods, "best-fit", 7, slices="mps")


def test_isolation_costs_pair_runs_by_seed(tenth: tuple[ClusterSpec, PodTrace]) -> None:
    spec, pods = tenth
    runs: list[SlicedRun] = [
        run_sliced_inflation(spec, pods, "best-fit", s, slices=m) for s in (42, 43) for m in ("free", "mig")
    ]
    (cost,) = isolation_costs(runs)
    free = [r.run.unallocated_pct_at_100 or 0.0 for r in runs if r.slices == "free"]
    mig = [r.run.unallocated_pct_at_100 or 0.0 for r in runs if r.slices == "mig"]
    assert cost.seeds == (42, 43)
    assert cost.cost_pp == round(sum(b - a for a, b in zip(free, mig, strict=True)) / 2, 2)
    assert cost.free_unallocated == round(sum(free) / 2, 2) and cost.mig_unallocated == round(sum(mig) / 2, 2)
    assert cost.to_json()["isolation_cost_pp"] == cost.cost_pp

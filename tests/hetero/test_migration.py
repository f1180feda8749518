"""Migration planner: exact costs on hand-made topologies, SelectTargetNode, infeasible targets."""

from __future__ import annotations

import pytest

from seedance.core.errors import InputError
from seedance.hetero.fleet import FleetNode, gpu_type
from seedance.hetero.migration import MigrationPlanner, MigrationRequest
from seedance.storage.tiers import STORAGE
from seedance.topology.compat import CudaBuild
from seedance.topology.topo import parse_topo

SRC_TOPO = parse_topo("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
                      "GPU0\t X \tNV6\tPIX\t0-15\t0\n"
                      "GPU1\tNV6\t X \tPXB\t0-15\t0\n"
                      "NIC0\tPIX\tPXB\t X \n", source="src")
DST_TOPO = parse_topo("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
                      "GPU0\t X \tSYS\tNODE\t0-15\t0\n"
                      "GPU1\tSYS\t X \tSYS\t16-31\t1\n"
                      "NIC0\tNODE\tSYS\t X \n", source="dst")
NEW = (580, 65, 6)


def node(name: str, gpu: str, topo: str | None, *, storage: str = "tiered", net: float = 12.5,
         cap: float | None = None, driver: tuple[int, ...] = NEW) -> FleetNode:
    g = gpu_type(gpu)
    return FleetNode(name, g, 2, driver, cap or g.tdp_w, STORAGE.get(storage), net, topo)


PLANNER = MigrationPlanner(topologies={"src": SRC_TOPO, "dst": DST_TOPO}, restart_s=10.0, jit_s=30.0,
                           requant_s=2.0)


def test_exact_cross_node_cost_v100_to_l40s() -> None:
    src = node("v100-box", "V100-32GB", "src")
    dst = node("l40s-box", "L40S", "dst")
    build = CudaBuild.of("11.8", sass=["sm_70"], ptx=["compute_70"])  # no Ada SASS: the driver JITs the PTX
    req = MigrationRequest("j1", 10.0, build, src, 1e6)
    c = PLANNER.cost(req, dst)
    assert c.feasible and "PTX JIT on L40S" in c.reason
    # path: V100 GPU0 -PIX 15.75-> NIC0 -network 12.5-> NIC0 -NODE 31.5-> L40S GPU0; slowest = network
    assert [(lk.kind, lk.gbs) for lk in c.path] == [("PIX", 15.75), ("network", 12.5), ("NODE", 31.5)]
    assert c.topology_s == pytest.approx(10 / 12.5 + (1 + 4) * 1e-6)
    assert c.checkpoint_s == pytest.approx(10 / 15.75)  # GPU -> DRAM staging over PCIe 3.0 x16
    assert c.bandwidth_s == pytest.approx(10 / 900 + 10 / 864)
    assert (c.compat_s, c.restart_s, c.power_s) == (30.0, 10.0, 0.0)
    # no throughput profile: dense TFLOPS as the rate (V100 125, L40S 362.05)
    assert c.gain_s == pytest.approx(1e6 / 125.0 - 1e6 / 362.05)
    assert c.cost_s == pytest.approx(10 / 15.75 + 0.8 + 5e-6 + 10 / 900 + 10 / 864 + 40.0)
    assert c.net_s == pytest.approx(c.gain_s - c.cost_s)


def test_same_node_nvlink_move() -> None:
    src = node("v100-box", "V100-32GB", "src")
    req = MigrationRequest("j2", 30.0, CudaBuild.of("12.4"), src, 0.0, src_gpu=0)
    links, hops = PLANNER.path(req, src, dst_gpu=1)
    assert [(lk.kind, lk.gbs) for lk in links] == [("NV6", 150.0)] and hops == 0  # 6 NVLink-2 links x 25


def test_power_cap_and_requantisation() -> None:
    src = node("a100", "A100-80GB", None)
    dst = node("v100-capped", "V100-32GB", None, cap=150.0)  # half the 300 W TDP
    req = MigrationRequest("j3", 4.0, CudaBuild.of("12.4"), src, 1e5, precision="bf16")
    c = PLANNER.cost(req, dst)
    assert "re-quantisation BF16 -> FP16" in c.reason
    assert c.compat_s == pytest.approx(2.0 + 2 * 4.0 / 900)
    assert c.power_s == pytest.approx(1e5 / 125.0 * (1 / 0.5 - 1))  # remaining time on target, doubled by the cap
    # no topology given: one PHB path at the PCIe rate of each GPU; network the slowest
    assert [lk.kind for lk in c.path] == ["PHB (no topology)", "network", "PHB (no topology)"]


def test_select_target_argmin_and_refusals() -> None:
    src = node("v100-box", "V100-32GB", "src")
    k80 = node("k80", "K80", None, driver=(470, 256, 2))
    l40s = node("l40s-box", "L40S", "dst")
    h100 = node("h100", "H100-80GB", None, net=1.25)
    build = CudaBuild.of("12.4")
    res = PLANNER.select_target(MigrationRequest("j4", 10.0, build, src, 2e6), [src, k80, l40s, h100])
    rows = {c["node"]: c for c in res["candidates"]}
    assert "v100-box" not in rows  # the source is no candidate
    assert not rows["k80"]["feasible"] and "CUDA 12.4 needs driver >= 525.60.13" in rows["k80"]["reason"]
    best = min((c for c in rows.values() if c["feasible"]), key=lambda c: c["cost_s"] - c["gain_s"])
    assert res["decision"] == "migrate" and res["target"] == best["node"] == "h100"
    assert res["whitepaper_argmin"] == "l40s-box"  # cheapest topology + compatibility, ignoring the gain
    stay = PLANNER.select_target(MigrationRequest("j5", 10.0, build, src, 0.0), [l40s, h100])
    assert stay["decision"] == "stay" and stay["target"] is None


def test_impossible_requests() -> None:
    src = node("v100-box", "V100-16GB", "src")
    with pytest.raises(InputError, match="cannot be on 2 x V100-16GB") as ei:
        MigrationRequest("big", 40.0, CudaBuild.of("12.4"), src, 0.0)
    assert ei.value.field == "state_gb"
    with pytest.raises(InputError, match="must be > 0 GB"):
        MigrationRequest("zero", 0.0, CudaBuild.of("12.4"), src, 0.0)
    t4 = node("t4", "T4", None)
    big = node("v100-32", "V100-32GB", None)
    c = PLANNER.cost(MigrationRequest("fits", 40.0, CudaBuild.of("12.4"), big, 0.0), t4)
    assert not c.feasible and "does not fit 2 x T4" in c.reason

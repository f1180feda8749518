"""One node end to end: GPUs (MIG, time-sliced, lost) + processes + pods → holders, usage, energy, metrics."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from seedance.telemetry.attribution import rollup, split_by_ratio
from seedance.telemetry.exporter import Exporter
from seedance.telemetry.nvml import NvmlCollector
from seedance.telemetry.pods import PodDirectory
from seedance.telemetry.procfs import ProcessSampler
from seedance.telemetry.readings import GpuProcess, GpuReading, GpuSnapshot
from seedance.telemetry.sampler import NodeSampler
from tests.telemetry.fakes import FakeNvml, FakePsutil, cgroup_of, pod_doc

CIDS = {name: (f"{i:x}" * 64)[:64] for i, name in enumerate(["mig", "a", "b", "cpu"], start=1)}
UIDS = {"mig": "11111111-1111-1111-1111-111111111111", "a": "22222222-2222-2222-2222-222222222222",
        "b": "33333333-3333-3333-3333-333333333333", "cpu": "44444444-4444-4444-4444-444444444444"}
PIDS = {21180: "mig", 21181: "mig", 21198: "mig", 30001: "a", 30002: "b", 40000: "cpu", 1: None}


def node(nv: FakeNvml | None = None, table: dict[int, tuple[float, float, int]] | None = None,
         dcgm: str | None = None) -> tuple[NodeSampler, dict[int, tuple[float, float, int]]]:
    table = table if table is not None else dict.fromkeys(PIDS, (10.0, 100.0, 1 << 30))

    def read(pid: int) -> str:
        who = PIDS.get(pid)
        return cgroup_of(UIDS[who], CIDS[who]) if who else "0::/system.slice/sshd.service\n"

    pods = PodDirectory.from_objects([
        pod_doc("train", UIDS["mig"], [CIDS["mig"]], namespace="ml", labels={"team": "nlp"}, mig="3g.40gb"),
        pod_doc("infer-a", UIDS["a"], [CIDS["a"]], namespace="serve", labels={"team": "search"},
                annotations={"seedance.ai/gpu-milli": "500", "seedance.ai/gpu-index": "1"}),
        pod_doc("infer-b", UIDS["b"], [CIDS["b"]], namespace="serve", labels={"team": "ads"},
                annotations={"seedance.ai/gpu-milli": "250", "seedance.ai/gpu-index": "1"}),
        pod_doc("etl", UIDS["cpu"], [CIDS["cpu"]], namespace="data", labels={"team": "data"}, cpu="2", memory="4Gi"),
    ], {"ml": {"env": "prod"}, "serve": {"env": "prod"}, "data": {"env": "dev"}}, node="n1")
    s = NodeSampler("n1", gpus=NvmlCollector(nv or FakeNvml()), processes=ProcessSampler(FakePsutil(table), read),
                    pods=pods, cpu_cores=96, ram_bytes=1024 * 2**30,
                    dcgm_text=(lambda: dcgm) if dcgm is not None else None)
    return s, table


DCGM = ('DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",device="nvidia0",'
        'GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="n1"} 0.8\n')


def more_samples(nv: FakeNvml, t: int) -> None:
    nv.devices[1].samples += [(30001, t, 45), (30002, t + 1, 15)]


def test_holders_usage_and_tags_on_mig_and_shared_gpus() -> None:
    nv = FakeNvml()
    s, table = node(nv, dcgm=DCGM)
    s.tick(t=1000.0)
    more_samples(nv, 100)
    for pid in table:
        table[pid] = (10.0, table[pid][1] + 2.5, table[pid][2])
    tick = s.tick(t=1005.0)
    assert tick.dt == 5.0
    dev = {(d.gpu, d.slice): d for d in tick.devices}
    gi2 = dev[(0, "2/0")]
    assert gi2.profile == "3g.40gb" and math.isclose(gi2.fraction, 3 / 7) and gi2.util_pct == 80.0
    assert [(h.pod, h.allocated) for h in gi2.holders] == [("train", 1.0)]
    assert math.isclose(gi2.holders[0].used or 0, 0.8)  # the instance's engine activity, all of it this pod's
    assert dev[(0, "3/0")].holders == () and dev[(0, "9/0")].mem_total_mib == 9984.0
    shared = dev[(1, "")]
    assert [(h.pod, h.allocated, h.used) for h in shared.holders] == [("infer-a", 0.5, 0.45), ("infer-b", 0.25, 0.15)]
    assert any(d.lost for d in tick.devices)
    by = {(c.namespace, c.pod): c for c in tick.containers}
    train = by[("ml", "train")]
    assert math.isclose(train.gpu_request, 3 / 7) and math.isclose(train.gpu_usage, 0.8 * 3 / 7)
    assert train.gpu_model == "H100-80GB" and train.labels == {"team": "nlp", "env": "prod"}
    assert train.cpu_usage == 3 * 2.5 / 5.0  # three processes, 2.5 CPU-s each over 5 s
    assert by[("serve", "infer-a")].gpu_request == 0.5 and math.isclose(by[("serve", "infer-a")].gpu_usage, 0.45)
    etl = by[("data", "etl")]
    assert (etl.cpu_request, etl.ram_request, etl.gpu_request, etl.gpu_model) == (2.0, 4 * 2**30, 0.0, "")
    assert tick.asset.gpus == {"H100-80GB": 2.0} and tick.asset.cpu_cores == 96
    # no new per-process samples: the device's 60 % is split by the processes' memory (8000 : 4000 MiB)
    tick = s.tick(t=1010.0)
    shared = next(d for d in tick.devices if d.gpu == 1)
    assert [(h.pod, round(h.used or 0, 9)) for h in shared.holders] == [("infer-a", 0.4), ("infer-b", 0.2)]


def test_energy_active_plus_idle_is_total_and_levels_add_up() -> None:
    nv = FakeNvml()
    s, _ = node(nv)
    s.tick(t=0.0)
    for d in nv.devices:
        if d.energy_mj is not None:
            d.energy_mj += 2_000_000  # 2 kJ over the tick on every GPU
    tick = s.tick(t=5.0)
    shared = next(d for d in tick.devices if d.gpu == 1)
    total = 2000.0
    assert math.isclose(sum(h.energy_j for h in shared.holders) + shared.idle_energy_j, total)
    idle = 70.0 * 5.0  # H100 idle power × dt stays with the device
    assert math.isclose(sum(h.energy_j for h in shared.holders), total - idle)
    procs = [((p.namespace, p.pod, p.container), p.energy_j) for p in tick.processes]
    by_c, by_p = rollup(procs)
    for d in tick.devices:
        for h in d.holders:
            assert math.isclose(by_c[(h.namespace, h.pod, h.container)], h.energy_j) or d.slice
    assert math.isclose(sum(by_p.values()), sum(by_c.values()))


def test_kepler_worked_example() -> None:
    # power-attribution-guide.md: 60 W, usage ratio 1/3, node CPU 1000 ms, processes 100/80/70/60/200/90/110 ms
    ms = {"p1": 100, "p2": 80, "p3": 70, "p4": 60, "p5": 200, "p6": 90, "p7": 110}
    active, idle, w = split_by_ratio(60.0, 1 / 3, 1000.0, {k: float(v) for k, v in ms.items()})
    assert (round(active, 9), round(idle, 9)) == (20.0, 40.0)
    assert {k: round(v, 9) for k, v in w.items()} == {"p1": 2.0, "p2": 1.6, "p3": 1.4, "p4": 1.2, "p5": 4.0,
                                                      "p6": 1.8, "p7": 2.2}
    owner = {"p2": ("ns", "pod-a", "container-A"), "p3": ("ns", "pod-a", "container-A"),
             "p6": ("ns", "pod-X", "c1"), "p7": ("ns", "pod-X", "c2")}
    by_c, by_p = rollup((owner[k], w[k]) for k in owner)
    assert round(by_c[("ns", "pod-a", "container-A")], 9) == 3.0 and round(by_p[("ns", "pod-X")], 9) == 4.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.floats(0, 100), st.floats(1, 5000)),
                min_size=1, max_size=12, unique_by=lambda x: x[0]))
def test_process_container_pod_sums_agree(procs: list[tuple[int, int, float, float]]) -> None:
    """Random processes of random containers on one shared GPU: Σ process = container, Σ container = pod,
    Σ everything + device idle = device energy."""
    uid = [f"aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaa{i}" for i in range(3)]
    cid = {i: f"{i + 10:x}" * 64 for i in range(6)}
    pod_of = {i: i % 3 for i in range(6)}
    docs = []
    for p in range(3):
        mine = [cid[i] for i in range(6) if pod_of[i] == p]
        docs.append(pod_doc(f"p{p}", uid[p], mine, annotations={"seedance.ai/gpu-milli": "300",
                                                               "seedance.ai/gpu-index": "0"}))
    table = {1000 + c: (1.0, 0.0, 1) for c, _, _, _ in procs}

    def read(pid: int) -> str:
        c = pid - 1000
        return cgroup_of(uid[pod_of[c]], cid[c])

    class Snap:
        name = "fake"

        def __init__(self) -> None:
            self.e = 0.0

        def collect(self) -> GpuSnapshot:
            self.e += 1e6
            return GpuSnapshot(t=0.0, gpus=(GpuReading(0, "GPU-x", "NVIDIA H100 80GB HBM3", util_pct=70.0,
                                                       power_w=500.0, energy_mj=self.e),),
                               processes=tuple(GpuProcess(1000 + c, "GPU-x", mib, sm) for c, _, sm, mib in procs))

    s = NodeSampler("n", gpus=Snap(), processes=ProcessSampler(FakePsutil(table), read),
                    pods=PodDirectory.from_objects(docs, {}), cpu_cores=8, ram_bytes=2**34)
    s.tick(t=0.0)
    tick = s.tick(t=5.0)
    dev = tick.devices[0]
    by_c, by_p = rollup(((p.namespace, p.pod, p.container), p.energy_j) for p in tick.processes)
    for h in dev.holders:
        assert math.isclose(by_c.get((h.namespace, h.pod, h.container), 0.0), h.energy_j, abs_tol=1e-9)
    pods: dict[str, float] = {}
    for h in dev.holders:
        pods[h.pod] = pods.get(h.pod, 0.0) + h.energy_j
    for (_, pod), v in by_p.items():
        assert math.isclose(pods[pod], v, abs_tol=1e-9)
    assert math.isclose(sum(h.energy_j for h in dev.holders) + dev.idle_energy_j, 1000.0, rel_tol=1e-9)


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_exporter_uses_dcgm_names_and_labels_and_attributes_shares() -> None:
    nv = FakeNvml()
    s, table = node(nv, dcgm=DCGM)
    exp = Exporter("n1")
    exp.update(s.tick(t=0.0))
    more_samples(nv, 100)
    for pid in table:
        table[pid] = (10.0, table[pid][1] + 1.0, table[pid][2])
    exp.update(s.tick(t=5.0))
    text = exp.render()
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n" in text  # dcgm-exporter's name, no _total
    fam = families(text)
    util = {s.labels["gpu"]: s for s in fam["DCGM_FI_DEV_GPU_UTIL"].samples}
    assert set(util) == {"1"}  # the MIG-enabled GPU reports no utilisation
    assert util["1"].value == 60.0 and util["1"].labels["UUID"].endswith("0001")
    assert {"gpu", "UUID", "device", "modelName", "Hostname"} <= set(util["1"].labels)
    assert "pod" not in util["1"].labels  # two pods share it: dcgm-exporter's pod labels cannot say who
    mig = [s for s in fam["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].samples if s.labels["GPU_I_ID"] == "2"]
    assert mig[0].value == 0.8 and mig[0].labels["pod"] == "train" and mig[0].labels["GPU_I_PROFILE"] == "3g.40gb"
    assert mig[0].labels["UUID"] == "GPU-00000000-0000-0000-0000-000000000000"  # the parent's UUID, as DCGM
    shares = {(x.labels["gpu"], x.labels["pod"]): x.value for x in fam["seedance_gpu_used_share"].samples}
    assert shares == {("0", "train"): 0.8, ("1", "infer-a"): 0.45, ("1", "infer-b"): 0.15}
    held = {(x.labels["gpu"], x.labels["pod"]): x.value for x in fam["seedance_gpu_allocated_share"].samples}
    assert held[("1", "infer-a")] == 0.5 and held[("1", "infer-b")] == 0.25
    cost = {(x.labels["pod"], x.labels["resource"]): x.value for x in fam["seedance_allocation_cost_usd"].samples}
    gpu_rate = 12.29  # catalog H100-80GB list price
    assert math.isclose(cost[("infer-a", "gpu")], 0.5 * 5 / 3600 * gpu_rate)
    assert math.isclose(cost[("train", "gpu")], 3 / 7 * 5 / 3600 * gpu_rate)
    lost = fam["seedance_gpu_lost"].samples
    assert [x.labels["where"] for x in lost] == ["GPU 2"]


def test_counters_never_decrease_even_when_the_energy_counter_resets() -> None:
    nv = FakeNvml()
    s, table = node(nv)
    exp = Exporter("n1")
    last: dict[str, dict[Any, float]] = {}
    for k in range(6):
        for d in nv.devices:
            if d.energy_mj is not None:
                d.energy_mj = 500 if k == 3 else d.energy_mj + 3_000_000  # a driver reload at k = 3
        for pid in table:
            table[pid] = (10.0, table[pid][1] + 1.0, table[pid][2])
        tick = s.tick(t=5.0 * k)
        exp.update(tick, energy_mj={d.uuid: d.energy_mj for d in nv.devices if d.energy_mj is not None})
        now = exp.counters()
        for name, series in last.items():
            for ls, v in series.items():
                assert now[name][ls] >= v, (name, ls)
        last = now
    energy = families(exp.render())["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].samples
    e1 = next(x.value for x in energy if x.labels["gpu"] == "1")
    assert e1 == 4 * 3_000_000 + 500  # 4 normal steps after the first, the reset counts from the new value

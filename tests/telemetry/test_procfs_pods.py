"""cgroup paths → container and pod, the process sampler, pod documents → requests, GPU claims and tags."""

from __future__ import annotations

from pathlib import Path

import pytest

from seedance.core.errors import InputError
from seedance.telemetry.pods import GpuClaim, PodDirectory, gpu_claim, pod_meta
from seedance.telemetry.procfs import ProcessSampler, parse_cgroup
from tests.telemetry.fakes import FakePsutil, cgroup_of, pod_doc

FIX = Path(__file__).parent / "fixtures"
CID = "0123456789abcdef" * 4


def cases() -> dict[str, str]:
    out = {}
    for line in (FIX / "cgroups.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, content = line.partition(" | ")
        out[name] = content.replace("\\n", "\n")
    return out


@pytest.mark.parametrize(("case", "pod", "container", "qos", "runtime"), [
    ("v2-containerd-burstable", "4b1f4f77-49e6-4e30-98db-e98055c8a54f", CID, "burstable", "containerd"),
    ("v2-crio-besteffort", "7d2a1c3e-5b6f-4a8e-9c0d-1e2f3a4b5c6d", "fedcba9876543210" * 4, "besteffort", "cri-o"),
    ("v2-docker-guaranteed", "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", "00112233445566778899aabbccddeeff" * 2,
     "guaranteed", "docker"),
    ("v1-cgroupfs-burstable", "4b1f4f77-49e6-4e30-98db-e98055c8a54f", CID, "burstable", None),
    ("v1-docker-plain", None, "00112233445566778899aabbccddeeff" * 2, None, "docker"),
    ("host-systemd", None, None, None, None),
])
def test_cgroup_layouts(case: str, pod: str | None, container: str | None, qos: str | None, runtime: str | None
                        ) -> None:
    c = parse_cgroup(cases()[case])
    assert (c.pod_uid, c.container_id, c.qos, c.runtime) == (pod, container, qos, runtime)


def test_process_sampler_caches_cgroups_per_pid_and_start() -> None:
    table = {10: (100.0, 5.0, 1 << 20), 11: (100.0, 1.0, 2 << 20)}
    reads: list[int] = []

    def read(pid: int) -> str:
        reads.append(pid)
        return cgroup_of("4b1f4f77-49e6-4e30-98db-e98055c8a54f", CID) if pid == 10 else "0::/system.slice/x\n"

    s = ProcessSampler(FakePsutil(table), read_cgroup=read)
    a = s.sample()
    assert [(p.pid, p.cpu_s, p.rss_bytes, p.cgroup.container_id) for p in a] == [
        (10, 5.0, 1 << 20, CID), (11, 1.0, 2 << 20, None)]
    table[10] = (100.0, 7.5, 1 << 20)
    table[11] = (200.0, 0.5, 1 << 20)  # pid 11 reused by a new process
    s.sample()
    assert reads == [10, 11, 11]


def test_pod_documents_to_requests_claims_and_tags() -> None:
    pod = pod_doc("train-0", "u1", [CID, "ab" * 32], labels={"team": "nlp", "cost.seedance.ai/env": "prod"},
                  cpu="1500m", memory="8Gi", gpus=2, annotations={"seedance.ai/gpu-index": "2,3"})
    m = pod_meta(pod, {"env": "dev", "team": "other"})
    assert [(c.name, c.container_id, c.cpu_request, c.ram_request) for c in m.containers] == [
        ("c0", CID, 1.5, 8 * 2**30), ("c1", "ab" * 32, 1.5, 8 * 2**30)]
    assert m.gpu == GpuClaim(fraction=1.0, devices=2, indices=(2, 3))
    assert m.tags() == {"team": "nlp", "env": "prod"}  # operator's env label wins, team from the pod
    assert pod_meta(pod_doc("p", "u", [CID]), {"env": "dev"}).tags() == {"env": "dev"}
    d = PodDirectory([m])
    assert d.by_container(CID)[1].name == "c0" and d.by_uid("u1") is m and d.by_container("zz") is None


@pytest.mark.parametrize(("kw", "claim"), [
    ({"annotations": {"seedance.ai/gpu-milli": "250", "seedance.ai/gpu-index": "1"}},
     GpuClaim(fraction=0.25, devices=1, indices=(1,))),
    ({"mig": "1g.10gb"}, GpuClaim(fraction=1 / 7, devices=1, mig_profile="1g.10gb")),
    ({"mig": "3g.40gb"}, GpuClaim(fraction=3 / 7, devices=1, mig_profile="3g.40gb")),
    ({"gpus": 1}, GpuClaim(fraction=1.0, devices=1)),
    ({}, None),
])
def test_gpu_claims(kw: dict, claim: GpuClaim | None) -> None:
    assert gpu_claim(pod_doc("p", "u", [CID], **kw)) == claim


def test_time_sliced_replicas_and_bad_annotation() -> None:
    assert gpu_claim(pod_doc("p", "u", [CID], gpus=1), time_slice_replicas=4) == GpuClaim(fraction=0.25, devices=1)
    with pytest.raises(InputError, match="must be 1..1000") as e:
        gpu_claim(pod_doc("p", "u", [CID], annotations={"seedance.ai/gpu-milli": "1500"}))
    assert e.value.field == "metadata.annotations.seedance.ai/gpu-milli"


def test_ebpf_is_optional_and_says_how_to_get_it() -> None:
    import subprocess
    import sys

    code = ("import sys, seedance.telemetry.collector, seedance.telemetry.sampler, seedance.telemetry.agent, "
            "seedance.telemetry.exporter; print('bcc' in sys.modules, 'seedance.telemetry.ebpf' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]  # the default path never imports eBPF or BCC
    from seedance.telemetry.ebpf import EbpfProcessSampler
    from seedance.telemetry.nvsmi import CollectorUnavailable

    with pytest.raises(CollectorUnavailable, match="python3-bpfcc"):
        EbpfProcessSampler(FakePsutil({}))


def test_pods_from_the_api_server_and_agent_refresh() -> None:
    from seedance.telemetry.agent import Agent
    from seedance.telemetry.collector import FakeCollector
    from seedance.telemetry.pods import from_kubernetes
    from seedance.telemetry.sampler import NodeSampler

    class Api:
        def __init__(self) -> None:
            self.pods = [pod_doc("a", "u1", [CID], namespace="ml", node="n1"),
                         pod_doc("b", "u2", ["cd" * 32], namespace="ml", node="n2")]
            self.ns_reads = 0
            self.fail = False

        def list_pods(self) -> tuple[list[dict], str]:
            if self.fail:
                raise ConnectionError("API server away")
            return self.pods, "1"

        def namespace_labels(self, ns: str) -> dict[str, str]:
            self.ns_reads += 1
            return {"env": "prod"}

    api = Api()
    d = from_kubernetes(api, "n1")
    assert [p.name for p in d.pods()] == ["a"] and d.pods()[0].tags() == {"env": "prod"} and api.ns_reads == 1
    s = NodeSampler("n1", gpus=FakeCollector(gpus=1), processes=None, pods=PodDirectory(), cpu_cores=1, ram_bytes=1)
    agent = Agent(s, cluster="c", send=lambda b: None, refresh_pods=lambda: from_kubernetes(api, "n1"),
                  refresh_every=2)
    agent.step(0.0)
    assert [p.name for p in s.pods.pods()] == ["a"]
    api.pods.append(pod_doc("c", "u3", ["ef" * 32], namespace="ml", node="n1"))
    api.fail = True
    agent.step(5.0)
    agent.step(10.0)  # refresh fails: the known pods stay
    assert [p.name for p in s.pods.pods()] == ["a"]


def test_cgroup_sampler_reads_container_counters_v2_and_v1(tmp_path: Path) -> None:
    from seedance.telemetry.procfs import CgroupSampler
    from tests.telemetry.fakes import cgroup_tree

    cgroup_tree(tmp_path, {CID: ("4b1f4f77-49e6-4e30-98db-e98055c8a54f", 2_500_000, 3 * 2**30, 2**30)})
    (tmp_path / "system.slice" / "docker-" f"{'ab' * 32}.scope").mkdir(parents=True)  # not a pod: ignored
    got = CgroupSampler(str(tmp_path)).sample()
    assert got == {CID: type(got[CID])(CID, 2.5, float(2 * 2**30))}
    v1 = tmp_path / "v1"
    for ctl, files in (("cpuacct", {"cpuacct.usage": "4000000000"}),
                       ("memory", {"memory.usage_in_bytes": str(5 * 2**20),
                                   "memory.stat": "total_inactive_file 1048576\n"})):
        d = v1 / ctl / "kubepods" / "burstable" / "pod4b1f4f77-49e6-4e30-98db-e98055c8a54f" / CID
        d.mkdir(parents=True)
        for name, text in files.items():
            (d / name).write_text(text)
    got = CgroupSampler(str(v1)).sample()
    assert got[CID].cpu_s == 4.0 and got[CID].working_set_bytes == 4 * 2**20


def test_sampler_in_cgroup_mode_reads_only_gpu_processes(tmp_path: Path) -> None:
    from seedance.telemetry.collector import FakeCollector
    from seedance.telemetry.procfs import CgroupSampler
    from seedance.telemetry.sampler import NodeSampler
    from tests.telemetry.fakes import cgroup_tree

    uid = "4b1f4f77-49e6-4e30-98db-e98055c8a54f"
    pods = PodDirectory.from_objects([pod_doc("train", uid, [CID], gpus=1,
                                              annotations={"seedance.ai/gpu-index": "0"})], {})
    ps = FakePsutil({77: (1.0, 0.0, 1 << 30), **dict.fromkeys(range(1000, 1500), (1.0, 0.0, 1))})
    t = [0.0]
    s = NodeSampler("n1", gpus=FakeCollector(gpus=1, clock=lambda: t[0], processes=[(77, 0, 1000.0, 50.0)]),
                    processes=ProcessSampler(ps, read_cgroup=lambda pid: cgroup_of(uid, CID)), pods=pods,
                    cpu_cores=8, ram_bytes=2**34, cgroups=CgroupSampler(str(tmp_path)))
    cgroup_tree(tmp_path, {CID: (uid, 1_000_000, 2**30, 0)})
    s.tick(t=0.0)
    cgroup_tree(tmp_path, {CID: (uid, 6_000_000, 2 * 2**30, 2**29)})
    t[0] = 5.0
    tick = s.tick(t=5.0)
    (c,) = tick.containers
    assert (c.cpu_usage, c.ram_usage) == (1.0, 1.5 * 2**30)  # 5 CPU-s over 5 s; working set 2 GiB - 0.5 GiB
    assert c.gpu_usage == 0.5 and ps.iterations == 0  # the 500 other processes were never walked

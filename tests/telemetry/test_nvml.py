"""The NVML collector on a fake NVML (the H100 MIG capture's instances, a time-sliced GPU, a lost GPU)."""

from __future__ import annotations

import pytest

from seedance.telemetry.nvml import NvmlCollector, profile_of, total_slices_of
from seedance.telemetry.nvsmi import CollectorUnavailable
from seedance.telemetry.readings import GpuProcess, SliceReading
from tests.telemetry.fakes import FakeNvml, h100_mig_table

P = "GPU-00000000-0000-0000-0000-000000000000"


def test_mig_instances_shared_gpu_and_lost_gpu() -> None:
    nv = FakeNvml()
    snap = NvmlCollector(nv).collect()
    mig, shared = snap.gpus
    assert (mig.uuid, mig.mig, mig.util_pct, mig.power_w, mig.mem_used_mib) == (P, True, None, 433.78, 11125.0)
    assert (shared.util_pct, shared.mig, shared.energy_mj, shared.bus_id) == (60.0, False, 1e6, "00000000:00:0A.0")
    assert snap.slices == (
        SliceReading(0, P, 2, 0, "3g.40gb", "MIG-00000000-0000-0000-0000-000000000000", 3, 7, 11091.0, 40448.0),
        SliceReading(0, P, 3, 0, "2g.20gb", "MIG-00000001-0000-0000-0000-000000000001", 2, 7, 17.0, 20096.0),
        SliceReading(0, P, 9, 0, "1g.10gb", "MIG-00000002-0000-0000-0000-000000000002", 1, 7, 9.0, 9984.0),
        SliceReading(0, P, 10, 0, "1g.10gb", "MIG-00000003-0000-0000-0000-000000000003", 1, 7, 9.0, 9984.0),
    )
    assert [s.fraction for s in snap.slices] == [3 / 7, 2 / 7, 1 / 7, 1 / 7]
    mig_procs = [p for p in snap.processes if p.gi_id is not None]
    assert mig_procs == [GpuProcess(21180, P, 2296.0, None, 2, 0), GpuProcess(21181, P, 1272.0, None, 2, 0),
                         GpuProcess(21198, P, 7484.0, None, 2, 0)]
    ts = {p.pid: p.sm_util_pct for p in snap.processes if p.gi_id is None}
    assert ts == {30001: 45.0, 30002: 15.0}  # mean of the NVML samples since the last tick
    assert [x.where for x in snap.lost] == ["GPU 2"] and "NVML error 15" in snap.lost[0].reason
    assert snap.issues.total == 0


def test_process_samples_are_read_since_the_last_tick() -> None:
    nv = FakeNvml()
    col = NvmlCollector(nv)
    col.collect()
    snap = col.collect()  # no new samples: NOT_FOUND, so no SM % (unknown, not zero)
    assert {p.pid: p.sm_util_pct for p in snap.processes if p.gi_id is None} == {30001: None, 30002: None}


def test_not_supported_values_are_none_and_init_failure_is_unavailable() -> None:
    devs = h100_mig_table()[1:2]
    devs[0].power_mw = None
    devs[0].energy_mj = None
    snap = NvmlCollector(FakeNvml(devs)).collect()
    assert snap.gpus[0].power_w is None and snap.gpus[0].energy_mj is None and snap.issues.total == 0
    with pytest.raises(CollectorUnavailable, match="NVML did not initialise"):
        NvmlCollector(FakeNvml(fail_init=True))


def test_profile_names() -> None:
    assert profile_of("NVIDIA H200 MIG 1c.3g.71gb") == ("1c.3g.71gb", 1)
    assert profile_of("NVIDIA A100-SXM4-80GB MIG 7g.80gb") == ("7g.80gb", 7)
    assert profile_of("NVIDIA H100 80GB HBM3") is None
    assert total_slices_of("NVIDIA A30") == 4 and total_slices_of("NVIDIA H100 80GB HBM3") == 7

"""nvidia-smi parsing on real captures (H100, H100 MIG, H200, H200 MIG, L40S), issue outputs and bad lines."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from seedance.core.errors import InputError, UnknownNameError
from seedance.telemetry.collector import FakeCollector, FileCollector, make_collector
from seedance.telemetry.nvsmi import (
    APPS_FIELDS,
    QUERY_FIELDS,
    WHITEPAPER_FIELDS,
    CollectorUnavailable,
    NvidiaSmiCollector,
    lost_gpu_line,
    parse_compute_apps,
    parse_pmon,
    parse_query_gpu,
)
from seedance.telemetry.readings import GpuReading, LostGpu

FIX = Path(__file__).parent / "fixtures"
UUID0 = "GPU-00000000-0000-0000-0000-000000000000"


def text(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


H100_LOAD = GpuReading(index=0, uuid=UUID0, name="NVIDIA H100 80GB HBM3", bus_id="00000000:00:09.0", util_pct=100.0,
                       temp_c=59.0, mem_used_mib=19818.0, mem_total_mib=81559.0, power_w=631.95, sm_clock_mhz=1980.0,
                       mig=False)


@pytest.mark.parametrize("name", ["h100_query_csv_load.txt", "h100_query_noheader_load.txt"])
def test_h100_under_load_with_and_without_header_and_units(name: str) -> None:
    gpus, lost, issues = parse_query_gpu(text(name))
    assert gpus == [H100_LOAD]
    assert lost == [] and issues.total == 0


@pytest.mark.parametrize(
    ("name", "util", "mem", "total", "power", "mig"),
    [
        ("h100_query_csv_idle.txt", 0.0, 0.0, 81559.0, 69.85, False),
        ("h100mig_query_csv_load.txt", None, 11125.0, 81559.0, 433.78, True),
        ("h100mig_query_noheader_idle.txt", None, 59.0, 81559.0, 71.15, True),
        ("h200_query_csv_load.txt", 100.0, 32362.0, 143771.0, 627.4, False),
        ("h200mig_query_csv_load.txt", None, 16959.0, 143771.0, 295.01, True),
        ("h200mig_query_noheader_load.txt", None, 16959.0, 143771.0, 295.01, True),
        ("l40s_query_noheader_load.txt", 9.0, 1235.0, 46068.0, 110.23, None),
    ],
)
def test_real_captures(name: str, util: float | None, mem: float, total: float, power: float, mig: bool | None
                       ) -> None:
    (g,), lost, issues = parse_query_gpu(text(name))
    assert (g.util_pct, g.mem_used_mib, g.mem_total_mib, g.power_w, g.mig) == (util, mem, total, power, mig)
    assert lost == [] and issues.total == 0


def test_the_whitepapers_exact_three_field_query() -> None:
    line = text("h100_query_noheader_load.txt").split(", ")[:3]
    gpus, _, _ = parse_query_gpu(", ".join(line) + "\n", WHITEPAPER_FIELDS)
    assert gpus == [GpuReading(index=0, util_pct=100.0, temp_c=59.0)]
    assert QUERY_FIELDS[:3] == WHITEPAPER_FIELDS  # one call answers the whitepaper's query and the rest


def test_a100_mig_row_from_an_issue_reports_no_utilisation() -> None:
    gpus, _, _ = parse_query_gpu(text("a800_mig_5field.txt"), QUERY_FIELDS[:5])
    assert gpus == [GpuReading(index=0, util_pct=None, temp_c=33.0, mem_used_mib=36537.0, mem_total_mib=81920.0)]


def test_a_gpu_that_fell_off_the_bus() -> None:
    gpus, lost, issues = parse_query_gpu(text("h100x8_lost_gpu.txt"), QUERY_FIELDS[:6])
    assert [g.index for g in gpus] == [0, 1] and gpus[1].util_pct == 4.0 and gpus[0].power_w == 145.0
    assert lost == [LostGpu("0000:02:00.0", "GPU is lost. Reboot the system to recover this GPU")]
    assert issues.total == 0
    gpus, lost, _ = parse_query_gpu(text("lost_unknown_error.txt"))
    assert [g.index for g in gpus] == [0]
    assert lost == [LostGpu("1: 0000:34:00.0", "Unknown Error"), LostGpu("00000000:36:00.0", "GPU is lost")]


def test_bad_lines_are_counted_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    gpus, lost, issues = parse_query_gpu(text("malformed.txt"), source="malformed.txt")
    assert [g.index for g in gpus] == [0, 5]  # the two good rows survive
    assert dict(issues.counts) == {"malformed": 1, "unknown-unit": 1, "bad-value": 2}
    assert issues.messages == [
        "malformed.txt:2: expected 11 comma-separated fields, got 5: '1, 100, 59, 19818, 81559'",
        "malformed.txt:3: memory.used: unknown unit 'KiB' in '19818 KiB' (expected MiB)",
        "malformed.txt:4: utilization.gpu: negative or out-of-range reading '-5'",
        "malformed.txt:5: temperature.gpu: not a number 'hot'",
    ]
    assert sum("telemetry: skipped" in r.message for r in caplog.records) == 4
    assert lost == []


@pytest.mark.parametrize(("line", "where", "field"), [
    ("1, 100, 59, 19818, 81559", 1, None),
    ("2, 97, 61, 19818 KiB, 81559, 612.40, 1980, u, n, b, Disabled", 1, "memory.used"),
    ("3, -5, 60, 19818, 81559, 612.40, 1980, u, n, b, Disabled", 1, "utilization.gpu"),
])
def test_strict_mode_raises_with_line_and_field(line: str, where: int, field: str | None) -> None:
    with pytest.raises(InputError) as e:
        parse_query_gpu(line + "\n", strict=True, source="q")
    assert e.value.line == where and e.value.field == field and e.value.source == "q"


def test_unknown_field_and_driver_down_are_clear_errors() -> None:
    with pytest.raises(InputError, match="unsupported field 'fan.speed'"):
        parse_query_gpu("0, 30\n", ("index", "fan.speed"))
    with pytest.raises(CollectorUnavailable, match="couldn't communicate"):
        parse_query_gpu("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    assert parse_query_gpu("No devices were found\n")[0] == []


def test_compute_apps_and_pmon() -> None:
    procs, issues = parse_compute_apps(text("h100_apps_csv_load.txt"))
    assert [(p.pid, p.used_mib) for p in procs] == [(11327, 2566.0), (11328, 1542.0), (11345, 15690.0)]
    assert {p.gpu_uuid for p in procs} == {UUID0} and issues.total == 0
    sm, _ = parse_pmon(text("l40s_pmon_load.txt"))
    assert set(sm) == {(0, 20037), (0, 20038)} and 0 < sm[(0, 20037)] < sm[(0, 20038)] < 10
    sm, _ = parse_pmon(text("h100_pmon_load.txt"))
    assert set(sm) == {(0, 11345)} and sm[(0, 11345)] >= 99  # memhogs print '-'
    assert parse_pmon(text("h100mig_pmon_load.txt"))[0] == {}  # MIG: no per-process SM %


def test_lost_line_forms() -> None:
    assert lost_gpu_line("Unable to determine the device handle for GPU0000:CB:00.0: Unknown Error") == LostGpu(
        "0000:CB:00.0", "Unknown Error")
    assert lost_gpu_line("0, 1, 2") is None


def test_collector_runs_the_two_queries_and_joins_pmon() -> None:
    seen: list[Sequence[str]] = []
    outputs = {"--query-gpu": text("l40s_query_noheader_load.txt"),
               "--query-compute-apps": "20037, GPU-00000000-0000-0000-0000-000000000000, 538\n"
                                       "20038, GPU-00000000-0000-0000-0000-000000000000, 681\n",
               "pmon": text("l40s_pmon_load.txt")}

    def runner(argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
        seen.append(list(argv))
        return 0, outputs[argv[1].split("=")[0]]

    snap = NvidiaSmiCollector(runner=runner, pmon=True).collect()
    assert seen[0] == ["nvidia-smi", "--query-gpu=index,utilization.gpu,temperature.gpu,memory.used,memory.total,"
                       "power.draw,clocks.sm,uuid,name,pci.bus_id,mig.mode.current", "--format=csv,noheader,nounits"]
    assert seen[1] == ["nvidia-smi", f"--query-compute-apps={','.join(APPS_FIELDS)}", "--format=csv,noheader,nounits"]
    assert seen[2] == ["nvidia-smi", "pmon", "-c", "1", "-s", "u"]
    assert [(p.pid, p.used_mib, p.sm_util_pct is not None) for p in snap.processes] == [(20037, 538.0, True),
                                                                                        (20038, 681.0, True)]


def test_missing_binary_is_unavailable_and_registry_lists_names() -> None:
    with pytest.raises(CollectorUnavailable, match="not found"):
        NvidiaSmiCollector(binary="/nonexistent/nvidia-smi").collect()
    with pytest.raises(UnknownNameError, match="valid names: nvidia-smi, nvml, fake, file"):
        make_collector("dcgm")


def test_file_and_fake_collectors() -> None:
    snap = FileCollector(query=FIX / "h200mig_query_noheader_load.txt").collect()
    assert snap.gpus[0].mig is True and snap.gpus[0].util_pct is None
    t = [1000.0]
    fake = FakeCollector(gpus=4, model="H200", clock=lambda: t[0], period_s=600)
    a = fake.collect()
    t[0] += 5
    b = fake.collect()
    assert len(a.gpus) == 4 and all(0 <= g.util_pct <= 100 for g in b.gpus)  # type: ignore[operator]
    assert all(y.energy_mj > x.energy_mj for x, y in zip(a.gpus, b.gpus, strict=True))  # type: ignore[operator]
    assert a.gpus[0].mem_total_mib == 141 * 1024
    with pytest.raises(InputError, match="cannot open file"):
        FileCollector(query=FIX / "absent.txt")

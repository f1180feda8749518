"""Demand files (format and every error), replayed pod traces, scenarios, the PAI calibration; config files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.cli.main import main
from seedance.core.errors import InputError
from seedance.reservations.config import load_config
from seedance.reservations.demand import (
    PAI_2020,
    PAI_GPU_PROBS,
    PAI_GPU_SIZES,
    Scenario,
    demand_from_pods,
    hourly_mean,
    load_demand_csv,
    pai_calibrated_demand,
    scenario_demand,
    weekly_profile,
    write_demand_csv,
)


def write(tmp_path: Path, text: str, name: str = "d.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_demand_file_round_trip_and_rounding_up(tmp_path: Path) -> None:
    p = write(tmp_path, "timestamp,gpus\n2024-01-01T00:00:00Z,3\n2024-01-01T01:00:00+00:00,2.2\n"
                        "2024-01-01T02:00:00,0\n")
    d = load_demand_csv(p)
    assert d.start == 1704067200 and d.values.tolist() == [3, 3, 0]
    write_demand_csv(d, tmp_path / "out.csv")
    assert load_demand_csv(tmp_path / "out.csv").values.tolist() == [3, 3, 0]


@pytest.mark.parametrize(("text", "match"), [
    ("time,gpus\n2024-01-01T00:00:00Z,3\n", r"d.csv:1: field timestamp: missing column 'timestamp'"),
    ("timestamp,gpus\n2024-01-01T00:00:00Z,3\n2024-01-01 nope,3\n", r"d.csv:3: field timestamp: not an ISO 8601"),
    ("timestamp,gpus\n2024-01-01T00:00:00+01:00,3\n", r"d.csv:2: field timestamp: timestamps must be UTC"),
    ("timestamp,gpus\n2024-01-01T00:30:00Z,3\n", r"d.csv:2: field timestamp: .* is not the start of an hour"),
    ("timestamp,gpus\n2024-01-01T00:00:00Z,3\n2024-01-01T03:00:00Z,3\n",
     r"d.csv:3: field timestamp: 2 hour\(s\) missing"),
    ("timestamp,gpus\n2024-01-01T00:00:00Z,3\n2024-01-01T00:00:00Z,3\n", r"d.csv:3: field timestamp: the same hour"),
    ("timestamp,gpus\n2024-01-01T01:00:00Z,3\n2024-01-01T00:00:00Z,3\n", r"d.csv:3: field timestamp: .*ascend"),
    ("timestamp,gpus\n2024-01-01T00:00:00Z,-1\n", r"d.csv:2: field gpus: must be a finite number >= 0"),
    ("timestamp,gpus\n2024-01-01T00:00:00Z,many\n", r"d.csv:2: field gpus: not a number"),
    ("timestamp,gpus\n2024-01-01T00:00:00Z\n", r"d.csv:2: expected 2 fields, got 1"),
    ("timestamp,gpus\n", r"d.csv:2: no data rows"),
])
def test_bad_demand_files_name_file_line_and_field(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        load_demand_csv(write(tmp_path, text))


def test_the_cli_prints_one_line_and_exits_2_on_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, "timestamp,gpus\n2024-01-01T00:00:00Z,x\n")
    assert main(["reserve", "plan", "--demand", str(bad), "--train-until", "2024-01-01T00:00:00Z"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {bad}:2: field gpus: not a number: 'x'"]
    cfg = write(tmp_path, "apiVersion: seedance.io/v1\nkind: ReservationConfig\nspec:\n  ppo:\n    timestep: 10\n",
                "c.yaml")
    good = write(tmp_path, "timestamp,gpus\n2024-01-01T00:00:00Z,1\n2024-01-01T01:00:00Z,1\n")
    assert main(["reserve", "plan", "--demand", str(good), "--train-until", "2024-01-01T01:00:00Z",
                 "--config", str(cfg)]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {cfg}:5: field spec.ppo.timestep: unknown key (not in the "
                                               "ReservationConfig schema; check the spelling)")
    pol = write(tmp_path, "not a zip", "policy.zip")
    long = write(tmp_path, "timestamp,gpus\n" + "".join(
        f"2024-01-{1 + h // 24:02d}T{h % 24:02d}:00:00Z,2\n" for h in range(24 * 20)), "long.csv")
    assert main(["reserve", "plan", "--demand", str(long), "--train-until", "2024-01-16T00:00:00Z",
                 "--policy", str(pol), "--policies", "ppo"]) == 2
    assert "not a saved PPO policy" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "line", "field"), [
    ("spec:\n  epoch_hours: 700\n", 2, "spec.epoch_hours"),
    ("spec:\n  spot_share: 1.5\n", 2, "spec.spot_share"),
    ("spec:\n  percentile:\n    term: 2y\n", 3, "spec.percentile.term"),
    ("kind: CostPolicy\n", 1, "kind"),
])
def test_bad_config_files_name_line_and_field(tmp_path: Path, text: str, line: int, field: str) -> None:
    p = write(tmp_path, text, "c.yaml")
    with pytest.raises(InputError) as ei:
        load_config(p)
    assert ei.value.line == line and ei.value.field == field and ei.value.source == str(p)


def test_replayed_pods_hold_their_gpus_from_creation_to_deletion(tmp_path: Path) -> None:
    # two GPU pods: one GPU for hours 0-2 (1.5 h), half a GPU for 30 min in hour 3; period = 1 week
    p = write(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
                        "a,1000,1024,1,1000,0,5400\nb,1000,1024,1,500,10800,12600\n", "pods.csv")
    d = demand_from_pods(p, start=0, hours=170, busy_quantile=0.0)
    assert d.values[:5].tolist() == [1, 1, 0, 1, 0]  # hourly means 1, 0.5, 0, 0.25 rounded up
    assert d.values[168:170].tolist() == [1, 1]  # the week repeats


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 20000), st.floats(1, 20000), st.floats(0.1, 4)), min_size=1, max_size=20))
def test_property_hourly_mean_is_the_exact_integral(jobs: list[tuple[float, float, float]]) -> None:
    s = np.array([j[0] for j in jobs])
    e = s + np.array([j[1] for j in jobs])
    w = np.array([j[2] for j in jobs])
    got = hourly_mean(s, e, w, 12)
    for h in range(12):
        a, b = h * 3600.0, (h + 1) * 3600.0
        expect = float((w * np.clip(np.minimum(e, b) - np.maximum(s, a), 0, None)).sum() / 3600.0)
        assert got[h] == pytest.approx(expect, abs=1e-6)


def test_scenarios_and_profiles() -> None:
    flat = scenario_demand(Scenario(base=100, noise=0.0, profile=(1.0,) * 168), start=0, hours=2 * 8760)
    assert set(flat.values.tolist()) == {100}
    grow = scenario_demand(Scenario(base=100, growth=1.0, noise=0.0, profile=(1.0,) * 168), start=0, hours=8761)
    assert grow.values[0] == 100 and grow.values[8760] == 200
    prof = weekly_profile(np.tile(np.arange(168) + 1.0, 3), 4 * 86400)  # 1970-01-05 was a Monday
    assert prof.mean() == pytest.approx(1.0) and prof[0] == pytest.approx(1 / 84.5)
    with pytest.raises(InputError, match="profile needs 168 values"):
        Scenario(profile=(1.0,))


def test_the_pai_stream_matches_the_published_statistics() -> None:
    d = pai_calibrated_demand(start=0, hours=24 * 60, seed=1, scale=0.05)
    g_mean = float(np.dot(PAI_GPU_SIZES, PAI_GPU_PROBS))
    assert abs(g_mean - PAI_2020["avg_gpu_num"]) < 0.02
    # M/G/infinity: mean busy GPUs = arrival rate x mean run time (capped) x mean request
    rng = np.random.default_rng(0)
    mu, sig = np.log(PAI_2020["med_run_time_gpu"]), np.sqrt(2 * np.log(PAI_2020["avg_run_time_gpu"]
                                                                       / PAI_2020["med_run_time_gpu"]))
    mean_run = float(np.minimum(rng.lognormal(mu, sig, 2_000_000), PAI_2020["max_run_time_gpu"]).mean())
    rate = 0.05 * PAI_2020["gpu_job_num"] / (PAI_2020["days"] * 86400)
    expect = rate * mean_run * g_mean
    assert d.values.mean() == pytest.approx(expect + 0.5, rel=0.08)  # + 0.5: the hourly round-up

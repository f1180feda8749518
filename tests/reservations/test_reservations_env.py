"""The gymnasium environment (hybrid action, masks, reward = attributed savings) and PPO (smoke, save, load)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from seedance.cli.main import main
from seedance.core.errors import InputError
from seedance.reservations.accounting import simulate_plan
from seedance.reservations.demand import DemandWindow, Scenario, scenario_demand, write_demand_csv
from seedance.reservations.env import OBS_SIZE, RATIO_STEPS, ReservationEnv, action_units, forecast_peak
from seedance.reservations.policies import epoch_view
from seedance.reservations.ppo import PpoReservation, TrainConfig, load_model, train_ppo
from seedance.reservations.pricing import ReservationPrices

Y = 8760
PRICES = ReservationPrices(on_demand=3.673385, commitments={"1y": 2.314207, "3y": 1.285708})


def sampler(rng: np.random.Generator) -> tuple[DemandWindow, ReservationPrices]:
    seed = int(rng.integers(0, 1000))
    d = scenario_demand(Scenario(base=50, growth=0.2, noise=0.05), start=1672531200, hours=3 * Y, seed=seed)
    return d.window(Y, 2 * Y), PRICES


def test_check_env_and_a_random_masked_episode(shared_data: Path) -> None:
    from stable_baselines3.common.env_checker import check_env

    env = ReservationEnv(sampler)
    check_env(env)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (OBS_SIZE,) and env.action_space.nvec.tolist() == [3, RATIO_STEPS]
    rng = np.random.default_rng(0)
    total, done, step = 0.0, False, 0
    while not done:
        mask = env.action_masks()
        types = np.flatnonzero(mask[:3])
        # 3-year units never fit a 2-year window; 1-year units only in the first 13 epochs
        assert (mask[2], mask[1]) == (False, step <= 12)
        action = np.array([rng.choice(types), rng.integers(0, RATIO_STEPS)])
        obs, r, done, _, info = env.step(action)
        total += info["saving"]
        step += 1
    assert step == 24
    plan = info["plan"]
    att = simulate_plan(plan, env.window, PRICES)  # the plan is legal and its savings are the episode's
    assert att.savings.sum() == pytest.approx(total)


def test_the_hybrid_action_buys_up_to_the_ratio_of_the_forecast_peak() -> None:
    w, p = sampler(np.random.default_rng(1))
    buys = np.zeros((24, 2), dtype=np.int64)
    view = epoch_view(w, buys, 0, p)
    peak = forecast_peak(view)
    assert peak >= w.history[-720:].max()
    assert action_units(view, (1, 10)).tolist() == [round(0.5 * peak), 0]
    assert action_units(view, (0, 20)).tolist() == [0, 0]  # none: the ratio is ignored
    assert action_units(view, (2, 20)).tolist() == [0, 0]  # 3 years do not fit: nothing


def test_ppo_trains_reproducibly_saves_and_loads(tmp_path: Path) -> None:
    cfg = TrainConfig(timesteps=256, n_steps=128, batch_size=64, n_epochs=2, seed=7)
    a = train_ppo(sampler, cfg)
    b = train_ppo(sampler, cfg)
    w, p = sampler(np.random.default_rng(5))
    pa, pb = PpoReservation(a.model).plan(w, p), PpoReservation(b.model).plan(w, p)
    assert (pa.buys == pb.buys).all()  # same seed, same policy
    path = tmp_path / "ppo.zip"
    a.model.save(str(path))
    assert (PpoReservation(path=path).plan(w, p).buys == pa.buys).all()
    (tmp_path / "x.zip").write_bytes(b"PK\x03\x04 broken")
    with pytest.raises(InputError, match="cannot load the PPO policy|not a saved PPO policy"):
        load_model(tmp_path / "x.zip")
    with pytest.raises(InputError, match="policy file not found"):
        load_model(tmp_path / "missing.zip")


def test_reserve_plan_json_evaluates_only_the_held_out_hours(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             shared_data: Path) -> None:
    d = scenario_demand(Scenario(base=40, growth=0.3, noise=0.05), start=1672531200, hours=2 * Y, seed=2)
    f = tmp_path / "d.csv"
    write_demand_csv(d, f)
    argv = ["reserve", "plan", "--demand", str(f), "--train-until", "2024-01-01T00:00:00Z", "--timesteps", "512",
            "--tune-windows", "2", "-o", "json", "--hourly-out", str(tmp_path / "h.csv")]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in out["results"]] == ["none", "percentile", "best-fixed", "online", "ppo",
                                                    "hindsight-optimal"]
    assert out["window"]["start"] == "2024-01-01T00:00:00Z" and out["window"]["hours"] == 2 * Y - 8760
    by = {r["policy"]: r for r in out["results"]}
    opt = by["hindsight-optimal"]["total_cost"]
    assert all(r["total_cost"] >= opt - 1e-6 for r in out["results"])
    assert by["none"]["savings"] == pytest.approx(0.0) and by["hindsight-optimal"]["vs_hindsight_optimal"] == 1.0
    for r in out["results"]:
        assert sum(r["attribution"].values()) == pytest.approx(r["total_cost"])
        assert all(b["at"] >= "2024-01-01" for b in r["purchases"])
    assert len(out["attribution_by_slot"]) == 12 and out["attribution_policy"] == "ppo"
    assert len((tmp_path / "h.csv").read_text().splitlines()) == 1 + 2 * Y - 8760

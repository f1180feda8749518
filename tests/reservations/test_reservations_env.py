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
from seedance.reservations.env import (
    OBS_SIZE,
    RATIO_STEPS,
    YEAR_H,
    ReservationEnv,
    action_units,
    features,
    reference_level,
    target_level,
)
from seedance.reservations.milp import hindsight_optimal
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


def test_the_hybrid_action_buys_up_to_a_level_on_the_scale_of_the_last_60_days() -> None:
    hist = np.concatenate([np.full(Y - 1440, 99), np.repeat(np.arange(1, 17), 90)])  # last 60 days: 1..16, 90 h each
    w = DemandWindow(history=hist.astype(np.int64), values=np.full(2 * Y, 8, dtype=np.int64), start=1672531200)
    buys = np.zeros((24, 2), dtype=np.int64)
    view = epoch_view(w, buys, 0, PRICES)
    assert [target_level(view, b) for b in (0, 4, 8, 16)] == [1, 4, 8, 16]  # quantiles 0, 1/4, 1/2, 1 (inverted CDF)
    assert [target_level(view, b) for b in (17, 18, 20)] == [18, 20, 24]  # the 60-day peak x 1.125, 1.25, 1.5
    assert action_units(view, (1, 8)).tolist() == [8, 0]
    assert action_units(view, (0, 20)).tolist() == [0, 0]  # none: the level is ignored
    assert action_units(view, (2, 20)).tolist() == [0, 0]  # 3 years do not fit: nothing
    ref = reference_level(view)
    assert ref == pytest.approx(hist[-720:].mean())  # the observation's scale: the last 30 days' mean
    buys[0] = [10, 0]
    later = epoch_view(w, buys, 1, PRICES)
    assert action_units(later, (1, 4)).tolist() == [0, 0]  # a target below what is in force buys nothing
    # the expiry schedule: the 1-year units expire within 12 epochs of epoch 1, not within 6
    f = features(later)
    assert f[0] * reference_level(later) == pytest.approx(buys[0, 0], rel=1e-5)
    assert f[5] == 0 and f[6] == pytest.approx(f[0])


def test_rewards_pay_a_purchase_its_whole_term_at_once_and_sum_to_the_plan_saving() -> None:
    w = DemandWindow(history=np.full(Y, 10, dtype=np.int64), values=np.full(2 * Y, 10, dtype=np.int64),
                     start=1672531200)
    env = ReservationEnv(lambda _rng: (w, PRICES))
    env.reset(seed=0)
    _, r0, *_ = env.step(np.array([1, 8]))  # 10 one-year units: the median of a flat 10
    per_unit_hour = PRICES.on_demand - PRICES.commitments["1y"]
    assert r0 == pytest.approx(10 * per_unit_hour * Y / (PRICES.on_demand * YEAR_H * 10))
    # the 60-day peak (10) x 1.5 = 15: 5 more, idle until the first 10 expire, then used for 730 h
    _, r1, *_ = env.step(np.array([1, 20]))
    marginal = 5 * (-PRICES.commitments["1y"] * Y + PRICES.on_demand * 730)
    assert r1 == pytest.approx(marginal / (PRICES.on_demand * YEAR_H * 10))
    total, done = r0 + r1, False
    while not done:
        _, r, done, _, info = env.step(np.array([0, 0]))
        total += r
    att = simulate_plan(info["plan"], w, PRICES)
    assert total * PRICES.on_demand * YEAR_H * 10 == pytest.approx(att.savings.sum())


def test_the_observation_holds_the_past_only_and_the_milp_faces_the_same_problem() -> None:
    w, p = sampler(np.random.default_rng(2))
    future = w.values.copy()
    future[5000:] = 0  # another future after month 6
    w2 = DemandWindow(history=w.history, values=future, start=w.start)
    buys = np.zeros((24, 2), dtype=np.int64)
    for e in range(7):
        assert (features(epoch_view(w, buys, e, p)) == features(epoch_view(w2, buys, e, p))).all()
    # the bound: same window, same prices, no commitment at the start, the same purchase space
    env = ReservationEnv(lambda _rng: (w, p))
    env.reset(seed=0)
    done, rng = False, np.random.default_rng(0)
    while not done:
        mask = env.action_masks()
        _, _, done, _, info = env.step(np.array([rng.choice(np.flatnonzero(mask[:3])), rng.integers(0, RATIO_STEPS)]))
    milp = hindsight_optimal(w, p)
    opt = simulate_plan(milp.plan, w, p).cost.sum()
    assert opt == pytest.approx(milp.objective)
    assert simulate_plan(info["plan"], w, p).cost.sum() >= opt - 1e-6


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
    assert [r["policy"] for r in out["results"]] == ["none", "percentile", "best-fixed", "online",
                                                    "forecast-mpc", "ppo", "hindsight-optimal"]
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

"""Training the PPO reservation policy, and using a trained one as a reservation policy.

``MaskablePPO`` (sb3-contrib) on :class:`~seedance.reservations.env.ReservationEnv`: the hybrid
action is ``MultiDiscrete([3, 21])`` (type, capacity-ratio bucket) with the types that cannot be
bought masked, see :mod:`seedance.reservations.env`; by default (``action="planner"``) the ratio
scales the receding-horizon planner's forecast (:mod:`seedance.reservations.forecast`). Training draws windows from a
:class:`~seedance.reservations.scenarios.WindowFactory` split (or any sampler); the policy sees only
scale-free features of the past, so one policy serves demands of any size.

A trained policy is saved as the SB3 zip file; loading anything else raises ``InputError``.
"""

from __future__ import annotations

import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.reservations.accounting import EPOCH_HOURS
from seedance.reservations.env import (
    ACTIONS,
    RATIO_STEPS,
    ReservationEnv,
    Sampler,
    action_mask,
    action_units,
    check_action,
    obs_size,
    observe,
)
from seedance.reservations.policies import RESERVATION_POLICIES, EpochView, OnlinePolicy
from seedance.reservations.pricing import TERMS


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """PPO settings, chosen on the ``tune`` split (docs/reservations.md, the sweep table).

    SB3's PPO defaults except gamma 1 (the undiscounted objective), 4 environments (2,048 steps
    per update in all), batch 256, entropy 0.01 and the learning rate 1e-3 (the first sweep's best,
    ``levels`` action: 1.088 of the MILP's cost on the tune windows at 100 k steps, against 1.123
    with SB3's 3e-4) and 125 k steps (1.080 there; 150 k: 1.101). The ``planner`` action (the
    default since the second sweep): 1.054 on the same tune windows at 125 k steps, the planner it
    starts from 1.059; on 96 tune windows 1.113 against the planner's 1.090 (PPO does not beat it).
    """

    timesteps: int = 125_000
    seed: int = 0
    n_steps: int = 2048
    batch_size: int = 256
    n_epochs: int = 10
    learning_rate: float = 1e-3
    gamma: float = 1.0
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    clip_range: float = 0.2
    net_arch: tuple[int, ...] = (64, 64)
    n_envs: int = 4
    torch_threads: int = 1
    action: str = "planner"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_action(self.action)


@dataclass(frozen=True, slots=True)
class TrainResult:
    """A trained model and how training went."""

    model: Any
    config: TrainConfig
    wall_s: float
    episodes: int
    mean_return_last: float
    cpu_s: float = float("nan")


def train_ppo(sampler: Sampler, config: TrainConfig = TrainConfig(), epoch_hours: int = EPOCH_HOURS,
              callback: Any = None) -> TrainResult:
    """Train ``MaskablePPO`` on windows drawn by ``sampler`` (``callback``: an SB3 callback, e.g. checkpoints)."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(config.torch_threads)

    def make() -> Monitor:
        return Monitor(ReservationEnv(sampler, epoch_hours, action=config.action))

    # each env draws its windows from its own stream (SB3 seeds env i with config.seed + i)
    env = DummyVecEnv([make] * config.n_envs)
    model = MaskablePPO(
        "MlpPolicy", env, n_steps=config.n_steps // config.n_envs, batch_size=config.batch_size,
        n_epochs=config.n_epochs, learning_rate=config.learning_rate, gamma=config.gamma, gae_lambda=config.gae_lambda,
        ent_coef=config.ent_coef, clip_range=config.clip_range, seed=config.seed, device="cpu", verbose=0,
        policy_kwargs={"net_arch": list(config.net_arch)})
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=config.timesteps, callback=callback)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rets = [float(r) for m in env.envs for r in m.get_episode_rewards()]  # type: ignore[attr-defined]
    return TrainResult(model=model, config=config, wall_s=wall, episodes=len(rets),
                       mean_return_last=float(np.mean(rets[-100:])) if rets else float("nan"), cpu_s=cpu)


def load_model(path: str | Path) -> Any:
    """Load a saved policy (an SB3 ``MaskablePPO`` zip)."""
    from sb3_contrib import MaskablePPO

    src = str(path)
    p = Path(path)
    if not p.exists():
        raise InputError("policy file not found", source=src)
    if not zipfile.is_zipfile(p):
        raise InputError("not a saved PPO policy (expected the zip file written by `seedancectl reserve train`)",
                         source=src)
    try:
        model = MaskablePPO.load(p, device="cpu")
    except Exception as exc:  # SB3 raises many types for a damaged archive
        raise InputError(f"cannot load the PPO policy: {type(exc).__name__}: {exc}", source=src) from None
    space = model.action_space
    nvec = getattr(space, "nvec", None)
    if nvec is None or list(nvec) != [1 + len(TERMS), RATIO_STEPS]:
        raise InputError(f"the policy's action space {space} is not the reservation engine's "
                         f"MultiDiscrete([3, {RATIO_STEPS}])",
                         source=src, field="action_space")
    sizes = {obs_size(a): a for a in ACTIONS}
    shape = model.observation_space.shape
    if shape is None or len(shape) != 1 or shape[0] not in sizes:
        raise InputError(f"the policy observes {shape}, not one of the engine's feature sets "
                         f"({', '.join(f'{n} for {a}' for n, a in sizes.items())})",
                         source=src, field="observation_space")
    return model


def model_action(model: Any) -> str:
    """The action encoding a model was trained with (from its observation size)."""
    n = int(model.observation_space.shape[0])
    return next((a for a in ACTIONS if obs_size(a) == n), "levels")


@RESERVATION_POLICIES.register("ppo")
class PpoReservation(OnlinePolicy):
    """A trained PPO policy, deciding from the past only (deterministic action)."""

    name = "ppo"
    summary = "MaskablePPO over the hybrid action (type x capacity ratio of the planner's forecast)"

    def __init__(self, model: Any = None, path: str | Path | None = None) -> None:
        if model is None and path is None:
            raise InputError("the ppo policy needs a trained model (--policy FILE or training)", field="policy")
        self.model = model if model is not None else load_model(path)  # type: ignore[arg-type]
        self.path = str(path) if path else None
        self.encoding = model_action(self.model)

    def decide(self, view: EpochView) -> NDArray[np.int64]:
        obs = observe(view, self.encoding)
        action, _ = self.model.predict(obs, deterministic=True, action_masks=action_mask(view, self.encoding))
        return action_units(view, np.asarray(action, dtype=np.int64), self.encoding)

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"model": self.path or "trained in this run", "action": self.encoding}


TRAIN_PRESETS: Registry[TrainConfig] = Registry("PPO training preset")
TRAIN_PRESETS.add("default", TrainConfig())
TRAIN_PRESETS.add("smoke", TrainConfig(timesteps=4096, n_steps=512, batch_size=128, n_epochs=4))
TRAIN_PRESETS.add("levels", TrainConfig(action="levels"))


def config_json(config: TrainConfig) -> dict[str, Any]:
    """JSON-ready settings."""
    d = asdict(config)
    d["net_arch"] = list(config.net_arch)
    return d

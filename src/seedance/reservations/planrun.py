"""``seedancectl reserve plan``: every policy on a demand file's held-out hours (see :mod:`.engine`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.reservations.accounting import Attribution, n_epochs
from seedance.reservations.config import ReservationConfig, load_config
from seedance.reservations.demand import HOUR, HourlyDemand, load_demand_csv
from seedance.reservations.engine import (
    PolicyResult,
    file_sampler,
    make_policy,
    results_json,
    run_policy,
    tune_online,
    tune_percentile,
    window_json,
)
from seedance.reservations.policies import OnlineBreakEven, Percentile, ReservationPolicy
from seedance.reservations.pricing import TERM_HOURS


def plan_demand_file(demand: str | Path, train_until: str, *, config: str | Path | None = None,
                     price_book: str | Path | None = None, offer: str | None = None,
                     policy: str | Path | None = None, timesteps: int | None = None,
                     save_policy: str | Path | None = None, policies: Sequence[str] = (),
                     tune_windows: int = 12, progress: Callable[[str], None] | None = None,
                     offer_parser: Callable[[str | None, Any], tuple[str, str, str]] | None = None
                     ) -> tuple[dict[str, Any], Attribution | None]:
    """Run ``reserve plan``; returns the JSON payload and the attribution of the PPO plan (or the first)."""
    from seedance.markets.book import market_book
    from seedance.signals.series import iso, parse_utc

    say = progress or (lambda _m: None)
    cfg = load_config(config) if config else ReservationConfig()
    spec = cfg.spec
    d = load_demand_csv(demand)
    cut = parse_utc(train_until, source="--train-until")
    if cut % HOUR:
        raise InputError("must be the start of an hour", source="--train-until")
    i = d.index(cut)
    if not 0 < i < len(d):
        raise InputError(f"must lie inside the demand ({iso(d.start)} .. {iso(d.end)})", source="--train-until")
    window = d.window(i, label=f"{demand} after {iso(cut)}")
    history = HourlyDemand(d.start, d.values[:i], str(demand))
    ref = (offer_parser(offer, cfg) if offer_parser else (spec.offer.cloud, spec.offer.instance_type,
                                                          spec.offer.region))
    book = market_book(price_book or spec.price_book)
    o = book.find(cloud=ref[0], instance_type=ref[1], region=ref[2])
    if not o.commitments:
        raise InputError(f"{'/'.join(ref)} has no 1-/3-year commitment prices (the catalog has them for GCP only; "
                         "add yours with a price book)", source="--offer")
    prices = o.reservation_prices(spot_share=spec.spot_share, spot_rework=spec.spot_rework)
    eh = spec.epoch_hours
    notes = []
    if len(window) < min(TERM_HOURS[t] for t in prices.terms):
        notes.append(f"the held-out window ({len(window)} h) is shorter than the shortest term: no policy can buy")
    names = list(policies) or ["none", "percentile", "best-fixed", "online", "forecast-mpc", "ppo",
                                  "hindsight-optimal"]
    sampler = file_sampler(history, window_hours=len(window), prices=[prices])
    rng = np.random.default_rng(spec.ppo.seed)
    tuning: dict[str, Any] = {}
    built: dict[str, ReservationPolicy] = {}
    need_tune = ("percentile" in names and None in (spec.percentile.lookback_days, spec.percentile.term)) or (
        "online" in names and spec.online.term is None)
    tune_set = [sampler(rng) for _ in range(tune_windows)] if need_tune else []
    for name in names:
        if name == "percentile":
            p = spec.percentile
            if p.lookback_days is not None and p.term is not None:
                built[name] = Percentile(p.lookback_days, p.percentile, p.term)
            else:
                say(f"tuning the percentile baseline on {len(tune_set)} windows drawn from the history")
                built[name], rows = tune_percentile(tune_set, epoch_hours=eh)
                tuning["percentile"] = {"chosen": built[name].describe(), "grid": rows}
        elif name == "online":
            if spec.online.term is not None:
                built[name] = OnlineBreakEven(spec.online.term)
            else:
                built[name], rows = tune_online(tune_set, epoch_hours=eh)
                tuning["online"] = {"chosen": built[name].describe(), "grid": rows}
        elif name == "ppo":
            built[name] = _ppo(spec, policy, timesteps, save_policy, sampler, tuning, say)
        else:
            built[name] = make_policy(name)
    results: list[PolicyResult] = []
    for name, pol in built.items():
        say(f"evaluating {name}")
        results.append(run_policy(pol, window, prices, eh))
    att_res = next((r for r in results if r.policy == "ppo"), results[0] if results else None)
    payload = {
        "window": window_json(window), "train_until": iso(cut), "prices": prices.to_json(),
        "offer": o.to_json(), "epochs": n_epochs(len(window), eh), "epoch_hours": eh,
        "results": results_json(results, window), "tuning": tuning,
        "attribution_policy": att_res.policy if att_res else None,
        "attribution_by_slot": att_res.attribution.by_slot() if att_res else [],
        "notes": notes + ["only the hours before --train-until were used to train and tune"],
    }
    return payload, att_res.attribution if att_res else None


def _ppo(spec: Any, policy: str | Path | None, timesteps: int | None, save_policy: str | Path | None,
         sampler: Any, tuning: dict[str, Any], say: Callable[[str], None]) -> ReservationPolicy:
    from seedance.reservations.ppo import PpoReservation, TrainConfig, config_json, train_ppo

    path = policy or spec.ppo.policy_file
    if path:
        return PpoReservation(path=path)
    cfg = TrainConfig(timesteps=timesteps or spec.ppo.timesteps, seed=spec.ppo.seed, action=spec.ppo.action)
    say(f"training PPO for {cfg.timesteps} steps on windows drawn from the history")
    t0 = time.perf_counter()
    res = train_ppo(sampler, cfg, spec.epoch_hours)
    tuning["ppo"] = {"config": config_json(cfg), "wall_s": time.perf_counter() - t0, "episodes": res.episodes}
    if save_policy:
        res.model.save(str(save_policy))
    return PpoReservation(res.model)

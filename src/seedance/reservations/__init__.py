"""Reservation planning: which 1-/3-year commitments to buy, when, and what they save.

* :mod:`~seedance.reservations.demand`: hourly GPU demand (CSV ``timestamp,gpus``, replayed pod
  traces, demand scenarios with growth, seasonality and bursts, a PAI-2020-calibrated generator).
* :mod:`~seedance.reservations.pricing`: on-demand, spot and commitment prices of one offer.
* :mod:`~seedance.reservations.accounting`: the hourly cost of a purchase plan and its attribution
  vector (baseline cost, savings, main cause).
* :mod:`~seedance.reservations.milp`: the hindsight-optimal plan (exact MILP, HiGHS).
* :mod:`~seedance.reservations.policies`: ``none``, ``percentile``, ``best-fixed``, ``online``,
  ``ppo``, ``hindsight-optimal`` (registry :data:`RESERVATION_POLICIES`).
* :mod:`~seedance.reservations.forecast`: ``forecast-mpc``, the receding-horizon planner, and the
  layered program it re-plans with.
* :mod:`~seedance.reservations.env` / :mod:`~seedance.reservations.ppo`: the gymnasium
  environment with the hybrid action and its PPO training.
"""

from seedance.reservations.accounting import Attribution, Plan, simulate_plan
from seedance.reservations.demand import DemandWindow, HourlyDemand, load_demand_csv
from seedance.reservations.pricing import ReservationPrices

__all__ = [
    "Attribution",
    "DemandWindow",
    "HourlyDemand",
    "Plan",
    "ReservationPrices",
    "load_demand_csv",
    "simulate_plan",
]

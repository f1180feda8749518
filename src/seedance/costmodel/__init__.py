"""Cost model: energy, ``cost_score``, deferral and reordering, cost policies, and their evaluation.

The control plane uses :func:`~seedance.costmodel.score.cost_score` (pure) with a policy loaded
by :func:`~seedance.costmodel.policy.load_policy`; the simulator and the CLI use the same code.
"""

from seedance.costmodel.deferral import reorder
from seedance.costmodel.energy import CarbonAccounting, EnergyModel
from seedance.costmodel.policy import COST_PLUGINS, CostPolicy, load_policy, parse_policy
from seedance.costmodel.score import CostScore, JobFeatures, Signals, Weights, cost_score

__all__ = [
    "COST_PLUGINS", "CarbonAccounting", "CostPolicy", "CostScore", "EnergyModel", "JobFeatures", "Signals",
    "Weights", "cost_score", "load_policy", "parse_policy", "reorder",
]

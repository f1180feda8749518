"""Prometheus metrics of the canary controller (its own registry; nothing module-global).

``cost_action_rollback_total{action,reason}`` is the whitepaper's counter (§4.4). The rest follow
Flagger's shape: ``seedance_rollout_status{flag}`` (0 progressing, 1 promoted, 2 rolled back, as
``flagger_canary_status``), ``seedance_rollout_weight{flag}`` (% of eligible traffic on the
candidate) and ``seedance_rollout_duration_seconds{flag,outcome}``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PROGRESSING, PROMOTED, ROLLED_BACK = 0, 1, 2


class RolloutMetrics:
    """The controller's metrics in ``registry`` (a fresh one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.rollbacks = Counter("cost_action_rollback_total", "Cost-action rollbacks by the SLI circuit breaker.",
                                 ["action", "reason"], registry=self.registry)
        self.status = Gauge("seedance_rollout_status", "0 progressing, 1 promoted, 2 rolled back.", ["flag"],
                            registry=self.registry)
        self.weight = Gauge("seedance_rollout_weight", "Share of eligible traffic on the candidate (%).", ["flag"],
                            registry=self.registry)
        self.duration = Histogram("seedance_rollout_duration_seconds", "Rollout duration to its outcome.",
                                  ["flag", "outcome"], registry=self.registry,
                                  buckets=(10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, float("inf")))

    def render(self) -> bytes:
        """Prometheus text exposition."""
        return bytes(generate_latest(self.registry))

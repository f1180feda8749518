"""Prometheus series of the privacy service, registered in the control plane's registry.

* ``seedance_privacy_fingerprint_steps_total`` (``step``): every step of the abuse response —
  ``cluster_paused``, ``ingestion_paused``, ``challenge_issued``, ``challenge_passed``,
  ``challenge_failed``, ``challenge_timed_out``, ``blacklisted``, ``resumed``,
  ``ingestion_blacklisted``;
* ``seedance_privacy_telemetry_events_total`` (``outcome``: accepted, refused);
* ``seedance_privacy_erasures_total`` (``status``: requested, verified, failed);
* ``seedance_privacy_erasure_duration_seconds``: request to verified proof.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

FINGERPRINT_STEPS = ("cluster_paused", "ingestion_paused", "challenge_issued", "challenge_passed",
                     "challenge_failed", "challenge_timed_out", "blacklisted", "resumed", "ingestion_blacklisted")


class PrivacyMetrics:
    """The privacy series of one service instance."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.fingerprint_steps = Counter(
            "seedance_privacy_fingerprint_steps", "Steps of the device-fingerprint abuse response.", ["step"],
            registry=registry)
        for step in FINGERPRINT_STEPS:
            self.fingerprint_steps.labels(step)
        self.telemetry_events = Counter(
            "seedance_privacy_telemetry_events", "Telemetry events by outcome.", ["outcome"], registry=registry)
        self.erasures = Counter("seedance_privacy_erasures", "Erasure requests by status.", ["status"],
                                registry=registry)
        self.erasure_seconds = Histogram(
            "seedance_privacy_erasure_duration_seconds", "Time from an erasure request to its verified proof.",
            registry=registry, buckets=(1, 10, 60, 600, 3600, 6 * 3600, 24 * 3600, 72 * 3600, 7 * 24 * 3600))

    def step(self, name: str, n: int = 1) -> None:
        """Count one fingerprint step."""
        self.fingerprint_steps.labels(name).inc(n)

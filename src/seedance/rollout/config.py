"""Canary settings: the flag under rollout, the step weights, the analysis period and the SLI thresholds.

Defaults are the whitepaper's (§4.4): at most 5 % of traffic per step, 3 consecutive healthy sampling
periods to promote, P95 < 200 ms and 5xx < 0.5 % healthy, P95 > 350 ms held for 30 s or 5xx > 3 %
over a 2-minute window trip the breaker. Windows and periods are settings, so tests can shorten
them; the benchmark runs the full ones. The state machines follow Flagger (``stepWeight``,
``maxWeight``, failed checks → rollback) and Argo Rollouts (a period without data is
inconclusive, never a pass; ``consecutiveErrorLimit`` inconclusive periods roll back).

A canary file (YAML)::

    flag: enable_cpu_throttling
    candidate: "on"            # the variant the cost action serves
    baseline: "off"            # the variant rollback returns everyone to
    step_weight: 5             # % of the eligible traffic per step (at most 5)
    max_weight: 5              # last step before promotion
    period_s: 60
    metrics_url: http://127.0.0.1:8000/metrics
    thresholds: {trip_p95_ms: 350, latency_hold_s: 30, trip_error_ratio: 0.03, error_window_s: 120}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from seedance.core.errors import InputError

MAX_STEP_WEIGHT = 5.0


class SLIThresholds(BaseModel):
    """When a period is healthy and when the breaker trips."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    healthy_p95_ms: float = Field(default=200.0, gt=0, description="A healthy period's P95 latency is below this.")
    trip_p95_ms: float = Field(default=350.0, gt=0, description="P95 above this for latency_hold_s trips.")
    latency_hold_s: float = Field(default=30.0, gt=0, description="How long the P95 breach must last to trip.")
    latency_window_s: float = Field(default=10.0, gt=0, description="Trailing window of each P95 sample.")
    healthy_error_ratio: float = Field(default=0.005, ge=0, le=1, description="A healthy period's 5xx share.")
    trip_error_ratio: float = Field(default=0.03, ge=0, le=1, description="5xx share over error_window_s that trips.")
    error_window_s: float = Field(default=120.0, gt=0, description="Trailing window of the 5xx share.")
    min_requests: int = Field(default=20, ge=1, description="Fewer canary requests in a window: no data.")

    @model_validator(mode="after")
    def _ordered(self) -> SLIThresholds:
        if self.healthy_p95_ms > self.trip_p95_ms:
            raise ValueError("healthy_p95_ms must not exceed trip_p95_ms")
        if self.healthy_error_ratio > self.trip_error_ratio:
            raise ValueError("healthy_error_ratio must not exceed trip_error_ratio")
        return self


class MetricNames(BaseModel):
    """Where the SLIs are in the service's Prometheus exposition."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_histogram: str = Field(default="http_request_duration_seconds", description="Histogram, seconds.")
    requests_counter: str = Field(default="http_requests_total", description="Counter with a status-code label.")
    code_label: str = Field(default="code", description="Status-code label of the counter.")
    variant_label: str = Field(default="variant", description="Label naming the flag variant a request was served.")


class CanarySettings(BaseModel):
    """One canary rollout (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flag: str = Field(min_length=1, max_length=200, description="Flag key in the flag file.")
    candidate: str = Field(default="on", min_length=1, description="Variant of the cost action.")
    baseline: str = Field(default="off", min_length=1, description="Variant rollback switches everyone to.")
    action: str | None = Field(default=None, description="action label of cost_action_rollback_total (default: flag).")
    step_weight: float = Field(default=5.0, gt=0, le=MAX_STEP_WEIGHT, description="% of eligible traffic per step.")
    max_weight: float | None = Field(default=None, gt=0, le=100,
                                     description="Last step before promotion (default: step_weight).")
    healthy_periods: int = Field(default=3, ge=1, le=100, description="Consecutive healthy periods per step.")
    period_s: float = Field(default=60.0, gt=0, description="Length of one analysis period.")
    sample_s: float = Field(default=1.0, gt=0, description="How often the breaker scrapes the metrics.")
    error_limit: int = Field(default=4, ge=1, description="Consecutive periods without data that roll back.")
    metrics_url: str = Field(default="http://127.0.0.1:8000/metrics", description="Service's Prometheus endpoint.")
    scrape_timeout_s: float = Field(default=2.0, gt=0, description="Timeout of one scrape.")
    confirm_timeout_s: float = Field(default=3.0, gt=0,
                                     description="Longest wait for the flag provider to serve a written change.")
    thresholds: SLIThresholds = Field(default_factory=SLIThresholds)
    metrics: MetricNames = Field(default_factory=MetricNames)

    @model_validator(mode="after")
    def _weights(self) -> CanarySettings:
        if self.max_weight is not None and self.max_weight < self.step_weight:
            raise ValueError("max_weight must be at least step_weight")
        if self.candidate == self.baseline:
            raise ValueError("candidate and baseline must be different variants")
        return self

    @property
    def last_weight(self) -> float:
        """The weight of the last step (promotion follows its healthy periods)."""
        return self.max_weight if self.max_weight is not None else self.step_weight

    @property
    def action_label(self) -> str:
        """The ``action`` label value."""
        return self.action or self.flag


def parse_canary(data: Any, *, source: str) -> CanarySettings:
    """Validate a canary mapping; errors name the field."""
    try:
        return CanarySettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise InputError(str(err["msg"]).removeprefix("Value error, "), source=source, field=loc or None) from None


def load_canary(path: str | Path) -> CanarySettings:
    """Read a canary YAML file; errors name the file, line and field."""
    from seedance.compliance.document import load_document

    doc = load_document(path)  # YAML errors with line and nearest key
    try:
        return parse_canary(doc.data, source=str(path))
    except InputError as exc:
        line = None
        if exc.field:
            parts = exc.field.split(".")
            while parts and line is None:
                key = tuple(int(p) if p.isdigit() else p for p in parts)
                pos = doc.positions.get(key)
                line = pos.line if pos else None
                parts.pop()
        raise InputError(exc.message, source=str(path), line=line, field=exc.field) from None

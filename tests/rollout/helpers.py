"""Shared builders of the rollout tests: the whitepaper's flag, a synthetic metrics source, a fake clock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from seedance.rollout.demo import BUCKETS

FLAG = "enable_cpu_throttling"
ELIGIBLE = {"and": [{"==": [{"var": "region"}, "cn-east-2"]}, {"==": [{"var": "tier"}, "premium"]}]}


def flag_doc(state: str = "DISABLED") -> dict[str, Any]:
    """The whitepaper's §4.4 flag: CPU throttling for premium users of cn-east-2."""
    return {"flags": {FLAG: {"state": state, "variants": {"on": True, "off": False}, "defaultVariant": "off",
                             "targeting": {"if": [ELIGIBLE, "on", "off"]}}}}


def write_flag_file(folder: Path, state: str = "DISABLED") -> Path:
    path = folder / "flags.json"
    path.write_text(json.dumps(flag_doc(state), indent=2))
    return path


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class SyntheticMetrics:
    """A service's metrics fed by hand: ``serve`` adds canary (and baseline) requests."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram("http_request_duration_seconds", "", ["variant"], registry=self.registry,
                                 buckets=BUCKETS)
        self.requests = Counter("http_requests_total", "", ["variant", "code"], registry=self.registry)
        self.down = False

    def serve(self, n: int, latency_s: float, errors: int = 0, variant: str = "on") -> None:
        for i in range(n):
            self.latency.labels(variant).observe(latency_s)
            self.requests.labels(variant, "503" if i < errors else "200").inc()

    def scrape(self) -> str:
        if self.down:
            raise OSError("connection refused")
        return generate_latest(self.registry).decode()

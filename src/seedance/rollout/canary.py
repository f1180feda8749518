"""The canary controller: step the flag's weight, judge each period by its SLIs, trip on the breaker, roll back.

NOTE(seedance): the state machine, once (settings in :mod:`seedance.rollout.config`).
  * Start: the flag's candidate goes to ``step_weight`` % of the eligible traffic.
  * Every ``sample_s`` the service's metrics are scraped and the breaker checked on the canary's
    requests: the P95 over the trailing ``latency_window_s`` above ``trip_p95_ms`` starts (or
    continues) a breach, any P95 at or below it ends the breach, a window without data neither
    starts nor ends one; a breach lasting ``latency_hold_s`` trips (reason ``latency``). The 5xx
    share over the trailing ``error_window_s`` above ``trip_error_ratio`` trips at once (reason
    ``errors``).
  * Every ``period_s`` the period is judged on the canary's requests since it began: healthy
    (P95 < ``healthy_p95_ms`` and 5xx < ``healthy_error_ratio``), unhealthy (neither healthy nor
    tripping: it resets the healthy run), or inconclusive (fewer than ``min_requests``: never a
    pass; it resets the healthy run, and ``error_limit`` of them in a row roll back, reason
    ``no-data``). After ``healthy_periods`` healthy periods in a row the weight steps up by
    ``step_weight`` (at most 5) up to ``max_weight``; after the healthy periods of the last step
    the flag is promoted.
  * Rollback: the flag file is rewritten with the baseline for everyone, the controller waits
    until its own OpenFeature client serves the new definition, then increments
    ``cost_action_rollback_total{action,reason}``, sets the status gauge and records
    ``rollout.rolled_back`` in the event log. Its ``completed_at`` is after all of that.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from seedance.core.errors import InputError
from seedance.rollout.config import CanarySettings
from seedance.rollout.events import EventSink
from seedance.rollout.flags import CANARY_META, FlagRollout
from seedance.rollout.metrics import PROGRESSING, PROMOTED, ROLLED_BACK, RolloutMetrics
from seedance.rollout.sli import SLIHistory, WindowSLI, parse_snapshot


class Phase(StrEnum):
    """Where a rollout is."""

    PROGRESSING = "progressing"
    PROMOTED = "promoted"
    ROLLED_BACK = "rolled-back"


class Verdict(StrEnum):
    """Judgement of one analysis period."""

    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    INCONCLUSIVE = "inconclusive"


class MetricsSource(Protocol):
    """Gives the service's current Prometheus text exposition."""

    def scrape(self) -> str:
        """The exposition text (raise ``OSError`` when unreachable)."""


class HttpMetrics:
    """Scrapes a ``/metrics`` URL over HTTP."""

    def __init__(self, url: str, timeout_s: float = 2.0) -> None:
        import httpx

        self.url = url
        self._http = httpx.Client(timeout=timeout_s)
        self._errors = (httpx.HTTPError,)

    def scrape(self) -> str:
        try:
            r = self._http.get(self.url)
            r.raise_for_status()
        except self._errors as exc:
            raise OSError(f"cannot scrape {self.url}: {exc}") from None
        return r.text

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()


@dataclass(frozen=True, slots=True)
class Period:
    """One judged analysis period."""

    index: int
    start: float
    end: float
    weight: float
    verdict: Verdict
    requests: float
    p95_ms: float | None
    error_ratio: float | None


@dataclass(slots=True)
class Trip:
    """A breaker trip and the rollback it caused (monotonic times)."""

    reason: str
    detected_at: float
    breach_since: float | None
    p95_ms: float | None
    error_ratio: float | None
    window_requests: float
    switched_at: float = float("nan")
    confirmed_at: float = float("nan")
    completed_at: float = float("nan")


@dataclass(slots=True)
class RolloutState:
    """Everything the controller knows about its rollout."""

    phase: Phase = Phase.PROGRESSING
    weight: float = 0.0
    started_at: float = float("nan")
    finished_at: float = float("nan")
    healthy_run: int = 0
    no_data_run: int = 0
    periods: list[Period] = field(default_factory=list)
    weights: list[tuple[float, float]] = field(default_factory=list)
    breach_since: float | None = None
    trip: Trip | None = None
    scrape_errors: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON summary."""
        t = self.trip
        return {
            "phase": str(self.phase), "weight": self.weight, "healthy_periods_in_a_row": self.healthy_run,
            "periods": [{"index": p.index, "weight": p.weight, "verdict": str(p.verdict), "requests": p.requests,
                         "p95_ms": p.p95_ms, "error_ratio": p.error_ratio, "start": p.start, "end": p.end}
                        for p in self.periods],
            "weights": [{"t": t0, "weight": w} for t0, w in self.weights],
            "trip": None if t is None else {
                "reason": t.reason, "detected_at": t.detected_at, "breach_since": t.breach_since,
                "p95_ms": t.p95_ms, "error_ratio": t.error_ratio, "window_requests": t.window_requests,
                "switched_at": t.switched_at, "confirmed_at": t.confirmed_at, "completed_at": t.completed_at},
            "scrape_errors": self.scrape_errors, "started_at": self.started_at, "finished_at": self.finished_at,
        }


class CanaryController:
    """Runs one canary rollout (see the module docstring).

    Args:
        settings: The rollout's settings.
        rollout: Writer of the flag's states.
        source: The service's metrics.
        metrics: The controller's own Prometheus metrics.
        events: Event log (``None``: not recorded).
        served_weight: Returns the canary weight the flag provider currently serves (the flag's
            ``seedanceCanaryWeight`` metadata through OpenFeature), to confirm a written change;
            ``None`` skips the confirmation.
        clock: Monotonic clock (seconds).
    """

    def __init__(
        self, settings: CanarySettings, rollout: FlagRollout, source: MetricsSource, *,
        metrics: RolloutMetrics | None = None, events: EventSink | None = None,
        served_weight: Callable[[], float | None] | None = None, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.rollout = rollout
        self.source = source
        self.metrics = metrics or RolloutMetrics()
        self.events = events
        self.served_weight = served_weight
        self.clock = clock
        th = settings.thresholds
        keep = max(th.error_window_s, th.latency_window_s, settings.period_s) + 5 * settings.sample_s
        self.history = SLIHistory(keep_s=keep, min_requests=th.min_requests)
        self.state = RolloutState()
        self._period_start = float("nan")
        self._stop = threading.Event()

    # ------------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Put the first step in force and begin the first period."""
        now = self.clock()
        self.state.started_at = now
        self._set_weight(self.settings.step_weight, now)
        self._period_start = now
        self._sample(now)
        self._event("rollout.started", f"canary of {self.settings.flag} at {self.state.weight:g}%",
                    {"weight": self.state.weight})

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current tick (the flag stays as it is)."""
        self._stop.set()

    def run(self, *, timeout_s: float | None = None) -> RolloutState:
        """Start, then tick every ``sample_s`` until promoted, rolled back, stopped or ``timeout_s``."""
        self.start()
        deadline = None if timeout_s is None else self.clock() + timeout_s
        nxt = self.clock()
        while self.state.phase is Phase.PROGRESSING and not self._stop.is_set():
            nxt += self.settings.sample_s
            delay = nxt - self.clock()
            if delay > 0 and self._stop.wait(delay):
                break
            self.tick()
            if deadline is not None and self.clock() >= deadline:
                break
        return self.state

    # ------------------------------------------------------------------------------------ one tick
    def tick(self) -> Phase:
        """Scrape, check the breaker, and judge the period when it is over."""
        if self.state.phase is not Phase.PROGRESSING:
            return self.state.phase
        now = self.clock()
        if not self._sample(now):  # no data: nothing to trip on, but the period still ends (inconclusive)
            if now - self._period_start >= self.settings.period_s - 1e-9:
                self._judge(now)
            return self.state.phase
        th = self.settings.thresholds
        lat = self.history.window(th.latency_window_s)
        if lat is not None and lat.p95_ms is not None:
            if lat.p95_ms > th.trip_p95_ms:
                if self.state.breach_since is None:
                    self.state.breach_since = now
                if now - self.state.breach_since >= th.latency_hold_s:
                    self._rollback("latency", now, lat)
                    return self.state.phase
            else:
                self.state.breach_since = None
        err = self.history.window(th.error_window_s)
        if err is not None and err.error_ratio is not None and err.error_ratio > th.trip_error_ratio:
            self._rollback("errors", now, err)
            return self.state.phase
        if now - self._period_start >= self.settings.period_s - 1e-9:
            self._judge(now)
        return self.state.phase

    def _sample(self, now: float) -> bool:
        m = self.settings.metrics
        try:
            text = self.source.scrape()
            snap = parse_snapshot(text, t=now, names=m, variant=self.settings.candidate,
                                  source=self.settings.metrics_url)
        except (OSError, InputError):  # unreachable or garbled: no data this tick
            self.state.scrape_errors += 1
            return False
        self.history.add(snap)
        return True

    def _judge(self, now: float) -> None:
        th = self.settings.thresholds
        w = self.history.since(self._period_start)
        if w is None or w.p95_ms is None or w.error_ratio is None:
            verdict = Verdict.INCONCLUSIVE
        elif w.p95_ms < th.healthy_p95_ms and w.error_ratio < th.healthy_error_ratio:
            verdict = Verdict.HEALTHY
        else:
            verdict = Verdict.UNHEALTHY
        self.state.periods.append(Period(
            len(self.state.periods) + 1, self._period_start, now, self.state.weight, verdict,
            w.requests if w else 0.0, w.p95_ms if w else None, w.error_ratio if w else None))
        self._period_start = now
        if verdict is Verdict.HEALTHY:
            self.state.healthy_run += 1
            self.state.no_data_run = 0
            if self.state.healthy_run >= self.settings.healthy_periods:
                if self.state.weight < self.settings.last_weight - 1e-9:
                    self.state.healthy_run = 0
                    w_new = min(self.state.weight + self.settings.step_weight, self.settings.last_weight)
                    self._set_weight(w_new, now)
                    self._event("rollout.advanced", f"canary of {self.settings.flag} to {w_new:g}%",
                                {"weight": w_new})
                else:
                    self._promote(now)
            return
        self.state.healthy_run = 0
        if verdict is Verdict.INCONCLUSIVE:
            self.state.no_data_run += 1
            if self.state.no_data_run >= self.settings.error_limit:
                self._rollback("no-data", now, w)
        else:
            self.state.no_data_run = 0

    # ------------------------------------------------------------------------------------ outcomes
    def _set_weight(self, weight: float, now: float) -> None:
        self.rollout.set_weight(weight)
        self.state.weight = weight
        self.state.weights.append((now, weight))
        self.metrics.weight.labels(self.settings.flag).set(weight)
        self.metrics.status.labels(self.settings.flag).set(PROGRESSING)
        self._confirm(weight)

    def _confirm(self, weight: float) -> bool:
        """Wait until the provider serves the flag written with ``weight``."""
        if self.served_weight is None:
            return True
        deadline = time.monotonic() + self.settings.confirm_timeout_s  # a real wait, whatever the clock
        while True:
            got = self.served_weight()
            if got is not None and abs(got - weight) < 1e-9:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    def _promote(self, now: float) -> None:
        self.rollout.promote()
        self._confirm(100.0)
        self.state.phase = Phase.PROMOTED
        self.state.weight = 100.0
        self.state.weights.append((now, 100.0))
        self.state.finished_at = self.clock()
        flag = self.settings.flag
        self.metrics.weight.labels(flag).set(100.0)
        self.metrics.status.labels(flag).set(PROMOTED)
        self.metrics.duration.labels(flag, "promoted").observe(self.state.finished_at - self.state.started_at)
        self._event("rollout.promoted", f"{flag} promoted after {len(self.state.periods)} period(s)",
                    {"periods": len(self.state.periods), "healthy_periods": self.state.healthy_run})

    def _rollback(self, reason: str, now: float, w: WindowSLI | None) -> None:
        st = self.state
        st.trip = Trip(reason, now, st.breach_since if reason == "latency" else None,
                       w.p95_ms if w else None, w.error_ratio if w else None, w.requests if w else 0.0)
        self.rollout.rollback()
        st.trip.switched_at = self.clock()
        self._confirm(0.0)
        st.trip.confirmed_at = self.clock()
        flag = self.settings.flag
        self.metrics.rollbacks.labels(self.settings.action_label, reason).inc()
        self.metrics.weight.labels(flag).set(0.0)
        self.metrics.status.labels(flag).set(ROLLED_BACK)
        st.phase = Phase.ROLLED_BACK
        st.weight = 0.0
        st.weights.append((now, 0.0))
        self._event("rollout.rolled_back", f"{flag} rolled back to {self.settings.baseline}: {reason}", {
            "reason": reason, "weight_before": st.weights[-2][1] if len(st.weights) > 1 else None,
            "p95_ms": st.trip.p95_ms, "error_ratio": st.trip.error_ratio, "window_requests": st.trip.window_requests,
            "breach_s": None if st.trip.breach_since is None else now - st.trip.breach_since})
        st.trip.completed_at = self.clock()
        st.finished_at = st.trip.completed_at
        self.metrics.duration.labels(flag, "rolled-back").observe(st.finished_at - st.started_at)

    def _event(self, kind: str, message: str, data: dict[str, Any]) -> None:
        if self.events is not None:
            self.events.record(kind, message, {"flag": self.settings.flag, "action": self.settings.action_label,
                                               "candidate": self.settings.candidate,
                                               "baseline": self.settings.baseline, **data})


def served_weight_probe(evaluator: Any, flag: str, default: Any = False) -> Callable[[], float | None]:
    """A ``served_weight`` callback reading the flag's canary-weight metadata through OpenFeature."""

    def probe() -> float | None:
        d = evaluator.details(flag, default, "seedance-canary-probe")
        v = (d.flag_metadata or {}).get(CANARY_META)
        return float(v) if isinstance(v, int | float) else None

    return probe

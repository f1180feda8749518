"""Live canaries against a real HTTP service on loopback under bounded load (at most 150 requests/s).

The service evaluates the whitepaper's flag per request through OpenFeature (flagd file provider);
faults are injected into the candidate variant. Windows are shortened here (settings); the full
30 s hold and 2-minute error window run in ``benchmarks/bench_rollout.py``. Each delay is measured
from the service's own request log (when the trip condition began to hold) to the controller's
completed rollback (flag rewritten and served, counter incremented, event stored).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from seedance.control.db.models import EventRecord
from seedance.rollout import measure
from seedance.rollout.canary import CanaryController, HttpMetrics, Phase, RolloutState, Verdict, served_weight_probe
from seedance.rollout.config import CanarySettings, SLIThresholds
from seedance.rollout.demo import DemoService, LoadGenerator
from seedance.rollout.evaluator import FlagEvaluator
from seedance.rollout.events import StoreEventSink
from seedance.rollout.flags import FlagRollout
from seedance.rollout.metrics import RolloutMetrics
from tests.control.helpers import free_port
from tests.rollout.helpers import FLAG, write_flag_file

TH = SLIThresholds(latency_window_s=3, latency_hold_s=3, error_window_s=5, min_requests=6)
PERIOD_S = 3.0


@dataclass
class Live:
    service: DemoService
    load: LoadGenerator
    controller: CanaryController
    sink: StoreEventSink
    metrics_url: str

    def events(self) -> list[EventRecord]:
        with self.sink.db.read() as s:
            return list(s.scalars(select(EventRecord).where(EventRecord.kind.like("rollout.%"))
                                  .order_by(EventRecord.id)))


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    from prometheus_client import start_http_server

    path = write_flag_file(tmp_path)
    svc = DemoService(str(path), FLAG, poll_ms=50)
    url = svc.start()
    load = LoadGenerator(url, rps=150, threads=8, seed=7)
    cfg = CanarySettings(flag=FLAG, period_s=PERIOD_S, sample_s=0.25, thresholds=TH, metrics_url=f"{url}/metrics")
    probe = FlagEvaluator(path, poll_ms=20)
    metrics = RolloutMetrics()
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=metrics.registry)
    sink = StoreEventSink(f"sqlite:///{tmp_path / 'events.db'}")
    source = HttpMetrics(cfg.metrics_url)
    ctl = CanaryController(cfg, FlagRollout(path, FLAG, "on", "off"), source, metrics=metrics, events=sink,
                           served_weight=served_weight_probe(probe, FLAG))
    load.start()
    time.sleep(0.5)
    try:
        yield Live(svc, load, ctl, sink, f"http://127.0.0.1:{port}/metrics")
    finally:
        load.stop()
        server.shutdown()
        source.close()
        probe.close()
        svc.close()
        sink.close()


def run_with_fault(live: Live, at_s: float, **fault: float) -> tuple[RolloutState, float]:
    import threading

    injected: list[float] = []
    timer = threading.Timer(at_s, lambda: injected.append(live.service.inject(**fault)))
    timer.start()
    state = live.controller.run(timeout_s=30)
    timer.cancel()
    assert injected, "the fault was never injected"
    return state, injected[0]


def test_healthy_canary_promotes_after_exactly_three_periods(live: Live) -> None:
    state = live.controller.run(timeout_s=30)
    assert state.phase is Phase.PROMOTED and state.trip is None
    assert [p.verdict for p in state.periods] == [Verdict.HEALTHY] * 3
    assert all(p.p95_ms is not None and p.p95_ms < 200 and p.error_ratio == 0.0 for p in state.periods)
    took = state.finished_at - state.started_at
    print(f"healthy: promoted after {len(state.periods)} periods of {PERIOD_S:g} s in {took:.2f} s, "
          f"{sum(p.requests for p in state.periods):.0f} canary requests")
    assert 3 * PERIOD_S - 0.3 <= took <= 3 * PERIOD_S + 2.0
    assert [e.kind for e in live.events()] == ["rollout.started", "rollout.promoted"]
    log = live.service.requests_log()
    assert sum(1 for r in log if r[2] == "on") > 0 and live.load.failed == 0
    text = httpx.get(live.metrics_url).text
    assert 'seedance_rollout_status{flag="enable_cpu_throttling"} 1.0' in text
    assert "cost_action_rollback_total{" not in text  # no rollback counted


def test_latency_breach_rolls_back_within_8_s_of_the_hold(live: Live) -> None:
    state, t_inj = run_with_fault(live, 1.0, latency_ms=500)
    assert state.phase is Phase.ROLLED_BACK and state.trip is not None and state.trip.reason == "latency"
    log = live.service.requests_log()
    start = measure.p95_breach_start(log, "on", since=t_inj, window_s=TH.latency_window_s,
                                     threshold_ms=TH.trip_p95_ms, min_requests=TH.min_requests)
    assert start is not None
    holds = start + TH.latency_hold_s
    delay = state.trip.completed_at - holds
    print(f"latency: breach began {start - t_inj:.2f} s after injection, condition held at +{holds - t_inj:.2f} s, "
          f"rollback completed {delay:.3f} s later (switch {state.trip.switched_at - holds:.3f} s)")
    assert -0.5 <= delay <= 8.0  # not before the hold has passed (allowing the window's edge), at most 8 s after
    assert measure.served_after(log, "on", state.trip.completed_at + 0.2) == 0
    kinds = [e.kind for e in live.events()]
    assert kinds == ["rollout.started", "rollout.rolled_back"]
    assert live.events()[-1].data["reason"] == "latency"
    text = httpx.get(live.metrics_url).text
    assert 'cost_action_rollback_total{action="enable_cpu_throttling",reason="latency"} 1.0' in text


def test_5xx_burst_rolls_back_within_5_s(live: Live) -> None:
    state, t_inj = run_with_fault(live, 1.0, error_ratio=0.2)
    assert state.phase is Phase.ROLLED_BACK and state.trip is not None and state.trip.reason == "errors"
    log = live.service.requests_log()
    holds = measure.error_ratio_start(log, "on", since=t_inj, window_s=TH.error_window_s,
                                      threshold=TH.trip_error_ratio, min_requests=TH.min_requests)
    assert holds is not None
    delay = state.trip.completed_at - holds
    print(f"errors: 5xx share over {TH.error_window_s:g} s passed 3 % at +{holds - t_inj:.2f} s, rollback "
          f"completed {delay:.3f} s later (controller saw {state.trip.error_ratio:.3f})")
    assert -0.5 <= delay <= 5.0
    assert measure.served_after(log, "on", state.trip.completed_at + 0.2) == 0
    text = httpx.get(live.metrics_url).text
    assert 'cost_action_rollback_total{action="enable_cpu_throttling",reason="errors"} 1.0' in text

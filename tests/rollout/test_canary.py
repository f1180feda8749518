"""The canary state machine on a hand-driven clock and synthetic metrics: exact promotion and trip ticks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.rollout.canary import CanaryController, Phase, Verdict
from seedance.rollout.config import CanarySettings, SLIThresholds
from seedance.rollout.events import StoreEventSink
from seedance.rollout.flags import FlagRollout, load_flag_file
from tests.rollout.helpers import FLAG, Clock, SyntheticMetrics, write_flag_file


def make(tmp_path: Path, **kw: object) -> tuple[CanaryController, SyntheticMetrics, Clock]:
    th = kw.pop("thresholds", SLIThresholds())
    cfg = CanarySettings.model_validate({"flag": FLAG, "period_s": 10, "sample_s": 1, "thresholds": th, **kw})
    src, clock = SyntheticMetrics(), Clock()
    path = tmp_path / "flags.json" if (tmp_path / "flags.json").exists() else write_flag_file(tmp_path)
    ctl = CanaryController(cfg, FlagRollout(path, FLAG, "on", "off"), src, clock=clock)
    return ctl, src, clock


def drive(ctl: CanaryController, src: SyntheticMetrics, clock: Clock, ticks: int, *, n: int = 10,
          latency_s: float = 0.05, errors: int = 0) -> int:
    """Advance ``ticks`` seconds serving ``n`` canary requests per second; the tick count when it ended."""
    for i in range(1, ticks + 1):
        clock.t += 1.0
        src.serve(n, latency_s, errors)
        if ctl.tick() is not Phase.PROGRESSING:
            return i
    return ticks


def test_promotes_after_exactly_three_healthy_periods(tmp_path: Path) -> None:
    ctl, src, clock = make(tmp_path)
    sink = StoreEventSink(f"sqlite:///{tmp_path / 'events.db'}")
    ctl.events = sink
    ctl.start()
    t0 = clock.t
    assert drive(ctl, src, clock, 29) == 29 and ctl.state.phase is Phase.PROGRESSING
    assert [p.verdict for p in ctl.state.periods] == [Verdict.HEALTHY, Verdict.HEALTHY]
    assert drive(ctl, src, clock, 1) == 1 and ctl.state.phase is Phase.PROMOTED
    assert clock.t - t0 == 30.0 and len(ctl.state.periods) == 3 and ctl.state.trip is None
    assert [w for _, w in ctl.state.weights] == [5.0, 100.0]
    flag = load_flag_file(tmp_path / "flags.json").flag(FLAG)
    assert flag["state"] == "ENABLED" and flag["targeting"]["if"][1] == "on"  # the authored targeting, enabled
    m = ctl.metrics.registry
    assert m.get_sample_value("seedance_rollout_status", {"flag": FLAG}) == 1.0
    assert m.get_sample_value("seedance_rollout_weight", {"flag": FLAG}) == 100.0
    from sqlalchemy import select

    from seedance.control.db.models import EventRecord

    with sink.db.read() as s:
        kinds = [e.kind for e in s.scalars(select(EventRecord).where(EventRecord.kind.like("rollout.%")))]
    sink.close()
    assert kinds == ["rollout.started", "rollout.promoted"]


def test_each_step_needs_its_own_healthy_periods(tmp_path: Path) -> None:
    ctl, src, clock = make(tmp_path, step_weight=5, max_weight=15)
    ctl.start()
    ended = drive(ctl, src, clock, 200)
    assert ctl.state.phase is Phase.PROMOTED and ended == 90  # 3 steps x 3 periods x 10 s
    assert [w for _, w in ctl.state.weights] == [5.0, 10.0, 15.0, 100.0]


def test_unhealthy_period_resets_the_healthy_run(tmp_path: Path) -> None:
    ctl, src, clock = make(tmp_path)
    ctl.start()
    drive(ctl, src, clock, 20)
    drive(ctl, src, clock, 10, latency_s=0.25)  # 200 ms < P95 < 350 ms: not healthy, no trip
    assert ctl.state.healthy_run == 0 and ctl.state.phase is Phase.PROGRESSING
    assert drive(ctl, src, clock, 30) == 30 and ctl.state.phase is Phase.PROMOTED
    assert [p.verdict for p in ctl.state.periods] == [Verdict.HEALTHY] * 2 + [Verdict.UNHEALTHY] + [Verdict.HEALTHY] * 3


def test_latency_trips_after_the_hold_and_counts_the_rollback(tmp_path: Path) -> None:
    ctl, src, clock = make(tmp_path, thresholds=SLIThresholds(latency_window_s=5, latency_hold_s=30))
    ctl.start()
    drive(ctl, src, clock, 5)
    ended = drive(ctl, src, clock, 60, latency_s=0.5)
    # the 5 s window's P95 passes 350 ms at the first tick with more than 5 % slow requests (tick 1 of 50
    # requests: 10 slow = 20 %), so the breach starts at tick 1 and trips 30 s later
    assert ended == 31 and ctl.state.phase is Phase.ROLLED_BACK
    trip = ctl.state.trip
    assert trip is not None and trip.reason == "latency" and trip.breach_since is not None
    assert trip.detected_at - trip.breach_since == 30.0 and trip.p95_ms is not None and trip.p95_ms > 350
    reg = ctl.metrics.registry
    assert reg.get_sample_value("cost_action_rollback_total", {"action": FLAG, "reason": "latency"}) == 1.0
    assert reg.get_sample_value("seedance_rollout_status", {"flag": FLAG}) == 2.0
    flag = load_flag_file(tmp_path / "flags.json").flag(FLAG)
    assert flag["defaultVariant"] == "off" and "targeting" not in flag


def test_a_healthy_window_ends_the_breach(tmp_path: Path) -> None:
    ctl, src, clock = make(tmp_path, thresholds=SLIThresholds(latency_window_s=3, latency_hold_s=10),
                           period_s=1000)
    ctl.start()
    drive(ctl, src, clock, 8, latency_s=0.5)
    drive(ctl, src, clock, 4)  # P95 back under 350 ms: the breach ends
    assert ctl.state.breach_since is None
    # the breach starts afresh at the first slow tick and trips 10 s later
    assert drive(ctl, src, clock, 12, latency_s=0.5) == 11 and ctl.state.phase is Phase.ROLLED_BACK


def test_errors_over_the_window_trip_at_once(tmp_path: Path) -> None:
    th = SLIThresholds(error_window_s=120, min_requests=20)
    ctl, src, clock = make(tmp_path, thresholds=th, period_s=1000)
    ctl.start()
    drive(ctl, src, clock, 120)  # a full window of clean requests
    # 1 error in 10 requests per second: the 120 s share passes 3 % once errors / requests > 0.03
    ended = drive(ctl, src, clock, 200, errors=1)
    trip = ctl.state.trip
    assert trip is not None and trip.reason == "errors" and trip.error_ratio is not None
    # after k error ticks the window holds 120 ticks of 10 requests with k errors: k / 1200 > 0.03 -> k = 37
    assert ended == 37 and trip.error_ratio == pytest.approx(37 / 1200)
    assert ctl.metrics.registry.get_sample_value("cost_action_rollback_total",
                                                 {"action": FLAG, "reason": "errors"}) == 1.0


@pytest.mark.parametrize("down", [True, False])
def test_no_data_is_never_a_pass(tmp_path: Path, down: bool) -> None:
    """An unreachable endpoint, or 10 requests a period (< min_requests 20): inconclusive, rolled back."""
    ctl, src, clock = make(tmp_path)
    ctl.start()
    src.down = down
    ended = drive(ctl, src, clock, 100, n=1)
    assert ctl.state.phase is Phase.ROLLED_BACK and ctl.state.trip is not None
    assert ctl.state.trip.reason == "no-data" and ended == 40  # error_limit: 4 inconclusive periods in a row
    assert [p.verdict for p in ctl.state.periods] == [Verdict.INCONCLUSIVE] * 4
    assert ctl.state.scrape_errors == (40 if down else 0)


@st.composite
def traffic(draw: st.DrawFn) -> list[tuple[int, float, int]]:
    n = draw(st.integers(1, 40))
    out = []
    for _ in range(n):
        ticks = draw(st.integers(1, 15))
        req = draw(st.sampled_from([0, 3, 10, 30]))
        lat = draw(st.sampled_from([0.02, 0.15, 0.25, 0.4, 0.8]))
        err = draw(st.integers(0, 2)) if req else 0
        out.extend([(req, lat, min(err, req))] * ticks)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=traffic(), step=st.sampled_from([1.0, 2.5, 5.0]), steps=st.integers(1, 3))
def test_property_steps_of_at_most_5_and_promotion_only_after_healthy_periods(
        tmp_path: Path, seq: list[tuple[int, float, int]], step: float, steps: int) -> None:
    ctl, src, clock = make(tmp_path, step_weight=step, max_weight=step * steps, period_s=5,
                           thresholds=SLIThresholds(latency_hold_s=8, latency_window_s=3, error_window_s=20,
                                                    min_requests=5))
    ctl.start()
    for req, lat, err in seq:
        clock.t += 1.0
        src.serve(req, lat, err)
        if ctl.tick() is not Phase.PROGRESSING:
            break
    ws = [w for _, w in ctl.state.weights]
    moves = [b - a for a, b in zip(ws, ws[1:], strict=False)]
    final = ctl.state.phase
    body = moves[:-1] if final is not Phase.PROGRESSING else moves
    assert all(0 < m <= 5.0 + 1e-9 for m in body)  # every step before the outcome: up by at most 5 %
    assert ws[0] == step and max(w for w in ws if w < 100) <= step * steps + 1e-9
    if final is Phase.PROMOTED:
        last = [p for p in ctl.state.periods if p.weight == step * steps]
        assert len(last) >= 3 and all(p.verdict is Verdict.HEALTHY for p in last[-3:])
    if final is Phase.ROLLED_BACK:
        assert ws[-1] == 0.0 and ctl.state.trip is not None
        assert ctl.state.trip.reason in ("latency", "errors", "no-data")
        if ctl.state.trip.reason == "no-data":
            assert all(p.verdict is Verdict.INCONCLUSIVE for p in ctl.state.periods[-4:])

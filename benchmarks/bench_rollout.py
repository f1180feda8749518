"""Canary rollouts with the whitepaper's full SLI windows, live against a real HTTP service on loopback.

Run: ``.venv/bin/python benchmarks/bench_rollout.py [--only healthy,latency,errors-burst,errors-slow]``
(about 7 minutes; the tests run the same scenarios with shortened windows).

The demo service (``seedance.rollout.demo``) evaluates the whitepaper's ``enable_cpu_throttling``
flag per request through OpenFeature (flagd provider, file mode) under bounded load (at most
150 requests/s from 8 client threads); faults are injected into the candidate variant only.
Thresholds are the defaults (whitepaper §4.4): healthy P95 < 200 ms and 5xx < 0.5 %; trip on
P95 > 350 ms held 30 s (10 s P95 windows) or 5xx > 3 % over 120 s; 5 % canary, 3 healthy periods.

* ``healthy``: no fault; promotion must come after exactly 3 healthy periods (20 s each here; the
  whitepaper gives no period length, Flagger's default interval is 60 s), with no trip.
* ``latency``: +500 ms on the candidate from 5 s; rollback completed ≤ 8 s after the condition
  "P95 > 350 ms for 30 s" holds (its start measured from the service's own request log).
* ``errors-burst``: 120 s of clean canary traffic (a full window), then 25 % 5xx; rollback ≤ 5 s
  after the 120-s 5xx share passes 3 % (from the request log).
* ``errors-slow``: the same with 6 % 5xx, so the full 2-minute window matters (about 60 s).

Each delay is printed with its ratio to the whitepaper's budget (8 s, 5 s).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from seedance.rollout import measure
from seedance.rollout.canary import CanaryController, HttpMetrics, Phase, served_weight_probe
from seedance.rollout.config import CanarySettings, SLIThresholds
from seedance.rollout.demo import DemoService, LoadGenerator
from seedance.rollout.evaluator import FlagEvaluator
from seedance.rollout.flags import FlagRollout, write_flags

FLAG = "enable_cpu_throttling"
DOC = {"flags": {FLAG: {"state": "DISABLED", "variants": {"on": True, "off": False}, "defaultVariant": "off",
                        "targeting": {"if": [{"and": [{"==": [{"var": "region"}, "cn-east-2"]},
                                                      {"==": [{"var": "tier"}, "premium"]}]}, "on", "off"]}}}}


def scenario(name: str, folder: Path) -> dict[str, Any]:
    th = SLIThresholds()
    period = 20.0 if name == "healthy" else 600.0  # faults: no promotion while the fault builds up
    path = folder / f"{name}.json"
    write_flags(path, DOC)
    svc = DemoService(str(path), FLAG, poll_ms=100)
    url = svc.start()
    load = LoadGenerator(url, rps=150, threads=8, seed=11)
    cfg = CanarySettings(flag=FLAG, period_s=period, sample_s=1.0, thresholds=th, metrics_url=f"{url}/metrics")
    probe = FlagEvaluator(path, poll_ms=50)
    source = HttpMetrics(cfg.metrics_url)
    ctl = CanaryController(cfg, FlagRollout(path, FLAG, "on", "off"), source,
                           served_weight=served_weight_probe(probe, FLAG))
    fault: dict[str, Any] = {"latency": (5.0, {"latency_ms": 500.0}), "errors-burst": (120.0, {"error_ratio": 0.25}),
                             "errors-slow": (120.0, {"error_ratio": 0.06})}.get(name, (None, {}))
    injected: list[float] = []
    timer = None
    if fault[0] is not None:
        timer = threading.Timer(fault[0], lambda: injected.append(svc.inject(**fault[1])))
    load.start()
    time.sleep(1.0)
    try:
        if timer is not None:
            timer.start()
        state = ctl.run(timeout_s=400)
    finally:
        if timer is not None:
            timer.cancel()
        load.stop()
        log = svc.requests_log()
        source.close()
        probe.close()
        svc.close()
    out: dict[str, Any] = {"scenario": name, "phase": str(state.phase),
                           "periods": [str(p.verdict) for p in state.periods],
                           "canary_requests": sum(1 for r in log if r[2] == "on"), "requests": len(log),
                           "rps": len(log) / max(1e-9, (log[-1][1] - log[0][0])) if log else 0.0}
    if name == "healthy":
        out["promoted_after_s"] = state.finished_at - state.started_at
        out["ok"] = state.phase is Phase.PROMOTED and out["periods"] == ["healthy"] * 3 and state.trip is None
        return out
    trip = state.trip
    t_inj = injected[0] if injected else float("nan")
    if trip is None:
        out["ok"] = False
        return out
    if name == "latency":
        start = measure.p95_breach_start(log, "on", since=t_inj, window_s=th.latency_window_s,
                                         threshold_ms=th.trip_p95_ms, min_requests=th.min_requests)
        holds = None if start is None else start + th.latency_hold_s
        budget = 8.0
    else:
        holds = measure.error_ratio_start(log, "on", since=t_inj, window_s=th.error_window_s,
                                          threshold=th.trip_error_ratio, min_requests=th.min_requests)
        budget = 5.0
    out.update({"reason": trip.reason, "injected_at_s": t_inj - state.started_at,
                "condition_holds_at_s": None if holds is None else holds - state.started_at,
                "delay_s": None if holds is None else trip.completed_at - holds, "budget_s": budget,
                "candidate_served_after": measure.served_after(log, "on", trip.completed_at + 0.2)})
    d = out["delay_s"]
    out["ok"] = d is not None and -1.0 <= d <= budget and out["candidate_served_after"] == 0 and (
        trip.reason == ("latency" if name == "latency" else "errors"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="healthy,latency,errors-burst,errors-slow")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            t0 = time.perf_counter()
            r = scenario(name.strip(), Path(tmp))
            wall = time.perf_counter() - t0
            head = f"{r['scenario']:>12}: {r['phase']:<11} {'ok ' if r['ok'] else 'FAIL'} ({wall:.0f} s wall, "
            head += f"{r['requests']} requests at {r['rps']:.0f}/s, {r['canary_requests']} on the canary)"
            print(head)
            if r["scenario"] == "healthy":
                print(f"              periods {r['periods']}, promoted {r['promoted_after_s']:.1f} s after the start")
            elif "delay_s" in r:
                d = r["delay_s"]
                ratio = "n/a" if d is None else f"{d / r['budget_s']:.3f} of the {r['budget_s']:g} s budget"
                print(f"              fault at +{r['injected_at_s']:.1f} s, condition holds at "
                      f"+{r['condition_holds_at_s']:.1f} s, rollback ({r['reason']}) completed "
                      f"{'n/a' if d is None else f'{d:.3f} s'} later ({ratio}); "
                      f"candidate requests begun after: {r['candidate_served_after']}")


if __name__ == "__main__":
    main()

"""Serving-process tuning (GIL switch interval, collector) and the scheduling loop's gap between woken cycles."""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from seedance.control import runtime
from seedance.control.service import ControlService


def test_tune_server_process_sets_the_switch_interval_and_freezes_start_up_objects() -> None:
    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    try:
        runtime.tune_server_process(switch_interval_s=0.0005, gc_gen0_threshold=12_345, freeze=True)
        assert sys.getswitchinterval() == pytest.approx(0.0005)
        assert gc.get_threshold() == (12_345, threshold[1], threshold[2])
        assert gc.get_freeze_count() > 10_000  # the modules, classes and app objects made so far
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)
        gc.unfreeze()


def test_the_uvicorn_factory_tunes_its_process_from_the_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from seedance.control import app as app_module

    seen: list[tuple[float, int, bool]] = []
    monkeypatch.setattr(runtime, "tune_server_process", lambda **kw: seen.append(
        (kw["switch_interval_s"], kw["gc_gen0_threshold"], kw["freeze"])))
    monkeypatch.setenv("SEEDANCE_DATABASE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.setenv("SEEDANCE_SWITCH_INTERVAL_MS", "2")
    monkeypatch.setenv("SEEDANCE_GC_FREEZE", "false")
    made = app_module.create_app_from_env()
    made.state.service.close()
    assert seen == [(0.002, 20_000, False)]


def test_a_woken_loop_waits_its_gap_so_wakes_meanwhile_share_one_cycle(
        make_service: Callable[..., ControlService], sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    loop = svc.loop
    loop.interval_s, loop.min_gap_s = 60.0, 0.4
    cycles: list[float] = []
    done = threading.Event()
    real = loop.run_once

    def counted() -> list:  # type: ignore[type-arg]
        cycles.append(time.monotonic())
        if len(cycles) >= 2:
            done.set()
        return real()

    loop.run_once = counted  # type: ignore[method-assign]
    loop.start()
    try:
        time.sleep(0.1)  # the first cycle ran at start; now idle for interval_s
        woken = time.monotonic()
        for _ in range(20):  # a burst of submissions
            loop.wake()
        assert done.wait(10)
        time.sleep(0.3)
    finally:
        loop.stop()
    assert len(cycles) == 2  # one cycle for the whole burst
    assert cycles[1] - woken >= 0.4 - 0.02  # after the gap

"""The GPU heatmap page in real headless Chromium: 519 devices, first paint timed, hover, live updates.

The page draws node × GPU from ``/api/v1/telemetry/heatmap``; the test posts the GPU state of 64
eight-GPU nodes plus one MIG node (7 instances) and a lost GPU, then reads the time from navigation
start to the first painted heatmap (``performance.now()`` after two animation frames, set by the page
as ``data-first-paint-ms``), median of three cold loads (fresh browser contexts) to ride out load spikes
of a shared machine. Goal: ≤ 1000 ms. A screenshot is written to ``tmp_path`` (and to
``$SEEDANCE_SCREENSHOT_DIR`` when set).
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.control.conftest import LiveServer
from tests.control.helpers import ADMIN_TOKEN

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
VIRIDIS_END = (253, 231, 37)
VIRIDIS_MID = (33, 145, 140)
VIRIDIS_START = (68, 1, 84)
NODES, GPUS = 64, 8


@pytest.fixture
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is required for the dashboard tests: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def device(gpu: int, util: float, *, holders: list[dict[str, Any]] | None = None, **kw: Any) -> dict[str, Any]:
    return {"gpu": gpu, "uuid": f"GPU-{gpu}", "model": "H100-80GB", "util_pct": util, "mem_used_mib": 800.0 * util,
            "mem_total_mib": 81559.0, "power_w": 70 + 6.3 * util, "temp_c": 40.0, "cost_usd_h": 12.29,
            "holders": holders or [], **kw}


def post(c: Any, node: str, gpus: list[dict[str, Any]]) -> None:
    r = c.post("/api/v1/telemetry", json={"cluster": "default", "node": node, "gpus": gpus})
    assert r.status_code == 200, r.text


@pytest.fixture
def fleet(live_server: LiveServer) -> LiveServer:
    c = live_server.client()
    share = [{"namespace": "serve", "pod": "chat-a", "container": "main", "allocated": 0.5, "used": 0.3},
             {"namespace": "serve", "pod": "chat-b", "container": "main", "allocated": 0.25, "used": 0.1}]
    for n in range(NODES):
        gpus = [device(g, float((n * GPUS + g) % 101)) for g in range(GPUS)]
        if n == 0:
            gpus = [device(0, 100.0), device(1, 50.0, holders=share), device(2, 0.0), *gpus[3:]]
        post(c, f"gpu-node-{n:03d}", gpus)
    mig = [device(0, 80.0, slice=f"{gi}/0", profile="1g.10gb", fraction=1 / 7, mem_total_mib=9984.0,
                  mem_used_mib=100.0 * gi, cost_usd_h=12.29 / 7,
                  holders=[{"namespace": "ml", "pod": f"tiny-{gi}", "container": "main", "allocated": 1.0,
                            "used": 0.8}]) for gi in range(7)]
    post(c, "mig-node", [*mig, {"gpu": -1, "uuid": "0000:02:00.0", "lost": True}])
    return live_server


def colour_at(page: Any, shot: Any, sel: str) -> tuple[int, int, int]:
    box = page.locator(sel).bounding_box()
    origin = page.locator("#heatmap-svg").bounding_box()
    return tuple(shot.getpixel((int(box["x"] - origin["x"] + box["width"] / 2),
                                int(box["y"] - origin["y"] + box["height"] / 2)))[:3])  # type: ignore[return-value]


def close(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(abs(x - y) <= 3 for x, y in zip(a, b, strict=True))


def first_paint(browser: Any, url: str) -> tuple[float, float, Any, Any, list[str]]:
    """One cold load in a fresh browser context: (first paint ms, data fetched ms, context, page, errors)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)  # wait_for_function evals
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector('#status[data-state="ready"]', timeout=15000)
    body = page.locator("body")
    return (float(body.get_attribute("data-first-paint-ms") or "inf"),
            float(body.get_attribute("data-fetched-ms") or "inf"), ctx, page, errors)


def test_heatmap_of_519_devices_paints_within_a_second(fleet: LiveServer, browser: Any, tmp_path: Path) -> None:
    from PIL import Image

    url = f"{fleet.url}/dashboard/heatmap.html#token={ADMIN_TOKEN}"
    runs = []
    for _ in range(3):  # three cold loads (fresh context, empty cache); the median is the figure
        paint, fetched, ctx, page, errors = first_paint(browser, url)
        runs.append((paint, fetched))
        assert errors == []
        if len(runs) < 3:
            ctx.close()
    first_paint_ms = sorted(p for p, _ in runs)[1]
    print(f"\nheatmap first paint: median {first_paint_ms:.0f} ms of {[round(p) for p, _ in runs]} ms "
          f"(data fetched at {[round(f) for _, f in runs]} ms) for {NODES * GPUS + 7} devices")
    assert page.locator("rect.gpu").count() == NODES * GPUS + 7
    assert first_paint_ms <= 1000.0, first_paint_ms
    assert "lost: mig-node 0000:02:00.0" in page.locator("#lost").inner_text()
    assert "65 nodes, 519 devices" in page.locator("#summary").inner_text()
    shots = [tmp_path / "heatmap.png"]
    if os.environ.get("SEEDANCE_SCREENSHOT_DIR"):
        shots.append(Path(os.environ["SEEDANCE_SCREENSHOT_DIR"]) / "heatmap.png")
    for p in shots:
        page.screenshot(path=str(p), full_page=True)
    shot = Image.open(io.BytesIO(page.locator("#heatmap-svg").screenshot())).convert("RGB")
    cell = 'rect.gpu[data-node="gpu-node-000"][data-gpu="{}"]'
    assert close(colour_at(page, shot, cell.format(0)), VIRIDIS_END)
    assert close(colour_at(page, shot, cell.format(1)), VIRIDIS_MID)
    assert close(colour_at(page, shot, cell.format(2)), VIRIDIS_START)
    # MIG instances split their GPU's cell: seven sub-cells of about 1/7 of it
    mig = page.locator('rect.gpu[data-node="mig-node"][data-gpu="0"]')
    assert mig.count() == 7
    heights = [float(mig.nth(i).get_attribute("height") or 0) for i in range(7)]
    assert all(abs(h - 2.0) < 1e-6 for h in heights)
    # hover shows the pods on a shared GPU and their shares
    page.hover(cell.format(1))
    tip = page.locator("#tip").inner_text()
    assert "serve/chat-a" in tip and "50% held" in tip and "30% used" in tip and "serve/chat-b" in tip
    assert "25% held" in tip and "$12.29/h" in tip
    # colour by memory, then by cost: the same cell changes meaning
    page.select_option("#metric", "cost")
    assert page.locator(cell.format(1)).get_attribute("data-value") == "$12.29/h"
    page.select_option("#metric", "memory")
    assert page.locator(cell.format(1)).get_attribute("data-value") == "49%"
    ctx.close()


def test_heatmap_updates_live(fleet: LiveServer, browser: Any) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    page.goto(f"{fleet.url}/dashboard/heatmap.html#token={ADMIN_TOKEN}")
    page.wait_for_selector('#status[data-state="ready"]', timeout=15000)
    sel = 'rect.gpu[data-node="gpu-node-000"][data-gpu="2"]'
    assert page.locator(sel).get_attribute("data-value") == "0%"
    post(fleet.client(), "gpu-node-000", [device(g, 77.0) for g in range(GPUS)])
    page.wait_for_function(f"document.querySelector('{sel}').dataset.value === '77%'", timeout=15000)
    assert int(page.locator("#status").get_attribute("data-updates") or 0) >= 2
    page.close()

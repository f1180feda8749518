"""The web dashboard in real headless Chromium (Debian ``chromium`` driven by Playwright).

The heatmap check is on pixels: a screenshot of the heatmap is decoded and the colour at the centre
of three cells (a full, a half and an empty GPU) must be the colour scale's value for them.
"""

from __future__ import annotations

import io
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
VIRIDIS_END = (253, 231, 37)  # colour of a fully allocated GPU
VIRIDIS_MID = (33, 145, 140)  # half allocated
VIRIDIS_START = (68, 1, 84)  # idle


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


@pytest.fixture
def populated(live_server: LiveServer) -> LiveServer:
    c = live_server.client()
    c.post("/api/v1/clusters", json={"name": "default"})
    for i in range(3):
        c.post("/api/v1/clusters/default/nodes", json={
            "name": f"node-{i}", "cpu_milli": 64000, "memory_mib": 512000, "gpu_count": 4, "gpu_model": "A100-80GB",
            "labels": {"gpu.sla.level": "gold" if i == 0 else "bronze"}})
    assert c.patch("/api/v1/clusters/default/nodes/node-2", json={"status": "cordoned"}).status_code == 200
    c.post("/api/v1/jobs", json={"gpus": 4, "tier": "gold", "name": "full"})
    c.post("/api/v1/jobs", json={"gpus": 0.5, "tier": "bronze", "name": "half"})
    c.post("/api/v1/jobs", json={"gpus": 4, "tier": "bronze", "name": "waits", "cpu_milli": 64000})
    live_server.service.loop.run_once()
    # which node got what is the policy's business; the test reads it back
    jobs = {j["name"]: j for j in c.get("/api/v1/jobs").json()["items"]}
    assert jobs["full"]["status"] == "running" and jobs["half"]["status"] == "running"
    assert jobs["waits"]["status"] == "pending"
    return live_server


def cell_colour(page: Any, shot: Any, node: str, gpu: int) -> tuple[int, int, int]:
    box = page.locator(f'rect.gpu[data-node="{node}"][data-gpu="{gpu}"]').bounding_box()
    origin = page.locator("#heatmap-svg").bounding_box()
    x = int(box["x"] - origin["x"] + box["width"] / 2)
    y = int(box["y"] - origin["y"] + box["height"] / 2)
    return tuple(shot.getpixel((x, y))[:3])  # type: ignore[return-value]


def test_dashboard_renders_heatmap_tiers_reasons_and_cost(populated: LiveServer, browser: Any,
                                                          tmp_path: Path) -> None:
    from PIL import Image

    c = populated.client()
    jobs = {j["name"]: j for j in c.get("/api/v1/jobs").json()["items"]}
    full_node, half_node = jobs["full"]["node"], jobs["half"]["node"]
    half_gpu = jobs["half"]["gpu_indices"][0]
    idle_node = "node-2"  # cordoned: nothing lands there
    page = browser.new_page(viewport={"width": 1300, "height": 900}, bypass_csp=True)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{populated.url}/dashboard/#token={ADMIN_TOKEN}")
    page.wait_for_selector('#status[data-state="ready"]', timeout=15000)
    assert errors == []
    assert all(u.startswith(populated.url) for u in requests), "the page fetched something off the server"
    assert "token=" not in page.url  # the token left the address bar
    assert page.locator("rect.gpu").count() == 12
    assert page.locator(f'rect.gpu[data-node="{full_node}"][data-milli="1000"]').count() == 4
    assert page.locator(f'rect.gpu[data-node="{half_node}"][data-gpu="{half_gpu}"]').get_attribute(
        "data-milli") == "500"
    tiers = page.locator("#tiers").inner_text()
    assert "gold" in tiers and "bronze" in tiers and "pending" in tiers and "running" in tiers
    reasons = page.locator("#reasons").inner_text()
    assert "no node fits now" in reasons and "waits" in reasons
    assert "node-2 (cordoned)" in page.locator("#heatmap").inner_text()
    path = page.locator("#cost-line").get_attribute("d") or ""
    assert path.startswith("M") and path.count("L") >= 50
    # pixels: take the screenshot and read the colour at the centre of three cells
    png = page.locator("#heatmap-svg").screenshot()
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    shot = Image.open(io.BytesIO(png)).convert("RGB")

    def close(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
        return all(abs(x - y) <= 3 for x, y in zip(a, b, strict=True))

    assert close(cell_colour(page, shot, full_node, 0), VIRIDIS_END)
    assert close(cell_colour(page, shot, half_node, half_gpu), VIRIDIS_MID)
    assert close(cell_colour(page, shot, idle_node, 3), VIRIDIS_START)
    colours = {shot.getpixel((x, y)) for x in range(0, shot.width, 7) for y in range(0, shot.height, 5)}
    assert len(colours) > 3  # labels, three cell colours, background: it really drew something
    page.close()


def test_dashboard_asks_for_a_token_and_refuses_a_bad_one(populated: LiveServer, browser: Any) -> None:
    page = browser.new_page(bypass_csp=True)
    page.goto(f"{populated.url}/dashboard/")
    page.wait_for_selector("#login:not([hidden])", timeout=10000)
    assert page.locator("#status").inner_text() == "token needed"
    page.fill("#token", "sdt_wrong")
    page.click("#login button")
    page.wait_for_function("document.getElementById('status').textContent === 'token refused'", timeout=10000)
    assert page.locator("#panels").is_hidden()
    page.fill("#token", ADMIN_TOKEN)
    page.click("#login button")
    page.wait_for_selector('#status[data-state="ready"]', timeout=10000)
    assert page.locator("rect.gpu").count() == 12
    page.close()

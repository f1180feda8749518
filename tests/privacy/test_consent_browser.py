"""The consent dialog in real headless Chromium: without a "granted" decision the page makes zero
third-party requests and sends no telemetry; refusing keeps it so after a reload; accepting loads the
flow's third-party script and first-party telemetry. Requests are counted with Playwright's ``request``
event; every off-server request is answered locally (nothing leaves the machine)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from seedance.privacy.models import ConsentRecord, TelemetryEvent
from tests.control.helpers import ADMIN_TOKEN, serve_in_thread
from tests.control.test_dashboard import browser  # noqa: F401  (fixture: Debian chromium via Playwright)
from tests.privacy.conftest import Env
from tests.privacy.helpers import occurrences


@pytest.fixture
def site(env: Env) -> Iterator[str]:
    from seedance.control.app import create_app

    app = create_app(service=env.control)
    app.state.privacy = env.privacy
    url, stop = serve_in_thread(app)
    try:
        yield url
    finally:
        stop()


class Page:
    def __init__(self, chromium: Any, url: str) -> None:
        self.url = url
        self.ctx = chromium.new_context(bypass_csp=True)  # the probes below evaluate strings; the page's CSP forbids it
        self.requests: list[tuple[str, str]] = []
        self.ctx.route("**/*", self._route)
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append((r.method, r.url)))

    def _route(self, route: Any) -> None:
        if route.request.url.startswith(self.url):
            route.continue_()
        else:  # a third party: answer here, count it (the request event fired already)
            route.fulfill(status=200, content_type="application/javascript", body="window.thirdPartyLoaded = true;")

    def open(self) -> None:
        self.page.goto(f"{self.url}/dashboard/#token={ADMIN_TOKEN}")
        self.page.wait_for_selector('#status[data-state="ready"]', timeout=15000)
        self.page.wait_for_function("document.getElementById('consent') && document.getElementById('consent')"
                                    ".dataset.step !== undefined", timeout=10000)

    def third_party(self) -> list[str]:
        return [u for _, u in self.requests if not u.startswith(self.url)]

    def telemetry_posts(self) -> list[str]:
        return [u for m, u in self.requests if m == "POST" and "/api/v1/telemetry/" in u]

    def click(self, does: str) -> None:
        self.page.click(f'#consent button[data-does="{does}"]')


def test_no_decision_and_refusal_load_no_third_party(site: str, env: Env, browser: Any) -> None:  # noqa: F811
    p = Page(browser, site)
    p.open()
    assert p.page.locator("#consent").get_attribute("data-step") == "choose"
    assert p.page.locator("#consent").is_visible()
    labels = p.page.locator("#consent button").all_inner_texts()
    assert labels == ["Accept", "Do Not Sell or Share My Personal Information"]
    p.page.wait_for_timeout(500)
    assert p.third_party() == []  # undecided: nothing optional
    p.click("refuse")
    assert p.page.locator("#consent").get_attribute("data-step") == "confirm"
    assert "Do Not Sell" in p.page.locator("#consent .consent-choice").inner_text()
    p.click("back")  # the second step can go back to the first
    assert p.page.locator("#consent").get_attribute("data-step") == "choose"
    p.click("refuse")
    p.click("confirm")
    assert p.page.locator("#consent").is_hidden()
    assert p.page.evaluate("window.seedanceTelemetry.flush()") is None  # refused: nothing to send
    p.page.wait_for_timeout(300)
    p.page.reload()
    p.page.wait_for_selector('#status[data-state="ready"]', timeout=15000)
    p.page.wait_for_function("document.getElementById('consent').dataset.step === 'done'", timeout=10000)
    assert p.page.locator("#consent").is_hidden()  # remembered
    p.page.wait_for_timeout(500)
    assert p.third_party() == [] and p.telemetry_posts() == []
    assert p.page.evaluate("window.thirdPartyLoaded === true") is False
    assert p.errors == []
    with env.control.db.read() as s:
        recs = [(r.choice, r.purposes) for r in s.scalars(select(ConsentRecord))]
    assert recs == [("refused", {"usage_telemetry": False, "third_party_analytics": False})]
    p.ctx.close()


def test_accepting_loads_the_declared_script_and_telemetry(site: str, env: Env, browser: Any) -> None:  # noqa: F811
    p = Page(browser, site)
    p.open()
    p.click("grant")
    p.click("confirm")
    p.page.wait_for_function("window.thirdPartyLoaded === true", timeout=10000)
    assert p.third_party() == ["https://analytics.example.com/collect.js"]
    status = p.page.evaluate("window.seedanceTelemetry.flush()")
    assert status == 202
    device_id = p.page.evaluate("localStorage.getItem('seedance-device-id')")
    with env.control.db.read() as s:
        actions = sorted(s.scalars(select(TelemetryEvent.action)))
        recs = [r.choice for r in s.scalars(select(ConsentRecord))]
    assert actions == ["consent_granted"] and recs == ["granted"]  # the page view before consent was not kept
    assert occurrences(env, device_id) == []  # the browser's device id is stored nowhere
    assert p.errors == []
    p.ctx.close()

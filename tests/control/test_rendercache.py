"""``RenderCache`` (exact renders and ages on a hand-driven clock, single flight, eviction) and the
dashboard's data call served from it: one render per window for every tab of one scope, tenants apart."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from seedance.control.rendercache import RenderCache
from tests.control.conftest import LiveServer
from tests.control.helpers import ADMIN_TOKEN


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def counting(body: bytes) -> tuple[Callable[[], bytes], list[int]]:
    calls = [0]

    def render() -> bytes:
        calls[0] += 1
        return body + str(calls[0]).encode()

    return render, calls


def test_a_body_is_served_until_its_ttl_then_rendered_again() -> None:
    clock = Clock()
    cache = RenderCache(5.0, clock=clock)
    render, calls = counting(b"v")
    assert cache.get("k", render) == (b"v1", 0.0)
    clock.t += 4.5
    assert cache.get("k", render) == (b"v1", 4.5)
    clock.t += 0.5  # exactly ttl old: stale
    assert cache.get("k", render) == (b"v2", 0.0)
    assert calls == [2]
    other, other_calls = counting(b"o")
    assert cache.get("other", other) == (b"o1", 0.0)  # keys apart
    assert cache.get("k", render) == (b"v2", 0.0) and other_calls == [1]
    cache.clear()
    assert cache.get("k", render) == (b"v3", 0.0)


def test_ttl_zero_renders_every_call_and_errors_are_not_kept() -> None:
    render, calls = counting(b"x")
    cache = RenderCache(0.0)
    assert [cache.get("k", render)[0] for _ in range(3)] == [b"x1", b"x2", b"x3"]
    kept = RenderCache(60.0)

    def boom() -> bytes:
        raise LookupError("no such cluster")

    with pytest.raises(LookupError):
        kept.get("k", boom)
    assert kept.get("k", render)[0] == b"x4"  # the failure left nothing behind
    with pytest.raises(ValueError, match="ttl_s must be >= 0"):
        RenderCache(-1.0)


def test_least_recently_stored_key_is_evicted() -> None:
    cache = RenderCache(60.0, max_items=2)
    renders: list[str] = []

    def make(key: str) -> Callable[[], bytes]:
        return lambda: (renders.append(key), key.encode())[1]

    for key in ("a", "b", "c", "b", "a"):
        cache.get(key, make(key))
    assert renders == ["a", "b", "c", "a"]  # "a" was evicted by "c"; "b" stayed


def test_concurrent_callers_of_one_key_share_one_render() -> None:
    cache = RenderCache(60.0)
    started = threading.Event()
    release = threading.Event()
    calls = [0]

    def slow() -> bytes:
        calls[0] += 1
        started.set()
        release.wait(10)
        return b"body"

    got: list[bytes] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get("k", slow)[0])) for _ in range(6)]
    threads[0].start()
    assert started.wait(10)
    for t in threads[1:]:
        t.start()
    time.sleep(0.05)  # the others are waiting on the first render
    release.set()
    for t in threads:
        t.join(10)
    assert got == [b"body"] * 6 and calls == [1]


def test_dashboard_tabs_share_a_render_per_scope(live_server_factory: Callable[..., LiveServer],
                                                 sqlite_url: str) -> None:
    server = live_server_factory(sqlite_url, dashboard_cache_s=60.0)
    admin = server.client()
    admin.post("/api/v1/clusters", json={"name": "default"})
    tid = admin.post("/api/v1/tenants", json={"name": "tenant-a"}).json()["id"]
    member = server.client(admin.post("/api/v1/tokens", json={"name": "m", "role": "member",
                                                               "tenant_id": tid}).json()["token"])
    assert member.post("/api/v1/jobs", json={"name": "a-job", "gpus": 1}).status_code in (200, 201)
    first = admin.get("/api/v1/dashboard")
    assert first.status_code == 200 and first.headers["age"] == "0"
    assert first.json()["jobs_by_tier_status"] == {"bronze": {"pending": 1}}
    admin.post("/api/v1/jobs", json={"name": "admin-job", "gpus": 1})
    again = admin.get("/api/v1/dashboard")
    assert again.content == first.content  # within the window: the same render, the new job not yet in it
    mine = member.get("/api/v1/dashboard")  # another scope: its own render, of its one job
    assert mine.json()["jobs_by_tier_status"] == {"bronze": {"pending": 1}}
    assert admin.get("/api/v1/dashboard", params={"window_h": 12}).json()["jobs_by_tier_status"] == {
        "bronze": {"pending": 2}}  # another window: rendered now
    server.service.dashboard_cache.clear()
    assert admin.get("/api/v1/dashboard").json()["jobs_by_tier_status"] == {"bronze": {"pending": 2}}
    assert admin.get("/api/v1/dashboard", params={"cluster": "nope"}).status_code == 404


def test_dashboard_without_a_cache_renders_every_call(live_server_factory: Callable[..., LiveServer],
                                                      sqlite_url: str) -> None:
    server = live_server_factory(sqlite_url, dashboard_cache_s=0.0)
    admin = server.client(ADMIN_TOKEN)
    admin.post("/api/v1/clusters", json={"name": "default"})
    assert admin.get("/api/v1/dashboard").json()["jobs_by_tier_status"] == {}
    admin.post("/api/v1/jobs", json={"name": "j", "gpus": 1})
    assert admin.get("/api/v1/dashboard").json()["jobs_by_tier_status"] == {"bronze": {"pending": 1}}

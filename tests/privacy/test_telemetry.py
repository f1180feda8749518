"""``POST /api/v1/telemetry/events``: anonymised storage, the raw device id stored nowhere, bad input refused whole."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import select

from seedance.privacy.anonymize import behaviour_entropy, session_id
from seedance.privacy.models import SubjectActivity, TelemetryEvent
from tests.privacy.conftest import Env, client_for
from tests.privacy.helpers import WEBGL, batch, occurrences, table_count

DEVICE = "dev-7f3a9c21-e4b8-4d6a-9f00-1234567890ab"


def test_anonymous_batch_is_stored_anonymised(env: Env) -> None:
    with client_for(env) as c:
        body = batch(env, DEVICE, actions=("view", "view", "click", "refresh"), fingerprint=WEBGL)
        r = c.post("/api/v1/telemetry/events", json=body)
        assert r.status_code == 202, r.text
        out = r.json()
    assert out["accepted"] == 4 and out["entropy"] == behaviour_entropy(["view", "view", "click", "refresh"]) == 1.5
    with env.control.db.read() as s:
        rows = list(s.scalars(select(TelemetryEvent).order_by(TelemetryEvent.id)))
        key_id, key = env.privacy.ring.current(s, "session", env.clock())
    assert [r.action for r in rows] == ["view", "view", "click", "refresh"]
    assert {r.session_id for r in rows} == {out["session_id"]}
    start = dt.datetime.fromisoformat(body["session_started_at"])
    assert out["session_id"] == session_id(key, DEVICE, start)  # HMAC under the current rotated key
    assert {r.key_id for r in rows} == {key_id} and key_id.startswith("session:")
    assert all(r.occurred_at.microsecond == 0 for r in rows)
    assert all(r.subject_id is None and r.entropy == 1.5 for r in rows)
    assert table_count(env, SubjectActivity) == 0  # no subject: nothing derived per person


def test_raw_device_id_is_never_stored_anywhere(env: Env) -> None:
    with client_for(env) as c:
        assert c.post("/api/v1/privacy/subjects", json={"subject": "ada@example.org",
                                                        "traits": {"email": "ada@example.org"}}).status_code == 201
        for subject in (None, "ada@example.org"):
            r = c.post("/api/v1/telemetry/events", json=batch(env, DEVICE, subject=subject, fingerprint=WEBGL))
            assert r.status_code == 202, r.text
        r = c.post("/api/v1/privacy/consents", json={"flow_version": "2.0.0", "choice": "refused", "purposes": {},
                                                     "device_id": DEVICE, "subject": "ada@example.org"})
        assert r.status_code == 201, r.text
    assert table_count(env, TelemetryEvent) == 4
    assert occurrences(env, DEVICE) == []  # not in any table, not in any Redis key or value
    assert occurrences(env, "ada@example.org") == []  # the profile is sealed; no cache was read yet


def test_subject_batches_use_the_subjects_key_and_feed_the_daily_rollup(env: Env) -> None:
    with client_for(env) as c:
        c.post("/api/v1/privacy/subjects", json={"subject": "bob@example.org"})
        r = c.post("/api/v1/telemetry/events", json=batch(env, DEVICE, subject="bob@example.org",
                                                          actions=("a", "b", "a", "b")))
        assert r.status_code == 202
        r2 = c.post("/api/v1/telemetry/events", json=batch(env, DEVICE, subject="bob@example.org", actions=("a",)))
        assert r2.status_code == 202
    with env.control.db.read() as s:
        rows = list(s.scalars(select(TelemetryEvent)))
        roll = list(s.scalars(select(SubjectActivity)))
    assert {r.key_id for r in rows} == {"subject"} and len({r.subject_id for r in rows}) == 1
    assert [(a.events, a.batches, a.entropy_sum) for a in roll] == [(5, 2, 4 * 1.0 + 0.0)]


BAD: list[tuple[str, Any, int, str]] = [
    ("not json", b"{nope", 400, "not valid JSON"),
    ("no events", {"device_id": DEVICE, "session_started_at": "2026-01-01T00:00:00Z", "events": []}, 422, "events"),
    ("bad action", {"device_id": DEVICE, "session_started_at": "2026-01-01T00:00:00Z",
                    "events": [{"action": "DROP TABLE", "at": "2026-01-01T00:00:00Z"}]}, 422, "action"),
    ("naive time", {"device_id": DEVICE, "session_started_at": "2026-01-01T00:00:00",
                    "events": [{"action": "view", "at": "2026-01-01T00:00:00Z"}]}, 422, "time zone"),
    ("short device id", {"device_id": "abc", "session_started_at": "2026-01-01T00:00:00Z",
                         "events": [{"action": "view", "at": "2026-01-01T00:00:00Z"}]}, 422, "device_id"),
    ("unknown field", {"device_id": DEVICE, "session_started_at": "2026-01-01T00:00:00Z", "ip": "10.0.0.1",
                       "events": [{"action": "view", "at": "2026-01-01T00:00:00Z"}]}, 422, "ip"),
    ("time as number", {"device_id": DEVICE, "session_started_at": 1767225600,
                        "events": [{"action": "view", "at": "2026-01-01T00:00:00Z"}]}, 422, "RFC 3339"),
]


@pytest.mark.parametrize(("name", "body", "status", "says"), BAD, ids=[b[0] for b in BAD])
def test_malformed_batches_are_refused_whole(env: Env, name: str, body: Any, status: int, says: str) -> None:
    with client_for(env) as c:
        if isinstance(body, bytes):
            r = c.post("/api/v1/telemetry/events", content=body, headers={"Content-Type": "application/json"})
        else:
            r = c.post("/api/v1/telemetry/events", json=body)
    assert r.status_code == status, r.text
    assert says in r.text
    assert table_count(env, TelemetryEvent) == 0
    assert list(env.privacy.redis.scan_iter(match=env.privacy.prefix + "*")) == []


def test_times_out_of_bounds_and_batch_size_refused_with_the_field(make_env: Any, sqlite_url: str) -> None:
    env = make_env(sqlite_url, max_events_per_batch=3)
    with client_for(env) as c:
        future = batch(env, DEVICE)
        future["events"][1]["at"] = (env.clock() + dt.timedelta(hours=1)).isoformat()
        r = c.post("/api/v1/telemetry/events", json=future)
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "body.events.1.at"
        assert "in the future" in r.json()["detail"] and "nothing was stored" in r.json()["detail"]
        old = batch(env, DEVICE, start=env.clock() - dt.timedelta(days=30))
        r = c.post("/api/v1/telemetry/events", json=old)
        assert r.status_code == 422 and "older than" in r.json()["detail"]
        r = c.post("/api/v1/telemetry/events", json=batch(env, DEVICE, actions=("a", "b", "c", "d")))
        assert r.status_code == 422 and "at most 3" in r.json()["detail"]
        late = batch(env, DEVICE)
        late["session_started_at"] = (env.clock() + dt.timedelta(minutes=10)).isoformat()
        r = c.post("/api/v1/telemetry/events", json=late)
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "body.session_started_at"
    assert table_count(env, TelemetryEvent) == 0


def test_oversize_payload_is_413_and_nothing_stored(env: Env) -> None:
    huge = batch(env, DEVICE, actions=tuple("view" for _ in range(3000)))
    with client_for(env) as c:
        r = c.post("/api/v1/telemetry/events", json=huge)
    assert r.status_code == 413 and "nothing was stored" in r.json()["detail"]
    assert table_count(env, TelemetryEvent) == 0


def test_unknown_subject_is_404_and_nothing_stored(env: Env) -> None:
    with client_for(env) as c:
        r = c.post("/api/v1/telemetry/events", json=batch(env, DEVICE, subject="nobody@example.org"))
    assert r.status_code == 404 and "unknown subject" in r.json()["detail"]
    assert table_count(env, TelemetryEvent) == 0
    assert list(env.privacy.redis.scan_iter(match=env.privacy.prefix + "*")) == []


def test_ingestion_needs_a_token(env: Env) -> None:
    with client_for(env, token=None) as c:
        assert c.post("/api/v1/telemetry/events", json=batch(env, DEVICE)).status_code == 401

"""Builders shared by the privacy tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from seedance.privacy.scan import Needle, NeedleIndex, scan_database, scan_redis
from tests.privacy.conftest import Env

WEBGL = {"webgl_vendor": "Google Inc. (Google)", "webgl_renderer": "ANGLE (Google, SwiftShader Device)",
         "webgl_params": "ab" * 16, "webgl_render": "cd" * 16, "screen": "1920x1080", "timezone": "UTC",
         "languages": ["en-US"], "platform": "Linux x86_64", "hardware_concurrency": 8}


def batch(env: Env, device_id: str, *, subject: str | None = None, actions: tuple[str, ...] = ("view", "click"),
          fingerprint: dict[str, Any] | None = None, start: dt.datetime | None = None) -> dict[str, Any]:
    """A telemetry batch body at the env's clock."""
    t0 = start or env.clock() - dt.timedelta(seconds=30)
    body: dict[str, Any] = {
        "device_id": device_id, "session_started_at": t0.isoformat(),
        "events": [{"action": a, "at": (t0 + dt.timedelta(seconds=i, milliseconds=250)).isoformat()}
                   for i, a in enumerate(actions)],
    }
    if subject is not None:
        body["subject"] = subject
    if fingerprint is not None:
        body["fingerprint"] = fingerprint
    return body


def occurrences(env: Env, *values: str) -> list[str]:
    """Every place in the store (all tables) and in Redis (all keys of the env) holding one of ``values``."""
    index = NeedleIndex(Needle("x", "probe", v) for v in values)
    found = scan_database(env.control.db, index, store="db").findings
    found += scan_redis(env.privacy.redis, env.privacy.prefix, index).findings
    return sorted(f"{f.store}:{f.location}" for f in found)


def table_count(env: Env, model: Any) -> int:
    from sqlalchemy import func, select

    with env.control.db.read() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)

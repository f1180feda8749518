"""Keep the privacy side of apps built by other tests off shared state.

Apps built with ``create_app`` get their ``PrivacyService`` from ``SEEDANCE_PRIVACY_*`` at start-up.
``isolated_privacy_env`` points those at a per-test Redis key prefix (deleted afterwards), a fresh
master key and temporary audit and backup folders, with the worker off.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from seedance.privacy.crypto import encode_key, new_key

REDIS_URL = os.environ.get("SEEDANCE_TEST_REDIS", "redis://127.0.0.1:6379/0")


def isolated_privacy_env(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Set the variables; yields the prefix; deletes its Redis keys afterwards (best effort)."""
    prefix = f"sdtest:{os.getpid()}:{secrets.token_hex(4)}:"
    for name, value in (("REDIS_URL", REDIS_URL), ("REDIS_PREFIX", prefix), ("MASTER_KEY", encode_key(new_key())),
                        ("AUDIT_DIR", str(tmp / "privacy-audit")), ("BACKUP_DIR", str(tmp / "privacy-backups")),
                        ("WORKER_ENABLED", "false")):
        monkeypatch.setenv(f"SEEDANCE_PRIVACY_{name}", value)
    yield prefix
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL, decode_responses=True, socket_connect_timeout=1)
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
    except redis.RedisError:  # nothing was written if Redis was never reachable
        pass

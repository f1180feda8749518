"""``PrivacyService``: everything the privacy routes, the CLI and the erasure worker share.

Built on a :class:`~seedance.control.service.ControlService` (its store, metrics registry and
settings); adds Redis, the key vault, the consent flow and a clock (tests inject one). Nothing is
module-global: two services never share state. Construction does no I/O; the master key, the
consent flow and Redis connections are opened on first use.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seedance.control.db.models import utcnow
from seedance.control.paths import home_dir
from seedance.privacy.consent import ConsentFlow, load_consent_flow
from seedance.privacy.errors import ServiceUnavailable
from seedance.privacy.expiring import ExpiringSet
from seedance.privacy.keys import KeyRing, RingPolicy, SubjectKeys, load_master_key
from seedance.privacy.metrics import PrivacyMetrics
from seedance.privacy.settings import PrivacySettings

if TYPE_CHECKING:
    from seedance.control.service import ControlService

HOUR = 3600.0


class PrivacyService:
    """The privacy side of one control-plane instance.

    Args:
        control: The control-plane service (store, metrics registry, settings).
        settings: Privacy settings (default: from ``SEEDANCE_PRIVACY_*``).
        redis: A ``redis.Redis`` client with ``decode_responses=True`` (default: from ``redis_url``).
        clock: Returns the current time, timezone-aware UTC.
        metrics: Privacy series (default: registered in ``control.metrics.registry``).
    """

    def __init__(
        self, control: ControlService, settings: PrivacySettings | None = None, *, redis: Any = None,
        clock: Callable[[], dt.datetime] | None = None, metrics: PrivacyMetrics | None = None,
    ) -> None:
        self.control = control
        self.db = control.db
        self.settings = settings or PrivacySettings()
        if redis is None:
            import redis as redis_lib

            redis = redis_lib.Redis.from_url(self.settings.redis_url, decode_responses=True, socket_timeout=10,
                                             socket_connect_timeout=5)
        self.redis = redis
        self.prefix = self.settings.redis_prefix
        self.metrics = metrics or PrivacyMetrics(control.metrics.registry)
        self.clock: Callable[[], dt.datetime] = clock or utcnow
        self.blacklist = ExpiringSet(redis, self.key("fp", "blacklist"))
        self.verified = ExpiringSet(redis, self.key("fp", "verified"))
        self._lock = threading.Lock()
        self._master: bytes | None = None
        self._keys: SubjectKeys | None = None
        self._ring: KeyRing | None = None
        self._flow: ConsentFlow | None = None

    # ------------------------------------------------------------------------------ wiring
    def key(self, *parts: str) -> str:
        """A Redis key under this service's prefix."""
        return self.prefix + ":".join(parts)

    @property
    def master_key(self) -> bytes:
        """The key-encryption key (read or, in local mode, created on first use)."""
        with self._lock:
            if self._master is None:
                secret = self.settings.master_key.get_secret_value() if self.settings.master_key else None
                local = self.control.settings.environment == "local"
                self._master = load_master_key(secret, home=home_dir() if local else None, local=local)
            return self._master

    @property
    def keys(self) -> SubjectKeys:
        """Subjects' data keys."""
        master = self.master_key
        with self._lock:
            if self._keys is None:
                self._keys = SubjectKeys(master)
            return self._keys

    @property
    def ring(self) -> KeyRing:
        """Rotated HMAC keys."""
        master = self.master_key
        s = self.settings
        with self._lock:
            if self._ring is None:
                self._ring = KeyRing(master, {
                    "session": RingPolicy(s.session_key_rotation_hours * HOUR, s.session_key_retention_hours * HOUR),
                    "device": RingPolicy(s.device_key_rotation_hours * HOUR, s.device_key_retention_hours * HOUR),
                })
            return self._ring

    @property
    def consent_flow(self) -> ConsentFlow:
        """The validated consent flow document."""
        with self._lock:
            if self._flow is None:
                self._flow = load_consent_flow(self.settings.consent_flow_file)
            return self._flow

    @property
    def audit_dir(self) -> Path:
        """Folder of the Parquet audit logs."""
        return self.settings.audit_dir or home_dir() / "audit_logs"

    @property
    def backup_dir(self) -> Path:
        """Folder of the data backups."""
        return self.settings.backup_dir or home_dir() / "backups"

    def forget_keys(self, key_ids: list[str]) -> None:
        """Drop destroyed HMAC keys from this process's cache."""
        with self._lock:
            ring = self._ring
        if ring is not None and key_ids:
            ring.forget(key_ids)

    def now(self) -> dt.datetime:
        """The service clock."""
        return self.clock()

    @contextmanager
    def redis_errors(self) -> Iterator[None]:
        """Turn an unreachable Redis into a 503 with the URL to check."""
        import redis as redis_lib

        try:
            yield
        except (redis_lib.ConnectionError, redis_lib.TimeoutError) as exc:
            raise ServiceUnavailable(f"Redis is required for privacy operations and is not reachable at "
                                     f"{self.settings.redis_url}: {exc}") from None

    def close(self) -> None:
        """Close the Redis connections."""
        self.redis.close()

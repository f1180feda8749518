"""What ``seedancectl privacy`` talks to: a server (``RemotePrivacyClient``) or the local store.

Both return the API's JSON shapes. The local client runs the very services the server runs, on
the embedded SQLite store in ``$SEEDANCE_HOME`` as the local admin, with Redis and the master key
from ``SEEDANCE_PRIVACY_*``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from seedance.control.client import ClientError, RemoteClient


class PrivacyClient(ABC):
    """Operations of the privacy commands."""

    @abstractmethod
    def identify(self, subject: str, traits: dict[str, str]) -> dict[str, Any]:
        """Register a subject."""

    @abstractmethod
    def request_erasure(self, subject: str, device_ids: list[str]) -> dict[str, Any]:
        """Record an erasure request."""

    @abstractmethod
    def run_erasures(self) -> list[dict[str, Any]]:
        """Execute and verify open requests."""

    @abstractmethod
    def list_requests(self, status: str | None, limit: int) -> list[dict[str, Any]]:
        """Requests, newest first."""

    @abstractmethod
    def get_request(self, request_id: int) -> dict[str, Any]:
        """One request."""

    @abstractmethod
    def backup(self) -> dict[str, Any]:
        """Take a backup."""

    @abstractmethod
    def blacklist(self) -> list[dict[str, Any]]:
        """Live blacklist entries."""

    @abstractmethod
    def sweep(self) -> dict[str, Any]:
        """Run the maintenance pass."""

    def close(self) -> None:  # noqa: B027  (optional hook)
        """Release connections."""


class RemotePrivacyClient(PrivacyClient):
    """HTTP client of a server's privacy routes."""

    def __init__(self, server: str, token: str | None) -> None:
        self._c = RemoteClient(server, token)

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        return self._c._call(method, path, retry=method == "GET", **kw)

    def identify(self, subject: str, traits: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = self._call("POST", "/api/v1/privacy/subjects", json={"subject": subject,
                                                                                   "traits": traits})
        return out

    def request_erasure(self, subject: str, device_ids: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = self._call("POST", "/api/v1/privacy/erasure-requests",
                                         json={"subject": subject, "device_ids": device_ids})
        return out

    def run_erasures(self) -> list[dict[str, Any]]:
        return list(self._call("POST", "/api/v1/privacy/erasures/run")["items"])

    def list_requests(self, status: str | None, limit: int) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit, **({"status": status} if status else {})}
        return list(self._call("GET", "/api/v1/privacy/erasure-requests", params=params)["items"])

    def get_request(self, request_id: int) -> dict[str, Any]:
        out: dict[str, Any] = self._call("GET", f"/api/v1/privacy/erasure-requests/{request_id}")
        return out

    def backup(self) -> dict[str, Any]:
        out: dict[str, Any] = self._call("POST", "/api/v1/privacy/backups")
        return out

    def blacklist(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/api/v1/privacy/blacklist"))

    def sweep(self) -> dict[str, Any]:
        out: dict[str, Any] = self._call("POST", "/api/v1/privacy/sweep")
        return out

    def close(self) -> None:
        self._c.close()


class LocalPrivacyClient(PrivacyClient):
    """The local store, driven through the server's privacy services."""

    def __init__(self, database_url: str | None = None) -> None:
        from seedance.control.client import LocalClient
        from seedance.privacy.service import PrivacyService

        self._local = LocalClient(database_url)
        self.me = self._local.principal
        self.svc = PrivacyService(self._local.service)

    def identify(self, subject: str, traits: dict[str, str]) -> dict[str, Any]:
        from seedance.privacy.subjects import identify

        with self.svc.redis_errors(), self.svc.db.write() as s:
            sid, created = identify(self.svc, session=s, tenant_id=self.me.tenant_id, external_id=subject,
                                    traits=traits)
        return {"subject_id": sid, "created": created}

    def request_erasure(self, subject: str, device_ids: list[str]) -> dict[str, Any]:
        from seedance.privacy.erasure import request_erasure
        from seedance.privacy.schemas import ErasureCreate

        out, _ = request_erasure(self.svc, self.me, ErasureCreate(subject=subject, device_ids=device_ids))
        return out.model_dump(mode="json")

    def run_erasures(self) -> list[dict[str, Any]]:
        from seedance.privacy.erasure import run_erasures

        return [r.model_dump(mode="json") for r in run_erasures(self.svc)]

    def list_requests(self, status: str | None, limit: int) -> list[dict[str, Any]]:
        from seedance.privacy.erasure import list_requests

        return [r.model_dump(mode="json") for r in list_requests(self.svc, self.me, status=status, limit=limit)]

    def get_request(self, request_id: int) -> dict[str, Any]:
        from seedance.privacy.erasure import get_request

        return get_request(self.svc, self.me, request_id).model_dump(mode="json")

    def backup(self) -> dict[str, Any]:
        from seedance.privacy.backup import take_backup
        from seedance.privacy.schemas import BackupRead

        return BackupRead.model_validate(take_backup(self.svc)).model_dump(mode="json")

    def blacklist(self) -> list[dict[str, Any]]:
        import datetime as dt

        with self.svc.redis_errors():
            members = self.svc.blacklist.members(self.svc.now().timestamp())
        return [{"device_tag": m, "expires_at": dt.datetime.fromtimestamp(t, dt.UTC).isoformat()} for m, t in members]

    def sweep(self) -> dict[str, Any]:
        from seedance.privacy.maintenance import sweep

        return sweep(self.svc).model_dump(mode="json")

    def close(self) -> None:
        self.svc.close()
        self._local.close()


__all__ = ["ClientError", "LocalPrivacyClient", "PrivacyClient", "RemotePrivacyClient"]

"""What the safe-change commands talk to: a control-plane server, or the local embedded store.

The same operations either way (system facts, evidence, override records, dry runs), as the job
commands' ``ControlClient``: with a ``seedancectl config`` context they call the server's
``/api/v1/compliance/*`` and ``/api/v1/policies/dry-run`` routes; without one they run the server's
services on the local store (``$SEEDANCE_HOME/local.db``) as the local admin.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any

from seedance.compliance.facts import SystemFacts
from seedance.control.client import ClientError

TOKEN_ENV = "SEEDANCE_TOKEN"


class SafeChangeClient(ABC):
    """Safe-change operations against one control plane."""

    where: str

    @abstractmethod
    def facts(self) -> SystemFacts:
        """The control plane's compliance facts."""

    @abstractmethod
    def record_override(self, *, policy: str, reason: str, config_yaml: str, source: str) -> dict[str, Any]:
        """Log a policy enabled over its compliance errors (checked again there with its facts)."""

    @abstractmethod
    def record_evidence(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append an evidence record."""

    @abstractmethod
    def dry_run(self, proposal: dict[str, Any]) -> dict[str, Any]:
        """Dry run of a policy document (``DryRunProposal`` fields)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class RemoteSafeChange(SafeChangeClient):
    """HTTP client of a server's safe-change routes."""

    def __init__(self, server: str, token: str | None, *, timeout: float = 120.0) -> None:
        import httpx

        self.where = server
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=timeout)
        self._httpx = httpx

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            r = self._http.request(method, path, **kw)
        except self._httpx.TransportError as exc:
            raise ClientError(f"cannot reach {self._http.base_url}: {exc}", 503) from None
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise ClientError(f"{r.status_code}: {detail}", r.status_code)
        return r.json()

    def facts(self) -> SystemFacts:
        return SystemFacts.model_validate(self._call("GET", "/api/v1/compliance/facts"))

    def record_override(self, *, policy: str, reason: str, config_yaml: str, source: str) -> dict[str, Any]:
        return dict(self._call("POST", "/api/v1/compliance/overrides", json={
            "policy": policy, "reason": reason, "config_yaml": config_yaml, "source": source}))

    def record_evidence(self, record: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", "/api/v1/compliance/evidence", json={"record": record}))

    def dry_run(self, proposal: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", "/api/v1/policies/dry-run", json=proposal))

    def close(self) -> None:
        self._http.close()


class LocalSafeChange(SafeChangeClient):
    """The local embedded store, through the server's services, as the local admin."""

    def __init__(self, database_url: str | None = None) -> None:
        from seedance.control.client import LocalClient

        self._local = LocalClient(database_url)
        self.where = "local store"

    def facts(self) -> SystemFacts:
        from seedance.control.services import compliance

        with self._local.service.db.read() as s:
            return compliance.gather_facts(session=s)

    def record_override(self, *, policy: str, reason: str, config_yaml: str, source: str) -> dict[str, Any]:
        from seedance.control.services import compliance

        data = compliance.OverrideCreate(policy=policy, reason=reason, config_yaml=config_yaml, source=source)
        with self._local.service.db.write() as s:
            report = compliance.override_elsewhere(session=s, principal=self._local.principal, data=data)
        return {"recorded": compliance.OVERRIDE_EVENT, "policy": policy, "report": report.to_json()}

    def record_evidence(self, record: dict[str, Any]) -> dict[str, Any]:
        from seedance.control.services import compliance

        data = compliance.EvidenceCreate.model_validate({"record": record})
        with self._local.service.db.write() as s:
            return compliance.record_evidence(session=s, principal=self._local.principal, data=data)

    def dry_run(self, proposal: dict[str, Any]) -> dict[str, Any]:
        from pydantic import ValidationError

        from seedance.control.services import dryrun
        from seedance.core.errors import InputError

        svc = self._local.service
        try:
            data = dryrun.DryRunProposal.model_validate(proposal)
        except ValidationError as exc:  # the API answers 422; the CLI says the same on one line
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else None
            raise InputError(str(err["msg"]).removeprefix("Value error, "), source="dry run", field=field) from None
        st = svc.settings
        with svc.db.read() as s:
            prepared = dryrun.prepare(session=s, name=data.name, request=data, default_placement=st.default_placement,
                                      default_queue=st.default_queue_order, tier_pools=st.tier_pools,
                                      validator=svc.validator)
        return dryrun.execute(prepared)

    def close(self) -> None:
        self._local.close()


def make_safechange_client(context: str | None) -> SafeChangeClient:
    """The client of ``context`` (or the current one, or the local store)."""
    from seedance.cli.config import active_context

    ctx = active_context(context)
    if ctx is None:
        return LocalSafeChange()
    return RemoteSafeChange(str(ctx["server"]), ctx.get("token") or os.environ.get(TOKEN_ENV))

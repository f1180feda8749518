"""What the CLI talks to: a control-plane server (``RemoteClient``) or the local store (``LocalClient``).

Both return the API's JSON shapes (plain dicts), so the CLI renders them the same way. The local
client runs the very services the server runs, on an embedded SQLite file in ``$SEEDANCE_HOME``,
as the local admin, and runs one scheduling cycle after every change (there is no server loop).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any

from seedance.control.errors import ControlError, Unauthorized
from seedance.control.manifest import JOB_KINDS, Manifest
from seedance.core.errors import InputError


class ClientError(ControlError):
    """A request the server (or the local store) refused; the message says why."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.http_status = status


class ControlClient(ABC):
    """Operations of the job commands."""

    @abstractmethod
    def apply(self, m: Manifest, *, idempotency_key: str | None = None) -> tuple[str, dict[str, Any], bool]:
        """Create what a manifest describes; returns ``(kind, object, created)``."""

    @abstractmethod
    def list_jobs(
        self, *, status: str | None = None, tier: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Jobs, newest first."""

    @abstractmethod
    def get_job(self, ref: str) -> dict[str, Any]:
        """One job by id or name."""

    @abstractmethod
    def explain(self, ref: str) -> dict[str, Any]:
        """The job's explanation."""

    @abstractmethod
    def decisions(self, ref: str) -> list[dict[str, Any]]:
        """The job's decisions, oldest first."""

    @abstractmethod
    def cancel(self, ref: str) -> dict[str, Any]:
        """Cancel a job."""

    @abstractmethod
    def list_nodes(self, cluster: str) -> list[dict[str, Any]]:
        """Nodes of a cluster with their allocation."""

    def logs(self, ref: str, *, tail_bytes: int | None = None) -> dict[str, Any]:
        """The job's captured output (``JobLogs``)."""
        raise ClientError("this client cannot read logs", 501)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


# ------------------------------------------------------------------------------------------ remote
class RemoteClient(ControlClient):
    """HTTP client of a control-plane server.

    Args:
        server: Base URL, e.g. ``http://127.0.0.1:8080``.
        token: API token.
        timeout: Seconds per request.
        retries: Attempts for requests that are safe to repeat (reads, and submissions, which
            always carry an idempotency key) when the connection fails.
    """

    def __init__(self, server: str, token: str | None, *, timeout: float = 30.0, retries: int = 5) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=timeout)
        self._retries = retries
        self._httpx = httpx

    def _call(self, method: str, path: str, *, retry: bool = True, **kw: Any) -> Any:
        attempts = self._retries if retry else 1
        for i in range(attempts):
            try:
                r = self._http.request(method, path, **kw)
            except self._httpx.TransportError as exc:
                if i + 1 >= attempts:
                    raise ClientError(f"cannot reach {self._http.base_url}: {exc}", 503) from None
                time.sleep(min(2.0, 0.2 * 2**i))
                continue
            if r.status_code >= 400:
                try:
                    detail = r.json().get("detail", r.text)
                except ValueError:
                    detail = r.text
                if r.status_code == 401:
                    raise Unauthorized(str(detail))
                raise ClientError(f"{r.status_code}: {detail}", r.status_code)
            return r.json() if r.content else None
        raise AssertionError("unreachable")

    def apply(self, m: Manifest, *, idempotency_key: str | None = None) -> tuple[str, dict[str, Any], bool]:
        if m.kind in JOB_KINDS:
            body = m.payload.model_dump(mode="json", exclude_none=True)
            if idempotency_key and "idempotency_key" not in body:
                body["idempotency_key"] = idempotency_key
            r = self._http_submit(body)
            return m.kind, r[0], r[1]
        if m.kind == "Cluster":
            created = self._create_if_missing(f"/api/v1/clusters/{m.name}", "/api/v1/clusters",
                                              m.payload.model_dump(mode="json"))
            existing = {n["name"] for n in self.list_nodes(str(m.name))}
            for node in m.nodes:
                if node.name not in existing:
                    self._call("POST", f"/api/v1/clusters/{m.name}/nodes", retry=False,
                               json=node.model_dump(mode="json"))
            return m.kind, self._call("GET", f"/api/v1/clusters/{m.name}"), created
        if m.kind == "Node":
            obj = self._call("POST", f"/api/v1/clusters/{m.cluster}/nodes", retry=False,
                             json=m.payload.model_dump(mode="json"))
            return m.kind, obj, True
        obj = self._call("POST", "/api/v1/policies", retry=False, json=m.payload.model_dump(mode="json",
                                                                                            exclude_unset=True))
        return m.kind, obj, True

    def _http_submit(self, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        for i in range(self._retries):
            try:
                r = self._http.post("/api/v1/jobs", json=body)
            except self._httpx.TransportError as exc:
                if i + 1 >= self._retries:
                    raise ClientError(f"cannot reach {self._http.base_url}: {exc}", 503) from None
                time.sleep(min(2.0, 0.2 * 2**i))
                continue
            if r.status_code >= 400:
                raise ClientError(f"{r.status_code}: {r.json().get('detail', r.text)}", r.status_code)
            return r.json(), r.status_code == 201
        raise AssertionError("unreachable")

    def _create_if_missing(self, get_path: str, post_path: str, body: dict[str, Any]) -> bool:
        try:
            self._call("GET", get_path)
            return False
        except ClientError as exc:
            if exc.http_status != 404:
                raise
        self._call("POST", post_path, retry=False, json=body)
        return True

    def _job_id(self, ref: str) -> int:
        if ref.isdigit():
            return int(ref)
        items = self._call("GET", "/api/v1/jobs", params={"name": ref, "limit": 1})["items"]
        if not items:
            raise ClientError(f"404: job {ref!r} not found", 404)
        return int(items[0]["id"])

    def list_jobs(
        self, *, status: str | None = None, tier: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = status
        if tier:
            params["tier"] = tier
        return list(self._call("GET", "/api/v1/jobs", params=params)["items"])

    def get_job(self, ref: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/v1/jobs/{self._job_id(ref)}"))

    def explain(self, ref: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/v1/jobs/{self._job_id(ref)}/explain"))

    def decisions(self, ref: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/api/v1/jobs/{self._job_id(ref)}/decisions")["items"])

    def cancel(self, ref: str) -> dict[str, Any]:
        return dict(self._call("POST", f"/api/v1/jobs/{self._job_id(ref)}/cancel", retry=False))

    def list_nodes(self, cluster: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/api/v1/clusters/{cluster}/nodes"))

    def logs(self, ref: str, *, tail_bytes: int | None = None) -> dict[str, Any]:
        params = {"tail_bytes": tail_bytes} if tail_bytes is not None else {}
        return dict(self._call("GET", f"/api/v1/jobs/{self._job_id(ref)}/logs", params=params))

    def close(self) -> None:
        self._http.close()


# ------------------------------------------------------------------------------------------- local
class LocalClient(ControlClient):
    """The embedded store in ``$SEEDANCE_HOME/local.db``, driven through the server's services."""

    def __init__(self, database_url: str | None = None) -> None:
        from seedance.control.paths import local_database_url
        from seedance.control.schemas import Role
        from seedance.control.security import LOCAL_PRINCIPAL_NAME, Principal
        from seedance.control.service import ControlService
        from seedance.control.services import tenants
        from seedance.control.settings import ControlSettings

        settings = ControlSettings(database_url=database_url or local_database_url(), scheduler_enabled=False,
                                   db_pool_size=2)
        self.service = ControlService(settings)
        with self.service.db.write() as s:
            tenant = tenants.ensure_tenant(session=s, name=LOCAL_PRINCIPAL_NAME, display_name="local user")
            tid = tenant.id
        self.principal = Principal(token_id=0, token_name=LOCAL_PRINCIPAL_NAME, tenant_id=tid,
                                   tenant_name=LOCAL_PRINCIPAL_NAME, role=Role.ADMIN)

    def _schedule(self) -> None:
        self.service.loop.run_once()

    def apply(self, m: Manifest, *, idempotency_key: str | None = None) -> tuple[str, dict[str, Any], bool]:
        from seedance.control.errors import NotFound
        from seedance.control.services import clusters, jobs, policies

        svc = self.service
        with svc.db.write() as s:
            if m.kind in JOB_KINDS:
                data = m.payload
                if idempotency_key and getattr(data, "idempotency_key", None) is None:
                    data = data.model_copy(update={"idempotency_key": idempotency_key})
                job, created = jobs.submit_job(
                    session=s, principal=self.principal, data=data, scorer=svc.scorer,  # type: ignore[arg-type]
                    directory=svc.directory,
                )
                jid = job.id
                result: tuple[str, dict[str, Any], bool] | None = None
            elif m.kind == "Cluster":
                try:
                    c = clusters.get_cluster(session=s, name=str(m.name))
                    created = False
                except NotFound:
                    c = clusters.create_cluster(session=s, principal=self.principal, data=m.payload)  # type: ignore[arg-type]
                    created = True
                _, existing = clusters.list_nodes(session=s, cluster_name=c.name)
                have = {n.name for n in existing}
                for node in m.nodes:
                    if node.name not in have:
                        clusters.add_node(session=s, principal=self.principal, cluster_name=c.name, data=node)
                result = (m.kind, clusters.to_cluster_read(session=s, cluster=c).model_dump(mode="json"), created)
            elif m.kind == "Node":
                n = clusters.add_node(session=s, principal=self.principal, cluster_name=str(m.cluster),
                                      data=m.payload)  # type: ignore[arg-type]
                result = (m.kind, clusters.to_node_read(str(m.cluster), n, None).model_dump(mode="json"), True)
            else:
                p = policies.create_policy(session=s, principal=self.principal, data=m.payload,  # type: ignore[arg-type]
                                           validator=svc.validator)
                result = (m.kind, policies.to_read(p, getattr(m.payload, "cluster", None)).model_dump(mode="json"),
                          True)
        self._schedule()
        if result is not None:
            return result
        return m.kind, self.get_job(str(jid)), created

    def _read(self, fn: Any, **kw: Any) -> Any:
        with self.service.db.read() as s:
            return fn(session=s, principal=self.principal, **kw)

    def list_jobs(
        self, *, status: str | None = None, tier: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        from seedance.control.services import jobs

        with self.service.db.read() as s:
            names = jobs.cluster_names(session=s)
            rows = jobs.list_jobs(session=s, principal=self.principal, status=status, tier=tier, limit=limit)
            return [jobs.to_read(j, names.get(j.cluster_id, "?")).model_dump(mode="json") for j in rows]

    def get_job(self, ref: str) -> dict[str, Any]:
        from seedance.control.services import jobs

        with self.service.db.read() as s:
            job = jobs.find_job(session=s, principal=self.principal, ref=ref)
            return jobs.to_read(job, jobs.cluster_names(session=s).get(job.cluster_id, "?")).model_dump(mode="json")

    def explain(self, ref: str) -> dict[str, Any]:
        from seedance.control.services import jobs

        with self.service.db.read() as s:
            job = jobs.find_job(session=s, principal=self.principal, ref=ref)
            return jobs.explain_job(session=s, principal=self.principal, job_id=job.id).model_dump(mode="json")

    def decisions(self, ref: str) -> list[dict[str, Any]]:
        from seedance.control.schemas import DecisionRead
        from seedance.control.services import jobs

        with self.service.db.read() as s:
            job = jobs.find_job(session=s, principal=self.principal, ref=ref)
            rows = jobs.decisions_of(session=s, principal=self.principal, job_id=job.id)
            return [DecisionRead.model_validate(d).model_dump(mode="json") for d in rows]

    def cancel(self, ref: str) -> dict[str, Any]:
        from seedance.control.services import jobs

        with self.service.db.write() as s:
            job = jobs.find_job(session=s, principal=self.principal, ref=ref)
            job, handle = jobs.cancel_job(session=s, principal=self.principal, job_id=job.id)
            jid = job.id
        if handle is not None:  # as the API does: stop the run on the backend
            self.service.dispatcher.cancel(handle)
        self._schedule()
        return self.get_job(str(jid))

    def list_nodes(self, cluster: str) -> list[dict[str, Any]]:
        from seedance.control.services import clusters

        with self.service.db.read() as s:
            c, nodes = clusters.list_nodes(session=s, cluster_name=cluster)
            alloc = clusters.allocations(session=s, cluster_id=c.id, nodes=nodes)
            return [clusters.to_node_read(cluster, n, alloc.get(n.name)).model_dump(mode="json") for n in nodes]

    def logs(self, ref: str, *, tail_bytes: int | None = None) -> dict[str, Any]:
        from seedance.backends.dispatch import read_logs
        from seedance.control.schemas import JobLogs
        from seedance.control.services import jobs
        from seedance.core.lifecycle import JobStatus

        with self.service.db.read() as s:
            job = jobs.find_job(session=s, principal=self.principal, ref=ref)
            jid, name, status = job.id, job.name, JobStatus(job.status)
        text, note = read_logs(self.service.dispatcher, jid, tail_bytes=tail_bytes)
        return JobLogs(job_id=jid, name=name, status=status, backend=self.service.dispatcher.name,
                       available=text is not None, text=text or "", note=note).model_dump(mode="json")

    def close(self) -> None:
        self.service.close()


def check_ref(ref: str) -> str:
    """A job reference (id or name) from the command line."""
    ref = ref.strip()
    if not ref or len(ref) > 63:
        raise InputError("give a job id or name", source="job")
    return ref

"""The Kubernetes API as plain JSON documents, through the official ``kubernetes`` client.

Every call asks for the raw response (``_preload_content=False``) and decodes it with ``json``, so
callers see exactly the API's JSON (camelCase fields), the same shape kube-scheduler sends the
extender. Two client pitfalls found while testing against a local HTTP server (kubernetes 37.0.2):

* ``create_namespaced_pod_binding`` with the response preloaded fails after a *successful* call:
  the API answers a ``Status``, which the client cannot turn into a ``V1Binding`` (``target`` is
  required). Raw responses avoid it.
* The client sends POST bodies without a ``Content-Type`` header (``_content_type`` is ignored);
  kube-apiserver then falls back to JSON, but we set the header explicitly through ``_headers``.

This module is the only one (with ``controller``) that imports ``kubernetes``, and only when a
:class:`KubernetesApi` is built. It has been exercised against a local fake API server only,
never against a real kube-apiserver (see docs/kubernetes.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from seedance.k8s import keys

Obj = dict[str, Any]
_JSON = {"Content-Type": "application/json"}


def binding_body(*, namespace: str, name: str, uid: str, node: str) -> Obj:
    """The ``v1`` Binding object that binds pod ``namespace/name`` (UID ``uid``) to ``node``."""
    meta: Obj = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


class KubernetesApi:
    """Binder (extender), operator calls and list/watch, over ``kubernetes.client``.

    Args:
        api_client: A configured ``kubernetes.client.ApiClient`` (see :meth:`from_environment`).
    """

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self._api_client = api_client
        # typed as Any: the client's annotations want model objects, we pass and get plain JSON
        self._core: Any = client.CoreV1Api(api_client)
        self._custom: Any = client.CustomObjectsApi(api_client)

    @classmethod
    def from_environment(cls, kubeconfig: str | None = None) -> KubernetesApi:
        """In-cluster service-account credentials, else ``kubeconfig`` (or ``$KUBECONFIG``)."""
        from kubernetes import client
        from kubernetes import config as kube_config

        config: Any = kube_config
        if kubeconfig is None:
            try:
                config.load_incluster_config()
                return cls(client.ApiClient())
            except config.ConfigException:
                pass
        config.load_kube_config(config_file=kubeconfig)
        return cls(client.ApiClient())

    @staticmethod
    def _decode(resp: Any) -> Obj:
        data = resp.data
        return json.loads(data) if data else {}

    @staticmethod
    def _status(exc: Exception) -> int | None:
        status = getattr(exc, "status", None)
        return int(status) if isinstance(status, int) else None

    # ------------------------------------------------------------------ extender
    def bind(self, *, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> None:
        """Annotate the pod with its GPUs, then create its ``pods/binding`` subresource."""
        if annotations:
            self._core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": dict(annotations)}},
                                            _preload_content=False)
        body = binding_body(namespace=namespace, name=name, uid=uid, node=node)
        self._core.create_namespaced_pod_binding(name, namespace, body, _preload_content=False, _headers=_JSON)

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        """A Pod document, or ``None`` when it does not exist."""
        try:
            return self._decode(self._core.read_namespaced_pod(name, namespace, _preload_content=False))
        except Exception as exc:
            if self._status(exc) == 404:
                return None
            raise

    # ------------------------------------------------------------------ informer
    def list_nodes(self) -> tuple[list[Obj], str]:
        """All nodes and the list's resourceVersion."""
        out = self._decode(self._core.list_node(_preload_content=False))
        return list(out.get("items") or []), str((out.get("metadata") or {}).get("resourceVersion") or "")

    def list_pods(self) -> tuple[list[Obj], str]:
        """All unfinished pods of every namespace and the list's resourceVersion."""
        out = self._decode(self._core.list_pod_for_all_namespaces(
            field_selector="status.phase!=Succeeded,status.phase!=Failed", _preload_content=False))
        return list(out.get("items") or []), str((out.get("metadata") or {}).get("resourceVersion") or "")

    def _watch(self, func: Any, resource_version: str, timeout_s: int, **kw: Any) -> Iterator[Obj]:
        from kubernetes import watch as kube_watch

        watch: Any = kube_watch  # untyped in the client
        w = watch.Watch()
        for event in w.stream(func, resource_version=resource_version, timeout_seconds=timeout_s, **kw):
            yield {"type": event["type"], "object": event.get("raw_object") or {}}

    def watch_nodes(self, resource_version: str, timeout_s: int = 300) -> Iterator[Obj]:
        """Node watch events (``{"type", "object"}``) after ``resource_version``."""
        return self._watch(self._core.list_node, resource_version, timeout_s)

    def watch_pods(self, resource_version: str, timeout_s: int = 300) -> Iterator[Obj]:
        """Pod watch events after ``resource_version`` (finished pods arrive as DELETED)."""
        return self._watch(self._core.list_pod_for_all_namespaces, resource_version, timeout_s,
                           field_selector="status.phase!=Succeeded,status.phase!=Failed")

    # ------------------------------------------------------------------ operator
    def namespace_labels(self, namespace: str) -> dict[str, str]:
        """Labels of a namespace (empty when it cannot be read)."""
        try:
            ns = self._decode(self._core.read_namespace(namespace, _preload_content=False))
        except Exception as exc:
            if self._status(exc) in (403, 404):
                return {}
            raise
        return dict((ns.get("metadata") or {}).get("labels") or {})

    def list_job_pods(self, namespace: str, job: str) -> list[Obj]:
        """Pods labelled as belonging to TrainingJob ``job``."""
        out = self._decode(self._core.list_namespaced_pod(
            namespace, label_selector=f"{keys.LABEL_JOB}={job}", _preload_content=False))
        return list(out.get("items") or [])

    def list_namespace_pods(self, namespace: str) -> list[Obj]:
        """Every pod of a namespace (the cost-tag handler re-tags them when the namespace changes)."""
        out = self._decode(self._core.list_namespaced_pod(namespace, _preload_content=False))
        return list(out.get("items") or [])

    def patch_pod_labels(self, namespace: str, name: str, labels: Mapping[str, str]) -> None:
        """Merge-patch labels of a pod."""
        self._core.patch_namespaced_pod(name, namespace, {"metadata": {"labels": dict(labels)}},
                                        _preload_content=False)

    def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> bool:
        """Create a pod; returns ``False`` when it already exists."""
        try:
            self._core.create_namespaced_pod(namespace, dict(pod), _preload_content=False, _headers=_JSON)
        except Exception as exc:
            if self._status(exc) == 409:
                return False
            raise
        return True

    def get_cost_policy(self, name: str) -> Obj | None:
        """A cluster-scoped CostPolicy, or ``None``."""
        try:
            return self._decode(self._custom.get_cluster_custom_object(
                keys.GROUP, keys.VERSION, "costpolicies", name, _preload_content=False))
        except Exception as exc:
            if self._status(exc) == 404:
                return None
            raise

    def get_trainingjob(self, namespace: str, name: str) -> Obj | None:
        """A TrainingJob, or ``None``."""
        try:
            return self._decode(self._custom.get_namespaced_custom_object(
                keys.GROUP, keys.VERSION, namespace, "trainingjobs", name, _preload_content=False))
        except Exception as exc:
            if self._status(exc) == 404:
                return None
            raise

    def patch_trainingjob_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch ``status`` of a TrainingJob (status subresource)."""
        self._custom.patch_namespaced_custom_object_status(
            keys.GROUP, keys.VERSION, namespace, "trainingjobs", name, {"status": dict(status)},
            _preload_content=False)

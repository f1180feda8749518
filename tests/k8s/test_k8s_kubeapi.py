"""``KubernetesApi`` (the real ``kubernetes`` client) against a fake API server on 127.0.0.1.

The fake answers what kube-apiserver answers for these calls (a ``Status`` for bindings, 404/409
Status objects for errors) and records method, path, query, Content-Type and body.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from seedance.k8s.kubeapi import KubernetesApi, binding_body
from seedance.k8s.validation import object_errors
from tests.k8s.k8s_docs import make_pod


class FakeApiServer:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.routes: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                url = urlsplit(self.path)
                fake.calls.append({"method": self.command, "path": url.path, "query": parse_qs(url.query),
                                   "content_type": self.headers.get("Content-Type"),
                                   "body": json.loads(body) if body else None})
                status, payload = fake.routes.get((self.command, url.path), (404, _status(404, "NotFound")))
                out = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PATCH = _serve  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


def _status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": reason,
            "code": code}


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    f = FakeApiServer()
    yield f
    f.httpd.shutdown()
    f.httpd.server_close()


@pytest.fixture
def api(fake: FakeApiServer) -> KubernetesApi:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = fake.url
    return KubernetesApi(client.ApiClient(cfg))


def test_bind_patches_gpu_annotation_then_posts_the_binding(fake: FakeApiServer, api: KubernetesApi) -> None:
    fake.routes[("PATCH", "/api/v1/namespaces/ml/pods/p")] = (200, make_pod("p", namespace="ml"))
    fake.routes[("POST", "/api/v1/namespaces/ml/pods/p/binding")] = (
        201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    api.bind(namespace="ml", name="p", uid="u-1", node="gpu-7", annotations={"seedance.ai/gpu-index": "0,1"})
    patch, post = fake.calls
    assert (patch["method"], patch["content_type"]) == ("PATCH", "application/strategic-merge-patch+json")
    assert patch["body"] == {"metadata": {"annotations": {"seedance.ai/gpu-index": "0,1"}}}
    assert (post["method"], post["content_type"]) == ("POST", "application/json")
    expected = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "ml", "uid": "u-1"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-7"}}
    assert post["body"] == expected == binding_body(namespace="ml", name="p", uid="u-1", node="gpu-7")
    assert object_errors(expected) == []


def test_binding_rejected_by_the_api_raises(fake: FakeApiServer, api: KubernetesApi) -> None:
    fake.routes[("POST", "/api/v1/namespaces/ml/pods/p/binding")] = (409, _status(409, "Conflict"))
    with pytest.raises(Exception, match="Conflict") as exc:
        api.bind(namespace="ml", name="p", uid="u-1", node="gpu-7", annotations={})
    assert getattr(exc.value, "status", None) == 409
    assert [c["method"] for c in fake.calls] == ["POST"]  # no annotations: no patch


def test_reads_return_plain_api_json(fake: FakeApiServer, api: KubernetesApi) -> None:
    fake.routes[("GET", "/api/v1/namespaces/ml")] = (
        200, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"env": "prod"}}})
    fake.routes[("GET", "/api/v1/namespaces/ml/pods")] = (
        200, {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "7"},
              "items": [make_pod("j-0", namespace="ml")]})
    fake.routes[("GET", "/api/v1/nodes")] = (
        200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "42"}, "items": []})
    assert api.namespace_labels("ml") == {"env": "prod"}
    assert api.namespace_labels("missing") == {}
    pods = api.list_job_pods("ml", "j")
    assert pods[0]["metadata"]["creationTimestamp"] == "2026-11-30T09:01:12Z"  # raw JSON, not a model
    assert fake.calls[-1]["query"] == {"labelSelector": ["seedance.ai/job=j"]}
    assert api.list_nodes() == ([], "42")
    assert api.get_pod("ml", "nope") is None
    assert api.get_cost_policy("nope") is None
    assert fake.calls[-1]["path"] == "/apis/seedance.ai/v1alpha1/costpolicies/nope"


def test_create_pod_and_status_patch(fake: FakeApiServer, api: KubernetesApi) -> None:
    pod = make_pod("j-0", namespace="ml")
    for server_set in ("uid", "resourceVersion", "creationTimestamp"):  # an operator's new pod has none
        del pod["metadata"][server_set]
    fake.routes[("POST", "/api/v1/namespaces/ml/pods")] = (201, pod)
    assert api.create_pod("ml", pod) is True
    assert fake.calls[-1]["body"] == pod and fake.calls[-1]["content_type"] == "application/json"
    fake.routes[("POST", "/api/v1/namespaces/ml/pods")] = (409, _status(409, "AlreadyExists"))
    assert api.create_pod("ml", pod) is False
    path = "/apis/seedance.ai/v1alpha1/namespaces/ml/trainingjobs/j/status"
    fake.routes[("PATCH", path)] = (200, {"apiVersion": "seedance.ai/v1alpha1", "kind": "TrainingJob"})
    api.patch_trainingjob_status("ml", "j", {"phase": "Running"})
    assert fake.calls[-1]["content_type"] == "application/merge-patch+json"
    assert fake.calls[-1]["body"] == {"status": {"phase": "Running"}}

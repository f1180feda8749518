"""Builders of Kubernetes documents shaped as the API (and kube-scheduler) send them, and fakes."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"

Obj = dict[str, Any]


def load_fixture(name: str) -> Obj:
    """A JSON document from tests/k8s/fixtures."""
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def make_node(name: str, *, gpus: int = 8, model: str | None = "A100-80GB", cpu: str = "64",
              memory: str = "512Gi", labels: Mapping[str, str] | None = None, unschedulable: bool = False,
              rv: str | None = "1") -> Obj:
    """A Node document with the fields a kubelet reports (allocatable, conditions, nodeInfo)."""
    node = load_fixture("node-a100.json")
    node["metadata"]["name"] = name
    node["metadata"]["uid"] = f"uid-{name}"
    node["metadata"]["labels"] = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                  **({"gpu.model": model} if model else {}), **(labels or {})}
    if rv is None:
        del node["metadata"]["resourceVersion"]
    else:
        node["metadata"]["resourceVersion"] = rv
    node["spec"] = {"unschedulable": True} if unschedulable else {}
    alloc = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    node["status"]["allocatable"] = alloc
    node["status"]["capacity"] = dict(alloc)
    return node


def make_pod(name: str, *, cpu: str = "1", memory: str = "1Gi", gpus: int = 0, milli: int | None = None,
             tier: str | None = None, types: str | None = None, namespace: str = "default",
             uid: str | None = None, node: str | None = None, phase: str = "Pending",
             annotations: Mapping[str, str] | None = None) -> Obj:
    """A Pod document as the API serves it to kube-scheduler (defaults filled in by admission)."""
    ann = dict(annotations or {})
    if milli is not None:
        ann["seedance.ai/gpu-milli"] = str(milli)
    if types:
        ann["seedance.ai/gpu-types"] = types
    res: Obj = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        res["limits"] = {"nvidia.com/gpu": str(gpus)}
        res["requests"]["nvidia.com/gpu"] = str(gpus)
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}",
                     "resourceVersion": "100", "creationTimestamp": "2026-11-30T09:01:12Z",
                     "labels": {"app": name, **({"seedance.ai/tier": tier} if tier else {})},
                     **({"annotations": ann} if ann else {})},
        "spec": {
            "schedulerName": "seedance-scheduler",
            "containers": [{"name": "main", "image": "busybox:1.36", "resources": res,
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "securityContext": {},
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
        },
        "status": {"phase": phase, "qosClass": "Burstable"},
    }
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def extender_args(pod: Obj, nodes: list[Obj], *, node_cache_capable: bool) -> Obj:
    """``ExtenderArgs`` exactly as pkg/scheduler/extender.go builds it (Go field names, nil → null)."""
    if node_cache_capable:
        return {"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]}
    return {"Pod": pod, "Nodes": {"metadata": {}, "items": copy.deepcopy(nodes)}, "NodeNames": None}


class RecordingBinder:
    """A Binder that records calls and can be told to fail."""

    def __init__(self) -> None:
        self.calls: list[Obj] = []
        self.fail: Exception | None = None

    def bind(self, *, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> None:
        if self.fail is not None:
            raise self.fail
        self.calls.append({"namespace": namespace, "name": name, "uid": uid, "node": node,
                           "annotations": dict(annotations)})


class ExtenderOverHttp:
    """An extender behind its real HTTP server on 127.0.0.1, posted to as kube-scheduler does."""

    def __init__(self, extender: Any, *, timeout: float = 10.0) -> None:
        import http.client

        from seedance.k8s.server import ExtenderApp, make_server, serve_in_thread

        self.extender = extender
        self.httpd = make_server(ExtenderApp(extender), "127.0.0.1", 0)
        serve_in_thread(self.httpd)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.httpd.server_address[1], timeout=timeout)

    def post(self, verb: str, body: dict[str, Any]) -> Any:
        self.conn.request("POST", f"/{verb}", body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        raw = resp.read()
        assert resp.status == 200, raw
        return json.loads(raw)

    def close(self) -> None:
        self.conn.close()
        self.httpd.shutdown()
        self.httpd.server_close()

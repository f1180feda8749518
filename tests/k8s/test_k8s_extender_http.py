"""The extender over real HTTP on 127.0.0.1, with bodies shaped exactly as kube-scheduler sends them.

kube-scheduler (pkg/scheduler/extender.go) marshals k8s.io/kube-scheduler/extender/v1 structs with
Go's encoding/json: Go field names, ``null`` for nil pointers, POST with Content-Type
application/json over a keep-alive ``http.Client``; any status but 200 is a failed call.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from seedance.k8s.extender import Extender
from seedance.k8s.server import ExtenderApp, make_server, serve_in_thread
from seedance.scheduling import make_policy
from tests.k8s.k8s_docs import RecordingBinder, extender_args, load_fixture, make_node, make_pod

# ExtenderArgs as Go marshals it, verbatim from kubernetes/kubernetes
# staging/src/k8s.io/kube-scheduler/extender/v1/types_test.go (TestCompatibility).
GO_EXTENDER_ARGS = (
    '{"Pod":{"metadata":{"name":"podname","creationTimestamp":null},"spec":{"containers":null},"status":{}},'
    '"Nodes":{"metadata":{},"items":[{"metadata":{"name":"nodename","creationTimestamp":null},"spec":{},'
    '"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"",'
    '"bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"","kubeletVersion":"",'
    '"kubeProxyVersion":"","operatingSystem":"","architecture":""}}}]},"NodeNames":["node1"]}'
)
GO_BINDING_ARGS = '{"PodName":"mypodname","PodNamespace":"mypodnamespace","PodUID":"mypoduid","Node":"mynode"}'

BRONZE = {"gpu.sla.level": "bronze"}


class Server:
    def __init__(self) -> None:
        self.binder = RecordingBinder()
        self.extender = Extender(make_policy("best-fit"), binder=self.binder)
        self.app = ExtenderApp(self.extender)
        self.httpd = make_server(self.app, "127.0.0.1", 0)
        self.port = self.httpd.server_address[1]
        serve_in_thread(self.httpd)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)

    def post(self, verb: str, body: str | bytes | dict[str, Any]) -> tuple[int, Any]:
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        self.conn.request("POST", f"/{verb}", body=data, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        raw = resp.read()
        assert resp.getheader("Content-Type") == "application/json"
        return resp.status, json.loads(raw)

    def get(self, path: str) -> tuple[int, str]:
        self.conn.request("GET", path)
        resp = self.conn.getresponse()
        return resp.status, resp.read().decode()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.conn.close()
    s.httpd.shutdown()
    s.httpd.server_close()


@pytest.fixture(scope="module")
def nodes() -> list[dict[str, Any]]:
    return [
        load_fixture("node-a100.json"),  # gold / exclusive, 8 x A100-80GB
        make_node("h100-silver", gpus=8, model="H100", labels={"gpu.sla.level": "silver"}),
        make_node("t4-bronze", gpus=4, model="T4", cpu="32", memory="128Gi", labels=BRONZE),
    ]


def test_readyz_waits_for_the_node_cache(server: Server, nodes: list[dict[str, Any]]) -> None:
    assert server.get("/readyz") == (503, "node cache not synced\n")
    server.extender.set_nodes(nodes)
    server.extender.synced = True
    assert server.get("/readyz") == (200, "ready\n")
    assert server.get("/healthz") == (200, "ok\n")


def test_filter_node_cache_capable(server: Server, nodes: list[dict[str, Any]]) -> None:
    pod = load_fixture("pod-pending.json")  # bronze, 250 milli of an A100-80GB or H100
    status, res = server.post("filter", extender_args(pod, nodes, node_cache_capable=True))
    assert status == 200
    assert res == {
        "Nodes": None,
        "NodeNames": [],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {
            "gpu-a100-07": "Seedance: tier bronze needs gpu.sla.level in [bronze]",
            "h100-silver": "Seedance: tier bronze needs gpu.sla.level in [bronze]",
            "t4-bronze": "Seedance: GPU model not in A100-80GB, H100-80GB",
        },
        "Error": "",
    }


def test_filter_with_full_node_objects_returns_them_unchanged(server: Server, nodes: list[dict[str, Any]]) -> None:
    pod = make_pod("train", cpu="8", memory="64Gi", gpus=4, tier="gold")
    status, res = server.post("filter", extender_args(pod, nodes, node_cache_capable=False))
    assert status == 200
    assert res["NodeNames"] is None
    assert res["Nodes"] == {"metadata": {}, "items": [nodes[0]]}
    assert set(res["FailedAndUnresolvableNodes"]) == {"h100-silver", "t4-bronze"}


def test_prioritize_returns_a_host_priority_list(server: Server, nodes: list[dict[str, Any]]) -> None:
    pod = make_pod("share", cpu="1", milli=500)  # no tier: every GPU node is a candidate
    status, res = server.post("prioritize", extender_args(pod, nodes, node_cache_capable=True))
    assert status == 200
    assert [h["Host"] for h in res] == ["gpu-a100-07", "h100-silver", "t4-bronze"]
    assert all(set(h) == {"Host", "Score"} and isinstance(h["Score"], int) and 0 <= h["Score"] <= 10 for h in res)
    assert sorted(h["Score"] for h in res).count(10) == 1


def test_bind_records_and_binds_through_the_api(server: Server, nodes: list[dict[str, Any]]) -> None:
    pod = make_pod("job-0", namespace="ml", uid="uid-job-0", cpu="8", memory="64Gi", gpus=4, tier="gold")
    server.post("filter", extender_args(pod, nodes, node_cache_capable=True))
    status, res = server.post("bind", {"PodName": "job-0", "PodNamespace": "ml", "PodUID": "uid-job-0",
                                       "Node": "gpu-a100-07"})
    assert (status, res) == (200, {"Error": ""})
    assert server.binder.calls[-1] == {"namespace": "ml", "name": "job-0", "uid": "uid-job-0",
                                       "node": "gpu-a100-07", "annotations": {"seedance.ai/gpu-index": "0,1,2,3"}}
    # 4 of 8 GPUs are left: a second 8-GPU gold pod now fails there, resolvably
    big = make_pod("big", cpu="8", memory="64Gi", gpus=8, tier="gold")
    _, res = server.post("filter", extender_args(big, nodes[:1], node_cache_capable=True))
    assert res["FailedNodes"] == {"gpu-a100-07": "Seedance: fewer than 8 idle GPU(s)"}


def test_go_marshalled_bodies_are_understood(server: Server) -> None:
    status, res = server.post("filter", GO_EXTENDER_ARGS)
    assert status == 200
    assert res["FailedNodes"] == {"node1": "Seedance: node not in the extender's cache yet"}
    status, res = server.post("filter", GO_EXTENDER_ARGS.lower())  # Go decodes field names case-insensitively
    assert status == 200 and res["NodeNames"] == []
    status, res = server.post("bind", GO_BINDING_ARGS)
    assert status == 200
    assert res["Error"] == ("Seedance: pod mypodnamespace/mypodname (uid mypoduid) was never filtered "
                            "and cannot be looked up")


@pytest.mark.parametrize(
    ("verb", "body", "status", "error"),
    [
        ("filter", "{not json", 400, "request body is not JSON"),
        ("filter", "[]", 400, "request body must be a JSON object"),
        ("prioritize", '{"Nodes": null, "NodeNames": ["a"]}', 400, "ExtenderArgs.Pod is missing"),
        ("bind", '{"PodName": "p"}', 400, "ExtenderBindingArgs needs PodName and Node"),
        ("preempt", "{}", 404, "no route POST /preempt"),
    ],
)
def test_bad_requests_answer_4xx_with_an_error(server: Server, verb: str, body: str, status: int,
                                               error: str) -> None:
    got, res = server.post(verb, body)
    assert got == status
    assert error in res["Error"]


def test_keep_alive_and_metrics(server: Server) -> None:
    server.get("/healthz")
    sock = server.conn.sock
    for _ in range(5):
        server.post("prioritize", {"Pod": make_pod("p"), "NodeNames": ["t4-bronze"]})
    assert server.conn.sock is sock  # one connection served every request
    status, text = server.get("/metrics")
    assert status == 200
    assert 'seedance_extender_requests_total{verb="prioritize"}' in text
    assert "seedance_extender_nodes 3" in text
    count = int(next(line for line in text.splitlines()
                     if line.startswith('seedance_extender_requests_total{verb="prioritize"}')).split()[-1])
    assert count >= 6


def test_missing_content_length_is_refused(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest("POST", "/filter")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    conn.send(b"0\r\n\r\n")
    resp = conn.getresponse()
    assert resp.status == 411
    conn.close()

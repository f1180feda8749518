"""The extender's verbs in-process: same decisions as ``Scheduler``, exact results, state kept right."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from seedance.core.cluster import ClusterSpec, ClusterState
from seedance.core.decision import Placement
from seedance.core.errors import InputError
from seedance.k8s.extender import Extender
from seedance.k8s.informer import Informer, apply_node_event, apply_pod_event
from seedance.k8s.objects import node_spec, pod_info
from seedance.scheduling import Scheduler, make_policy
from tests.k8s.k8s_docs import RecordingBinder, extender_args, make_node, make_pod

BRONZE = {"gpu.sla.level": "bronze"}


def small_cluster() -> list[dict[str, Any]]:
    return [
        make_node("t4-a", gpus=4, model="T4", cpu="32", memory="128Gi", labels=BRONZE),
        make_node("t4-b", gpus=4, model="T4", cpu="32", memory="128Gi", labels=BRONZE),
        make_node("a100", gpus=8, model="A100-80GB", cpu="96", memory="1Ti", labels=BRONZE),
        make_node("cordoned", gpus=8, model="A100-80GB", labels=BRONZE, unschedulable=True),
        make_node("gold", gpus=8, model="H100", labels={"gpu.sla.level": "gold", "gpu.mode": "exclusive"}),
        make_node("cpu-only", gpus=0, model=None, cpu="16", memory="64Gi", labels=BRONZE),
    ]


@pytest.fixture
def ext(binder: RecordingBinder) -> Extender:
    e = Extender(make_policy("best-fit"), binder=binder)
    e.set_nodes(small_cluster())
    return e


def names(res: dict[str, Any]) -> list[str]:
    return list(res["NodeNames"])


def test_filter_classifies_every_candidate_with_a_reason(ext: Extender) -> None:
    # fill t4-b's GPUs so a share cannot fit there now (preemption could help: FailedNodes)
    for i in range(4):
        ext.bind(_bind_args(ext, make_pod(f"fill{i}", gpus=1, tier="bronze"), "t4-b"))
    pod = make_pod("p", cpu="2", memory="4Gi", milli=500, tier="bronze", types="T4,A100-80GB")
    nodes = small_cluster()
    res = ext.filter(extender_args(pod, nodes, node_cache_capable=True))
    assert set(res) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert res["Nodes"] is None and res["Error"] == ""
    assert names(res) == ["t4-a", "a100"]
    assert res["FailedNodes"] == {"t4-b": "Seedance: no GPU with 500 milli free"}
    assert res["FailedAndUnresolvableNodes"] == {
        "cordoned": "Seedance: node is cordoned",
        "gold": "Seedance: GPU model not in A100-80GB, T4",
        "cpu-only": "Seedance: GPU model not in A100-80GB, T4",
    }


def test_capacity_that_can_never_fit_is_unresolvable(ext: Extender) -> None:
    res = ext.filter({"Pod": make_pod("big", gpus=8, tier="bronze"), "NodeNames": ["t4-a", "a100"]})
    assert names(res) == ["a100"]
    assert res["FailedAndUnresolvableNodes"] == {
        "t4-a": "Seedance: node can never fit 1000m CPU, 1024Mi memory, 8 GPU"}


def test_unknown_candidates_are_resolvable_failures(ext: Extender) -> None:
    res = ext.filter({"Pod": make_pod("p", gpus=1), "NodeNames": ["t4-a", "not-yet-cached"]})
    assert names(res) == ["t4-a"]
    assert res["FailedNodes"] == {"not-yet-cached": "Seedance: node not in the extender's cache yet"}


def test_bad_pod_fails_every_node_unresolvably_with_the_reason(ext: Extender) -> None:
    res = ext.filter({"Pod": make_pod("p", namespace="ns", milli=5000), "NodeNames": ["t4-a", "a100"]})
    assert names(res) == []
    msg = ("Seedance: pod ns/p: field metadata.annotations.seedance.ai/gpu-milli: must be within 1..1000, "
           "got 5000")
    assert res["FailedAndUnresolvableNodes"] == {"t4-a": msg, "a100": msg}
    assert ext.prioritize({"Pod": make_pod("p", milli=5000), "NodeNames": ["t4-a"]}) == [{"Host": "t4-a", "Score": 0}]


def test_malformed_args_raise_input_error(ext: Extender) -> None:
    with pytest.raises(InputError, match="ExtenderArgs.Pod is missing"):
        ext.filter({"NodeNames": ["a"]})
    with pytest.raises(InputError, match="needs Nodes or NodeNames"):
        ext.filter({"Pod": make_pod("p"), "Nodes": None, "NodeNames": None})
    with pytest.raises(InputError, match="NodeNames must be a list"):
        ext.prioritize({"Pod": make_pod("p"), "NodeNames": "t4-a"})
    with pytest.raises(InputError, match="needs PodName and Node"):
        ext.bind({"PodNamespace": "ns"})


@pytest.mark.parametrize("policy", ["best-fit", "dot-product", "packing", "clustering"])
def test_prioritize_tops_the_node_scheduler_decide_picks(policy: str) -> None:
    nodes = [make_node(f"n{i}", gpus=g, model="A100-80GB", cpu=str(c), memory="256Gi")
             for i, (g, c) in enumerate([(8, 64), (4, 32), (2, 96), (8, 16), (1, 8)])]
    ext = Extender(make_policy(policy), binder=RecordingBinder())
    ext.set_nodes(nodes)
    for i, node in enumerate(["n0", "n0", "n2", "n3"]):  # some load, so scores differ
        ext.bind(_bind_args(ext, make_pod(f"load{i}", cpu="4", milli=300 + 100 * i), node))
    pod = make_pod("p", cpu="2", memory="8Gi", milli=400)
    scores = {h["Host"]: h["Score"] for h in ext.prioritize(extender_args(pod, nodes, node_cache_capable=True))}

    # the same decision straight from the scheduling core, on an equivalent state
    state = ClusterState(ClusterSpec(tuple(node_spec(n) for n in nodes)))
    for i in range(4):
        node, gpus = ext.placement_of(f"uid-load{i}")  # type: ignore[misc]
        state.apply(Placement(state.node_index(node), gpus, 300 + 100 * i, 4000, 1024))
    decision = Scheduler(make_policy(policy)).decide(state, pod_info(pod).request)
    winner = nodes[decision.placement.node]["metadata"]["name"]
    assert scores[winner] == 10
    assert all(1 <= s <= 9 for h, s in scores.items() if h != winner)


def test_prioritize_scores_infeasible_candidates_zero(ext: Extender) -> None:
    res = ext.prioritize({"Pod": make_pod("p", milli=500, tier="bronze"),
                          "NodeNames": ["t4-a", "gold", "cordoned", "a100", "nowhere"]})
    scores = {h["Host"]: h["Score"] for h in res}
    assert [h["Host"] for h in res] == ["t4-a", "gold", "cordoned", "a100", "nowhere"]
    assert scores["gold"] == scores["cordoned"] == scores["nowhere"] == 0
    assert sorted([scores["t4-a"], scores["a100"]]) == [1, 10]  # two feasible: winner 10, the other the floor


def test_bind_records_the_placement_and_calls_the_api(ext: Extender, binder: RecordingBinder) -> None:
    pod = make_pod("p", namespace="ml", uid="u-1", cpu="2", milli=250, tier="bronze")
    ext.filter({"Pod": pod, "NodeNames": ["t4-a"]})
    res = ext.bind({"PodName": "p", "PodNamespace": "ml", "PodUID": "u-1", "Node": "t4-a"})
    assert res == {"Error": ""}
    assert binder.calls == [{"namespace": "ml", "name": "p", "uid": "u-1", "node": "t4-a",
                             "annotations": {"seedance.ai/gpu-index": "0"}}]
    assert ext.placement_of("u-1") == ("t4-a", (0,))
    i = ext.state.node_index("t4-a")
    assert ext.state.gpu_free[i].tolist()[:4] == [750, 1000, 1000, 1000]
    assert int(ext.state.cpu_free[i]) == 32000 - 2000
    # the next share packs onto the same GPU (best fit inside the node)
    ext.bind(_bind_args(ext, make_pod("q", uid="u-2", milli=500, tier="bronze"), "t4-a"))
    assert ext.placement_of("u-2") == ("t4-a", (0,))


def test_failed_binding_releases_the_placement(ext: Extender, binder: RecordingBinder) -> None:
    binder.fail = RuntimeError("pods \"p\" not found")
    res = ext.bind(_bind_args(ext, make_pod("p", uid="u-1", gpus=2), "a100"))
    assert res == {"Error": "Seedance: binding default/p to a100 failed: pods \"p\" not found"}
    assert ext.placement_of("u-1") is None
    assert ext.state.gpu_free[ext.state.node_index("a100")].tolist() == [1000] * 8


def test_bind_that_no_longer_fits_is_refused(ext: Extender) -> None:
    for i in range(4):
        ext.bind(_bind_args(ext, make_pod(f"f{i}", gpus=1), "t4-a"))
    res = ext.bind(_bind_args(ext, make_pod("late", gpus=1), "t4-a"))
    assert res["Error"].startswith("Seedance: pod default/late no longer fits node t4-a: no node fits now")


def test_bind_of_an_unseen_pod_uses_the_lookup(binder: RecordingBinder) -> None:
    docs = {("ns", "p"): make_pod("p", namespace="ns", uid="u-9", gpus=1)}
    ext = Extender(make_policy("best-fit"), binder=binder, pod_lookup=lambda ns, n: docs.get((ns, n)))
    ext.set_nodes(small_cluster())
    assert ext.bind({"PodName": "p", "PodNamespace": "ns", "PodUID": "u-9", "Node": "a100"}) == {"Error": ""}
    assert ext.placement_of("u-9") == ("a100", (0,))
    res = ext.bind({"PodName": "ghost", "PodNamespace": "ns", "PodUID": "u-0", "Node": "a100"})
    assert res["Error"] == "Seedance: pod ns/ghost (uid u-0) was never filtered and cannot be looked up"


def test_bind_without_binder_is_an_error() -> None:
    ext = Extender(make_policy("best-fit"))
    ext.set_nodes(small_cluster())
    assert ext.bind({"PodName": "p", "Node": "a100"}) == {
        "Error": "Seedance extender has no Kubernetes binder configured"}


def test_node_changes_rebuild_the_state_and_keep_pods(ext: Extender) -> None:
    ext.bind(_bind_args(ext, make_pod("p", uid="u-1", gpus=2), "a100"))
    # a new node and a relabelled node: state rebuilt, the bound pod re-applied on its GPUs
    assert ext.upsert_node(make_node("new", gpus=2, model="T4", labels=BRONZE, rv="5"))
    assert not ext.upsert_node(make_node("new", gpus=2, model="T4", labels=BRONZE, rv="6"))  # nothing used changed
    assert ext.placement_of("u-1") == ("a100", (0, 1))
    assert ext.state.gpu_free[ext.state.node_index("a100")].tolist()[:3] == [0, 0, 1000]
    # cordon through an update: no rebuild needed, the node drops out of filter
    assert ext.upsert_node(make_node("t4-a", gpus=4, model="T4", cpu="32", memory="128Gi", labels=BRONZE,
                                     unschedulable=True))
    assert "t4-a" not in names(ext.filter({"Pod": make_pod("x", gpus=1), "NodeNames": ["t4-a", "t4-b"]}))
    # removing the node forgets it; the pod record survives and returns with the node
    assert ext.remove_node("a100") and not ext.remove_node("a100")
    assert ext.placement_of("u-1") is None
    ext.upsert_node(make_node("a100", gpus=8, model="A100-80GB", cpu="96", memory="1Ti", labels=BRONZE))
    assert ext.placement_of("u-1") == ("a100", (0, 1))


def test_label_churn_does_not_rebuild_the_state(ext: Extender) -> None:
    state = ext.state
    node = make_node("t4-a", gpus=4, model="T4", cpu="32", memory="128Gi",
                     labels={**BRONZE, "nvidia.com/gfd.timestamp": "1732957200"}, rv="77")
    assert not ext.upsert_node(node)  # GPU feature discovery's timestamp is not a scheduling label
    assert ext.state is state
    node["metadata"]["labels"]["gpu.sla.level"] = "silver"
    assert ext.upsert_node(node)
    assert ext.state is not state


def test_full_node_objects_mode_ingests_nodes_and_echoes_them() -> None:
    ext = Extender(make_policy("best-fit"))
    nodes = small_cluster()
    res = ext.filter(extender_args(make_pod("p", gpus=4, tier="bronze"), nodes, node_cache_capable=False))
    assert res["NodeNames"] is None
    assert [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["t4-a", "t4-b", "a100"]
    assert res["Nodes"]["items"][0] == nodes[0]  # passing nodes are returned as sent
    assert sorted(ext.node_names()) == sorted(n["metadata"]["name"] for n in nodes)
    # the same resourceVersion is not parsed again; a new one is
    changed = make_node("t4-a", gpus=8, model="T4", cpu="32", memory="128Gi", labels=BRONZE, rv="1")
    ext.filter(extender_args(make_pod("q", gpus=8, tier="bronze"), [changed], node_cache_capable=False))
    assert int(ext.state.gpu_count[ext.state.node_index("t4-a")]) == 4
    changed["metadata"]["resourceVersion"] = "2"
    res = ext.filter(extender_args(make_pod("q", gpus=8, tier="bronze"), [changed], node_cache_capable=False))
    assert [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["t4-a"]


def test_observed_pods_are_accounted_once_and_released(ext: Extender) -> None:
    running = make_pod("r", uid="u-r", gpus=3, node="a100", phase="Running",
                       annotations={"seedance.ai/gpu-index": "5,6,7"})
    ext.observe_pod(running)
    ext.observe_pod(running)  # idempotent
    a100 = ext.state.node_index("a100")
    assert ext.state.gpu_free[a100].tolist() == [1000] * 5 + [0] * 3
    ext.observe_pod({**running, "status": {"phase": "Succeeded"}})
    assert ext.state.gpu_free[a100].tolist() == [1000] * 8
    ext.observe_pod(make_pod("unbound", gpus=1))  # no nodeName: nothing to account
    assert ext.placement_of("uid-unbound") is None
    assert not ext.forget_pod("never-seen")


def test_retain_pods_forgets_what_a_relist_no_longer_shows(ext: Extender) -> None:
    ext.observe_pod(make_pod("a", uid="u-a", gpus=1, node="a100", phase="Running"))
    ext.observe_pod(make_pod("b", uid="u-b", gpus=1, node="a100", phase="Running"))
    listed_at = time.monotonic()
    ext.observe_pod(make_pod("c", uid="u-c", gpus=1, node="a100", phase="Running"))  # after the list began
    assert ext.retain_pods(["u-a"], listed_at) == 1
    assert [ext.placement_of(u) is not None for u in ("u-a", "u-b", "u-c")] == [True, False, True]


def test_informer_events_on_real_event_documents(ext: Extender) -> None:
    apply_node_event(ext, {"type": "ADDED", "object": make_node("n-new", gpus=2, model="T4", labels=BRONZE)})
    assert "n-new" in ext.node_names()
    apply_node_event(ext, {"type": "DELETED", "object": {"metadata": {"name": "n-new"}}})
    assert "n-new" not in ext.node_names()
    apply_node_event(ext, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}})
    pod = make_pod("w", uid="u-w", gpus=2, node="t4-a", phase="Running")
    apply_pod_event(ext, {"type": "MODIFIED", "object": pod})
    assert ext.placement_of("u-w") == ("t4-a", (0, 1))
    apply_pod_event(ext, {"type": "ADDED", "object": make_pod("bad", milli=0, node="t4-a")})  # ignored
    apply_pod_event(ext, {"type": "DELETED", "object": pod})
    assert ext.placement_of("u-w") is None


class FakeSource:
    """List/watch source: one list, a watch that ends with 410 Gone, a second list, then blocks."""

    def __init__(self) -> None:
        self.node_lists = 0
        self.release = threading.Event()

    def list_nodes(self) -> tuple[list[dict[str, Any]], str]:
        self.node_lists += 1
        return small_cluster(), "10"

    def watch_nodes(self, resource_version: str, timeout_s: int = 300) -> Any:
        if self.node_lists == 1:
            yield {"type": "ADDED", "object": make_node("late", gpus=1, model="T4", labels=BRONZE)}
            yield {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
        self.release.wait(5)

    def list_pods(self) -> tuple[list[dict[str, Any]], str]:
        return [make_pod("r", uid="u-r", gpus=2, node="a100", phase="Running")], "11"

    def watch_pods(self, resource_version: str, timeout_s: int = 300) -> Any:
        yield {"type": "DELETED", "object": make_pod("r", uid="u-r", gpus=2, node="a100")}
        self.release.wait(5)


def test_informer_loop_lists_watches_and_relists_after_410() -> None:
    ext = Extender(make_policy("best-fit"))
    src = FakeSource()
    inf = Informer(ext, src, retry_s=0.01)
    inf.start()
    try:
        assert inf.wait_synced(5)
        assert ext.synced
        # relisted after 410 Gone: the second list replaced the cache (the watched "late" node is gone)
        assert _eventually(lambda: src.node_lists == 2 and "late" not in ext.node_names()
                           and len(ext.node_names()) == len(small_cluster()))
        assert _eventually(lambda: ext.placement_of("u-r") is None)  # deleted by the pod watch
    finally:
        inf.stop.set()
        src.release.set()


def _eventually(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _bind_args(ext: Extender, pod: dict[str, Any], node: str) -> dict[str, Any]:
    ext.filter({"Pod": pod, "NodeNames": [node]})
    meta = pod["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}

"""The throughput-per-$ scorer as a profile stage (``ThroughputPerDollar``, ``Throughput``): exact choices on
tiny hand-built clusters, fallbacks with their reasons, and the same node from the simulator driver, the live
loop (real SQLite store) and the extender (real HTTP)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.hetero.score_stage import LABEL_BATCH, LABEL_PRICE, LABEL_WORKLOAD, ThroughputPerDollar, workload_rows
from seedance.hetero.throughput import default_matrix
from seedance.profile import Attempt, SchedulingProfile, build_profile, profile_from_text
from seedance.profile.context import MappingPods, PodInfo, StageServices

MATRIX = default_matrix()
RESNET = {LABEL_WORKLOAD: "resnet50-bs64"}
REQ = ResourceRequest(4000, 8192, 1, 1000)


def _doc(scorers: str = "[ThroughputPerDollar]", policy: str = "best-fit") -> str:
    return f"kind: SchedulingProfile\nname: hetero\nplacement: {{policy: {policy}}}\nscorers: {scorers}\n"


def _spec(*nodes: tuple[str, int, str | None, dict[str, str]]) -> ClusterSpec:
    return ClusterSpec(tuple(NodeSpec(n, 64000, 262144, g, m, lab) for n, g, m, lab in nodes))


def _profile(spec: ClusterSpec, pods: dict[int, dict[str, str]], doc: str | None = None) -> tuple[
        SchedulingProfile, ClusterState]:
    view = ClusterState(spec)
    dirs = MappingPods({k: PodInfo(f"job{k}", "t", v) for k, v in pods.items()})
    return build_profile(profile_from_text(doc or _doc(), source="p.yaml"), view,
                         services=StageServices(pods=dirs)), view


def _node(prof: SchedulingProfile, view: ClusterState, pod: int, req: ResourceRequest = REQ) -> str | None:
    d = prof.decide(view, req, pod)
    return None if d.placement is None else view.spec.nodes[d.placement.node].name


def test_the_scorer_is_named_in_the_profile_document_and_unknown_names_list_the_valid_ones() -> None:
    cfg = profile_from_text(_doc("[ThroughputPerDollar, Throughput]"), source="p.yaml")
    assert cfg.scorers == ("ThroughputPerDollar", "Throughput")
    prof, _ = _profile(_spec(("a", 4, "V100-16GB", {})), {}, _doc("[ThroughputPerDollar, Throughput]"))
    assert [s.name for s in prof.scorers] == ["ThroughputPerDollar", "Throughput"]
    with pytest.raises(InputError, match="valid names: .*throughputperdollar") as err:
        profile_from_text(_doc("[ThroughputPerDolar]"), source="p.yaml")
    assert err.value.source == "p.yaml" and err.value.line == 4


def test_resnet50_picks_v100_over_k80_at_catalog_prices_and_k80_when_its_price_says_so() -> None:
    # ResNet-50 bs64, 1 GPU: K80 0.6190 steps/s at $0.45 -> 4952 steps/$; V100 4.3948 at $3.06 -> 5170 steps/$
    spec = _spec(("k80", 4, "K80", {}), ("v100", 8, "V100-16GB", {}))
    prof, view = _profile(spec, {1: RESNET, 2: {}})
    assert _node(prof, view, 2) == "k80"  # best-fit alone: the tighter node
    d = prof.decide(view, REQ, 1)
    assert d.placement is not None and view.spec.nodes[d.placement.node].name == "v100"
    note = d.explanation["ThroughputPerDollar"]
    assert note["job_type"] == "ResNet-50 (batch size 64)"
    assert [t["node"] for t in note["top"]] == ["v100", "k80"]
    assert note["top"][0]["value"] == pytest.approx(4.39477482 * 3600 / 3.06, rel=1e-6)
    assert note["top"][1]["value"] == pytest.approx(0.61902822 * 3600 / 0.45, rel=1e-6)
    assert d.reason.startswith("ThroughputPerDollar: best of 2 feasible node(s) for ResNet-50 (batch size 64), 5170.")
    # a K80 at $0.40/GPU-h: 5571 steps/$ beats the V100
    cheap = _spec(("k80", 4, "K80", {LABEL_PRICE: "0.40"}), ("v100", 8, "V100-16GB", {}))
    prof2, view2 = _profile(cheap, {1: RESNET})
    assert _node(prof2, view2, 1) == "k80"
    # a V100 at $2.50/GPU-h against the catalog K80: 6329 steps/$
    prof3, view3 = _profile(_spec(("k80", 4, "K80", {}), ("v100", 8, "V100-16GB", {LABEL_PRICE: "2.5"})), {1: RESNET})
    assert _node(prof3, view3, 1) == "v100"


def test_throughput_objective_ignores_prices_and_p100_wins_per_dollar() -> None:
    spec = _spec(("k80", 4, "K80", {LABEL_PRICE: "0.01"}), ("p100", 4, "P100", {}), ("v100", 8, "V100-32GB", {}))
    prof, view = _profile(spec, {1: RESNET}, _doc("[Throughput]"))
    assert _node(prof, view, 1) == "v100"  # V100-32GB is a v100 column: 4.39 steps/s
    prof2, view2 = _profile(_spec(("p100", 4, "P100", {}), ("v100", 8, "V100-32GB", {})), {1: RESNET})
    assert _node(prof2, view2, 1) == "p100"  # 2.619 * 3600 / 1.46 = 6459 > 4.395 * 3600 / 3.90 = 4057


def test_a_pod_without_a_workload_gets_the_policys_decision_unchanged() -> None:
    spec = _spec(("k80", 4, "K80", {}), ("v100", 8, "V100-16GB", {}), ("a100", 2, "A100-80GB", {}))
    plain, v1 = _profile(spec, {2: {"team": "x"}}, "kind: SchedulingProfile\nplacement: {policy: best-fit}\n")
    prof, v2 = _profile(spec, {2: {"team": "x"}})
    for pod in (2, 99):  # labelled without a workload; not in the directory at all
        assert prof.decide(v2, REQ, pod) == plain.decide(v1, REQ, pod)
    assert plain._direct and not prof._direct  # the scorer-free profile keeps the simulators' hot path


def test_unknown_workloads_fall_back_to_the_policy_with_the_reason() -> None:
    spec = _spec(("k80", 4, "K80", {}), ("v100", 8, "V100-16GB", {}))
    pods = {1: {LABEL_WORKLOAD: "bert-large"}, 2: {LABEL_WORKLOAD: "resnet50", LABEL_BATCH: "48"},
            3: RESNET, 4: {LABEL_WORKLOAD: "resnet50", LABEL_BATCH: "x"}}
    prof, view = _profile(spec, pods)
    d = prof.decide(view, REQ, 1)
    assert view.spec.nodes[d.placement.node].name == "k80" if d.placement else False  # best-fit's choice
    assert d.reason.startswith("best-fit: best of 2")
    assert d.explanation["ThroughputPerDollar"] == {
        "fallback": "policy score",
        "reason": "workload 'bert-large' is not in the throughput matrix (known: A3C, CycleGAN, LM, "
                  "Recommendation, ResNet-18, ResNet-50, Transformer)"}
    d2 = prof.decide(view, REQ, 2)
    assert d2.explanation["ThroughputPerDollar"]["reason"].startswith(
        "workload 'resnet50' has no row for batch size 48 (rows: ResNet-50 (batch size 16), ")
    d3 = prof.decide(view, ResourceRequest(4000, 8192, 3, 1000), 3)  # no 3-GPU column
    assert d3.explanation["ThroughputPerDollar"] == {
        "job_type": "ResNet-50 (batch size 64)", "fallback": "policy score",
        "reason": "the matrix has no figure for 3 GPU(s) (it has (1, 2, 4, 8))"}
    assert "must be a batch size" in prof.decide(view, REQ, 4).explanation["ThroughputPerDollar"]["reason"]


def test_nodes_without_a_figure_rank_after_scored_ones_with_their_reason() -> None:
    # best-fit alone prefers the A100 (tightest) and then the T4; neither has a matrix column
    spec = _spec(("a100", 1, "A100-80GB", {}), ("t4", 2, "T4", {}), ("v100", 8, "V100-16GB", {}),
                 ("bad", 4, "P100", {LABEL_PRICE: "cheap"}))
    prof, view = _profile(spec, {1: RESNET})
    d = prof.decide(view, REQ, 1)
    assert d.placement is not None and view.spec.nodes[d.placement.node].name == "v100"
    assert d.explanation["ThroughputPerDollar"]["unscored"] == {
        "a100": "no throughput figure for GPU type A100-80GB (the matrix has k80, p100, v100)",
        "t4": "no throughput figure for GPU type T4 (the matrix has k80, p100, v100)",
        "bad": f"label {LABEL_PRICE} must be a price > 0 in $/GPU-h, got 'cheap'"}
    scorer = prof.scorers[0]
    assert isinstance(scorer, ThroughputPerDollar)
    nodes = np.arange(4, dtype=np.intp)
    prof.adapt(Attempt(view, REQ, 1))
    s = scorer.score(view, REQ, nodes, lambda: np.array([40, 30, 10, 20], dtype=np.int64))
    assert s.tolist() == [3, 2, 4, 1]  # v100 first, then the policy's order of the unscored: a100, t4, bad
    # only unscored nodes feasible: the policy's own scores, with the reason
    only = _spec(("a100", 1, "A100-80GB", {}), ("t4", 2, "T4", {}))
    prof2, view2 = _profile(only, {1: RESNET})
    d2 = prof2.decide(view2, REQ, 1)
    assert d2.reason.startswith("best-fit: best of 2") and view2.spec.nodes[d2.placement.node].name == "a100" \
        if d2.placement else False
    assert d2.explanation["ThroughputPerDollar"]["reason"] == "no feasible node has a throughput figure"


def test_workload_names_resolve_to_matrix_rows() -> None:
    assert workload_rows(MATRIX, {LABEL_WORKLOAD: "ResNet-50 (batch size 64)"}) == ("ResNet-50 (batch size 64)", [7])
    assert workload_rows(MATRIX, {LABEL_WORKLOAD: "resnet-50_bs128"}) == ("ResNet-50 (batch size 128)", [8])
    assert workload_rows(MATRIX, {LABEL_WORKLOAD: "RESNET50", LABEL_BATCH: "32"}) == ("ResNet-50 (batch size 32)", [6])
    assert workload_rows(MATRIX, {LABEL_WORKLOAD: "a3c"}) == ("A3C", [14])
    assert workload_rows(MATRIX, {LABEL_WORKLOAD: "resnet50"}) == ("ResNet-50", [5, 6, 7, 8])


def test_a_family_without_batch_size_scores_by_the_geometric_mean_of_its_rows() -> None:
    spec = _spec(("k80", 4, "K80", {}), ("p100", 4, "P100", {}), ("v100", 8, "V100-16GB", {}))
    prof, view = _profile(spec, {1: {LABEL_WORKLOAD: "resnet50"}})
    d = prof.decide(view, REQ, 1)
    top = {t["node"]: t["steps_per_s"] for t in d.explanation["ThroughputPerDollar"]["top"]}
    rows = MATRIX.steps_per_s[5:9, 0, :]
    gm = np.exp(np.log(rows).mean(axis=0))
    assert top == {n: pytest.approx(float(gm[c]), rel=1e-5) for n, c in (("k80", 0), ("p100", 1), ("v100", 2))}
    assert d.explanation["ThroughputPerDollar"]["job_type"] == "ResNet-50"


# ---------------------------------------------------------------- parity: simulator, live loop, extender
PARITY_NODES = (("v100", 8, "V100-16GB", {}), ("p100", 4, "P100", {}), ("t4", 2, "T4", {}),
                ("p100-spot", 4, "P100", {LABEL_PRICE: "0.55"}))
#: (workload labels, GPUs): each placed in turn, so later requests see the earlier ones' GPUs taken
PARITY_REQS: tuple[tuple[dict[str, str], int], ...] = (
    (RESNET, 1), ({LABEL_WORKLOAD: "transformer-bs64"}, 1), ({}, 1), ({LABEL_WORKLOAD: "lm", LABEL_BATCH: "20"}, 2),
    ({LABEL_WORKLOAD: "bert"}, 1), ({LABEL_WORKLOAD: "a3c"}, 4), (RESNET, 1),
)
PARITY_DOC = _doc() + "explain: true\n"  # the live loop explains in full: so do the others


def _row(node: str | None, d: Any) -> dict[str, Any]:
    return {"node": node, "reason": d["reason"], "explanation": json.loads(json.dumps(d["explanation"]))}


def _drive_sim() -> list[dict[str, Any]]:
    from seedance.trust.profile_stages import ensure_trust

    spec = _spec(*PARITY_NODES)
    view = ClusterState(spec)
    pods = MappingPods({i: PodInfo(f"job{i}", "t", dict(lab)) for i, (lab, _) in enumerate(PARITY_REQS)})
    cfg = ensure_trust(profile_from_text(PARITY_DOC, source="p.yaml"), registry=False)  # as every live driver
    prof = build_profile(cfg, view, services=StageServices(pods=pods))
    out = []
    for i, (_, g) in enumerate(PARITY_REQS):
        d = prof.decide(view, ResourceRequest(1000, 1024, g, 1000), i)
        prof.apply(view, d)
        out.append(_row(None if d.placement is None else spec.nodes[d.placement.node].name,
                        {"reason": d.reason, "explanation": d.explanation}))
    return out


def _drive_live(svc: Any) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from seedance.control.db.models import Cluster, DecisionRecord
    from seedance.control.schemas import ClusterCreate, JobCreate, NodeCreate
    from seedance.control.services import clusters, jobs
    from seedance.control.services.attestation import LiveStages
    from seedance.control.services.scheduling import SchedulingLoop
    from tests.control.helpers import ADMIN_TOKEN

    me = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        clusters.create_cluster(session=s, principal=me, data=ClusterCreate(name="hetero"))
        for name, g, model, lab in PARITY_NODES:
            clusters.add_node(session=s, principal=me, cluster_name="hetero", data=NodeCreate(
                name=name, cpu_milli=64000, memory_mib=262144, gpu_count=g, gpu_model=model, labels=dict(lab)))
    with svc.db.read() as s:
        cid = s.scalar(select(Cluster.id).where(Cluster.name == "hetero"))
    loop = SchedulingLoop(svc.db, scorer=svc.scorer, profile=profile_from_text(PARITY_DOC, source="p.yaml"),
                          stages=LiveStages())
    ids = []
    for lab, g in PARITY_REQS:
        with svc.db.write() as s:
            out, _ = jobs.submit_job(session=s, principal=me, data=JobCreate(
                cluster="hetero", gpus=float(g), cpu_milli=1000, memory_mib=1024, labels=dict(lab)),
                scorer=svc.scorer, directory=svc.directory)
        ids.append(out.id)
        loop.schedule_cluster(cid)
    with svc.db.read() as s:
        rows = s.execute(select(DecisionRecord.job_id, DecisionRecord.node_name, DecisionRecord.reason,
                                DecisionRecord.explanation).order_by(DecisionRecord.id)).all()
    last = {int(r[0]): r for r in rows}
    return [_row(last[j][1], {"reason": last[j][2], "explanation": last[j][3]}) for j in ids]


def _drive_extender() -> list[dict[str, Any]]:
    from seedance.k8s.extender import Extender
    from seedance.scheduling import make_policy
    from tests.k8s.k8s_docs import ExtenderOverHttp, RecordingBinder, make_node, make_pod

    ext = Extender(make_policy("best-fit"), binder=RecordingBinder(),
                   profile=profile_from_text(PARITY_DOC, source="p.yaml"))
    ext.set_nodes([make_node(n, gpus=g, model=m, cpu="64", memory="256Gi", labels=lab)
                   for n, g, m, lab in PARITY_NODES])
    names = [n for n, *_ in PARITY_NODES]
    http = ExtenderOverHttp(ext, timeout=30)
    try:
        out = []
        for i, (lab, g) in enumerate(PARITY_REQS):
            pod = make_pod(f"p{i}", cpu="1", memory="1Gi", gpus=g, uid=f"u{i}")
            pod["metadata"]["labels"].update(lab)
            passed = http.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": names})["NodeNames"]
            prio = http.post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": passed})
            best = max(prio, key=lambda h: h["Score"])["Host"]
            assert http.post("bind", {"PodName": f"p{i}", "PodNamespace": "default", "PodUID": f"u{i}",
                                      "Node": best}) == {"Error": ""}
            d = ext.decision_of(f"u{i}")
            assert d is not None and d.placement is not None and names[d.placement.node] == best
            out.append(_row(best, {"reason": d.reason, "explanation": d.explanation}))
        return out
    finally:
        http.close()


def test_simulator_live_loop_and_extender_choose_the_same_nodes(make_service: Any, sqlite_url: str) -> None:
    sim = _drive_sim()
    # resnet50 -> the spot P100 (2.619 * 3600 / 0.55 steps/$); transformer -> spot P100 again; the plain pod
    # -> best-fit's tightest (t4); lm x2 -> spot P100 (its last 2 GPUs); bert -> policy (t4, its last GPU);
    # a3c x4 -> p100 (catalog price beats the V100); the second resnet50 -> v100 (P100s full)
    assert [r["node"] for r in sim] == ["p100-spot", "p100-spot", "t4", "p100-spot", "t4", "p100", "v100"]
    assert sim[4]["explanation"]["ThroughputPerDollar"]["fallback"] == "policy score"
    assert "ThroughputPerDollar" not in sim[2]["explanation"]
    assert _drive_extender() == sim
    assert _drive_live(make_service(sqlite_url)) == sim


def test_the_extender_keeps_the_node_labels_the_hetero_stages_read() -> None:
    from seedance.hetero.labels import NODE_CC, NODE_DRIVER
    from seedance.k8s.extender import Extender
    from seedance.scheduling import make_policy
    from tests.k8s.k8s_docs import make_node

    gfd = dict(zip((*NODE_CC, *NODE_DRIVER), ("7", "0", "450", "80", "02"), strict=True))
    ext = Extender(make_policy("best-fit"))
    ext.set_nodes([make_node("v", gpus=4, model="V100-16GB", labels={**gfd, LABEL_PRICE: "2.1", "churn": "x"})])
    spec = ext._ensure_state().spec.nodes[0]
    assert spec.labels == {"gpu.model": "V100-16GB", **gfd, LABEL_PRICE: "2.1"}  # other labels still dropped

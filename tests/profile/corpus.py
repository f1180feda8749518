"""The decision-parity corpus: random clusters (tier labels, MIG pools, fractional shares) and requests.

Every driver gets the same clusters (node order included) and the same requests in the same order;
``drive_*`` functions return one normalised decision per request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.decision import Decision
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest
from seedance.profile import ProfileConfig, build_profile
from seedance.profile.config import PlacementConfig, SlicesConfig, TiersConfig
from seedance.scheduling.tasktypes import TaskTypes
from tests.k8s.k8s_docs import ExtenderOverHttp

#: (model, GPUs per node); A100-80GB and H100-80GB are MIG-capable (native MIG pools).
MODELS = (("A100-80GB", 8), ("H100-80GB", 4), ("T4", 4), ("V100-32GB", 2), ("L40S", 4))
MIG_MODELS = ("A100-80GB", "H100-80GB")
TIERS = ("gold", "silver", "bronze")
SHARES = (100, 250, 300, 500, 700)


@dataclass(frozen=True, slots=True)
class CNode:
    """One node of a corpus cluster."""

    name: str
    cores: int
    mem_gi: int
    gpus: int
    model: str | None
    labels: dict[str, str]


@dataclass(frozen=True, slots=True)
class CReq:
    """One request of the corpus (``milli`` < 1000: a share of one GPU)."""

    tier: str
    cores: int
    mem_gi: int
    num_gpu: int
    milli: int
    types: tuple[str, ...]

    @property
    def request(self) -> ResourceRequest:
        gpu = self.num_gpu > 0
        return ResourceRequest(cpu_milli=self.cores * 1000, memory_mib=self.mem_gi * 1024, num_gpu=self.num_gpu,
                               gpu_milli=self.milli if gpu else 0, gpu_types=self.types if gpu else ())


@dataclass(frozen=True, slots=True)
class Case:
    """A cluster and the requests submitted to it, in order."""

    name: str
    nodes: tuple[CNode, ...]
    reqs: tuple[CReq, ...]


def corpus(seed: int = 12, clusters: int = 25, per_cluster: int = 20) -> list[Case]:
    """``clusters`` random clusters with ``per_cluster`` requests each (500 by default)."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(clusters):
        nodes = []
        for i in range(int(rng.integers(3, 7))):
            if rng.random() < 0.1:
                model, gpus = None, 0
            else:
                model, gpus = MODELS[int(rng.integers(len(MODELS)))]
            labels: dict[str, str] = {}
            r = rng.random()
            if r < 0.3:
                labels = {"gpu.sla.level": "gold", "gpu.mode": "exclusive"}
            elif r < 0.9:
                labels = {"gpu.sla.level": str(rng.choice(["silver", "bronze"]))}
                mode = str(rng.choice(["", "shared", "mig"]))
                if mode == "mig" and model not in MIG_MODELS:
                    mode = "shared"
                if mode:
                    labels["gpu.mode"] = mode
            nodes.append(CNode(f"c{c}-n{i}", int(rng.choice([16, 32, 64, 96])), int(rng.choice([64, 128, 256, 512])),
                               gpus, model, labels))
        reqs = []
        present = sorted({n.model for n in nodes if n.model})
        for _ in range(per_cluster):
            tier = str(rng.choice(TIERS, p=[0.25, 0.3, 0.45]))
            k = rng.random()
            if k < 0.1:
                num, milli = 0, 0
            elif k < 0.55:
                num, milli = 1, int(rng.choice(SHARES))
            else:
                num, milli = int(rng.choice([1, 1, 2, 4])), MILLI_PER_GPU
            types: tuple[str, ...] = ()
            if num and present and rng.random() < 0.2:
                types = tuple(sorted({str(rng.choice(present)) for _ in range(int(rng.integers(1, 3)))}))
            reqs.append(CReq(tier, int(rng.integers(1, 17)), int(rng.integers(1, 65)), num, milli, types))
        out.append(Case(f"c{c}", tuple(nodes), tuple(reqs)))
    return out


def profile_config(policy: str) -> ProfileConfig:
    """The corpus profile: tiers (own pool, then borrow) and MIG pools on, explanations in full."""
    return ProfileConfig(
        placement=PlacementConfig(policy=policy), queue="priority",
        tiers=TiersConfig(enabled=True, fallbacks=("borrow",)),
        slices=SlicesConfig(mode="mig", mig_map={}), explain=True,
    )


def spec_of(case: Case) -> ClusterSpec:
    return ClusterSpec(tuple(
        NodeSpec(name=n.name, cpu_milli=n.cores * 1000, memory_mib=n.mem_gi * 1024, gpu_count=n.gpus,
                 gpu_model=n.model, labels=dict(n.labels))
        for n in case.nodes
    ))


def task_types(case: Case) -> TaskTypes:
    """The given workload of a case (FGD is given it in every driver)."""
    counts: dict[tuple[int, int, int, str], int] = {}
    spec_types: dict[str, tuple[str, ...]] = {}
    for r in case.reqs:
        q = r.request
        spec = ",".join(q.gpu_types)
        spec_types[spec] = q.gpu_types
        key = (q.cpu_milli, q.gpu_milli, q.num_gpu, spec)
        counts[key] = counts.get(key, 0) + 1
    return TaskTypes.from_counts(counts.items(), spec_types)


def norm(d: Decision, names: list[str]) -> dict[str, Any]:
    """A decision as every driver can report it (JSON round trip of the explanation)."""
    p = d.placement
    return {
        "outcome": d.outcome.value,
        "node": names[p.node] if p is not None else None,
        "gpus": list(p.gpus) if p is not None else [],
        "gpu_milli": (p.gpu_milli if p.gpus else 0) if p is not None else None,
        "reason": d.reason,
        "explanation": json.loads(json.dumps(_plain(d.explanation))),
    }


def _plain(v: Any) -> Any:
    if isinstance(v, dict) or hasattr(v, "items"):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def drive_sim(case: Case, policy: str) -> list[dict[str, Any]]:
    """The simulator driver: observe, decide, apply through the profile, one request at a time."""
    spec = spec_of(case)
    state = ClusterState(spec)
    prof = build_profile(profile_config(policy), state, task_types=task_types(case))
    names = [n.name for n in spec.nodes]
    out = []
    for r in case.reqs:
        req = r.request
        prof.observe(req)
        d = prof.decide(state, req, -1, tier=r.tier)
        if d.placement is not None:
            prof.apply(state, d)
        out.append(norm(d, names))
    return out


def drive_live(svc: Any, case: Case, policy: str, tag: str) -> list[dict[str, Any]]:
    """The live loop over the real store: one job submitted, then one cycle, per request."""
    from sqlalchemy import select

    from seedance.control.db.models import Cluster, DecisionRecord, Job
    from seedance.control.schemas import ClusterCreate, JobCreate, NodeCreate
    from seedance.control.services import clusters, jobs
    from seedance.control.services.scheduling import SchedulingLoop
    from tests.control.helpers import ADMIN_TOKEN

    me = svc.authenticate(ADMIN_TOKEN)
    cname = f"{case.name}-{tag}"
    with svc.db.write() as s:
        clusters.create_cluster(session=s, principal=me, data=ClusterCreate(name=cname))
        for n in case.nodes:
            clusters.add_node(session=s, principal=me, cluster_name=cname, data=NodeCreate(
                name=n.name, cpu_milli=n.cores * 1000, memory_mib=n.mem_gi * 1024, gpu_count=n.gpus,
                gpu_model=n.model, labels=dict(n.labels)))
    with svc.db.read() as s:
        cid = s.scalar(select(Cluster.id).where(Cluster.name == cname))
    assert cid is not None
    loop = SchedulingLoop(svc.db, scorer=svc.scorer, profile=profile_config(policy), task_types=task_types(case))
    ids = []
    for r in case.reqs:
        gpus = r.milli / MILLI_PER_GPU if r.num_gpu == 1 and r.milli < MILLI_PER_GPU else float(r.num_gpu)
        data = JobCreate(cluster=cname, tier=r.tier, gpus=gpus, gpu_types=list(r.types), cpu_milli=r.cores * 1000,
                         memory_mib=r.mem_gi * 1024)
        with svc.db.write() as s:
            out, _ = jobs.submit_job(session=s, principal=me, data=data, scorer=svc.scorer, directory=svc.directory)
        ids.append(out.id)
        loop.schedule_cluster(cid)
    names = [n.name for n in case.nodes]
    with svc.db.read() as s:
        rows = s.execute(select(DecisionRecord.job_id, DecisionRecord.outcome, DecisionRecord.node_name,
                                DecisionRecord.gpu_indices, DecisionRecord.reason, DecisionRecord.explanation)
                         .where(DecisionRecord.job_id.in_(ids)).order_by(DecisionRecord.id)).all()
        booked = {j: (pm, m) for j, pm, m in s.execute(
            select(Job.id, Job.placed_gpu_milli, Job.gpu_milli).where(Job.id.in_(ids)))}
    last = {int(r[0]): r for r in rows}
    out_rows = []
    for jid in ids:
        r = last[jid]
        node = r[2]
        pm, m = booked[jid]
        milli = None if node is None else ((pm if pm is not None else m) if r[3] else 0)
        out_rows.append({"outcome": r[1], "node": node, "gpus": list(r[3]), "gpu_milli": milli, "reason": r[4],
                         "explanation": json.loads(json.dumps(r[5]))})
    assert all(n in names or n is None for n in (x["node"] for x in out_rows))
    return out_rows


class HttpExtender(ExtenderOverHttp):
    """The extender behind its real HTTP server, driven the way kube-scheduler drives it."""

    def __init__(self, case: Case, policy: str) -> None:
        from seedance.k8s.extender import Extender
        from seedance.scheduling import PolicyContext, make_policy
        from tests.k8s.k8s_docs import RecordingBinder, make_node

        self.binder = RecordingBinder()
        pol = make_policy(policy, PolicyContext(seed=0, task_types=task_types(case)))
        self.extender = Extender(pol, binder=self.binder, profile=profile_config(policy))
        self.extender.set_nodes([
            make_node(n.name, gpus=n.gpus, model=n.model, cpu=str(n.cores), memory=f"{n.mem_gi}Gi", labels=n.labels)
            for n in case.nodes
        ])
        self.names = [n.name for n in case.nodes]
        super().__init__(self.extender, timeout=30)

    def schedule(self, pod: dict[str, Any]) -> str | None:
        """filter → prioritize → bind on the best-scored node (kube-scheduler's cycle); the bound node."""
        passed = self.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": self.names})["NodeNames"]
        prio = self.post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": passed})
        if not passed:
            return None
        best = max(prio, key=lambda h: h["Score"])["Host"]
        meta = pod["metadata"]
        res = self.post("bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                 "PodUID": meta["uid"], "Node": best})
        assert res == {"Error": ""}, res
        return str(best)


def pod_doc(r: CReq, i: int, case: Case) -> dict[str, Any]:
    """The Pod document of request ``i`` (borrowing allowed)."""
    from tests.k8s.k8s_docs import make_pod

    share = r.num_gpu == 1 and r.milli < MILLI_PER_GPU
    return make_pod(f"p{i}", cpu=str(r.cores), memory=f"{r.mem_gi}Gi", gpus=r.num_gpu,
                    milli=r.milli if share else None, tier=r.tier, types=",".join(r.types) or None,
                    uid=f"{case.name}-{i}", annotations={"seedance.ai/borrow": "true"})


def drive_extender(case: Case, policy: str) -> list[dict[str, Any]]:
    """The extender over real HTTP: each pod filtered, prioritized and bound in turn."""
    ext = HttpExtender(case, policy)
    try:
        out = []
        for i, r in enumerate(case.reqs):
            pod = pod_doc(r, i, case)
            bound = ext.schedule(pod)
            d = ext.extender.decision_of(pod["metadata"]["uid"])
            assert d is not None
            row = norm(d, ext.names)
            assert row["node"] == bound
            out.append(row)
        return out
    finally:
        ext.close()

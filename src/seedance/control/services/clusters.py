"""Clusters and nodes (shared infrastructure): create, read, change, and current allocations.

Every node change bumps the cluster's versions (see ``db.models``): anything that can take
capacity away bumps ``sched_version`` (an in-flight scheduling cycle then refuses to commit and
re-plans); anything that gives capacity bumps ``capacity_version`` (pending jobs are re-tried).

Nodes are shared by every tenant, but their jobs are not: an operator may change or remove a node
only while it holds no bound or running job of another tenant; otherwise that takes the
``cluster-admin`` role (or ``admin``). Node events carry no tenant and so never name jobs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import func, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from seedance.control.db.models import ALLOC_MILLI, Cluster, Job, Node, utcnow
from seedance.control.errors import Conflict, Forbidden, NotFound
from seedance.control.schemas import ClusterCreate, ClusterRead, NodeCreate, NodeRead, NodeUpdate, Role
from seedance.control.security import Principal
from seedance.control.services import events
from seedance.core.lifecycle import JOB_TRANSITIONS, NODE_TRANSITIONS, JobStatus, NodeStatus, transition

ACTIVE = (JobStatus.BOUND.value, JobStatus.RUNNING.value)


@dataclass(slots=True)
class NodeAlloc:
    """What is allocated on one node."""

    cpu_milli: int = 0
    memory_mib: int = 0
    jobs: int = 0
    gpu_milli: list[int] = field(default_factory=list)


def create_cluster(*, session: Session, principal: Principal, data: ClusterCreate) -> Cluster:
    """Create a cluster (operator or admin)."""
    principal.require(Role.OPERATOR, "creating a cluster")
    cluster = Cluster(name=data.name, description=data.description, sched_version=0, capacity_version=0,
                      created_at=utcnow())
    try:
        with session.begin_nested():
            session.add(cluster)
            session.flush()
    except IntegrityError:
        raise Conflict(f"cluster {data.name!r} already exists") from None
    events.record(session=session, kind="cluster.created", cluster_id=cluster.id, message=f"cluster {cluster.name}")
    return cluster


def ensure_cluster(*, session: Session, name: str) -> Cluster:
    """The cluster called ``name``, created if missing (local mode)."""
    cluster = session.scalars(select(Cluster).where(Cluster.name == name)).first()
    if cluster is None:
        cluster = Cluster(name=name, description="", sched_version=0, capacity_version=0, created_at=utcnow())
        session.add(cluster)
        session.flush()
    return cluster


def get_cluster(*, session: Session, name: str) -> Cluster:
    """The cluster called ``name`` (404 if none)."""
    cluster = session.scalars(select(Cluster).where(Cluster.name == name)).first()
    if cluster is None:
        raise NotFound(f"cluster {name!r} not found")
    return cluster


def list_clusters(*, session: Session) -> list[Cluster]:
    """Every cluster, by id."""
    return list(session.scalars(select(Cluster).order_by(Cluster.id)))


def cluster_totals(*, session: Session, cluster: Cluster) -> dict[str, int]:
    """Node count, GPU count, allocated and total milli-GPU of a cluster."""
    nodes, gpus = session.execute(
        select(func.count(Node.id), func.coalesce(func.sum(Node.gpu_count), 0)).where(Node.cluster_id == cluster.id)
    ).one()
    used = session.execute(
        select(func.coalesce(func.sum(Job.num_gpu * ALLOC_MILLI), 0)).where(
            Job.cluster_id == cluster.id, Job.status.in_(ACTIVE)
        )
    ).scalar_one()
    return {"nodes": int(nodes), "gpus": int(gpus), "allocated_gpu_milli": int(used),
            "capacity_gpu_milli": int(gpus) * 1000}


def cluster_models(*, session: Session, cluster_id: int) -> tuple[str, ...]:
    """GPU models present in a cluster, sorted."""
    rows = session.scalars(
        select(Node.gpu_model).where(Node.cluster_id == cluster_id, Node.gpu_model.is_not(None)).distinct()
    )
    return tuple(sorted(m for m in rows if m is not None))


def bump(*, session: Session, cluster_id: int, sched: bool, capacity: bool) -> None:
    """Advance the cluster's versions (see the module docstring)."""
    values = {}
    if sched:
        values["sched_version"] = Cluster.sched_version + 1
    if capacity:
        values["capacity_version"] = Cluster.capacity_version + 1
    if values:
        session.execute(update(Cluster).where(Cluster.id == cluster_id).values(**values))


# ------------------------------------------------------------------------------------------ nodes
def add_node(*, session: Session, principal: Principal, cluster_name: str, data: NodeCreate) -> Node:
    """Add a node (operator); unschedulable jobs of the cluster become pending again."""
    principal.require(Role.OPERATOR, "adding a node")
    cluster = get_cluster(session=session, name=cluster_name)
    node = Node(
        cluster_id=cluster.id, name=data.name, cpu_milli=data.cpu_milli, memory_mib=data.memory_mib,
        gpu_count=data.gpu_count, gpu_model=data.gpu_model, labels=dict(data.labels),
        status=NodeStatus.READY.value, version=0, created_at=utcnow(),
    )
    try:
        with session.begin_nested():
            session.add(node)
            session.flush()
    except IntegrityError:
        raise Conflict(f"node {data.name!r} already exists in cluster {cluster_name!r}") from None
    bump(session=session, cluster_id=cluster.id, sched=True, capacity=True)
    _requeue_unschedulable(session=session, cluster_id=cluster.id)
    events.record(session=session, kind="node.added", cluster_id=cluster.id, message=f"node {node.name}",
                  data={"gpus": node.gpu_count, "model": node.gpu_model})
    return node


def _requeue_unschedulable(*, session: Session, cluster_id: int) -> None:
    transition(JobStatus.UNSCHEDULABLE, JobStatus.PENDING, JOB_TRANSITIONS)
    session.execute(
        update(Job)
        .where(Job.cluster_id == cluster_id, Job.status == JobStatus.UNSCHEDULABLE.value)
        .values(status=JobStatus.PENDING.value, status_reason="cluster changed: retrying",
                version=Job.version + 1, attempt_capacity_version=-1, updated_at=utcnow())
    )


def get_node(*, session: Session, cluster_name: str, node_name: str) -> tuple[Cluster, Node]:
    """A node by cluster and name (404 if none)."""
    cluster = get_cluster(session=session, name=cluster_name)
    node = session.scalars(select(Node).where(Node.cluster_id == cluster.id, Node.name == node_name)).first()
    if node is None:
        raise NotFound(f"node {node_name!r} not found in cluster {cluster_name!r}")
    return cluster, node


def list_nodes(*, session: Session, cluster_name: str) -> tuple[Cluster, list[Node]]:
    """Nodes of a cluster, in id order (the scheduler's node order)."""
    cluster = get_cluster(session=session, name=cluster_name)
    nodes = list(session.scalars(select(Node).where(Node.cluster_id == cluster.id).order_by(Node.id)))
    return cluster, nodes


def _guard_foreign_jobs(*, session: Session, principal: Principal, cluster_id: int, node: Node, action: str) -> None:
    """Refuse ``action`` on a node holding other tenants' placed jobs unless the caller is a cluster-admin."""
    if principal.role.rank >= Role.CLUSTER_ADMIN.rank:
        return
    foreign = session.execute(select(func.count(Job.id)).where(
        Job.cluster_id == cluster_id, Job.node_name == node.name, Job.status.in_(ACTIVE),
        Job.tenant_id != principal.tenant_id,
    )).scalar_one()
    if foreign:
        raise Forbidden(f"node {node.name!r} holds jobs of other tenants; {action} it needs role cluster-admin "
                        f"(this token is {principal.role.value})")


def update_node(
    *, session: Session, principal: Principal, cluster_name: str, node_name: str, data: NodeUpdate
) -> Node:
    """Change labels and/or status (cordon, drain, down, ready) along the node lifecycle."""
    principal.require(Role.OPERATOR, "changing a node")
    cluster, node = get_node(session=session, cluster_name=cluster_name, node_name=node_name)
    changes: dict[str, object] = {}
    sched = capacity = False
    if data.status is not None and data.status.value != node.status:
        transition(NodeStatus(node.status), data.status, NODE_TRANSITIONS)
        changes["status"] = data.status.value
        if data.status is NodeStatus.READY:
            capacity = True
        else:
            sched = True
    if data.labels is not None and data.labels != node.labels:
        changes["labels"] = dict(data.labels)
        sched = capacity = True  # label filters may both exclude and admit the node now
    if not changes:
        return node
    _guard_foreign_jobs(session=session, principal=principal, cluster_id=cluster.id, node=node, action="changing")
    rows = session.execute(
        update(Node).where(Node.id == node.id, Node.version == node.version)
        .values(**changes, version=Node.version + 1)
    ).rowcount  # type: ignore[attr-defined]
    if rows != 1:
        raise Conflict(f"node {node_name!r} changed concurrently; retry")
    bump(session=session, cluster_id=cluster.id, sched=sched, capacity=capacity)
    if capacity:
        _requeue_unschedulable(session=session, cluster_id=cluster.id)
    events.record(session=session, kind="node.updated", cluster_id=cluster.id, message=f"node {node.name}",
                  data=dict(changes))
    session.refresh(node)
    return node


def delete_node(*, session: Session, principal: Principal, cluster_name: str, node_name: str) -> list[int]:
    """Remove a node; its bound and running jobs go back to pending. Returns their ids."""
    principal.require(Role.OPERATOR, "removing a node")
    cluster, node = get_node(session=session, cluster_name=cluster_name, node_name=node_name)
    _guard_foreign_jobs(session=session, principal=principal, cluster_id=cluster.id, node=node, action="removing")
    victims = list(session.scalars(
        select(Job).where(Job.cluster_id == cluster.id, Job.node_name == node.name, Job.status.in_(ACTIVE))
    ))
    now = utcnow()
    for job in victims:
        status = JobStatus(job.status)
        steps = [JobStatus.PENDING] if status is JobStatus.BOUND else [JobStatus.PREEMPTED, JobStatus.PENDING]
        for s in steps:
            status = transition(status, s, JOB_TRANSITIONS)
        session.execute(
            update(Job).where(Job.id == job.id).values(
                status=JobStatus.PENDING.value, status_reason=f"node {node.name} removed: re-queued",
                node_name=None, gpu_indices=[], placed_gpu_milli=None, dispatch_handle=None,
                version=Job.version + 1,
                attempt_capacity_version=-1, updated_at=now, bound_at=None, started_at=None,
            )
        )
        events.record(session=session, kind="job.requeued", tenant_id=job.tenant_id, job_id=job.id,
                      cluster_id=cluster.id, message=f"node {node.name} removed")
    session.delete(node)
    session.flush()
    bump(session=session, cluster_id=cluster.id, sched=True, capacity=True)
    events.record(session=session, kind="node.removed", cluster_id=cluster.id, message=f"node {node.name}",
                  data={"requeued_jobs": len(victims),
                        "labels": {str(k): str(v) for k, v in node.labels.items()}})
    return [j.id for j in victims]


def allocations(*, session: Session, cluster_id: int, nodes: Iterable[Node]) -> dict[str, NodeAlloc]:
    """Allocation per node name from the bound and running jobs of a cluster."""
    out = {n.name: NodeAlloc(gpu_milli=[0] * n.gpu_count) for n in nodes}
    rows = session.execute(
        select(Job.node_name, Job.gpu_indices, ALLOC_MILLI, Job.cpu_milli, Job.memory_mib)
        .where(Job.cluster_id == cluster_id, Job.status.in_(ACTIVE))
    )
    for node_name, gpus, milli, cpu, mem in rows:
        a = out.get(node_name) if node_name is not None else None
        if a is None:
            continue
        a.cpu_milli += cpu
        a.memory_mib += mem
        a.jobs += 1
        for g in gpus:
            if 0 <= g < len(a.gpu_milli):
                a.gpu_milli[g] += milli
    return out


def to_cluster_read(*, session: Session, cluster: Cluster) -> ClusterRead:
    """The API view of a cluster, with totals."""
    totals = cluster_totals(session=session, cluster=cluster)
    return ClusterRead(id=cluster.id, name=cluster.name, description=cluster.description,
                       created_at=cluster.created_at, **totals)


def to_node_read(cluster_name: str, node: Node, alloc: NodeAlloc | None) -> NodeRead:
    """The API view of a node with its allocation."""
    a = alloc or NodeAlloc(gpu_milli=[0] * node.gpu_count)
    return NodeRead(
        id=node.id, cluster=cluster_name, name=node.name, cpu_milli=node.cpu_milli, memory_mib=node.memory_mib,
        gpu_count=node.gpu_count, gpu_model=node.gpu_model, labels={str(k): str(v) for k, v in node.labels.items()},
        status=NodeStatus(node.status), allocated_cpu_milli=a.cpu_milli, allocated_memory_mib=a.memory_mib,
        allocated_gpu_milli=a.gpu_milli, jobs=a.jobs,
    )


_GPU_ALLOC_SQL = {  # ACTIVE jobs' GPU indexes unnested and summed in the store: one row per allocated GPU
    "postgresql": "SELECT j.cluster_id, j.node_name, CAST(g.value AS INTEGER), "
                  "SUM(COALESCE(j.placed_gpu_milli, j.gpu_milli)) "
                  "FROM jobs AS j, jsonb_array_elements_text(j.gpu_indices) AS g(value) "
                  "WHERE j.status IN ('bound', 'running') AND j.node_name IS NOT NULL{where} GROUP BY 1, 2, 3",
    "sqlite": "SELECT j.cluster_id, j.node_name, CAST(g.value AS INTEGER), "
              "SUM(COALESCE(j.placed_gpu_milli, j.gpu_milli)) "
              "FROM jobs AS j, json_each(j.gpu_indices) AS g "
              "WHERE j.status IN ('bound', 'running') AND j.node_name IS NOT NULL{where} GROUP BY 1, 2, 3",
}


def gpu_allocation(*, session: Session, cluster_id: int | None = None) -> dict[tuple[int, str], dict[int, int]]:
    """Milli-GPU allocated on each GPU of each node, ``(cluster id, node name) -> {gpu index: milli}``.

    The same sums as :func:`allocations`' ``gpu_milli``, computed by one statement in the store: it returns
    one row per allocated GPU (at most the GPUs' count) instead of every placed job with its index list.
    Of one cluster (``cluster_id``) or of all."""
    dialect = session.get_bind().dialect.name
    sql = _GPU_ALLOC_SQL[dialect].format(where=" AND j.cluster_id = :c" if cluster_id is not None else "")
    out: dict[tuple[int, str], dict[int, int]] = {}
    for cid, node, gpu, milli in session.execute(text(sql), {"c": cluster_id} if cluster_id is not None else {}):
        out.setdefault((int(cid), node), {})[int(gpu)] = int(milli)
    return out

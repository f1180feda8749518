"""``/api/v1/clusters`` and their nodes (shared infrastructure: every tenant may read them)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from sqlalchemy.orm import Session

from seedance.control.api.deps import ClusterPath, NodePath, PrincipalDep, ServiceDep
from seedance.control.api.errors import ERROR_RESPONSES
from seedance.control.db.models import Cluster
from seedance.control.schemas import ClusterCreate, ClusterRead, NodeCreate, NodeRead, NodeUpdate
from seedance.control.services import clusters

router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)


def _cluster_read(s: Session, c: Cluster) -> ClusterRead:
    return clusters.to_cluster_read(session=s, cluster=c)


_node_read = clusters.to_node_read


@router.post("/clusters", status_code=201, response_model=ClusterRead, tags=["clusters"])
def create_cluster(data: ClusterCreate, svc: ServiceDep, me: PrincipalDep) -> ClusterRead:
    """Create a cluster (operator)."""
    with svc.db.write() as s:
        return _cluster_read(s, clusters.create_cluster(session=s, principal=me, data=data))


@router.get("/clusters", response_model=list[ClusterRead], tags=["clusters"])
def list_clusters(svc: ServiceDep, me: PrincipalDep) -> list[ClusterRead]:
    """Every cluster with its totals."""
    with svc.db.read() as s:
        return [_cluster_read(s, c) for c in clusters.list_clusters(session=s)]


@router.get("/clusters/{cluster}", response_model=ClusterRead, tags=["clusters"])
def get_cluster(cluster: ClusterPath, svc: ServiceDep, me: PrincipalDep) -> ClusterRead:
    """One cluster."""
    with svc.db.read() as s:
        return _cluster_read(s, clusters.get_cluster(session=s, name=cluster))


@router.post("/clusters/{cluster}/nodes", status_code=201, response_model=NodeRead, tags=["nodes"])
def add_node(cluster: ClusterPath, data: NodeCreate, svc: ServiceDep, me: PrincipalDep) -> NodeRead:
    """Add a node (operator)."""
    with svc.db.write() as s:
        node = clusters.add_node(session=s, principal=me, cluster_name=cluster, data=data)
        out = _node_read(cluster, node, None)
    svc.wake_scheduler()
    return out


@router.get("/clusters/{cluster}/nodes", response_model=list[NodeRead], tags=["nodes"])
def list_nodes(cluster: ClusterPath, svc: ServiceDep, me: PrincipalDep) -> list[NodeRead]:
    """Nodes of a cluster with their allocation."""
    with svc.db.read() as s:
        c, nodes = clusters.list_nodes(session=s, cluster_name=cluster)
        alloc = clusters.allocations(session=s, cluster_id=c.id, nodes=nodes)
        return [_node_read(cluster, n, alloc.get(n.name)) for n in nodes]


@router.get("/clusters/{cluster}/nodes/{node}", response_model=NodeRead, tags=["nodes"])
def get_node(cluster: ClusterPath, node: NodePath, svc: ServiceDep, me: PrincipalDep) -> NodeRead:
    """One node with its allocation."""
    with svc.db.read() as s:
        c, n = clusters.get_node(session=s, cluster_name=cluster, node_name=node)
        alloc = clusters.allocations(session=s, cluster_id=c.id, nodes=[n])
        return _node_read(cluster, n, alloc.get(n.name))


@router.patch("/clusters/{cluster}/nodes/{node}", response_model=NodeRead, tags=["nodes"])
def update_node(
    cluster: ClusterPath, node: NodePath, data: NodeUpdate, svc: ServiceDep, me: PrincipalDep
) -> NodeRead:
    """Change a node's labels or status (operator)."""
    with svc.db.write() as s:
        n = clusters.update_node(session=s, principal=me, cluster_name=cluster, node_name=node, data=data)
        c = clusters.get_cluster(session=s, name=cluster)
        out = _node_read(cluster, n, clusters.allocations(session=s, cluster_id=c.id, nodes=[n]).get(n.name))
    svc.wake_scheduler()
    return out


@router.delete("/clusters/{cluster}/nodes/{node}", status_code=204, tags=["nodes"])
def delete_node(cluster: ClusterPath, node: NodePath, svc: ServiceDep, me: PrincipalDep) -> Response:
    """Remove a node (operator); its jobs are re-queued."""
    with svc.db.write() as s:
        clusters.delete_node(session=s, principal=me, cluster_name=cluster, node_name=node)
    svc.wake_scheduler()
    return Response(status_code=204)

"""Live migration on a real Ray cluster: checkpoint a running PyTorch job, stop it, resume it on another node.

The job is the backends' ``torch-train`` workload (``seedance.backends.workloads``). A run pinned to the
source node (through the node's ``seedance.node:<name>`` resource) stops after step ``k`` and returns
its real state dict (model, Adam moments, step, losses) as ``torch.save`` bytes; the resumed run is
pinned to the target node and gets the source run's result *by reference*, so Ray moves the
checkpoint between the two raylets' object stores. The resumed run continues at step ``k + 1``.

Measured per job: the losses after the move against an uninterrupted run of the same job (must match
to 1e-6), the migration time (the source's checkpoint start to the target's state loaded: serialise,
object transfer, a fresh worker process on the target node (``max_calls=1``), imports, deserialise),
and the planner's estimate of the same move (``seedance.hetero.migration``) for the checkpoint's size.

``start_local_cluster`` starts raylets on this machine (``seedance.backends.local_cluster``) and connects
to them; whoever calls it on a shared machine holds ``flock`` on the Ray lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from seedance.backends.local_cluster import local_ray_cluster
from seedance.backends.ray_backend import ray_node_resources
from seedance.backends.ray_runtime import NODE_PREFIX


@contextmanager
def start_local_cluster(names: Sequence[str], *, gpus_per_node: int = 2) -> Iterator[Any]:
    """Raylets standing for Seedance nodes ``names`` (the first is the head); connected and shut down after."""
    with local_ray_cluster([(n, ray_node_resources(n, gpus_per_node)) for n in names], gpus_per_node=gpus_per_node,
                           prefix="sdmig-") as local:
        import ray

        try:
            ray.init(address=local.address, log_to_driver=False, _node_ip_address="127.0.0.1",
                     namespace="seedance-migration", logging_level=logging.WARNING)
            yield local.cluster
        finally:
            ray.shutdown()


def _train(job_id: int, params: dict[str, str], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Runs inside a Ray task: the workload, resumed from ``previous['checkpoint']`` when given."""
    import ray

    from seedance.backends.workloads import WORKLOADS, JobContext

    started = time.time()
    ctx = JobContext(job_id=job_id, name=f"mig-{job_id}", attempt=2 if previous else 1, params=params,
                     resume_state=previous["checkpoint"] if previous else None)
    out = WORKLOADS.get("torch-train")(ctx)
    out["node_id"] = ray.get_runtime_context().get_node_id()
    out["task_started_unix"] = started
    return out


def migrate_jobs(plan: Sequence[tuple[int, str, str]], *, steps: int = 40, checkpoint_at: int = 20,
                 timeout_s: float = 300.0) -> list[dict[str, Any]]:
    """For each ``(job_id, source, target)``: an uninterrupted run on the source and a run stopped at
    ``checkpoint_at`` there and resumed on the target; all jobs at once. Needs a connected Ray."""
    import ray

    # max_calls=1: every run is a fresh worker process (a real restart: interpreter, imports, state load)
    task = ray.remote(num_cpus=0.5, max_retries=0, max_calls=1)(_train)
    node_ids: dict[str, str] = {}
    for n in ray.nodes():  # type: ignore[no-untyped-call]
        if n["Alive"]:
            for k in n["Resources"]:
                if k.startswith(NODE_PREFIX):
                    node_ids[k[len(NODE_PREFIX):]] = n["NodeID"]

    def on(node: str) -> Any:
        return task.options(resources={f"{NODE_PREFIX}{node}": 0.01})

    base = {"steps": str(steps)}
    fulls = ray.get([on(src).remote(job_id, base, None) for job_id, src, _ in plan], timeout=timeout_s)
    refs = []
    for job_id, src, dst in plan:  # all jobs migrate at once
        first = on(src).remote(job_id, {**base, "checkpoint-at": str(checkpoint_at)}, None)
        second = on(dst).remote(job_id, base, first)  # the checkpoint moves by reference
        refs.append((job_id, src, dst, first, second))
    out = []
    for (job_id, src, dst, first, second), full in zip(refs, fulls, strict=True):
        a, b = ray.get([first, second], timeout=timeout_s)
        diffs = [abs(x - y) for x, y in zip(full["losses"][checkpoint_at:], b["losses"][checkpoint_at:], strict=True)]
        out.append({
            "job": job_id, "source": src, "target": dst,
            "source_node_ok": a["node_id"] == node_ids.get(src), "target_node_ok": b["node_id"] == node_ids.get(dst),
            "completed": b["steps"] == steps,
            "checkpoint_bytes": len(a["checkpoint"]),
            "resumed_losses": b["losses"][checkpoint_at:],
            "uninterrupted_losses": full["losses"][checkpoint_at:],
            "max_loss_diff": max(diffs) if diffs else 0.0,
            "migration_s": b["resumed_at_unix"] - a["checkpointed_at_unix"],
            "target_task_start_s": b["task_started_unix"] - a["checkpointed_at_unix"],
        })
    return out


def planner_estimate(checkpoint_bytes: int, *, network_gbps: float = 10.0, restart_s: float = 10.0) -> dict[str, Any]:
    """The planner's figure for moving ``checkpoint_bytes`` between two nodes like the local ones."""
    from seedance.hetero.fleet import FleetNode, gpu_type
    from seedance.hetero.migration import MigrationPlanner, MigrationRequest
    from seedance.storage.tiers import STORAGE
    from seedance.topology.compat import CudaBuild, newest_driver

    g = gpu_type("A100-80GB")  # the Seedance nodes the Ray test cluster stands for
    nodes = [FleetNode(n, g, 2, newest_driver(g.compute_capability), g.tdp_w, STORAGE.get("tiered"),
                       network_gbps / 8.0) for n in ("src", "dst")]
    req = MigrationRequest("live", checkpoint_bytes / 1e9, CudaBuild.of("12.4"), nodes[0], 0.0)
    c = MigrationPlanner(restart_s=restart_s).cost(req, nodes[1])
    return {"transfer_s": c.transfer_s, "restart_s": c.restart_s, "data_s": c.transfer_s - c.restart_s,
            "assumed": f"A100-80GB nodes, {network_gbps:g} Gbit/s network, restart {restart_s:g} s"}

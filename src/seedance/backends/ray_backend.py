"""``--dispatcher ray``: run placed jobs on a Ray cluster, where Seedance decided.

Mapping (see ``docs/ray.md``):

* **Nodes.** Each Seedance node is one Ray node started with the custom resource
  ``seedance.node:<name>`` (:func:`ray_node_resources` / :func:`ray_start_args` give all of them).
  A job runs as a Ray task with ``NodeAffinitySchedulingStrategy(<that Ray node's id>, soft=False)``:
  never anywhere else.
* **GPUs.** ``num_gpus`` = the job's GPU share (``gpu_milli / 1000`` for a fraction, the GPU count
  otherwise), ``num_cpus`` = 0 for GPU jobs (Seedance books their CPU; Ray's CPU count of a GPU node
  then does not serialise fractional jobs) and the CPU request for CPU-only jobs. Each GPU index of
  the decision is also booked as ``seedance.gpu:<i>`` (one unit per GPU on the node), so Ray admits a
  job only where Seedance's per-GPU packing says it fits, and the task's ``CUDA_VISIBLE_DEVICES`` is
  set to Seedance's GPU indices (Ray's own choice is recorded next to it).
* **Labels and tiers.** For each key in ``label_keys`` (default ``gpu.sla.level``, ``gpu.mode``) that
  the decided node carries, the task asks for a sliver (0.001) of ``<key>:<value>``, which that
  node advertises: a task can only run on a node of the label Seedance filtered on.
* **Status.** pending/running -> ``RUNNING``; succeeded, failed, cancelled as such; a run whose node
  died -> ``PREEMPTED`` (the loop re-queues the job and marks the node down through
  :meth:`RayDispatcher.node_health`).
* **Logs.** The task's stdout/stderr go to the supervisor (``ray_runtime.JobSupervisor``), which keeps
  one file per job in ``log_dir``; :meth:`RayDispatcher.logs` reads it (``seedancectl logs``).

Settings: ``SEEDANCE_RAY_*`` environment variables or keyword arguments (:class:`RaySettings`).
``ray`` is imported when the dispatcher first talks to the cluster, never at import.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from seedance.backends.dispatch import DISPATCHERS, BackendStatus, Dispatcher, DispatchRequest
from seedance.backends.ray_runtime import GPU_PREFIX, HANDLE_PREFIX, HEAD_RESOURCE, NODE_PREFIX
from seedance.backends.workloads import workload_of
from seedance.core.errors import InputError

LABEL_REQUEST = 0.001
"""Amount of a node-label resource a task asks for (a node advertises 1: a thousand jobs)."""

_STATUS = {
    "pending": BackendStatus.RUNNING, "running": BackendStatus.RUNNING, "succeeded": BackendStatus.SUCCEEDED,
    "failed": BackendStatus.FAILED, "cancelled": BackendStatus.CANCELLED, "lost": BackendStatus.PREEMPTED,
}


class RaySettings(BaseSettings):
    """Where the Ray cluster is and how jobs are mapped onto it (``SEEDANCE_RAY_*``)."""

    model_config = SettingsConfigDict(env_prefix="SEEDANCE_RAY_", extra="ignore", frozen=True)

    address: str = Field(default="auto", description="Ray cluster address (GCS host:port, 'auto' or ray://...).")
    namespace: str = Field(default="seedance", description="Ray namespace of the supervisor actor.")
    supervisor: str = Field(default="seedance-supervisor", description="Name of the supervisor actor.")
    log_dir: str | None = Field(
        default=None, description="Folder of the job logs on the head node (default: $SEEDANCE_HOME/ray-logs).")
    label_keys: tuple[str, ...] = Field(
        default=("gpu.sla.level", "gpu.mode"), description="Node label keys asked for as <key>:<value> resources.")
    flush_s: float = Field(default=0.5, gt=0, le=60, description="Seconds between log shipments of a running job.")
    max_log_bytes: int = Field(default=16 * 2**20, ge=1024, description="Most bytes of log kept per job.")
    max_calls: int | None = Field(
        default=None, ge=0,
        description="Tasks per Ray worker process before it exits (None: Ray's default, 1 for GPU tasks).")
    call_timeout_s: float = Field(default=60.0, gt=0, description="Seconds to wait for the supervisor per call.")


def ray_node_resources(name: str, gpu_count: int, labels: Mapping[str, str] | None = None,
                       label_keys: Sequence[str] = ("gpu.sla.level", "gpu.mode")) -> dict[str, float]:
    """Custom resources the Ray node standing for Seedance node ``name`` must advertise."""
    res = {f"{NODE_PREFIX}{name}": 1.0}
    res.update({f"{GPU_PREFIX}{i}": 1.0 for i in range(gpu_count)})
    for key in label_keys:
        value = (labels or {}).get(key)
        if value:
            res[f"{key}:{value}"] = 1.0
    return res


def ray_start_args(name: str, gpu_count: int, labels: Mapping[str, str] | None = None,
                   label_keys: Sequence[str] = ("gpu.sla.level", "gpu.mode")) -> list[str]:
    """``ray start`` arguments of the Ray node standing for Seedance node ``name``."""
    import json

    resources = ray_node_resources(name, gpu_count, labels, label_keys)
    return [f"--num-gpus={gpu_count}", f"--resources={json.dumps(resources)}"]


def task_options(job: DispatchRequest, settings: RaySettings) -> dict[str, Any]:
    """Ray task options of a placed job (without its scheduling strategy, which needs the node id)."""
    gpus = tuple(job.gpu_indices)
    share = job.gpu_milli / 1000 if gpus else 0.0
    resources = {f"{GPU_PREFIX}{g}": share for g in gpus}
    for key in settings.label_keys:
        value = job.node_labels.get(key)
        if value:
            resources[f"{key}:{value}"] = LABEL_REQUEST
    opts: dict[str, Any] = {
        "num_gpus": share * len(gpus),
        "num_cpus": 0 if gpus else job.cpu_milli / 1000,
        "resources": resources,
        "max_retries": 0,  # the control plane re-queues; Ray must not retry elsewhere on its own
        "retry_exceptions": False,
        "name": f"seedance-job-{job.job_id}",
    }
    if settings.max_calls is not None:
        opts["max_calls"] = settings.max_calls
    return opts


def job_spec(job: DispatchRequest, settings: RaySettings) -> dict[str, Any]:
    """What the supervisor needs to run a placed job."""
    workload, params = workload_of(job.labels)
    return {
        "job_id": job.job_id, "name": job.name, "node": job.node, "gpu_indices": list(job.gpu_indices),
        "gpu_milli": job.gpu_milli, "workload": workload, "params": params, "flush_s": settings.flush_s,
        "options": task_options(job, settings),
    }


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("the ray dispatcher needs Ray: pip install 'seedance[ray]'", field="dispatcher") from None
    return ray


@DISPATCHERS.register("ray")
class RayDispatcher(Dispatcher):
    """Runs each placed job as a Ray task on the Ray node of Seedance's decision (module docstring).

    Args:
        settings: Where the cluster is and how jobs map onto it (default: ``SEEDANCE_RAY_*``).
        **options: Fields of :class:`RaySettings` (when ``settings`` is not given).

    It connects on first use: to the Ray session this process already has (``ray.init`` done by
    the caller, e.g. a test), else ``ray.init(address=settings.address)``.
    """

    name = "ray"

    def __init__(self, settings: RaySettings | None = None, **options: Any) -> None:
        self.settings = settings if settings is not None else RaySettings(**options)
        self._sup: Any = None
        self._ray: Any = None
        self._owns_session = False
        self._lock = threading.Lock()
        self._reasons: dict[str, str] = {}

    # -------------------------------------------------------------------------- connection
    def _log_dir(self) -> str:
        if self.settings.log_dir:
            return self.settings.log_dir
        from seedance.control.paths import home_dir

        return str(home_dir() / "ray-logs")

    def supervisor(self) -> Any:
        """The supervisor actor (created on the head node when missing)."""
        with self._lock:
            if self._sup is None:
                ray = _import_ray()
                if not ray.is_initialized():
                    ray.init(address=self.settings.address, namespace=self.settings.namespace, log_to_driver=False,
                             logging_level=logging.WARNING)
                    self._owns_session = True
                from seedance.backends.ray_runtime import JobSupervisor

                self._sup = ray.remote(JobSupervisor).options(
                    name=self.settings.supervisor, namespace=self.settings.namespace, lifetime="detached",
                    get_if_exists=True, num_cpus=0, resources={HEAD_RESOURCE: 0.001}, max_restarts=0,
                ).remote(self._log_dir(), self.settings.max_log_bytes)
                self._ray = ray
            return self._sup

    def _call(self, method: str, *args: Any) -> Any:
        sup = self.supervisor()
        try:
            return self._ray.get(getattr(sup, method).remote(*args), timeout=self.settings.call_timeout_s)
        except self._ray.exceptions.RayActorError:
            with self._lock:  # the supervisor died (its head node restarted): look it up again next time
                self._sup = None
            raise

    # ---------------------------------------------------------------------------- contract
    def dispatch(self, job: DispatchRequest) -> str:
        return str(self._call("submit", job_spec(job, self.settings)))

    def cancel(self, handle: str) -> None:
        if handle.startswith(HANDLE_PREFIX):
            self._call("cancel", handle)

    def poll(self, handles: Sequence[str]) -> dict[str, BackendStatus]:
        mine = [h for h in handles if h.startswith(HANDLE_PREFIX)]
        got: dict[str, tuple[str, str]] = self._call("poll", mine) if mine else {}
        out: dict[str, BackendStatus] = {}
        reasons: dict[str, str] = {}
        for h in handles:
            st = got.get(h)
            if st is None:
                out[h] = BackendStatus.UNKNOWN
                continue
            out[h] = _STATUS.get(st[0], BackendStatus.UNKNOWN)
            if out[h] is not BackendStatus.RUNNING:
                reasons[h] = st[1]
        self._reasons = reasons  # the last poll's ends only: bounded by the running jobs
        return out

    def reason(self, handle: str) -> str | None:
        return self._reasons.get(handle)

    def node_health(self) -> Mapping[str, bool]:
        return dict(self._call("nodes"))

    def logs(self, job_id: int, *, tail_bytes: int | None = None) -> str | None:
        text = self._call("read_log", job_id, tail_bytes)
        return None if text is None else str(text)

    # ------------------------------------------------------------------------------ extras
    def attempts(self, job_id: int | None = None) -> list[dict[str, Any]]:
        """Every run the supervisor knows (of one job): node, Ray node asked for and reported, GPUs, status."""
        return list(self._call("attempts", job_id))

    def release(self, job_ids: Sequence[int] | None = None) -> None:
        """Let held jobs (``seedance.io/hold``) go on; ``None``: all of them, now and later."""
        self._call("release", list(job_ids) if job_ids is not None else None)

    def close(self) -> None:
        """Disconnect a Ray session this dispatcher opened (the supervisor and its jobs live on)."""
        with self._lock:
            if self._owns_session and self._ray is not None:
                self._ray.shutdown()
            self._sup = None
            self._owns_session = False

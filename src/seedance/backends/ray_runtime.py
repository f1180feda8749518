"""Code that runs inside the Ray cluster: the job supervisor actor and the job task.

NOTE(seedance): one supervisor actor owns every job's task.
  The control plane does not own the Ray tasks itself: a detached, named actor on the head node
  (``JobSupervisor``, one per namespace) submits them, so that
  * any control-plane process (several uvicorn workers, the CLI, a restarted server) reaches the
    same jobs by name, and ``dispatch`` is idempotent per job id across processes;
  * tasks survive a control-plane restart (a Ray task dies with its owner; the actor lives on);
  * ``ray.cancel`` works (only a task's owner may cancel it);
  * status, placement records and logs live in one place, next to Ray's GCS, which a worker-node
    failure does not take away.
  (Ray's own job submission keeps one detached ``JobSupervisor`` actor per job for the same reasons.)

  Per job the supervisor keeps its runs ("attempts"). ``submit`` returns the live attempt's handle
  (``ray:<job>:<attempt>``) when there is one, else starts attempt n+1 (the job was re-queued after
  its node died). A task reports its start (the Ray node it runs on, its GPU ids) and ships its
  captured stdout/stderr in chunks through ``report``; the supervisor appends them to
  ``<log_dir>/job-<id>.log`` with one header and one trailer line per attempt.

  Statuses: pending (submitted) -> running (started) -> succeeded | failed | cancelled | lost.
  "lost" = the node died (``NodeDiedError``, the node vanished from ``ray.nodes()``, or the task
  could no longer be placed there); the control plane re-queues such jobs.

The module imports ``ray`` only inside functions: it is shipped to the workers by reference.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

NODE_PREFIX = "seedance.node:"
"""Custom resource naming the Seedance node a Ray node is (``seedance.node:<name>``: 1)."""
GPU_PREFIX = "seedance.gpu:"
"""Per-GPU custom resource (``seedance.gpu:<index>``: 1 per GPU): Ray then books Seedance's GPU choice."""
HEAD_RESOURCE = "node:__internal_head__"
"""Ray's resource of the head node, where the supervisor runs."""

PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, LOST = "pending", "running", "succeeded", "failed", "cancelled", "lost"
LIVE = frozenset({PENDING, RUNNING})
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED, LOST})
HANDLE_PREFIX = "ray:"


def make_handle(job_id: int, attempt: int) -> str:
    """The dispatch handle of one attempt."""
    return f"{HANDLE_PREFIX}{job_id}:{attempt}"


def parse_handle(handle: str) -> tuple[int, int] | None:
    """``(job_id, attempt)`` of a handle made by :func:`make_handle`; ``None`` for anything else."""
    if not handle.startswith(HANDLE_PREFIX):
        return None
    parts = handle[len(HANDLE_PREFIX):].split(":")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def names_of(resources: Mapping[str, float]) -> list[str]:
    """Seedance node names a Ray node advertises."""
    return [k[len(NODE_PREFIX):] for k in resources if k.startswith(NODE_PREFIX)]


def classify_error(exc: BaseException, node_dead: bool) -> tuple[str, str]:
    """``(status, reason)`` of a task that raised ``exc``; ``node_dead``: its node is gone."""
    import ray.exceptions as rx

    if isinstance(exc, rx.TaskCancelledError):
        return CANCELLED, "cancelled"
    if isinstance(exc, rx.RayTaskError):  # the workload raised: the first line of its own error
        cause = getattr(exc, "cause", None)
        text = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc).strip().splitlines()[-1]
        return FAILED, text.strip().splitlines()[0][:500]
    node_errors: tuple[type[BaseException], ...] = tuple(
        c for c in (getattr(rx, n, None) for n in ("NodeDiedError", "TaskUnschedulableError",
                                                   "LocalRayletDiedError", "ObjectLostError", "OwnerDiedError"))
        if isinstance(c, type)
    )
    if isinstance(exc, node_errors) or node_dead:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return LOST, f"node lost: {first[:300]}"
    return FAILED, f"{type(exc).__name__}: {str(exc).strip()[:400]}"


@dataclass(slots=True)
class Attempt:
    """One run of a job on the backend."""

    job_id: int
    attempt: int
    name: str
    node: str
    gpu_indices: tuple[int, ...]
    gpu_milli: int
    options: dict[str, Any]
    status: str = PENDING
    reason: str = ""
    ray_node: str | None = None  # the Ray node Seedance's node maps to (the affinity target)
    ran_on: str | None = None  # the Ray node the task reported from
    ray_gpu_ids: list[str] = field(default_factory=list)
    ray_cuda_visible: str | None = None
    cuda_visible: str | None = None
    pid: int | None = None
    submitted_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    result: dict[str, Any] | None = None
    ref: Any = None

    @property
    def handle(self) -> str:
        return make_handle(self.job_id, self.attempt)

    def record(self) -> dict[str, Any]:
        """The attempt as plain data (what ``attempts`` returns)."""
        return {k: getattr(self, k) for k in self.__slots__ if k != "ref"} | {"handle": self.handle}


class JobSupervisor:
    """The Ray actor owning every Seedance job's task (see the module note). One method at a time.

    Args:
        log_dir: Folder of the per-job logs (on this actor's node).
        max_log_bytes: Most bytes kept per job log; later output is dropped (one line says so).
        max_records: Most attempts remembered; beyond it the oldest ended jobs are forgotten (their
            logs stay on disk).
    """

    def __init__(self, log_dir: str, max_log_bytes: int = 16 * 2**20, max_records: int = 100_000) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.max_log_bytes = max_log_bytes
        self.max_records = max_records
        self._attempts: dict[tuple[int, int], Attempt] = {}
        self._latest: dict[int, Attempt] = {}
        self._log_bytes: dict[int, int] = {}
        self._known: dict[str, str] = {}  # Seedance node name -> the last Ray node id seen for it
        self._dead: set[str] = set()  # Ray node ids known dead (GCS, or a NodeDiedError)
        self._alive: dict[str, dict[str, float]] = {}  # live Ray node id -> its total resources
        self._nodes_read = 0.0  # monotonic time of the last node table read
        self._released_all = False
        self._released: set[int] = set()
        self._task: Any = None

    # ------------------------------------------------------------------------------ nodes
    def _refresh_nodes(self, max_age_s: float = 0.0) -> None:
        """Re-read the node table from the GCS unless it was read less than ``max_age_s`` ago."""
        import ray

        now = time.monotonic()
        if max_age_s and now - self._nodes_read < max_age_s:
            return
        self._nodes_read = now
        alive: dict[str, dict[str, float]] = {}
        for n in ray.nodes():  # type: ignore[no-untyped-call]
            nid = str(n["NodeID"])
            if n.get("Alive") and nid not in self._dead:
                res = dict(n.get("Resources") or {})
                alive[nid] = res
                for name in names_of(res):
                    self._known[name] = nid
            elif not n.get("Alive"):
                self._dead.add(nid)
        self._alive = alive

    def _ray_node_of(self, name: str) -> str | None:
        nid = self._known.get(name)
        return nid if nid is not None and nid in self._alive else None

    def nodes(self) -> dict[str, bool]:
        """Seedance node name -> alive, for every name a Ray node ever advertised or a job asked for."""
        self._refresh_nodes(max_age_s=0.2)  # the loop asks right after a poll, which read the table
        out = {name: nid in self._alive for name, nid in self._known.items()}
        for a in self._latest.values():
            out.setdefault(a.node, False)
        return out

    # ---------------------------------------------------------------------------- submit
    def submit(self, spec: dict[str, Any]) -> str:
        """Start a run of the job in ``spec`` unless one is live (or already ended); returns its handle."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        job_id = int(spec["job_id"])
        last = self._latest.get(job_id)
        if last is not None and last.status not in (LOST, CANCELLED):
            return last.handle  # a replay after a crash, or a second control-plane process
        a = Attempt(job_id=job_id, attempt=last.attempt + 1 if last else 1, name=str(spec["name"]),
                    node=str(spec["node"]), gpu_indices=tuple(int(g) for g in spec["gpu_indices"]),
                    gpu_milli=int(spec["gpu_milli"]), options=dict(spec["options"]), submitted_at=time.time())
        self._latest[job_id] = a
        self._attempts[(job_id, a.attempt)] = a
        self._refresh_nodes(max_age_s=1.0)  # a burst of dispatches reads the node table once
        a.ray_node = self._ray_node_of(a.node)
        if a.ray_node is None:  # a node that just joined: look again
            self._refresh_nodes()
            a.ray_node = self._ray_node_of(a.node)
        self._append(job_id, f"=== attempt {a.attempt}: {a.name} on {a.node} GPUs {list(a.gpu_indices)} "
                             f"(Ray node {a.ray_node or '-'}) ===\n")
        if a.ray_node is None:
            self._finish(a, LOST, f"node lost: no live Ray node advertises {NODE_PREFIX}{a.node}")
            return a.handle
        opts = a.options
        missing = sorted(k for k, v in opts.get("resources", {}).items() if self._alive[a.ray_node].get(k, 0.0) < v)
        if missing:
            self._finish(a, FAILED, f"Ray node of {a.node} lacks custom resources {missing} "
                                    "(start it with seedance.backends.ray_backend.ray_start_args)")
            return a.handle
        if self._task is None:
            self._task = ray.remote(run_job)
        me = ray.get_runtime_context().current_actor
        a.ref = self._task.options(
            **opts, scheduling_strategy=NodeAffinitySchedulingStrategy(a.ray_node, soft=False),
        ).remote({**spec, "attempt": a.attempt}, me)
        return a.handle

    # ------------------------------------------------------------------------------ poll
    def _refresh(self) -> None:
        import ray

        live = [a for a in self._latest.values() if a.status in LIVE and a.ref is not None]
        if not live:
            return
        self._refresh_nodes()
        ready, _ = ray.wait([a.ref for a in live], num_returns=len(live), timeout=0, fetch_local=False)
        done = set(ready)
        for a in live:
            node_dead = a.ray_node not in self._alive
            if a.ref in done:
                try:
                    result = ray.get(a.ref, timeout=10)
                except Exception as exc:  # the task's end, whatever it was
                    status, reason = classify_error(exc, node_dead)
                    if status == LOST and a.ray_node is not None:
                        self._dead.add(a.ray_node)
                    self._finish(a, status, reason)
                else:
                    a.result = result.get("result") if isinstance(result, dict) else None
                    self._finish(a, SUCCEEDED, "succeeded")
            elif node_dead:
                with contextlib.suppress(Exception):
                    ray.cancel(a.ref, force=True)
                self._finish(a, LOST, f"node lost: Ray node {a.ray_node} of {a.node} is dead")
        if any(a.status == LOST for a in live):  # a NodeDiedError may precede the GCS's verdict
            self._alive = {k: v for k, v in self._alive.items() if k not in self._dead}

    def poll(self, handles: Iterable[str]) -> dict[str, tuple[str, str]]:
        """``handle -> (status, reason)``; unknown handles are left out."""
        self._refresh()
        out: dict[str, tuple[str, str]] = {}
        for h in handles:
            key = parse_handle(h)
            a = self._attempts.get(key) if key is not None else None
            if a is not None:
                out[h] = (a.status, a.reason)
        return out

    def _finish(self, a: Attempt, status: str, reason: str) -> None:
        if a.status in TERMINAL:
            return
        a.status, a.reason, a.finished_at = status, reason, time.time()
        self._append(a.job_id, f"=== attempt {a.attempt}: {status} ({reason}) ===\n")
        if len(self._attempts) > self.max_records:
            self._forget(len(self._attempts) - self.max_records * 9 // 10)

    def _forget(self, count: int) -> None:
        """Drop the ``count`` oldest attempts of jobs that have ended (a job with a live run is kept)."""
        gone = 0
        for jid, a in list(self._latest.items()):  # insertion order: oldest jobs first
            if gone >= count:
                break
            if a.status in LIVE:
                continue
            for n in range(1, a.attempt + 1):
                if self._attempts.pop((jid, n), None) is not None:
                    gone += 1
            del self._latest[jid]
            self._log_bytes.pop(jid, None)
            self._released.discard(jid)

    def cancel(self, handle: str) -> str | None:
        """Stop the run of ``handle`` (its worker process is killed); returns its status."""
        import ray

        key = parse_handle(handle)
        a = self._attempts.get(key) if key is not None else None
        if a is None:
            return None
        self._refresh()
        if a.status in LIVE:
            if a.ref is not None:
                with contextlib.suppress(Exception):
                    ray.cancel(a.ref, force=True, recursive=True)
            self._finish(a, CANCELLED, "cancelled by the control plane")
        return a.status

    # ------------------------------------------------------------- the task's channel
    def report(self, job_id: int, attempt: int, info: dict[str, Any] | None, text: str) -> dict[str, bool]:
        """Called by a running task: its start ``info`` (once) and captured output; answers its flags."""
        a = self._attempts.get((job_id, attempt))
        if a is None:
            return {"release": False, "stop": True}
        if info is not None and a.started_at is None:
            a.started_at = time.time()
            a.ran_on = str(info.get("ray_node"))
            a.ray_gpu_ids = [str(g) for g in info.get("ray_gpu_ids", [])]
            a.ray_cuda_visible = info.get("ray_cuda_visible")
            a.cuda_visible = info.get("cuda_visible")
            a.pid = info.get("pid")
            if a.status == PENDING:
                a.status = RUNNING
            self._append(job_id, f"--- started on Ray node {a.ran_on} (host {info.get('host')}, pid {a.pid}), "
                                 f"CUDA_VISIBLE_DEVICES={a.cuda_visible} (Ray's GPU ids {a.ray_gpu_ids}) ---\n")
        if text:
            self._append(job_id, text)
        return {"release": self._released_all or job_id in self._released, "stop": a.status in TERMINAL}

    def release(self, job_ids: list[int] | None = None) -> None:
        """Let held jobs go on (``None``: every job, now and later)."""
        if job_ids is None:
            self._released_all = True
        else:
            self._released.update(int(j) for j in job_ids)

    # ------------------------------------------------------------------------------- logs
    def _append(self, job_id: int, text: str) -> None:
        used = self._log_bytes.get(job_id)
        path = self.log_dir / f"job-{job_id}.log"
        if used is None:
            used = path.stat().st_size if path.exists() else 0
        if used >= self.max_log_bytes:
            return
        data = text.encode("utf-8", "replace")
        if used + len(data) > self.max_log_bytes:
            data = data[: self.max_log_bytes - used] + b"\n[seedance: log limit reached; later output dropped]\n"
        with path.open("ab") as f:
            f.write(data)
        self._log_bytes[job_id] = used + len(data)

    def read_log(self, job_id: int, tail_bytes: int | None = None) -> str | None:
        """The job's log (the last ``tail_bytes``), ``None`` if it has none."""
        path = self.log_dir / f"job-{job_id}.log"
        if not path.exists():
            return None
        with path.open("rb") as f:
            if tail_bytes is not None:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - tail_bytes))
            return f.read().decode("utf-8", "replace")

    def attempts(self, job_id: int | None = None) -> list[dict[str, Any]]:
        """Every attempt (of one job), oldest first, as plain records."""
        self._refresh()
        return [a.record() for (jid, _), a in sorted(self._attempts.items()) if job_id is None or jid == job_id]

    def ping(self) -> str:
        """The Ray node this actor runs on (a liveness check)."""
        import ray

        return str(ray.get_runtime_context().get_node_id())


# --------------------------------------------------------------------------------- the task
class LogChannel:
    """Buffers a run's output and ships it to the supervisor every ``flush_s`` (and at the end).

    Each shipment is one ``report`` call, whose answer carries the supervisor's flags (released,
    stopping), so a held job learns it may go on without another round trip.
    """

    def __init__(self, supervisor: Any, job_id: int, attempt: int, flush_s: float = 0.5) -> None:
        self.supervisor = supervisor
        self.job_id = job_id
        self.attempt = attempt
        self.flush_s = flush_s
        self._buf: list[str] = []
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._closed = threading.Event()
        self._flags = {"release": False, "stop": False}
        self._thread: threading.Thread | None = None

    def open(self, info: dict[str, Any]) -> None:
        """Report the start (synchronously) and start shipping."""
        self._send(info)
        self._thread = threading.Thread(target=self._run, name="seedance-log", daemon=True)
        self._thread.start()

    def write(self, text: str) -> None:
        """Queue output."""
        with self._lock:
            self._buf.append(text)

    def _send(self, info: dict[str, Any] | None = None) -> None:
        import ray

        with self._send_lock:
            with self._lock:
                text, self._buf = "".join(self._buf), []
            try:
                self._flags = ray.get(self.supervisor.report.remote(self.job_id, self.attempt, info, text), timeout=60)
            except Exception:  # the supervisor is busy or restarting: keep the text for the next try
                with self._lock:
                    self._buf.insert(0, text)

    def _run(self) -> None:
        while not self._closed.wait(self.flush_s):
            self._send()

    def close(self) -> None:
        """Stop the thread and ship what is left."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._send()

    def released(self) -> bool:
        return bool(self._flags.get("release"))

    def stopping(self) -> bool:
        return bool(self._flags.get("stop"))


class TeeStream:
    """A text stream writing to the original stream (Ray's worker log) and to the channel."""

    def __init__(self, original: TextIO, channel: LogChannel) -> None:
        self.original = original
        self.channel = channel

    def write(self, text: str) -> int:
        self.channel.write(text)
        with contextlib.suppress(Exception):
            self.original.write(text)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self.original.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self.original, "encoding", "utf-8") or "utf-8"


_ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "SEEDANCE_JOB_ID", "SEEDANCE_NODE", "SEEDANCE_GPU_INDICES", "SEEDANCE_GPU_SHARE")


def run_job(spec: dict[str, Any], supervisor: Any) -> dict[str, Any]:
    """The Ray task of one attempt: set the job's devices, capture its output, run its workload."""
    import ray

    from seedance.backends.workloads import WORKLOADS, JobContext

    job_id, attempt = int(spec["job_id"]), int(spec["attempt"])
    gpus = [int(g) for g in spec["gpu_indices"]]
    share = int(spec["gpu_milli"]) / 1000 if gpus else 0.0
    saved = {k: os.environ.get(k) for k in _ENV_KEYS}
    ray_cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    if gpus:  # Seedance's GPU choice, which the per-GPU resources also booked in Ray
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
    os.environ.update(SEEDANCE_JOB_ID=str(job_id), SEEDANCE_NODE=str(spec["node"]),
                      SEEDANCE_GPU_INDICES=",".join(str(g) for g in gpus), SEEDANCE_GPU_SHARE=f"{share:g}")
    info = {"ray_node": ray.get_runtime_context().get_node_id(), "ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "ray_cuda_visible": ray_cuda, "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pid": os.getpid(), "host": socket.gethostname()}
    channel = LogChannel(supervisor, job_id, attempt, float(spec.get("flush_s", 0.5)))
    channel.open(info)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TeeStream(out, channel), TeeStream(err, channel)
    try:
        ctx = JobContext(job_id=job_id, name=str(spec["name"]), attempt=attempt, params=dict(spec["params"]),
                         gpu_indices=tuple(gpus), gpu_share=share, channel=channel)
        result = WORKLOADS.get(str(spec["workload"]))(ctx)
        return {"result": result, **info}
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        sys.stdout, sys.stderr = out, err
        channel.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

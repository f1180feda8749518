"""Dispatchers: the backends that run placed jobs (Ray, Kubernetes, ...), registered by name.

The scheduling loop binds a job (commits the placement), then hands it to the configured
dispatcher. A backend plugs in by subclassing :class:`Dispatcher` and registering itself in
:data:`DISPATCHERS`; ``ControlSettings.dispatcher`` picks one by name.

Contract (the loop relies on it to be restart-safe): ``dispatch`` may be called again for a job
it already started (the process died between dispatch and recording the handle); it must then
return the same handle and not start a second copy. Handles are opaque strings stored on the job.
A job whose run the backend lost (its node died, it was evicted) is reported ``PREEMPTED``: the
loop re-queues it, and a later ``dispatch`` of the same job id starts a new run. Optional hooks
(``reason``, ``node_health``, ``logs``) have defaults, so a backend overrides only what it knows.

Backends in their own modules (``seedance.backends.ray_backend``) are loaded by the registry the
first time a name is looked up (lazily, no side-effect imports); they import their heavy client
libraries (e.g. ``ray``) only when a dispatcher is built.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from seedance.core.registry import Registry


class BackendStatus(StrEnum):
    """What a backend says about a dispatched job."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"  # stopped on the backend's side (not by a cancel from the control plane)
    PREEMPTED = "preempted"  # the backend lost the run (node died, evicted): re-queue the job
    UNKNOWN = "unknown"  # the backend does not know the handle (yet, or any more)


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    """A bound job as a backend sees it: identity, resources and where they were placed."""

    job_id: int
    tenant_id: int
    name: str
    kind: str
    tier: str
    cluster: str
    node: str
    gpu_model: str | None
    gpu_indices: tuple[int, ...]
    gpu_milli: int
    cpu_milli: int
    memory_mib: int
    duration_hours: float | None
    labels: Mapping[str, str] = field(default_factory=dict)
    node_labels: Mapping[str, str] = field(default_factory=dict)


class Dispatcher(ABC):
    """Runs placed jobs on a backend. At most a handful of methods; all called by the loop."""

    name: ClassVar[str]

    @abstractmethod
    def dispatch(self, job: DispatchRequest) -> str:
        """Called once per bound job after its placement is committed; returns the handle.

        Must be idempotent per ``job.job_id`` (see the module docstring).
        """

    @abstractmethod
    def cancel(self, handle: str) -> None:
        """Called after a cancellation of a dispatched job is committed; unknown handles are ignored."""

    @abstractmethod
    def poll(self, handles: Sequence[str]) -> dict[str, BackendStatus]:
        """Called once per loop cycle with the handles of running jobs; returns their status."""

    def reason(self, handle: str) -> str | None:
        """Why the job of ``handle`` ended as last polled (e.g. the error), if the backend knows."""
        return None

    def node_health(self) -> Mapping[str, bool]:
        """Node name -> alive, for the nodes the backend knows; the loop marks dead ones down."""
        return {}

    def logs(self, job_id: int, *, tail_bytes: int | None = None) -> str | None:
        """The job's captured output (every run of it), the last ``tail_bytes``; ``None``: none kept."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called once when the service stops."""


DISPATCHERS: Registry[type[Dispatcher]] = Registry("dispatcher", plugins="seedance.backends.ray_backend")


@DISPATCHERS.register("noop", aliases=("none",))
class NoopDispatcher(Dispatcher):
    """Accepts every job and reports it running until it is cancelled (nothing is started)."""

    name = "noop"

    def dispatch(self, job: DispatchRequest) -> str:
        return f"noop:{job.job_id}"

    def cancel(self, handle: str) -> None:
        return None

    def poll(self, handles: Sequence[str]) -> dict[str, BackendStatus]:
        return dict.fromkeys(handles, BackendStatus.RUNNING)


@DISPATCHERS.register("timer", aliases=("local",))
class TimerDispatcher(Dispatcher):
    """Local stand-in for a backend: a job "runs" for ``duration_hours / speedup`` of wall time.

    The end time is encoded in the handle, so the dispatcher keeps no state and survives restarts.

    Args:
        speedup: Wall-clock speed-up (3600 turns one hour into one second).
        default_hours: Duration of jobs that give none.
    """

    name = "timer"

    def __init__(self, speedup: float = 3600.0, default_hours: float = 1.0) -> None:
        if speedup <= 0:
            raise ValueError("speedup must be > 0")
        self.speedup = speedup
        self.default_hours = default_hours

    def dispatch(self, job: DispatchRequest) -> str:
        hours = job.duration_hours if job.duration_hours is not None else self.default_hours
        return f"timer:{job.job_id}:{time.time() + hours * 3600.0 / self.speedup:.3f}"

    def cancel(self, handle: str) -> None:
        return None

    def poll(self, handles: Sequence[str]) -> dict[str, BackendStatus]:
        now = time.time()
        out: dict[str, BackendStatus] = {}
        for h in handles:
            parts = h.split(":")
            try:
                end = float(parts[2])
            except (IndexError, ValueError):
                out[h] = BackendStatus.UNKNOWN
                continue
            out[h] = BackendStatus.SUCCEEDED if now >= end else BackendStatus.RUNNING
        return out


def make_dispatcher(name: str, **options: Any) -> Dispatcher:
    """Build the dispatcher registered as ``name`` with ``options``."""
    return DISPATCHERS.get(name)(**options)


def read_logs(dispatcher: Dispatcher, job_id: int, *, tail_bytes: int | None = None) -> tuple[str | None, str]:
    """``(log or None, why none)`` of a job; a backend that cannot answer is said so, never raised."""
    try:
        text = dispatcher.logs(job_id, tail_bytes=tail_bytes)
    except Exception as exc:  # the backend is down or unreachable: the API still answers
        return None, f"backend {dispatcher.name} did not answer: {type(exc).__name__}: {exc}"[:500]
    if text is None:
        return None, f"backend {dispatcher.name} keeps no log of this job"
    return text, ""

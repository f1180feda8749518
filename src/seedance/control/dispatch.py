"""Dispatchers: the backends that run placed jobs (Ray, Kubernetes, ...), registered by name.

The scheduling loop binds a job (commits the placement), then hands it to the configured
dispatcher. A backend plugs in by subclassing :class:`Dispatcher` and registering itself in
:data:`DISPATCHERS`; ``ControlSettings.dispatcher`` picks one by name.

Contract (the loop relies on it to be restart-safe): ``dispatch`` may be called again for a job
it already started (the process died between dispatch and recording the handle); it must then
return the same handle and not start a second copy. Handles are opaque strings stored on the job.
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

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called once when the service stops."""


DISPATCHERS: Registry[type[Dispatcher]] = Registry("dispatcher")


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

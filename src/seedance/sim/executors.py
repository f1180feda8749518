"""Where a sweep's runs execute: this machine's processes (``local``) or a Ray cluster (``ray``).

NOTE(seedance): every run of a sweep is independent and deterministic given its ``RunSpec``, so
an executor only decides *where* runs happen; results come back in the order of the runs and
are the same whatever the executor (the ``wall_s`` timings aside). ``seedancectl simulate
--executor`` takes ``local`` or ``ray[=ADDRESS]``:
  * ``local``: ``--workers`` processes on this machine (a process pool; one process runs inline).
  * ``ray``: each run is one Ray task (1 CPU). Without an address a local Ray cluster with
    ``--workers`` CPUs is started for the sweep and stopped after it; with one
    (``ray=127.0.0.1:6379``, ``ray=auto``) the sweep joins that cluster and leaves it running. A
    process already connected to Ray (``ray.init`` done) uses its session. A task whose worker or
    node dies, or that raises, is retried up to ``--retries`` times; a run that still fails
    stops the sweep with an error naming it. Runs read their input files by path, so on a
    cluster of several machines the trace files must be at the same path on every node.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from seedance.core.errors import InputError
from seedance.core.registry import Registry

S = TypeVar("S")
R = TypeVar("R")
Progress = Callable[[Any], None]


class SweepExecutor(ABC):
    """Runs ``execute(run)`` for every run of a sweep; results in the order of the runs.

    Args:
        address: What follows ``=`` in ``--executor NAME=ADDRESS`` (``None`` when absent).
        workers: Parallelism on this machine (processes, or CPUs of a local Ray cluster).
        retries: How often a failed run is tried again (executors that can retry).
    """

    name: ClassVar[str]

    def __init__(self, address: str | None = None, *, workers: int = 1, retries: int = 2) -> None:
        if workers < 1:
            raise InputError("must be >= 1", source="--workers")
        if retries < 0:
            raise InputError("must be >= 0", source="--retries")
        self.address = address
        self.workers = workers
        self.retries = retries

    @abstractmethod
    def map(self, runs: Sequence[S], execute: Callable[[S], R], progress: Progress | None = None) -> list[R]:
        """``[execute(r) for r in runs]``, calling ``progress(result)`` as each one completes."""


SWEEP_EXECUTORS: Registry[type[SweepExecutor]] = Registry("sweep executor")


def make_executor(text: str, *, workers: int = 1, retries: int = 2) -> SweepExecutor:
    """The executor named by ``NAME[=ADDRESS]`` (``local``, ``ray``, ``ray=host:port``)."""
    name, sep, address = text.partition("=")
    if sep and not address.strip():
        raise InputError(f"empty address in {text!r}; write NAME or NAME=ADDRESS", source="--executor")
    return SWEEP_EXECUTORS.get(name)(address.strip() or None, workers=workers, retries=retries)


@SWEEP_EXECUTORS.register("local", aliases=("process", "processes"))
class LocalExecutor(SweepExecutor):
    """``workers`` processes of this machine (inline when ``workers`` is 1)."""

    name = "local"

    def __init__(self, address: str | None = None, *, workers: int = 1, retries: int = 2) -> None:
        if address is not None:
            raise InputError(f"the local executor takes no address, got {address!r}", source="--executor")
        super().__init__(None, workers=workers, retries=retries)

    def map(self, runs: Sequence[S], execute: Callable[[S], R], progress: Progress | None = None) -> list[R]:
        from seedance.sim.experiment import sweep

        return sweep(runs, workers=self.workers, progress=progress, execute=execute)


def _run_task(execute: Callable[[Any], Any], run: Any) -> Any:
    """The body of one Ray task."""
    return execute(run)


@SWEEP_EXECUTORS.register("ray")
class RayExecutor(SweepExecutor):
    """One Ray task per run, on a local Ray cluster or the one at ``address``."""

    name = "ray"

    def _connect(self) -> tuple[Any, bool]:
        # before ray is imported: no usage reports; "localhost" resolves to the loopback address
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import logging

        import ray

        if ray.is_initialized():
            return ray, False
        if self.address is None:
            ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
        else:
            try:
                ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise InputError(f"cannot join the Ray cluster: {exc}", source="--executor") from None
        return ray, True

    def map(self, runs: Sequence[S], execute: Callable[[S], R], progress: Progress | None = None) -> list[R]:
        if not runs:
            return []
        ray, owned = self._connect()
        try:
            task = ray.remote(num_cpus=1, max_retries=self.retries, retry_exceptions=True)(_run_task)
            fn = ray.put(execute)
            refs = [task.remote(fn, r) for r in runs]
            index = {ref: i for i, ref in enumerate(refs)}
            results: list[Any] = [None] * len(runs)
            waiting = list(refs)
            while waiting:
                done, waiting = ray.wait(waiting, num_returns=1)
                for ref in done:
                    i = index[ref]
                    try:
                        results[i] = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        for other in waiting:
                            ray.cancel(other, force=True)
                        raise RuntimeError(
                            f"run {i} ({runs[i]!r}) failed after {self.retries} retries: {exc}"
                        ) from exc
                    if progress:
                        progress(results[i])
            return results
        finally:
            if owned:
                ray.shutdown()

"""Moved: the dispatchers live in ``seedance.backends.dispatch`` (re-exported here for callers of the old path)."""

from seedance.backends.dispatch import (
    DISPATCHERS,
    BackendStatus,
    Dispatcher,
    DispatchRequest,
    NoopDispatcher,
    TimerDispatcher,
    make_dispatcher,
    read_logs,
)

__all__ = [
    "DISPATCHERS",
    "BackendStatus",
    "DispatchRequest",
    "Dispatcher",
    "NoopDispatcher",
    "TimerDispatcher",
    "make_dispatcher",
    "read_logs",
]
